"""`python -m tuneloop` is the same as the `tuneloop` command."""

from tuneloop.cli import main

if __name__ == "__main__":
    main()
