"""A real Claude Code session export, as users ingest it, replays: teachers answer every
main-thread assistant step, with the tool calls and tool results of the prefix in order; and
with the LLM judge its open-ended steps yield SFT rows and DPO pairs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuneloop.config.replay import ReplayConfig
from tuneloop.data.ingest import ingest_files
from tuneloop.plugins import Score
from tuneloop.records import read_jsonl
from tuneloop.registry import scorers
from tuneloop.replay import replay
from tuneloop.train.data import Row, sft_rows

from ..judge_fixture import write_judge

FIXTURE = Path(__file__).parents[1] / "data" / "fixtures" / "claude_code_session.jsonl"


def _accept_all():
    return lambda item, completion: Score(1.0, {"judged": "accepted"})


def test_claude_code_session_replays_with_tool_calls_in_order(
    tmp_path, teachers_server, kit, monkeypatch
) -> None:
    monkeypatch.setitem(scorers._items, "test_accept_all", _accept_all)
    traces, _, _ = ingest_files("claude_code", [FIXTURE])
    main = next(t for t in traces if not t.metadata.get("sidechain"))
    assert any(t.metadata.get("sidechain") for t in traces)  # and one sub-agent trace
    path = kit.write_traces(tmp_path / "traces.jsonl", traces)
    teachers = kit.write_teachers(
        tmp_path / "teachers.yaml", teachers_server.url, [{"name": "tool"}, {"name": "right"}]
    )
    out = tmp_path / "out"
    report = replay(path, teachers, out, ReplayConfig(judge="test_accept_all")).report

    steps = [i for i, m in enumerate(main.messages) if m.role == "assistant"]
    assert report.steps_planned == len(steps) == 5  # main thread only
    sent = [r for r in teachers_server.state.requests if r["model"] == "tool"]
    assert len(sent) == 5
    chat = [m.to_chat() for m in main.messages]
    for request in sent:
        n = len(request["messages"])
        assert n in steps and request["messages"] == chat[:n]  # the prefix, verbatim
    longest = max(sent, key=lambda r: len(r["messages"]))["messages"]
    calls = [c["id"] for m in longest if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    answered = [m["tool_call_id"] for m in longest if m["role"] == "tool"]
    assert calls == answered and len(calls) >= 3  # each result after its call, in order
    for i, m in enumerate(longest):
        if m["role"] == "tool":
            assert (
                m["tool_call_id"] in {c["id"] for c in longest[i - 1].get("tool_calls") or []}
                or longest[i - 1]["role"] == "tool"
            )

    by = {t.name: t for t in report.teachers}
    assert by["tool"].scored == by["right"].scored == 5 and by["tool"].malformed == 0
    sft = read_jsonl(out / "sft.jsonl")
    assert len(sft) == 5 and {r["teacher"] for r in sft} == {"tool"}  # first listed wins a tie
    assert sft[0]["messages"][-1]["tool_calls"][0]["function"]["name"] == "Bash"
    assert sft_rows([Row("x", r) for r in sft])  # a tool-call answer is a valid SFT row
    assert "sk-ant-" not in json.dumps(sft)  # the key typed in the session: redacted on write


def acting_wins(content: str) -> tuple[int, str]:
    """A fake judge for agent steps: an answer that acts (makes a tool call) beats one that
    only talks; graded, 1 for an answer that acts. Crude, but deterministic."""
    if "RESPONSE A:" in content:
        a, b = (("[tool call" in r) for r in content.split("RESPONSE A:")[1].split("RESPONSE B:"))
        return 200, "VERDICT: " + ("TIE" if a == b else "A" if a else "B")
    return 200, "SCORE: " + ("1" if "[tool call" in content.split("RESPONSE:")[1] else "0")


@pytest.mark.parametrize(
    ("mode", "sft", "dpo", "asked"),
    [
        # tool beats the two text-only originals (steps 5, 9) and ties the three that act;
        # `right` ("I do not know.") loses to those three and ties the other two: neither a
        # tie nor a loss on a step nobody won is a row
        ("pairwise", 2, 2, 20),
        # tool 1 on every step, `right` 0, the originals 1 on the three steps that act
        ("grade", 5, 7, 15),
    ],
)
def test_a_judged_claude_code_session_yields_rows(
    tmp_path, teachers_server, kit, fake_judge, mode, sft, dpo, asked
) -> None:
    """Issue 33: a real agent session has no reference, so without a judge its replay gave
    0 scored steps, 0 SFT rows and 0 DPO pairs; with the LLM judge it yields both."""
    fake_judge.answer = acting_wins
    traces, _, _ = ingest_files("claude_code", [FIXTURE])
    path = kit.write_traces(tmp_path / "traces.jsonl", traces)
    teachers = kit.write_teachers(
        tmp_path / "teachers.yaml", teachers_server.url, [{"name": "tool"}, {"name": "right"}]
    )
    unjudged = replay(path, teachers, tmp_path / "plain", ReplayConfig()).report
    assert (unjudged.sft_rows, unjudged.dpo_pairs) == (0, 0)
    assert all(t.scored == 0 and t.unscored == 5 for t in unjudged.teachers)

    judge = write_judge(tmp_path / "judge", fake_judge.url, mode=mode)
    settings = ReplayConfig(judge="judge", judge_args={"judge": str(judge)})
    report = replay(path, teachers, tmp_path / "out", settings).report
    j = report.judged
    assert j is not None and (j.steps, j.calls_scored, j.errors) == (5, 10, 0)
    assert j.originals_scored == 5
    assert (report.sft_rows, report.dpo_pairs) == (j.sft_rows, j.dpo_pairs) == (sft, dpo)
    assert fake_judge.calls == asked
    rows = read_jsonl(tmp_path / "out" / "sft.jsonl")
    assert {r["teacher"] for r in rows} == {"tool"} and sft_rows([Row("x", r) for r in rows])
