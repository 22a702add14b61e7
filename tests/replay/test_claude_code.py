"""A real Claude Code session export, as users ingest it, replays: teachers answer every
main-thread assistant step, with the tool calls and tool results of the prefix in order."""

from __future__ import annotations

import json
from pathlib import Path

from tuneloop.config.replay import ReplayConfig
from tuneloop.data.ingest import ingest_files
from tuneloop.plugins import Score
from tuneloop.records import read_jsonl
from tuneloop.registry import scorers
from tuneloop.replay import replay
from tuneloop.train.data import Row, sft_rows

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
