"""Measure the embedded model's greedy pass@1 on the arithmetic suite (and write its card).

Run: `python examples/arith/measure.py [--model DIR] [--suite FILE] [--limit N] [--write-card]`.
Prints overall and per-tag accuracy; writes nothing unless `--write-card` is given, which
(re)writes `MODEL_CARD.md` beside this script from the measurement and `model/build_info.json`.

Each item is rendered with the model's own chat template (generation prompt on), generated
greedily in left-padded batches, stopped at `<|im_end|>` (the generation config's eos), and
scored with the project's registered `numeric` scorer, the same one `tuneloop eval` uses.
This is a direct in-process measurement, deliberately not `tuneloop eval`: it is the
reference figure the served loop's pre-evaluation should reproduce.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BATCH = 64
MAX_NEW_TOKENS = 8


def numeric_scorer() -> Callable[[dict[str, Any], str], Any]:
    from tuneloop.registry import scorers

    return scorers.get("numeric")()


def generate(model_dir: Path, prompts: list[list[dict[str, str]]]) -> list[str]:
    """Greedy completions (special tokens stripped), in the order of `prompts`."""
    import torch
    from rich.progress import Progress
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(1)  # as the build: figures reproduce bit for bit on one machine
    tok = AutoTokenizer.from_pretrained(model_dir)
    tok.padding_side = "left"  # generation continues from the right edge
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    texts = [
        tok.apply_chat_template(m, add_generation_prompt=True, tokenize=False) for m in prompts
    ]
    out: list[str] = []
    with Progress(transient=True) as progress, torch.no_grad():
        task = progress.add_task("generating", total=len(texts))
        for start in range(0, len(texts), BATCH):
            batch = tok(
                texts[start : start + BATCH],
                return_tensors="pt",
                padding=True,
                add_special_tokens=False,
            )
            gen = model.generate(**batch, do_sample=False, max_new_tokens=MAX_NEW_TOKENS)
            new = gen[:, batch["input_ids"].shape[1] :]
            out += tok.batch_decode(new, skip_special_tokens=True)
            progress.update(task, advance=len(new))
    return out


def measure(
    model_dir: Path, items: list[dict[str, Any]]
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Accuracy overall (key `all`) and per tag, plus one row per item."""
    score = numeric_scorer()
    completions = generate(model_dir, [it["messages"] for it in items])
    rows = []
    for it, completion in zip(items, completions, strict=True):
        value = score(it, completion).value
        rows.append({"id": it["id"], "completion": completion, "score": value})
    return accuracy_by_tag(items, [r["score"] for r in rows]), rows


def accuracy_by_tag(items: list[dict[str, Any]], scores: list[float]) -> dict[str, float]:
    groups: dict[str, list[float]] = defaultdict(list)
    for it, s in zip(items, scores, strict=True):
        groups["all"].append(s)
        tags = it.get("tags", [])
        for tag in tags:
            groups[tag].append(s)
        groups["/".join(tags)].append(s)
    return {k: sum(v) / len(v) for k, v in sorted(groups.items())}


def counts_by_tag(items: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for it in items:
        counts["all"] += 1
        for tag in it.get("tags", []):
            counts[tag] += 1
        counts["/".join(it.get("tags", []))] += 1
    return dict(counts)


def card_text(
    acc: dict[str, float], counts: dict[str, int], info: dict[str, Any], config: dict[str, Any]
) -> str:
    """MODEL_CARD.md from measured figures only (nothing typed in by hand)."""
    table = "\n".join(
        f"| {tag} | {counts[tag]} | {100 * acc[tag]:.1f}% |" for tag in sorted(acc, key=_tag_order)
    )
    arch = (
        f"{config['num_hidden_layers']} layers, hidden {config['hidden_size']}, "
        f"MLP {config['intermediate_size']}, {config['num_attention_heads']} heads, "
        f"vocab {config['vocab_size']}, tied embeddings: {config['tie_word_embeddings']}"
    )
    return CARD.format(
        params=info["parameters"],
        arch=arch,
        steps=info["steps"],
        batch=info["batch_size"],
        problems=info["pretraining_problems"],
        lr=info["learning_rate"],
        loss=info["final_loss_mean_last_50"],
        seconds=info["build_seconds"],
        cpu_seconds=info.get("build_cpu_seconds", "?"),
        threads=info["threads"],
        torch=info["torch"],
        table=table,
        overall=100 * acc["all"],
        n=counts["all"],
    )


def _tag_order(tag: str) -> tuple[int, str]:
    return (0 if tag == "all" else 1 if "/" not in tag else 2, tag)


CARD = """\
# arith-tiny: the embedded default model

A tiny `Qwen2ForCausalLM` trained from scratch on CPU to *partial* competence at integer
addition and subtraction, so that the tuneloop demo has room to show a measured gain.
Not a useful model for anything else.

It was pretrained only on questions written with the operator symbol ("What is 37 + 45?");
questions in words ("Subtract 12 from 45.", "What is 7 plus 8?") are half of the suite and
three quarters of the training prompts and of the example's production traffic. It is good at
the first kind and poor at the second: the gap a fine-tuning round on usage-like data should
close, and what the tuneloop demo measures.

- **Architecture:** Qwen2 ({arch}); **{params:,} parameters**;
  float32 safetensors.
- **Embeddings:** input and output embeddings untied (see `ARCH` in `build_model.py`: tied,
  the never-read word tokens collapse into one vector and fine-tuning cannot learn them).
- **Tokenizer:** byte-level BPE (no `unk` possible), digits always single tokens, special
  tokens `<|endoftext|>` (pad), `<|im_start|>`, `<|im_end|>` (eos); ChatML chat template
  without a system message, every turn ending with `<|im_end|>`; given `tools`, it renders them
  compactly (one signature line, Hermes `<tool_call>` blocks, `tool` turns) for the agent demo.
- **Training data:** {problems:,} chat-rendered problems ("What is 37 + 45?" → "82"), 1-2 digit
  operands, subtraction never negative, all asked symbolically, drawn so that none is a suite
  problem in any wording (`make_data.pretraining_stream`); loss on the answer and `<|im_end|>`
  only. The tokenizer's BPE text also held the wordings, so their words are tokens of their own.
- **Training:** {steps} AdamW steps of batch {batch}, peak lr {lr}, linear warmup then
  inverse-square-root decay; mean loss over the last 50 steps {loss:.3f}.
- **Build time:** {seconds} s wall, {cpu_seconds} s CPU on the machine that built it
  (torch threads: {threads}, torch {torch}); wall time depends on what else that machine was
  running, CPU time much less.
- **Determinism:** fixed seeds, fixed thread count, `torch.use_deterministic_algorithms(True)`,
  eager attention: rebuilding on the same machine and torch build gives bit-identical weights.
  Another CPU or torch version may differ in the last bits and so in a few greedy answers.

## Measured greedy pass@1 on `suite.jsonl`

Overall: **{overall:.1f}%** of {n} items (greedy, max 8 new tokens, stop at `<|im_end|>`,
`numeric` scorer).

| tag | items | pass@1 |
|---|---:|---:|
{table}

## Reproduce

```
python examples/arith/make_data.py       # suite.jsonl, train_prompts.jsonl (byte-identical)
python examples/arith/build_model.py && python examples/arith/measure.py --write-card
```
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=HERE / "model")
    parser.add_argument("--suite", type=Path, default=HERE / "suite.jsonl")
    parser.add_argument("--limit", type=int, default=None, help="first N items only")
    parser.add_argument("--write-card", action="store_true")
    args = parser.parse_args(argv)
    lines = args.suite.read_text().splitlines()
    items = [json.loads(line) for line in lines if line.strip()][: args.limit]
    acc, _ = measure(args.model, items)
    counts = counts_by_tag(items)
    for tag in sorted(acc, key=_tag_order):
        print(f"{tag:10s} {counts[tag]:4d}  {100 * acc[tag]:5.1f}%")
    if args.write_card:
        info = json.loads((args.model / "build_info.json").read_text())
        config = json.loads((args.model / "config.json").read_text())
        (HERE / "MODEL_CARD.md").write_text(card_text(acc, counts, info, config))
        print(f"wrote {HERE / 'MODEL_CARD.md'}")


if __name__ == "__main__":
    main()
