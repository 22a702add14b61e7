"""GRPO on agent rows: TRL runs the tool loop, our environment answers, results carry no loss."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tuneloop.errors import InputError
from tuneloop.train.methods.toolenv import tool_method, with_environments

from .test_sft import CALL_TEXT, TRAJECTORY, qwen_tokenizer


def test_a_tool_method_carries_the_schema_transformers_reads() -> None:
    from transformers.utils import get_json_schema

    from tuneloop.envs import item_tools

    (tool,) = item_tools({"tools": ["calculator"]})
    schema = get_json_schema(tool_method(tool))["function"]
    assert schema["name"] == "calculator"
    assert schema["parameters"]["required"] == ["expression"]
    assert schema["parameters"]["properties"]["expression"]["type"] == "string"


def test_rows_without_tools_need_no_environment() -> None:
    rows = [{"prompt": [], "item": json.dumps({"answer": "1"})}]
    assert with_environments(rows) == (rows, None)


def test_grpo_refuses_a_template_without_tools(tiny_model: Path, tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    from tuneloop.train.methods.grpo import grpo_trainer_args
    from tuneloop.train.settings import TrainSettings

    item = {"messages": TRAJECTORY[:1], "tools": ["calculator"], "answer": "5"}
    rows = [{"prompt": TRAJECTORY[:1], "item": json.dumps(item)}]
    with pytest.raises(InputError, match="does not render tool calls"):
        grpo_trainer_args(
            None,
            AutoTokenizer.from_pretrained(tiny_model),
            rows,
            TrainSettings(),
            out_dir=tmp_path,
            nproc=1,
            default_scorer="agent_answer",
        )


def test_grpo_rollouts_run_the_tool_and_mask_its_result(tiny_model: Path, tmp_path: Path) -> None:
    from tuneloop.train.common import load_model
    from tuneloop.train.methods.grpo import build_grpo_trainer
    from tuneloop.train.settings import TrainSettings

    tok = qwen_tokenizer(tiny_model)
    item = {"id": "c1", "messages": TRAJECTORY[:1], "tools": ["calculator"], "answer": "5"}
    rows = [{"prompt": TRAJECTORY[:1], "item": json.dumps(item)}] * 2
    settings = TrainSettings(
        method="grpo", steps=1, batch_size=1, grpo={"group_size": 2, "max_completion_length": 512}
    )
    model = load_model(tiny_model)
    # The character-level prompt with Qwen's tool block outruns the tiny model's 256 positions;
    # TRL drops a tool result that would not fit.
    model.config.max_position_embeddings = 4096
    trainer = build_grpo_trainer(
        model,
        tok,
        rows,
        settings,
        out_dir=tmp_path,
        nproc=1,
        default_scorer="agent_answer",
    )
    turns = [CALL_TEXT + "<|im_end|>", "5<|im_end|>"]

    def scripted(prompt_ids: list, *_: Any, **__: Any) -> tuple[list, None]:
        text = turns[0] if not seen else turns[1]
        seen.append(text)
        return [tok(text, add_special_tokens=False)["input_ids"] for _ in prompt_ids], None

    seen: list[str] = []
    captured: list[dict] = []
    generate = trainer._generate_and_score_completions

    def capture(inputs: Any) -> dict:
        captured.append(generate(inputs))
        return captured[-1]

    trainer._generate_single_turn = scripted
    trainer._generate_and_score_completions = capture
    trainer.train()
    out = captured[0]
    ids, mask = out["completion_ids"][0], out["tool_mask"][0] * out["completion_mask"][0]
    trained = tok.decode([int(i) for i, m in zip(ids, mask, strict=True) if m])
    masked = tok.decode([int(i) for i, m in zip(ids, out["tool_mask"][0], strict=True) if not m])
    assert seen == turns  # the call ran and the model was asked to go on
    assert "<tool_response>\n5\n</tool_response>" in masked  # the calculator's result, no loss
    assert trained == f"{CALL_TEXT}<|im_end|>5<|im_end|>"
