"""Reading the traffic log the served champion writes: exchanges, feedback, new labels.

    traffic = read_traffic([Path("logs/")])
    labels = count_new_labels(traffic, since=last_round_start)

A traffic log is JSON lines of two kinds, in `traffic.jsonl` and its rotations
`traffic-<n>.jsonl` (a folder given in `flywheel.traffic` is read for exactly those names):

    {"timestamp": "2026-12-01T12:00:00.512Z", "request": {"model": …, "messages": […],
     "metadata": {…}}, "response": {"id": "chatcmpl-…", "object": "chat.completion", …}}
    {"type": "feedback", "completion_id": "chatcmpl-…", "verdict": "up" | "down",
     "correction": "…" | null, "score": 0.5 | null, "timestamp": "2026-12-01T12:01:40Z"}

A timestamp is ISO 8601 (as `serve.traffic.log` writes it; no zone means UTC) or unix
seconds; a streamed response (a list of `chat.completion.chunk` objects) takes its id from
the first chunk.

A line that does not parse is an error naming file:line — except an unterminated last line,
which the writer may be in the middle of appending and which is skipped (it is read whole
at the next look).

A "new labelled row" is an exchange of the log with at least one feedback line carrying a
verdict or a correction, timed after the last round's start. Deliberately, the *label's* time
counts, not the exchange's: an old exchange that got its thumbs-down after the last round
began was unlabelled in that round's data, so its label is new evidence. Feedback for a
completion id the log does not hold is counted apart (`orphans`), never as a label.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tuneloop.errors import InputError

_ROTATED = re.compile(r"traffic-(\d+)\.jsonl")


@dataclass(frozen=True)
class Exchange:
    """One request the champion answered."""

    timestamp: float
    """Unix seconds."""
    completion_id: str | None
    """The response's `id`, which feedback refers to."""
    request: dict[str, Any]
    """The chat body as sent: `model`, `messages`, optional `metadata`."""

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


@dataclass(frozen=True)
class LabelCount:
    new: int
    """Exchanges labelled after `since` (each counted once however many labels it got)."""
    orphans: int
    """Feedback lines after `since` for a completion id no exchange in the log has."""


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
    """Every exchange and feedback line of the logs; errors name file:line."""
    files = traffic_files(paths)
    exchanges: list[Exchange] = []
    feedback: list[FeedbackLine] = []
    for path in files:
        for where, obj in _lines(path):
            parsed = parse_line(obj, where)
            if isinstance(parsed, Exchange):
                exchanges.append(parsed)
            else:
                feedback.append(parsed)
    return Traffic(exchanges=exchanges, feedback=feedback, files=files)


def _lines(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    try:
        data = path.read_bytes()
    except OSError as err:
        raise InputError(f"{path}: cannot read the traffic log ({err.strerror or err})") from None
    chunks = data.split(b"\n")
    for lineno, chunk in enumerate(chunks, start=1):
        if not chunk.strip():
            continue
        unterminated = lineno == len(chunks)
        try:
            obj = json.loads(chunk.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            if unterminated:
                return  # the writer is appending this line now
            raise InputError(
                f"{path}:{lineno}: not a JSON line of the traffic log ({err})"
            ) from None
        if not isinstance(obj, dict):
            raise InputError(f"{path}:{lineno}: expected a JSON object")
        yield f"{path}:{lineno}", obj


def parse_line(obj: dict[str, Any], where: str) -> Exchange | FeedbackLine:
    """One traffic-log line as an exchange or a feedback line; InputError naming `where`."""
    when = _timestamp(obj.get("timestamp"), where)
    if obj.get("type") == "feedback":
        return _feedback(obj, when, where)
    request, response = obj.get("request"), obj.get("response")
    if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
        raise InputError(
            f"{where}: expected an exchange {{'timestamp', 'request': {{'messages': […]}}, "
            '\'response\'}} or a line with "type": "feedback"'
        )
    if isinstance(response, list) and response:  # streamed: chat.completion.chunk objects
        response = response[0]
    completion_id = response.get("id") if isinstance(response, dict) else None
    return Exchange(
        timestamp=when,
        completion_id=completion_id if isinstance(completion_id, str) else None,
        request=request,
    )


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
    if correction is not None and not isinstance(correction, str):
        raise InputError(f"{where}: feedback 'correction' must be a string or null")
    if score is not None and (isinstance(score, bool) or not isinstance(score, int | float)):
        raise InputError(f"{where}: feedback 'score' must be a number or null")
    return FeedbackLine(
        completion_id=completion_id,
        verdict=verdict,
        correction=correction,
        score=None if score is None else float(score),
        timestamp=when,
    )


def count_new_labels(traffic: Traffic, since: float | None) -> LabelCount:
    """Exchanges labelled after `since` (all time when None); see the module docstring."""
    known = {e.completion_id for e in traffic.exchanges if e.completion_id is not None}
    fresh = [f for f in traffic.feedback if f.is_label and (since is None or f.timestamp > since)]
    labelled = {f.completion_id for f in fresh if f.completion_id in known}
    orphans = sum(1 for f in fresh if f.completion_id not in known)
    return LabelCount(new=len(labelled), orphans=orphans)


def recent_exchanges(traffic: Traffic, since: float | None) -> list[Exchange]:
    """Exchanges after `since` (all when None): the traffic drift is measured on."""
    return [e for e in traffic.exchanges if since is None or e.timestamp > since]
