from __future__ import annotations

from pathlib import Path
from typing import Any

from tuneloop.train.data import Row, sft_rows
from tuneloop.train.methods.sft import tokenize_with_mask

CLAUDE_CODE = Path(__file__).parents[2] / "data" / "fixtures" / "claude_code_session.jsonl"

CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "calculator", "arguments": '{"expression": "2+3"}'},
}
TRAJECTORY = [
    {"role": "user", "content": "What is 2+3?"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_1", "content": "5"},
    {"role": "assistant", "content": "5"},
]
CALL_TEXT = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "2+3"}}\n</tool_call>'


def test_only_assistant_tokens_are_trained(tiny_model: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    msgs = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And 3 + 3?"},
        {"role": "assistant", "content": "6"},
    ]
    enc = tokenize_with_mask(tok, msgs, max_length=512)
    kept = [i for i, m in zip(enc["input_ids"], enc["assistant_masks"], strict=True) if m]
    # Each reply's text plus the template's end-of-turn marker, not the newline after it.
    assert tok.decode(kept) == "4<|im_end|>6<|im_end|>"
    dropped = tok.decode(
        [i for i, m in zip(enc["input_ids"], enc["assistant_masks"], strict=True) if not m]
    )
    assert "What is 2 + 2?" in dropped and "Be brief." in dropped and "assistant" in dropped


def test_trl_turns_the_mask_into_minus_100_labels(
    tiny_model: Path, prompts: Path, tmp_path: Path
) -> None:
    from tuneloop.train.common import load_model, load_tokenizer
    from tuneloop.train.data import read_rows, sft_rows
    from tuneloop.train.methods.sft import build_sft_trainer
    from tuneloop.train.settings import TrainSettings

    tok = load_tokenizer(tiny_model)
    trainer = build_sft_trainer(
        load_model(tiny_model),
        tok,
        sft_rows(read_rows(prompts)),
        TrainSettings(batch_size=2),
        out_dir=tmp_path,
        nproc=1,
        steps=1,
    )
    row = trainer.train_dataset[1]
    labels, ids = row["labels"], row["input_ids"]
    kept = [i for i, lab in zip(ids, labels, strict=True) if lab != -100]
    assert tok.decode(kept) == "8<|im_end|>"
    assert all(lab in (-100, i) for i, lab in zip(ids, labels, strict=True))


def _kept(tok: Any, enc: dict) -> tuple[str, str]:
    pairs = list(zip(enc["input_ids"], enc["assistant_masks"], strict=True))
    return tok.decode([i for i, m in pairs if m]), tok.decode([i for i, m in pairs if not m])


def qwen_tokenizer(tiny_model: Path) -> Any:
    from transformers import AutoTokenizer
    from trl.chat_template_utils import qwen2_5_chat_template

    tok = AutoTokenizer.from_pretrained(tiny_model)
    tok.chat_template = qwen2_5_chat_template
    return tok


def test_sft_trains_the_tool_call_not_the_tool_result(tiny_model: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)  # ChatML without tools: the fallback
    (row,) = sft_rows([Row("x", {"messages": TRAJECTORY, "tools": ["calculator"]})])
    enc = tokenize_with_mask(tok, row["messages"], 4096, row["tools"])
    kept, dropped = _kept(tok, enc)
    assert kept == f"{CALL_TEXT}<|im_end|>5<|im_end|>"
    assert "<tool_response>\n5\n</tool_response>" in dropped and "# Tools" in dropped


def test_sft_mask_is_token_exact_on_a_template_with_tools(tiny_model: Path) -> None:
    tok = qwen_tokenizer(tiny_model)
    (row,) = sft_rows([Row("x", {"messages": TRAJECTORY, "tools": ["calculator"]})])
    enc = tokenize_with_mask(tok, row["messages"], 4096, row["tools"])
    kept, dropped = _kept(tok, enc)
    assert kept == f"{CALL_TEXT}<|im_end|>5<|im_end|>"
    assert "<tool_response>\n5\n</tool_response>" in dropped and '"calculator"' in dropped


def test_a_claude_code_session_trains_its_calls_in_order_not_their_results(
    tiny_model: Path,
) -> None:
    from tuneloop.data.corpus import to_row
    from tuneloop.data.ingest import ingest_files

    traces, _, _ = ingest_files("claude_code", [CLAUDE_CODE])
    main = next(t for t in traces if not t.metadata.get("sidechain"))
    corpus_row = to_row(main)
    assert corpus_row is not None
    (row,) = sft_rows([Row("x", corpus_row.to_json())])
    messages = row["messages"]
    calls = [c["function"]["name"] for m in messages for c in m.get("tool_calls") or []]
    results = [m["content"] for m in messages if m["role"] == "tool"]
    assert len(calls) == len(results) >= 3
    from transformers import AutoTokenizer

    # Claude Code exports do not record tool schemas, so the row has no `tools`: the calls and
    # results render through a template with tool support, and through the fallback.
    for tok in (qwen_tokenizer(tiny_model), AutoTokenizer.from_pretrained(tiny_model)):
        kept, dropped = _kept(tok, tokenize_with_mask(tok, messages, 100_000, row.get("tools")))
        assert kept.count("<tool_call>") == len(calls) and "<tool_response>" not in kept
        assert _in_order(kept, [f'"name": "{name}"' for name in calls])
        assert _in_order(dropped, [str(r)[:40] for r in results])


def _in_order(text: str, parts: list[str]) -> bool:
    """Whether every part occurs in `text`, each after the one before."""
    at = 0
    for part in parts:
        at = text.find(part, at)
        if at < 0:
            return False
        at += len(part)
    return True
