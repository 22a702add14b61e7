"""Which steps are replayed and what is sent: seeded hash sampling, prefixes, verifiers."""

from __future__ import annotations

import pytest

from tuneloop.errors import InputError
from tuneloop.records.trace import Message, Trace
from tuneloop.replay.plan import build_request, plan_steps, read_traces, request_seed, trace_steps
from tuneloop.replay.teachers import Teacher


def _traces(kit, n: int) -> list[tuple[str, Trace]]:
    return [(f"arith/t{i}", kit.arith_trace(i, i, 2 * i)) for i in range(n)]


def test_membership_is_by_hash_not_by_file(kit) -> None:
    small, big = _traces(kit, 20), _traces(kit, 60)
    kw = dict(fraction=0.3, max_steps=None, seed=5, default_scorer="exact")
    a, total = plan_steps(small, **kw)
    b, _ = plan_steps(list(reversed(big)), **kw)
    assert total == 20 and 0 < len(a) < 20
    assert {s.key for s in a} == {s.key for s in b if int(s.trace.split("t")[-1]) < 20}
    other, _ = plan_steps(small, **{**kw, "seed": 6})
    assert {s.key for s in other} != {s.key for s in a}
    capped, _ = plan_steps(big, **{**kw, "max_steps": 3})
    assert len(capped) == 3 and {s.key for s in capped} <= {s.key for s in b}


def test_steps_prefixes_and_verifiers(kit) -> None:
    trace = Trace(
        source="s",
        source_id="x",
        source_file="f",
        source_lines=[1],
        messages=[
            Message(role="assistant", content="Hi!"),  # nothing before it: not a step
            Message(role="user", content="What is 1 + 2?"),
            Message(role="assistant", content="3"),
            Message(role="user", content="And 2 + 2?"),
            Message(role="assistant", content="4"),
        ],
        metadata={"verifiers": {"2": {"answer": "3"}}, "tools": [{"type": "function"}]},
    )
    steps = trace_steps("s/x", trace, "numeric")
    assert [s.index for s in steps] == [2, 4]
    assert steps[0].verifier == {"answer": "3", "scorer": "numeric"}
    assert steps[1].verifier is None and steps[1].prefix[-1]["content"] == "And 2 + 2?"
    teacher = Teacher(name="t", endpoint="http://x/v1", model="m")
    body = build_request(steps[1], teacher, "m", seed=1)
    assert body["messages"] == steps[1].prefix and body["tools"] == [{"type": "function"}]
    assert body["seed"] == request_seed(1, steps[1], "t") != request_seed(1, steps[1], "u")


def test_a_logged_reference_verifies_the_last_step(kit) -> None:
    if "reference" not in Trace.model_fields:
        pytest.skip("Trace has no `reference` field in this tree")
    raw = kit.arith_trace(0, 2, 3).to_json()
    trace = Trace.model_validate(
        {**raw, "metadata": {}, "reference": {"answer": "5", "scorer": "numeric"}}
    )
    (step,) = trace_steps("arith/t0", trace, "exact")
    assert step.verifier is not None and step.verifier["answer"] == "5"
    assert step.verifier["scorer"] == "numeric"


def test_sidechains_only_when_asked(kit) -> None:
    side = kit.arith_trace(9, 1, 1).model_copy(update={"metadata": {"sidechain": True}})
    traces = [("arith/t9", side), *_traces(kit, 2)]
    kw = dict(fraction=1.0, max_steps=None, seed=0, default_scorer="exact")
    assert plan_steps(traces, **kw)[1] == 2
    assert plan_steps(traces, **kw, include_sidechains=True)[1] == 3


def test_traces_file_errors_name_the_line(tmp_path, kit) -> None:
    path = kit.write_traces(tmp_path / "t.jsonl", [kit.arith_trace(0, 1, 1)] * 2)
    with pytest.raises(InputError, match=r"t.jsonl:2: trace 'arith/t0' is also at line 1"):
        read_traces(path)
    with pytest.raises(InputError, match="tuneloop ingest"):
        read_traces(tmp_path / "none.jsonl")
    path.write_text('{"schema": "tuneloop.sample/1"}\n')
    with pytest.raises(InputError, match=r"t.jsonl:1"):
        read_traces(path)
