"""The agent loop against a scripted model: exact trajectories, faults told to the model and
scored, limits, infrastructure errors never scored, and the report and gate on any metric."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tuneloop.client import MalformedResponse
from tuneloop.errors import InputError
from tuneloop.evaluate import EvalSettings, evaluate
from tuneloop.evaluate.agent import parse_turn
from tuneloop.evaluate.plan import sample_seed, turn_seed
from tuneloop.gate.arms import load_arms
from tuneloop.records import read_jsonl, write_jsonl
from tuneloop.report.build import compare
from tuneloop.report.delta import Settings
from tuneloop.samplelog import SampleRow, load_sample_log

METRICS = ["tool_call_valid", "tool_match", "redundant_calls", "failed_calls", "turns", "tokens"]

# item → (calls as (name, status), stop, turns, score)
EXPECTED: dict[str, tuple[list[tuple[str, str]], str, int, float]] = {
    "calc-plain": ([("calculator", "ok")], "answer", 2, 1.0),
    "calc-bad-json": ([("calculator", "invalid_json"), ("calculator", "ok")], "answer", 3, 1.0),
    "calc-unknown": ([("calc", "unknown_tool"), ("calculator", "ok")], "answer", 3, 1.0),
    "calc-wrong-args": (
        [("calculator", "invalid_arguments"), ("calculator", "ok")],
        "answer",
        3,
        1.0,
    ),
    "calc-fail": ([("calculator", "failed")], "answer", 2, 1.0),
    "calc-redundant": ([("calculator", "ok")] * 2, "answer", 3, 1.0),
    "calc-loop": ([("calculator", "ok")] * 4, "max_turns", 4, 0.0),
    "weather-recorded": ([("weather", "ok")], "answer", 2, 1.0),
}


def _rows(out: Path) -> dict[str, SampleRow]:
    return {r.item_id: r for r in load_sample_log(out)[1]}


def _eval(server: Any, suite: Path, out: Path, **kw: Any) -> Any:
    settings = EvalSettings(max_turns=4, metrics=METRICS, concurrency=4, backoff_s=0.01, **kw)
    return evaluate(server.url, "fake", suite, out, settings, progress=False)


def test_exact_trajectories(agent_server, kit, tmp_path) -> None:
    summary = _eval(agent_server, kit.AGENT_SUITE, tmp_path / "out")
    assert summary.counts == {"expected": 9, "ok": 9, "harness_error": 0, "missing": 0}
    assert summary.agent is not None and summary.agent.max_turns == 4
    rows = _rows(tmp_path / "out")
    for item_id, (calls, stop, turns, score) in EXPECTED.items():
        trace = rows[item_id].agent
        assert trace is not None, item_id
        assert [(c.name, c.status) for c in trace.calls] == calls, item_id
        assert (trace.stop, trace.turns, rows[item_id].score) == (stop, turns, score), item_id
    bad = rows["calc-bad-json"]
    assert bad.agent is not None and bad.agent.messages == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_0",
                    "type": "function",
                    "function": {"name": "calculator", "arguments": '{"expression": "120 / 8'},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_0",
            "content": json.dumps({"error": "arguments: Unterminated string starting at"}),
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "calculator", "arguments": '{"expression": "120 / 8"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "15"},
        {"role": "assistant", "content": "The answer is 15."},
    ]
    assert (bad.completion, bad.finish_reason) == ("The answer is 15.", "stop")
    # tokens: the sum over turns of the server's usage (10 per message sent, 5 per reply)
    assert (bad.prompt_tokens, bad.completion_tokens) == (10 + 30 + 50, 15)
    assert bad.metrics["tool_call_valid"] == 0.5 and bad.metrics["turns"] == 0.5
    assert rows["calc-fail"].metrics["failed_calls"] == 0.0
    assert rows["calc-redundant"].metrics["redundant_calls"] == 0.5
    assert rows["calc-loop"].detail["reason"] == "unfinished: stopped by max_turns"
    plain = rows["plain-chat"]
    assert plain.agent is None and plain.score == 1.0 and plain.metrics["turns"] == 1.0
    raw = read_jsonl(tmp_path / "out" / "samples.jsonl")
    assert {r["schema"] for r in raw} == {"tuneloop.sample/2"}


def test_each_turn_sends_its_own_seed_and_the_tools(agent_server, kit, tmp_path) -> None:
    _eval(agent_server, kit.AGENT_SUITE, tmp_path / "out")
    seen = {(q, t): s for q, t, s in agent_server.state.requests}
    q = "Compute: 120 / 8 [bad-json]"
    assert [seen[(q, t)] for t in range(3)] == [
        turn_seed(0, "calc-bad-json", 0, t) for t in range(3)
    ]
    assert turn_seed(0, "x", 2, 0) == sample_seed(0, "x", 2) != turn_seed(0, "x", 2, 1)


def test_token_budget_cuts_a_trajectory_off_as_unfinished(agent_server, kit, tmp_path) -> None:
    _eval(agent_server, kit.AGENT_SUITE, tmp_path / "out", token_budget=25)
    rows = _rows(tmp_path / "out")
    assert rows["calc-plain"].agent.stop == "answer"  # type: ignore[union-attr]
    cut = rows["calc-bad-json"]
    assert cut.agent is not None and (cut.agent.stop, cut.agent.turns) == ("token_budget", 2)
    assert cut.score == 0.0 and cut.metrics["tokens"] == 0.0


def test_500s_are_retried_and_never_change_a_trajectory(agent_server, kit, tmp_path) -> None:
    _eval(agent_server, kit.AGENT_SUITE, tmp_path / "clean")
    agent_server.state.error_rate = 0.3
    summary = _eval(agent_server, kit.AGENT_SUITE, tmp_path / "faulty", max_retries=20)
    assert summary.retries > 0 and summary.counts["ok"] == 9

    def strip(rows: dict[str, SampleRow]) -> dict[str, Any]:
        return {k: r.model_dump(exclude={"latency_s"}) for k, r in rows.items()}

    assert strip(_rows(tmp_path / "faulty")) == strip(_rows(tmp_path / "clean"))


def test_resume_refuses_other_agent_limits_or_metrics(agent_server, kit, tmp_path) -> None:
    out = tmp_path / "out"
    _eval(agent_server, kit.AGENT_SUITE, out)
    with pytest.raises(InputError, match="agent limits"):
        evaluate(
            agent_server.url, "fake", kit.AGENT_SUITE, out,
            EvalSettings(max_turns=5, metrics=METRICS), progress=False,
        )  # fmt: skip
    with pytest.raises(InputError, match="metrics"):
        evaluate(
            agent_server.url, "fake", kit.AGENT_SUITE, out,
            EvalSettings(max_turns=4, metrics=["turns"]), progress=False,
        )  # fmt: skip


def test_unknown_metric_is_refused_before_any_request(agent_server, kit, tmp_path) -> None:
    with pytest.raises(InputError, match="unknown scorer 'turn' \\(did you mean 'turns'"):
        evaluate(
            agent_server.url, "fake", kit.AGENT_SUITE, tmp_path / "out",
            EvalSettings(metrics=["turn"]), progress=False,
        )  # fmt: skip
    assert agent_server.state.requests == []


@pytest.mark.parametrize(
    "body",
    [
        b'{"choices": []}',
        b'{"choices": [{"message": {"content": null}}]}',
        b'{"choices": [{"message": {"content": "x", "tool_calls": {"a": 1}}}]}',
        b'{"choices": [{"message": "hi"}]}',
    ],
)
def test_a_reply_that_is_not_a_chat_completion_is_malformed(body: bytes) -> None:
    with pytest.raises(MalformedResponse):
        parse_turn(body)


def test_report_and_gate_work_on_a_named_metric(agent_server, kit, tmp_path) -> None:
    pre = tmp_path / "pre"
    _eval(agent_server, kit.AGENT_SUITE, pre)
    post = tmp_path / "post"  # the same log with every call well formed
    shutil.copytree(pre, post)
    rows = read_jsonl(post / "samples.jsonl")
    for r in rows:
        r["metrics"]["tool_call_valid"] = 1.0
    write_jsonl(post / "samples.jsonl", rows)

    report = compare(
        pre, post, tmp_path / "report", Settings(scorer="tool_call_valid"), figures=False
    )
    assert report.pre.mean == pytest.approx((6 + 3 * 0.5) / 9)
    assert report.post.mean == 1.0 and report.settings.scorer == "tool_call_valid"
    assert "scored by `tool_call_valid`" in (tmp_path / "report" / "delta.md").read_text()
    same = compare(pre, post, tmp_path / "r2", Settings(), figures=False)
    assert same.delta == 0.0  # the items' own scores did not change

    ids = [r["item_id"] for r in rows]
    champ, chall = load_arms(pre, post, ids, "tool_call_valid")
    assert champ.scores.mean() == pytest.approx((6 + 3 * 0.5) / 9) and chall.scores.mean() == 1.0
    own = r"'plain-chat' sample 0 has no output of scorer 'agent_answer' \(scored by 'numeric'"
    with pytest.raises(InputError, match=own):
        load_arms(pre, post, ids, "agent_answer")  # the agent items' own scorer, not plain-chat's
    with pytest.raises(InputError, match=r"no output of scorer 'python_tests'.*eval\.metrics"):
        load_arms(pre, post, ids, "python_tests")
