"""Error types shared by every phase, the one table of exit statuses, the two checks that
turn a person's file mistakes (unreadable input, unwritable output folder) into `InputError`,
and `did_you_mean`, the hint every "unknown name" error ends with.

The CLI maps `InputError` (bad config, bad file, refused comparison) to exit status 2 and
prints only its message, which must name the file and line or the config key, what was
expected, and — for a missing input — the command that produces it.

Exit statuses, the same for every command:

- `EXIT_OK` (0): success; for `run` and `gate`, the challenger was promoted.
- `EXIT_REJECT` (1): the gate rejected the challenger, or it awaits approval; `archive verify`
  found a changed artifact; `archive reproduce` got other numbers on the same hardware.
- `EXIT_USAGE` (2): a usage or input error — unknown option, missing argument, bad config,
  unreadable or unwritable file. Nothing is half-written.
- `EXIT_PHASE_FAILED` (3): a phase could not produce or verify its artifact.
- `EXIT_INTERRUPTED` (130): Ctrl-C (128 + SIGINT, the shell's convention).
- `EXIT_TERMINATED` (143): SIGTERM (128 + SIGTERM); `run` saves its state first.
"""

from __future__ import annotations

import difflib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

EXIT_OK = 0
EXIT_REJECT = 1
EXIT_USAGE = 2
EXIT_PHASE_FAILED = 3
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


class TuneloopError(Exception):
    """Base class for errors tuneloop reports to a person; each subclass names its status."""

    exit_code = 1  # the generic failure status, for a subclass that names none


class InputError(TuneloopError):
    """Bad input: config, file contents, CLI arguments or a refused request. Exit status 2."""

    exit_code = EXIT_USAGE


class PhaseFailed(TuneloopError):
    """A phase could not produce or verify its artifact. Exit status 3."""

    exit_code = EXIT_PHASE_FAILED


class AwaitingApproval(TuneloopError):
    """A run stopped before any compute until a person approves what it would spend
    (`portfolio.approval.spend`). Exit status 1."""

    exit_code = EXIT_REJECT


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """' (did you mean 'x'?)' for the closest choice, or '' when nothing is close."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def require_writable_dir(path: Path, what: str) -> None:
    """Refuse (InputError) a folder that cannot be created or written, before any work starts.

    `what` names the option or config key that gave the path. The probe makes and removes a
    temporary folder in `path` or its nearest existing ancestor, so it leaves nothing behind
    and also works as root, for whom permission bits and `os.access` say nothing.
    """
    existing = next((p for p in (path, *path.parents) if p.exists()), Path("."))
    if not existing.is_dir():
        where = "it" if existing == path else existing
        raise InputError(f"{what} {path}: {where} is a file, not a folder")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".tuneloop-probe-", dir=existing))
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise InputError(
            f"{what} {path}: cannot create a folder in {existing} ({reason})"
        ) from None


def refuse_overwriting_inputs(outputs: Iterable[tuple[str, Path]], inputs: Iterable[Path]) -> None:
    """InputError when an output (named by its option or key) is one of `inputs` or another
    output: the same file after resolving symlinks, or the same inode (a hard link). Every
    step that reads files and writes others (`ingest`, `corpus build`, `replay`) checks this
    before it reads anything."""
    ins = [Path(p) for p in inputs]
    seen: dict[Path, str] = {}
    for name, out in outputs:
        for given in ins:
            if _same_file(Path(out), given):
                raise InputError(
                    f"{name} {out}: is the input {given}; writing it would replace what is being "
                    "read (choose another output path)"
                )
        key = Path(out).resolve()
        if key in seen:
            raise InputError(f"{name} {out}: is also {seen[key]}; give each output its own path")
        seen[key] = f"{name} {out}"


def _same_file(a: Path, b: Path) -> bool:
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return False


def read_utf8(path: Path, what: str) -> str:
    """The text of a file a person gave us; InputError naming the file (and line) otherwise.

    `what` says what the file should be ("config file", "suite file"). A byte that is not
    UTF-8 is reported with its line and column, since editors rarely show it.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: {what} not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, expected a {what}") from None
    except OSError as err:
        raise InputError(f"{path}: cannot read the {what} ({err.strerror})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        raise InputError(
            f"{path}:{line}: not UTF-8 text (byte 0x{data[err.start]:02x} at column {column}); "
            f"save the {what} as UTF-8"
        ) from None
