"""Which assistant steps are replayed, and what each teacher is sent: pure functions.

    traces = read_traces(Path("traces.jsonl"))
    steps = plan_steps(traces, fraction=0.25, max_steps=100, seed=0)
    payload = build_request(steps[0], teacher, seed=0)

A step is one assistant message of a trace (main threads only unless sidechains are asked
for); the teacher is sent the conversation before it — system, user, assistant turns with
their tool calls, and tool results, in the trace's order — and the trace's `tools` when it
recorded them. Sampling is by hash: step (trace, i) is kept when
`sha256(seed, trace, i)` read as a fraction of 2^64 is below `fraction`, and `max_steps` keeps
the kept steps with the smallest hashes; so a step's membership never depends on the order of
the file or on the other traces in it. Per-request seeds derive the same way from (seed,
trace, step, teacher), as the eval's per-sample seeds do.

A step's verifier: the trace's `reference` (a logged verifiable answer) verifies its last
assistant step, and `metadata.verifiers` may map a step's message index to a suite-item-shaped
dict (`answer`, `tests`, …, `scorer`, `scorer_args`) for any step. Without one the judge (if
configured) scores the step against the original response.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuneloop.errors import InputError
from tuneloop.records import canonical_json, iter_jsonl, parse_record
from tuneloop.records.trace import Trace
from tuneloop.replay.teachers import Teacher


@dataclass(frozen=True)
class Step:
    """One assistant step to replay."""

    trace: str
    """`<source>/<source_id>` of its trace."""
    index: int
    """Index of the assistant message in the trace's messages."""
    prefix: list[dict[str, Any]]
    """OpenAI chat messages before it, in order (tool calls and results kept)."""
    original: dict[str, Any]
    """The assistant message the trace holds."""
    verifier: dict[str, Any] | None
    """Suite-item-shaped reference for the scorer (`answer`, `scorer`, …), or None."""
    tools: list[Any] | None
    """Tool definitions the trace recorded, sent along when present."""

    @property
    def key(self) -> str:
        return f"{self.trace}#{self.index}"


def read_traces(path: Path) -> list[tuple[str, Trace]]:
    """(key, trace) for every `tuneloop.trace/1` record in a JSONL file; keys are unique.

    Read through the typed record (`tuneloop.records.trace.Trace`), which lives in core so
    that this phase and the data phase, which writes traces, share it without importing
    each other.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: traces not found (`tuneloop ingest` writes them)")
    seen: dict[str, int] = {}
    out: list[tuple[str, Trace]] = []
    for lineno, obj in iter_jsonl(path):
        trace = parse_record(obj, Trace, f"{path}:{lineno}")
        key = f"{trace.source}/{trace.source_id}"
        if key in seen:
            raise InputError(f"{path}:{lineno}: trace {key!r} is also at line {seen[key]}")
        seen[key] = lineno
        out.append((key, trace))
    return out


def fraction_of(*parts: object) -> float:
    """sha256 of the parts, as a number in [0, 1)."""
    digest = hashlib.sha256("\0".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def request_seed(seed: int, step: Step, teacher: str) -> int:
    """A non-negative int32 from (seed, trace, step, teacher)."""
    return int(fraction_of(seed, step.trace, step.index, teacher) * 2**31)


def trace_steps(key: str, trace: Trace, default_scorer: str) -> list[Step]:
    """Every assistant step of one trace."""
    chat = [m.to_chat() for m in trace.messages]
    assistant = [i for i, m in enumerate(trace.messages) if m.role == "assistant"]
    verifiers = trace.metadata.get("verifiers")
    verifiers = verifiers if isinstance(verifiers, dict) else {}
    reference = trace.reference
    tools = trace.metadata.get("tools")
    steps = []
    for i in assistant:
        if i == 0:
            continue  # nothing before it to answer
        verifier = verifiers.get(str(i))
        if verifier is None and reference is not None and i == assistant[-1]:
            verifier = reference.model_dump(mode="json")
        if isinstance(verifier, dict):
            verifier = {**verifier, "scorer": verifier.get("scorer") or default_scorer}
        else:
            verifier = None
        steps.append(
            Step(key, i, chat[:i], chat[i], verifier, tools if isinstance(tools, list) else None)
        )
    return steps


def plan_steps(
    traces: list[tuple[str, Trace]],
    *,
    fraction: float,
    max_steps: int | None,
    seed: int,
    default_scorer: str,
    include_sidechains: bool = False,
) -> tuple[list[Step], int]:
    """(the sampled steps in file order, how many steps there were)."""
    every = [
        step
        for key, trace in traces
        if include_sidechains or not trace.metadata.get("sidechain")
        for step in trace_steps(key, trace, default_scorer)
    ]
    drawn = {s.key: fraction_of(seed, s.trace, s.index) for s in every}
    kept = [s for s in every if drawn[s.key] < fraction]
    if max_steps is not None and len(kept) > max_steps:
        chosen = {s.key for s in sorted(kept, key=lambda s: drawn[s.key])[:max_steps]}
        kept = [s for s in kept if s.key in chosen]
    return kept, len(every)


def build_request(step: Step, teacher: Teacher, model: str, seed: int) -> dict[str, Any]:
    """The chat request one teacher is sent for one step (no key: that is a header)."""
    s = teacher.sampling
    body: dict[str, Any] = {
        "model": model,
        "messages": step.prefix,
        "temperature": s.temperature,
        "top_p": s.top_p,
        "max_tokens": s.max_tokens,
        "n": 1,
        "stream": False,
    }
    if s.send_seed:
        body["seed"] = request_seed(seed, step, teacher.name)
    if step.tools:
        body["tools"] = step.tools
    return body


def request_hash(payload: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()
