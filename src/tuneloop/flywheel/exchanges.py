"""Reading the traffic log the served champion writes: exchanges, feedback, new labels.

    traffic = read_traffic([Path("logs/")])
    labels = count_new_labels(traffic, since=last_round_start)

A traffic log is JSON lines of two kinds, in `traffic.jsonl` and its rotations
`traffic-<n>.jsonl` (a folder given in `flywheel.traffic` is read for exactly those names):

    {"timestamp": "2026-12-01T12:00:00.512Z", "request": {"model": …, "messages": […],
     "metadata": {…}}, "response": {"id": "chatcmpl-…", "object": "chat.completion", …}}
    {"type": "feedback", "completion_id": "chatcmpl-…", "verdict": "up" | "down",
     "correction": "…" | null, "score": 0.5 | null, "timestamp": "2026-12-01T12:01:40Z"}

An exchange answered by a cascade is version 2 of the line, `"schema": "tuneloop.traffic/2"`
with its trace in `cascade` (or `cascade_error` when the upstream's trace was malformed:
`serve/traffic/exchange.py`); a line of a newer schema is skipped (upgrade tuneloop).

A timestamp is ISO 8601 (as `serve.traffic.log` writes it; no zone means UTC) or unix
seconds; a streamed response (a list of `chat.completion.chunk` objects) takes its id from
the first chunk. A text completion (`/v1/completions`: a request with a `prompt` and no
`messages`) is an exchange too; its prompt counts as one user turn for drift.

One bad line never stops the reader: a line that does not parse (a torn line a crash left
behind, invalid UTF-8) or is not an exchange or feedback line of the shapes above is skipped,
counted in `Traffic.skipped` with its file:line and why, and warned about once per read —
the flywheel keeps going on the rest of the log. An unterminated last line is not counted: the
writer may be in the middle of appending it, and it is read whole at the next look.

A "new labelled row" is a chat exchange of the log with at least one feedback line carrying a
verdict or a correction, timed after the last round's start — what the `openai_chat` ingester
turns into a training row (it joins feedback to its exchange across the folder's files, in
rotation order). Deliberately, the *label's* time counts, not the exchange's: an old exchange
that got its thumbs-down after the last round began was unlabelled in that round's data, so its
label is new evidence. Feedback for a completion id the log does not hold is counted apart
(`orphans`), as is a label on a text completion (`untrainable`: the ingester makes no row of
one); neither is a new label. Feedback naming one choice (`<id>#<n>`) labels its exchange.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tuneloop.errors import InputError
from tuneloop.tiers import CascadeTrace

TRAFFIC_SCHEMAS = ("tuneloop.traffic/2",)
"""Exchange-line schemas this reader knows; a line without one is version 1."""

_ROTATED = re.compile(r"traffic-(\d+)\.jsonl")
_LOG = logging.getLogger("tuneloop.flywheel")


@dataclass(frozen=True)
class Exchange:
    """One request the champion answered."""

    timestamp: float
    """Unix seconds."""
    completion_id: str | None
    """The response's `id`, which feedback refers to."""
    request: dict[str, Any]
    """The body as sent: `model`, `messages` (or a text completion's `prompt`), `metadata`."""
    choices: int = 1
    """How many choices the response holds (feedback may name one: `<id>#<n>`)."""
    cascade: CascadeTrace | None = None
    """How a cascade answered it (line version 2); None from a single model."""
    cascade_error: str | None = None
    """Why the cascade's trace was not recorded (malformed), or not read back; else None."""

    @property
    def is_chat(self) -> bool:
        """A chat exchange (`messages`), not a text completion (`prompt`)."""
        return isinstance(self.request.get("messages"), list)

    @property
    def messages(self) -> list[Any]:
        """The chat messages; a text completion's prompt as one user turn."""
        if self.is_chat:
            return list(self.request["messages"])
        prompt = self.request.get("prompt")
        parts = prompt if isinstance(prompt, list) else [prompt]
        return [{"role": "user", "content": "\n".join(p for p in parts if isinstance(p, str))}]

    @property
    def metadata(self) -> dict[str, Any]:
        meta = self.request.get("metadata")
        return meta if isinstance(meta, dict) else {}


@dataclass(frozen=True)
class FeedbackLine:
    """A person's (or a checker's) judgement of one completion."""

    completion_id: str
    verdict: str | None
    """`up` or `down`."""
    correction: str | None
    """What the answer should have been."""
    score: float | None
    timestamp: float

    @property
    def is_label(self) -> bool:
        """A verdict or a correction makes a training label; a bare score does not."""
        return self.verdict is not None or self.correction is not None


@dataclass(frozen=True)
class Traffic:
    exchanges: list[Exchange]
    feedback: list[FeedbackLine]
    files: list[Path]
    """The files read, oldest rotation first."""
    skipped: list[str] = field(default_factory=list)
    """Lines not read, each `file:line: why` (see the module docstring)."""


@dataclass(frozen=True)
class LabelCount:
    new: int
    """Exchanges labelled after `since` (each counted once however many labels it got)."""
    orphans: int
    """Feedback lines after `since` for a completion id no exchange in the log has."""
    untrainable: int = 0
    """Labels after `since` on text completions (no training row is made of one)."""


def traffic_files(paths: Sequence[Path]) -> list[Path]:
    """The log files named by `flywheel.traffic`: files as given; folders expanded."""
    out: list[Path] = []
    for path in map(Path, paths):
        if path.is_file():
            out.append(path)
        elif path.is_dir():
            rotated = [
                (int(m.group(1)), p) for p in path.iterdir() if (m := _ROTATED.fullmatch(p.name))
            ]
            out.extend(p for _, p in sorted(rotated))
            if (path / "traffic.jsonl").is_file():
                out.append(path / "traffic.jsonl")
        else:
            raise InputError(
                f"flywheel.traffic: {path} does not exist (expected a traffic log file or a "
                "folder holding traffic.jsonl, written by the serving proxy)"
            )
    return out


def read_traffic(paths: Sequence[Path]) -> Traffic:
    """Every exchange and feedback line of the logs; bad lines skipped and counted."""
    files = traffic_files(paths)
    exchanges: list[Exchange] = []
    feedback: list[FeedbackLine] = []
    skipped: list[str] = []
    for path in files:
        for where, obj in _lines(path, skipped):
            try:
                parsed = parse_line(obj, where)
            except InputError as err:
                skipped.append(str(err))
                continue
            if isinstance(parsed, Exchange):
                exchanges.append(parsed)
            else:
                feedback.append(parsed)
    if skipped:
        _LOG.warning(
            "traffic log: %d line(s) skipped, not read (first: %s)", len(skipped), skipped[0]
        )
    return Traffic(exchanges=exchanges, feedback=feedback, files=files, skipped=skipped)


def _lines(path: Path, skipped: list[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    try:
        data = path.read_bytes()
    except OSError as err:
        raise InputError(f"{path}: cannot read the traffic log ({err.strerror or err})") from None
    chunks = data.split(b"\n")
    for lineno, chunk in enumerate(chunks, start=1):
        if not chunk.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            obj = json.loads(chunk.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            if lineno < len(chunks):  # else: the writer is appending this line now
                skipped.append(f"{where}: not a JSON line (a torn line?) ({err})")
            continue
        if not isinstance(obj, dict):
            skipped.append(f"{where}: expected a JSON object")
            continue
        yield where, obj


def parse_line(obj: dict[str, Any], where: str) -> Exchange | FeedbackLine:
    """One traffic-log line as an exchange or a feedback line; InputError naming `where`."""
    when = _timestamp(obj.get("timestamp"), where)
    if obj.get("type") == "feedback":
        return _feedback(obj, when, where)
    request, response = obj.get("request"), obj.get("response")
    if not isinstance(request, dict) or not (
        isinstance(request.get("messages"), list) or "prompt" in request
    ):
        raise InputError(
            f"{where}: expected an exchange {{'timestamp', 'request': {{'messages': […]}} (or "
            "{'prompt'}), 'response'}} or a line with \"type\": \"feedback\""
        )
    chunks = response if isinstance(response, list) else [response]
    if isinstance(response, list) and response:  # streamed: chat.completion.chunk objects
        response = response[0]
    completion_id = response.get("id") if isinstance(response, dict) else None
    cascade, cascade_error = _cascade(obj, where)
    return Exchange(
        timestamp=when,
        completion_id=completion_id if isinstance(completion_id, str) else None,
        request=request,
        choices=_choices(chunks),
        cascade=cascade,
        cascade_error=cascade_error,
    )


def _cascade(obj: dict[str, Any], where: str) -> tuple[CascadeTrace | None, str | None]:
    """The cascade trace of an exchange line and why there is none when there should be; a
    line of a version this code does not know is refused (InputError: skipped, counted)."""
    schema = obj.get("schema")
    if schema is not None and schema not in TRAFFIC_SCHEMAS:
        raise InputError(
            f"{where}: exchange line of schema {schema!r}, newer than this tuneloop reads "
            f"({', '.join(TRAFFIC_SCHEMAS)}); upgrade tuneloop"
        )
    error = obj.get("cascade_error")
    if obj.get("cascade") is None:
        return None, error if isinstance(error, str) else None
    try:
        return CascadeTrace.model_validate(obj["cascade"]), None
    except ValidationError as err:  # written validated: only an edited or foreign line
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        return None, f"cascade.{loc}: {first['msg']} (not read back)"


def _choices(chunks: list[Any]) -> int:
    """The number of choices of a response (or of its streamed chunks): distinct indexes."""
    found = {
        choice.get("index", k) if isinstance(choice, dict) else k
        for chunk in chunks
        if isinstance(chunk, dict) and isinstance(chunk.get("choices"), list)
        for k, choice in enumerate(chunk["choices"])
    }
    return max(1, len(found))


def _timestamp(value: Any, where: str) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            pass
        else:
            return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()
    raise InputError(
        f"{where}: 'timestamp' must be an ISO 8601 time or unix seconds (got {value!r})"
    )


def _feedback(obj: dict[str, Any], when: float, where: str) -> FeedbackLine:
    completion_id = obj.get("completion_id")
    if not isinstance(completion_id, str) or not completion_id:
        raise InputError(f"{where}: feedback needs 'completion_id', the response's id")
    verdict, correction, score = obj.get("verdict"), obj.get("correction"), obj.get("score")
    if verdict not in (None, "up", "down"):
        raise InputError(f"{where}: feedback 'verdict' must be 'up', 'down' or null")
    if correction is not None and (not isinstance(correction, str) or not correction):
        raise InputError(f"{where}: feedback 'correction' must be a non-empty string or null")
    if score is not None and (
        isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1
    ):
        raise InputError(f"{where}: feedback 'score' must be a number in [0, 1] or null")
    if verdict is None and correction is None and score is None:
        raise InputError(f"{where}: feedback carries no verdict, score or correction")
    return FeedbackLine(
        completion_id=completion_id,
        verdict=verdict,
        correction=correction,
        score=None if score is None else float(score),
        timestamp=when,
    )


def count_new_labels(traffic: Traffic, since: float | None) -> LabelCount:
    """Exchanges labelled after `since` (all time when None); see the module docstring."""
    chat = {e.completion_id for e in traffic.exchanges if e.completion_id and e.is_chat}
    text = {e.completion_id for e in traffic.exchanges if e.completion_id and not e.is_chat}
    ids = _labelled(traffic, since)
    return LabelCount(
        new=len({cid for cid in ids if cid in chat}),
        orphans=sum(1 for cid in ids if cid not in chat and cid not in text),
        untrainable=sum(1 for cid in ids if cid in text),
    )


def labelled_ids(traffic: Traffic, since: float | None) -> set[str]:
    """The chat exchanges labelled after `since`: the ones `count_new_labels` counts new."""
    chat = {e.completion_id for e in traffic.exchanges if e.completion_id and e.is_chat}
    return {cid for cid in _labelled(traffic, since) if cid in chat}


def _labelled(traffic: Traffic, since: float | None) -> list[str]:
    """The exchange each label after `since` names, one entry per label."""
    choices = {e.completion_id: e.choices for e in traffic.exchanges if e.completion_id}
    fresh = [f for f in traffic.feedback if f.is_label and (since is None or f.timestamp > since)]
    return [_exchange_id(f.completion_id, choices) for f in fresh]


def _exchange_id(cid: str, choices: dict[str, int]) -> str:
    """The exchange a feedback id names: itself, or `<id>` of a choice id `<id>#<n>` when
    that exchange has a choice n (as the ingester joins it)."""
    base, sep, index = cid.rpartition("#")
    if cid in choices or not (sep and index.isdigit() and base in choices):
        return cid
    return base if int(index) < choices[base] else cid


def recent_exchanges(traffic: Traffic, since: float | None) -> list[Exchange]:
    """Exchanges after `since` (all when None): the traffic drift is measured on."""
    return [e for e in traffic.exchanges if since is None or e.timestamp > since]
