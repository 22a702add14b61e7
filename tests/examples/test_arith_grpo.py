"""The GRPO demo's recipe improves the demo model on prompts banded by its own pass rate.

A property of training, not of the clock: the demo model is sampled on 400 logged questions
(`traces/replay_production.jsonl`, what `corpus_grpo.yaml` bands) and the prompts it sometimes
but not always answers right are kept, as `bands.champion` keeps them; GRPO with
`loop_grpo.yaml`'s settings (without its SFT warm-up, to isolate GRPO) trains on them for a
few dozen steps; the pass rate on the same prompts, sampled with the same fresh seeds before
and after, must rise. Measured here: 0.735 → 0.902 on 65 banded prompts after 30 steps (the
assertion asks for +0.08). The sampled rewards rise in metrics.jsonl as well.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

ARITH = Path(__file__).resolve().parents[2] / "examples" / "arith"
N_PROMPTS, SAMPLES, STEPS = 400, 8, 30


def pass_rates(model_dir: Path, rows: list[dict[str, Any]], seed: int) -> list[float]:
    """Mean numeric score of SAMPLES completions at temperature 1, per row."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tuneloop.registry import scorers

    score = scorers.get("numeric")()
    tok = AutoTokenizer.from_pretrained(model_dir)
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    torch.manual_seed(seed)
    texts = [
        tok.apply_chat_template(r["messages"], add_generation_prompt=True, tokenize=False)
        for r in rows
    ]
    rates = []
    with torch.no_grad():
        for start in range(0, len(texts), 64):
            batch = tok(
                texts[start : start + 64],
                return_tensors="pt",
                padding=True,
                add_special_tokens=False,
            )
            out = model.generate(
                **batch,
                do_sample=True,
                temperature=1.0,
                max_new_tokens=8,
                num_return_sequences=SAMPLES,
            )
            said = tok.batch_decode(out[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
            for i, row in enumerate(rows[start : start + 64]):
                got = said[i * SAMPLES : (i + 1) * SAMPLES]
                rates.append(sum(score(row, s).value for s in got) / SAMPLES)
    return rates


def logged_questions() -> list[dict[str, Any]]:
    rows = []
    for line in (ARITH / "traces" / "replay_production.jsonl").read_text().splitlines():
        trace = json.loads(line)
        messages = trace["request"]["messages"]
        rows.append({"messages": messages, "answer": trace["answer"], "scorer": "numeric"})
    return rows[:N_PROMPTS]


def test_the_recipe_raises_the_pass_rate_of_the_banded_prompts(tmp_path: Path) -> None:
    from tuneloop.train.checkpoint import merge
    from tuneloop.train.run import train
    from tuneloop.train.settings import TrainSettings

    model = ARITH / "model"
    if not (model / "config.json").is_file():
        pytest.skip("examples/arith/model not built")
    rows = logged_questions()
    rates = pass_rates(model, rows, seed=0)
    banded = [r for r, p in zip(rows, rates, strict=True) if 0 < p < 1]
    assert len(banded) >= 30, len(banded)
    data = tmp_path / "banded.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in banded))

    recipe = yaml.safe_load((ARITH / "loop_grpo.yaml").read_text())["train"]
    grpo_only = {k: v for k, v in recipe.items() if not k.startswith("sft_warmup")}
    settings = TrainSettings.model_validate(grpo_only | {"steps": STEPS, "max_seconds": None})
    adapter = train(model, data, tmp_path / "adapter", settings, progress=False)
    merge(model, adapter, tmp_path / "merged")

    before = pass_rates(model, banded, seed=1)
    after = pass_rates(tmp_path / "merged", banded, seed=1)
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    print(f"{len(banded)} banded prompts: pass rate {mean(before):.3f} -> {mean(after):.3f}")
    assert mean(after) > mean(before) + 0.08, (mean(before), mean(after))
    logged = [json.loads(x) for x in (adapter / "metrics.jsonl").read_text().splitlines()]
    rewards = [r["reward_mean"] for r in logged if "reward_mean" in r]
    assert mean(rewards[-10:]) > mean(rewards[:10]), rewards
