"""Error types shared by every phase.

The CLI maps `InputError` (bad config, bad file, refused comparison) to exit status 2 and
prints only its message, which must name the file and line or the config key, what was
expected, and — for a missing input — the command that produces it.
"""

from __future__ import annotations


class TuneloopError(Exception):
    """Base class for errors tuneloop reports to a person."""

    exit_code = 1


class InputError(TuneloopError):
    """Bad input: config, file contents, CLI arguments or a refused request. Exit status 2."""

    exit_code = 2


class PhaseFailed(TuneloopError):
    """A phase could not produce or verify its artifact. Exit status 1."""

    exit_code = 1
