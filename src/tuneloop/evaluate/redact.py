"""Keeping the API key out of everything an eval stores or raises.

Servers echo the request's `Authorization` header in error bodies, and models repeat what they
are shown, so the key's value and anything shaped like a credential (`envkeys.Redactor`) is
redacted from every sample row and summary as it is written (`stored`), and from the message
of any exception leaving the eval (`redacted_errors`). Because the log holds redacted values,
a resumed log is compared with this eval as it would be stored (`as_stored`), not as it is in
memory. The HTTP client redacts its own error messages (`tuneloop.client`).

Every row is redacted as it is written (`stored_line`), so this is on the eval's per-sample
path: `envkeys.redact_value` tests each string in place and copies nothing when nothing
matches, which is nearly always (issue 35 measured the walk at ~5 µs a row, from ~10).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tuneloop.envkeys import Redactor
from tuneloop.records import jsonl_line, parse_record
from tuneloop.samplelog import EvalSummary, SampleRow


def stored(redactor: Redactor, record: SampleRow | EvalSummary) -> dict[str, Any]:
    """The record as it is written: its JSON, redacted."""
    return redactor.value(record.to_json())  # type: ignore[no-any-return]


def stored_line(redactor: Redactor, row: SampleRow) -> str:
    """The row's line in the sample log (`records.jsonl_line`), redacted."""
    return jsonl_line(stored(redactor, row))


def as_stored(redactor: Redactor, summary: EvalSummary, where: str) -> EvalSummary:
    """`summary` as it reads back once written (redacted), to compare with a stored log."""
    return parse_record(stored(redactor, summary), EvalSummary, where)


@contextmanager
def redacted_errors(redactor: Redactor) -> Iterator[None]:
    """Redact the message of any exception leaving the block: whatever is printed (our
    one-line errors or a traceback) must not show the key."""
    try:
        yield
    except Exception as err:
        err.args = tuple(redactor.value(list(err.args)))
        raise
