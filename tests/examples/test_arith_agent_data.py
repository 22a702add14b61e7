"""The agent demo's data (`make_agent_data.py`): a valid agent suite, trajectories that train
the call and the answer and not the tool result, within the context the demo serves, and
byte-identical files on every run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")

MAX_MODEL_LEN = 192  # loop_agent.yaml's serve.max_model_len
SYMBOL = {"add": "+", "sub": "-"}


@pytest.fixture(scope="module")
def agent_suite(arith_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (arith_dir / "agent_suite.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def agent_train(arith_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (arith_dir / "agent_train.jsonl").read_text().splitlines()]


def test_the_generator_rewrites_the_committed_files_byte_for_byte(
    make_agent_data, arith_dir: Path, tmp_path: Path
) -> None:
    make_agent_data.main(["--out", str(tmp_path)])
    for name in ("agent_suite.jsonl", "agent_train.jsonl"):
        assert (tmp_path / name).read_bytes() == (arith_dir / name).read_bytes(), name


def test_the_suite_loads_as_agent_items_with_correct_answers(
    make_data, arith_dir: Path, agent_suite: list[dict]
) -> None:
    from tuneloop.suite import load_suite

    suite = load_suite(arith_dir / "agent_suite.jsonl", default_scorer="agent_answer")
    assert len(suite.items) == len(agent_suite) == 300
    for it in agent_suite:
        p = make_data.parse_prompt(it["messages"][0]["content"])
        assert 100 <= p.a <= 999 and 100 <= p.b <= 999
        assert it["answer"] == str(p.a + p.b if p.op == "add" else p.a - p.b)
        assert it["tools"] == ["calculator"] and it["scorer"] == "agent_answer"
        assert it["tags"] == [p.op, "3d", p.form]
    forms = [it["tags"][2] for it in agent_suite]
    assert forms.count("symbolic") == forms.count("words")


def test_trajectories_call_the_calculator_and_answer_its_result(
    make_data, agent_train: list[dict], agent_suite: list[dict]
) -> None:
    from tuneloop.envs.calculator import calculator
    from tuneloop.train.data import Row, sft_rows

    rows = sft_rows([Row(f"agent_train.jsonl:{i + 1}", r) for i, r in enumerate(agent_train)])
    assert len(rows) == 2000 and all(
        r["tools"][0]["function"]["name"] == "calculator" for r in rows
    )
    problems = set()
    for row in agent_train:
        user, call, result, answer = row["messages"]
        p = make_data.parse_prompt(user["content"])
        problems.add(p.phrased(0))
        arguments = json.loads(call["tool_calls"][0]["function"]["arguments"])
        assert arguments == {"expression": f"{p.a} {SYMBOL[p.op]} {p.b}"}
        assert result["content"] == calculator(arguments["expression"]) == answer["content"]
    suite_problems = {
        make_data.parse_prompt(it["messages"][0]["content"]).phrased(0) for it in agent_suite
    }
    assert len(problems) == 2000 and not problems & suite_problems


def test_a_trajectory_fits_the_served_context_and_trains_only_the_assistant_turns(
    arith_dir: Path, agent_train: list[dict]
) -> None:
    from tuneloop.envs import item_tools
    from tuneloop.serve.embedded import parse_tool_calls
    from tuneloop.train.methods import tokenize_with_mask

    tok = transformers.AutoTokenizer.from_pretrained(arith_dir / "model")
    lengths = []
    for row in agent_train[:: len(agent_train) // 50]:
        enc = tokenize_with_mask(tok, row["messages"], 4096, item_tools(row))
        lengths.append(len(enc["input_ids"]))
        kept = tok.decode(
            [t for t, m in zip(enc["input_ids"], enc["assistant_masks"], strict=True) if m]
        )
        call, answer = kept.split("<|im_end|>")[:2]
        # What the model learns to write is what the server reads back as an OpenAI call.
        content, (parsed,) = parse_tool_calls(call)  # type: ignore[misc]
        assert content is None and parsed.name == "calculator"
        assert json.loads(parsed.arguments) == json.loads(
            row["messages"][1]["tool_calls"][0]["function"]["arguments"]
        )
        assert answer == row["messages"][3]["content"]
        assert re.fullmatch(r"-?\d+", answer)
    assert max(lengths) < MAX_MODEL_LEN
