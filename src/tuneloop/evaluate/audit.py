"""The labelled audit set a judge is calibrated on: a JSONL file, or a traffic-log folder.

    audit = read_audit(Path("audit.jsonl"))          # or Path("runs/traffic/")
    audit.rows[0].human                              # True: a person passed this answer

A file is JSONL, one row per line:

    {"id": "r1", "messages": [...] | "prompt": "…", "response": "…", "reference": "…",
     "human": true | false | "pass" | "fail" | 1 | 0 | null}

`id` defaults to `line-<n>`; `reference` is optional; a row whose `human` is null or absent is
unlabelled (counted, not graded). A line that is not such a row is an error naming file:line.

A folder is a traffic log, as the serving proxy writes it (`traffic.jsonl` and its rotations
`traffic-<n>.jsonl`, read oldest first): each chat exchange is a row (its request's messages,
its response's first choice — streamed chunks joined), labelled by the feedback lines that
name its completion id (`<id>` or `<id>#0`): `verdict: up` is a pass, `down` a fail, and a
`correction` without a verdict a fail (the person wrote what the answer should have been); the
last label wins, as in the ingester. Deliberately tolerant where the writer may be: a line
that does not parse (a torn line left by a crash) is skipped and counted, as the flywheel reads
the log; other exchanges (text completions, an answer that is not text) are unlabelled rows.
Read here, not through `tuneloop.flywheel` or `tuneloop.data` (a phase imports neither): only
the fields calibration needs.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tuneloop.errors import InputError
from tuneloop.records import iter_jsonl

_ROTATED = re.compile(r"traffic-(\d+)\.jsonl")
_LABELS: dict[object, bool] = {"pass": True, "fail": False, "up": True, "down": False}


@dataclass(frozen=True)
class AuditRow:
    """One answer a person judged."""

    id: str
    messages: list[dict[str, Any]]
    """The conversation the answer replies to."""
    response: str
    """The answer judged."""
    reference: str | None
    """The reference answer, when the row has one."""
    human: bool
    """The person's verdict: True = pass."""


@dataclass(frozen=True)
class Audit:
    """The labelled rows of an audit set, and what was left out."""

    rows: list[AuditRow]
    format: Literal["jsonl", "traffic"]
    unlabelled: int
    """Rows or exchanges without a human verdict."""
    skipped_lines: int = 0
    """Traffic-log lines that did not parse (torn lines)."""


def read_audit(path: Path) -> Audit:
    """The audit set at `path` (module docstring); InputError naming the file (and line)."""
    path = Path(path)
    if path.is_dir():
        return read_traffic_audit(path)
    if not path.exists():
        raise InputError(
            f"{path}: audit set not found (a JSONL file of labelled rows, or a traffic-log "
            "folder written by `tuneloop proxy`/`tuneloop serve --traffic-log`)"
        )
    return read_jsonl_audit(path)


def read_jsonl_audit(path: Path) -> Audit:
    rows: list[AuditRow] = []
    seen: set[str] = set()
    unlabelled = 0
    for lineno, obj in iter_jsonl(path):
        where = f"{path}:{lineno}"
        row = _jsonl_row(obj, lineno, where)
        if row is None:
            unlabelled += 1
            continue
        if row.id in seen:
            raise InputError(f"{where}: duplicate id {row.id!r}")
        seen.add(row.id)
        rows.append(row)
    return Audit(rows, "jsonl", unlabelled)


def _jsonl_row(obj: dict[str, Any], lineno: int, where: str) -> AuditRow | None:
    """One audit row; None when it carries no human verdict."""
    label = human_label(obj.get("human"), where)
    messages = _messages(obj, where)
    response = obj.get("response")
    if not isinstance(response, str):
        raise InputError(f"{where}: 'response' must be the answer's text (a string)")
    reference = obj.get("reference")
    if reference is not None and not isinstance(reference, str | int | float):
        raise InputError(f"{where}: 'reference' must be a string or a number")
    row_id = obj.get("id", f"line-{lineno}")
    if not isinstance(row_id, str | int) or isinstance(row_id, bool):
        raise InputError(f"{where}: 'id' must be a string or an integer")
    if label is None:
        return None
    ref = None if reference is None else str(reference)
    return AuditRow(str(row_id), messages, response, ref, label)


def human_label(value: Any, where: str) -> bool | None:
    """A person's verdict: true/false, "pass"/"fail" (or "up"/"down"), 1/0; None unlabelled."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return value == 1
    if isinstance(value, str) and value.strip().lower() in _LABELS:
        return _LABELS[value.strip().lower()]
    raise InputError(f'{where}: \'human\' must be true/false, "pass"/"fail" or 1/0 (got {value!r})')


def _messages(obj: dict[str, Any], where: str) -> list[dict[str, Any]]:
    messages, prompt = obj.get("messages"), obj.get("prompt")
    if (
        isinstance(messages, list)
        and messages
        and all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages)
    ):
        return messages
    if messages is None and isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    raise InputError(
        f"{where}: expected 'messages' (a list of {{'role', 'content'}}) or 'prompt' (text)"
    )


def traffic_files(folder: Path) -> list[Path]:
    """The folder's log files, oldest rotation first and the live log last."""
    rotated = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _ROTATED.fullmatch(p.name))]
    files = [p for _, p in sorted(rotated)]
    if (folder / "traffic.jsonl").is_file():
        files.append(folder / "traffic.jsonl")
    if not files:
        raise InputError(
            f"{folder}: no traffic.jsonl or traffic-<n>.jsonl in this folder (a traffic log "
            "is written by `tuneloop proxy` or `tuneloop serve --traffic-log`)"
        )
    return files


def read_traffic_audit(folder: Path) -> Audit:
    exchanges: dict[str, tuple[list[dict[str, Any]], str | None]] = {}
    order: list[str] = []
    labels: dict[str, bool] = {}
    unlabelled_other = 0
    skipped = 0
    for path in traffic_files(folder):
        for obj in _traffic_lines(path):
            if obj is None:
                skipped += 1
            elif obj.get("type") == "feedback":
                _take_feedback(obj, labels)
            elif (found := _exchange(obj)) is not None:
                cid, messages, text = found
                if cid not in exchanges:
                    order.append(cid)
                exchanges[cid] = (messages, text)
            else:
                unlabelled_other += 1
    rows = [
        AuditRow(cid, exchanges[cid][0], text, None, labels[cid])
        for cid in order
        if cid in labels and (text := exchanges[cid][1]) is not None
    ]
    return Audit(rows, "traffic", len(order) - len(rows) + unlabelled_other, skipped)


def _traffic_lines(path: Path) -> list[dict[str, Any] | None]:
    """Each line's object; None for a line that does not parse (module docstring)."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise InputError(f"{path}: cannot read the traffic log ({err.strerror or err})") from None
    out: list[dict[str, Any] | None] = []
    for chunk in data.split(b"\n"):
        if not chunk.strip():
            continue
        try:
            obj = json.loads(chunk)
        except ValueError:
            out.append(None)
            continue
        out.append(obj if isinstance(obj, dict) else None)
    return out


def _take_feedback(obj: dict[str, Any], labels: dict[str, bool]) -> None:
    cid = obj.get("completion_id")
    if not isinstance(cid, str):
        return
    base, sep, index = cid.rpartition("#")
    if sep and index == "0":
        cid = base  # the first choice is the one graded
    elif sep and index.isdigit():
        return  # a label of another choice: not the answer graded here
    verdict = obj.get("verdict")
    if verdict in ("up", "down"):
        labels[cid] = verdict == "up"
    elif verdict is None and isinstance(obj.get("correction"), str) and obj["correction"]:
        labels[cid] = False


def _exchange(obj: dict[str, Any]) -> tuple[str, list[dict[str, Any]], str | None] | None:
    """(completion id, messages, first choice's text or None) of a chat exchange line."""
    request, response = obj.get("request"), obj.get("response")
    if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
        return None
    chunks = response if isinstance(response, list) else [response]
    first = chunks[0] if chunks and isinstance(chunks[0], dict) else {}
    cid = first.get("id")
    if not isinstance(cid, str) or not cid:
        return None
    return cid, list(request["messages"]), _first_choice_text(chunks)


def _first_choice_text(chunks: list[Any]) -> str | None:
    """The text of choice 0 of a chat.completion, or of a stream's chunks joined."""
    parts: list[str] = []
    for chunk in chunks:
        choices = chunk.get("choices") if isinstance(chunk, dict) else None
        for choice in choices if isinstance(choices, list) else []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            message = choice.get("message") or choice.get("delta") or {}
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, str):
                parts.append(content)
    return "".join(parts) if parts else None
