"""Ingester `openhands`: OpenHands sessions, in either of the two shapes OpenHands writes.

Run: `tuneloop ingest --format openhands trajectory.json --out t.jsonl` (a trajectory file),
or `tuneloop ingest --format openhands ~/.openhands/conversations/<id>/ --out t.jsonl` (an
SDK conversation folder); `--format auto` recognises both.

- **Trajectory JSON** (`trajectory.py`; OpenHands ≤ 0.x, the UI's "download trajectory", the
  evaluation harness's `history`): a list of events, or an object holding it under `history`
  or `trajectory`. A record is one event, numbered by its place in the list (1-based).
- **SDK conversation folder** (`events.py`; the software-agent-sdk's persistence): a folder
  with `events/event-<NNNNN>-<id>.json`, one event per file, and `base_state.json`. A record
  is one event file, numbered in index order (1-based); `base_state.json` is read for the
  conversation id and model and is not a record.

One source → one trace (`source_id` = the session id: the SDK conversation id, the
trajectory's `id`/`conversation_id`/`instance_id`, else the file name). Tool calls are
paired with their results by id (the model's tool call id; an action without one, from
OpenHands before native tool calling, gets `event-<id>` and its observation is paired by
`cause`). Option `reasoning: keep|drop` (default keep) keeps or drops the model's visible
reasoning; encrypted reasoning (OpenAI `encrypted_content`, Anthropic `redacted_thinking`) is
never kept as text, only counted in `metadata.skipped_blocks`.

Deliberately, a record merged into a message is never also counted as skipped: the copy of the
model response that OpenHands writes onto an observation (and onto every action of a parallel
tool call batch) never becomes a second message — it is counted in
`metadata.model_response_copies` — while the record itself is merged (it is the tool result).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tuneloop.data.ingest.base import check_options
from tuneloop.data.ingest.detect import SNIFF_BYTES, sniff_text
from tuneloop.data.ingest.documents import Parsed, document_ingester
from tuneloop.data.ingest.openhands.events import EVENT_FILE, events_dir, read_conversation
from tuneloop.data.ingest.openhands.trajectory import read_trajectory
from tuneloop.errors import InputError
from tuneloop.plugins import DocumentConverter

_EVENT_HEAD = re.compile(r'"(action|observation)"\s*:\s*"')
_SOURCE = re.compile(r'"source"\s*:\s*"(user|agent|environment)"')
_WRAPPED = re.compile(r'^\{.*?"(history|trajectory)"\s*:\s*\[\s*\{', re.DOTALL)


def looks_like_openhands(path: Path) -> bool:
    """An SDK conversation folder, or a JSON file of OpenHands trajectory events (read from
    its first bytes only)."""
    path = Path(path)
    if path.is_dir():
        return events_dir(path) is not None
    head = sniff_text(path, SNIFF_BYTES // 16).lstrip()
    if not head.startswith(("[", "{")) or not _SOURCE.search(head):
        return False
    if head.startswith("{") and not _WRAPPED.match(head):
        return False
    return bool(_EVENT_HEAD.search(head)) and '"id"' in head


def _is_event_folder_file(path: Path) -> bool:
    return EVENT_FILE.match(path.name) is not None


@document_ingester("openhands", detect=looks_like_openhands)
def openhands(**options: Any) -> DocumentConverter:
    """OpenHands trajectories and SDK conversation folders: one trace per session."""
    check_options("openhands", options, {"reasoning"})
    reasoning = options.get("reasoning", "keep")
    if reasoning not in ("keep", "drop"):
        raise InputError("ingester 'openhands': option reasoning must be 'keep' or 'drop'")
    keep = reasoning == "keep"

    def convert(source: Path) -> Parsed:
        source = Path(source)
        if source.is_dir():
            folder = events_dir(source)
            if folder is None:
                raise InputError(
                    f"{source}: not an OpenHands conversation folder (no events/event-*.json)"
                )
            return read_conversation(source, folder, keep_reasoning=keep)
        if _is_event_folder_file(source) and source.parent.name == "events":
            raise InputError(
                f"{source}: one event of an SDK conversation; give its folder "
                f"({source.parent.parent})"
            )
        return read_trajectory(source, keep_reasoning=keep)

    return convert
