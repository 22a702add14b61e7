"""The embedded model folder: config, size, stop token, chat template, and its card's figures."""

from __future__ import annotations

import json
import math
import re

import pytest

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def model_dir(arith_dir):
    return arith_dir / "model"


@pytest.fixture(scope="module")
def tok(model_dir):
    return transformers.AutoTokenizer.from_pretrained(model_dir)


def test_config_loads_and_parameter_count_is_1_to_3_million(model_dir):
    from safetensors import safe_open

    config = transformers.AutoConfig.from_pretrained(model_dir)
    assert config.model_type == "qwen2"
    with safe_open(str(model_dir / "model.safetensors"), framework="pt") as f:
        count = sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys())  # noqa: SIM118
    info = json.loads((model_dir / "build_info.json").read_text())
    assert count == info["parameters"]
    assert 1_000_000 <= count <= 3_000_000


def test_generation_config_stops_on_im_end(model_dir, tok):
    gen = transformers.GenerationConfig.from_pretrained(model_dir)
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert im_end != tok.unk_token_id
    assert gen.eos_token_id == im_end == tok.eos_token_id
    assert gen.pad_token_id == tok.pad_token_id == tok.convert_tokens_to_ids("<|endoftext|>")
    assert gen.do_sample is False


def test_chat_template_ends_every_turn_with_im_end(tok):
    chat = [
        {"role": "user", "content": "What is 1 + 2?"},
        {"role": "assistant", "content": "3"},
        {"role": "user", "content": "What is 9 - 4?"},
    ]
    closed = tok.apply_chat_template(chat, tokenize=False)
    assert closed == "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in chat)
    opened = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    assert opened == closed + "<|im_start|>assistant\n"


def card_table(text: str) -> dict[str, float]:
    rows = re.findall(r"^\| (\S+) \| (\d+) \| ([\d.]+)% \|$", text, flags=re.MULTILINE)
    return {tag: float(pct) / 100 for tag, _, pct in rows}


def test_model_card_figures_reproduce_on_the_first_batch(measure, suite_items, arith_dir):
    # The first 64 items are exactly the first batch of the card's full run, so the 1-digit
    # cells are generated with the same padding and shapes. One item of slack per cell allows
    # for another CPU's floating-point kernels flipping a near-tie greedy token.
    card = card_table((arith_dir / "MODEL_CARD.md").read_text())
    items = suite_items[: measure.BATCH]
    acc, rows = measure.measure(arith_dir / "model", items)
    for tag in ("add/1d/symbolic", "add/1d/words", "sub/1d/symbolic", "sub/1d/words"):
        n = sum("/".join(it["tags"]) == tag for it in items)
        assert abs(acc[tag] - card[tag]) * n <= 1, tag
    # The model answers with just a number, is strong on symbolic questions and weak on
    # questions in words (the card's claim, and the gap the demo closes).
    assert sum(bool(re.fullmatch(r"-?\d+", r["completion"].strip())) for r in rows) >= 0.9 * 64
    assert acc["symbolic"] >= 0.8 and acc["symbolic"] - acc["words"] >= 0.3
