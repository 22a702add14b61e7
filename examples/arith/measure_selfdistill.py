"""Measure self-distillation on the demo model: what the hinted teacher knows, the channel's
scale against GRPO, and α × divergence at equal training seconds.

Run (after `build_teachers.py`; one torch thread throughout):
    python examples/arith/measure_selfdistill.py teacher          # ~1 min
    python examples/arith/measure_selfdistill.py scale            # ~2 min
    python examples/arith/measure_selfdistill.py sweep [--seconds 60] [--lr 0.0001]
        [--only 'ARM;ARM'] [--work DIR]                            # ~25 min

- `teacher`: the self-distillation teacher at the start of training is the base model with a
  hint in its prompt. For each hint format, its greedy pass@1 on the suite (words / symbolic)
  and the mean log-probability it gives the reference answer (answer tokens and `<|im_end|>`),
  against the same model without the hint (the student). A teacher worse than the student
  pulls the student down.
- `scale`: on the first batches of the composite arm's real training (the base, the replay's
  prompts, the sweep's settings), each channel's loss and the L2 norm of its gradient over the
  LoRA weights, for each divergence and hint format: how much of the update α gives
  self-distillation.
- `sweep`: measure_replay.py's method (one `tuneloop run` round per arm in one workdir, gate
  off, the base evaluated once; paired Δ against the base on all 320 suite items, bootstrap
  95% CI with 10,000 resamples, paired permutation p) for the composite objective (GRPO +
  α · self-distillation + 0.5 · replay-DPO, lr 1e-4, as in README "Teacher replay") with
  α ∈ {0, 0.05, 0.1, 0.5} × divergence ∈ {reverse KL (the default), JSD β 0 (= forward KL in
  TRL's convention), JSD β 0.5}, the reference appended as the hint; then the same α with a
  hint this model can read: the question restated symbolically ("What is 8 + 7?") in place of
  the worded one, the only form it was pretrained on (`hint_placement: replace`, reverse KL);
  at α 0.1, the two real hint sources appended as text: the replay's passing answer
  (`hint_source: replay`) and the scorer's verdict on the sample (`scorer_feedback`); and the
  symbolic and reference hints with the frozen base as the teacher (`teacher: base`) instead
  of the model as it trains. `--only 'symbolic;α 0 ('` runs a subset, `--lr` another rate.
  Every arm gets `--seconds` of training (`train.max_seconds`, from the first optimizer step).
  Prints a Markdown table and writes it to `WORK/table.md`.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import shutil
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import make_data as md  # noqa: E402
import measure_replay as mr  # noqa: E402
from measure import BATCH, generate, numeric_scorer  # noqa: E402
from rounds import TUNELOOP, round_figures, sh, tag_change  # noqa: E402

SUITE = HERE / "suite.jsonl"
MODEL = HERE / "model"
APPENDED = "\n\n(Reference answer: {hint})"
"""`train.composite.hint_template`'s default: what the README's composite arm used."""
SECONDS = 60.0
ALPHAS = (0.05, 0.1, 0.5)
DIVERGENCES: dict[str, dict[str, Any]] = {
    "reverse KL": {"divergence": "reverse_kl"},
    "JSD β 0": {"divergence": "jsd", "jsd_beta": 0.0},
    "JSD β 0.5": {"divergence": "jsd", "jsd_beta": 0.5},
}
SYMBOLIC_HINT: dict[str, Any] = {
    "hint_field": "symbolic",
    "hint_template": "{hint}",
    "hint_placement": "replace",
}
"""The hint this model can read: the question restated in its pretraining form."""
REAL_HINTS: dict[str, dict[str, Any]] = {
    "replay answer": {"alpha": 0.1, "hint_source": "replay", "hint_rows": "replay/sft.jsonl"},
    "scorer feedback": {
        "alpha": 0.1,
        "hint_source": "scorer_feedback",
        "hint_template": "\n\n(Feedback: {hint})",
    },
}
"""The real hint sources, appended as text like the reference."""
COMPOSITE: dict[str, Any] = {
    "method": "composite",
    "data": "data/grpo.jsonl",
    "batch_size": 8,
    "learning_rate": 0.0001,
    "grpo": {"group_size": 4, "max_completion_length": 8, "scorer": "numeric"},
}
"""measure_replay.py's composite arm (README "Teacher replay")."""


def symbolic(question: str) -> str:
    """The question in the form the model was pretrained on ("What is 8 + 7?")."""
    return md.parse_prompt(question).phrased(0).prompt


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# -- teacher ---------------------------------------------------------------------------------

Format = Callable[[dict[str, Any], str], list[dict[str, Any]]]
"""(item, the student's greedy completion) → the teacher's prompt."""


def hint_formats() -> dict[str, Format]:
    from tuneloop.train.methods.selfdistill import FeedbackTeacher, HintFormat, teacher_prompt

    score = numeric_scorer()
    feedback = FeedbackTeacher(score, HintFormat("\n\n(Feedback: {hint})"))

    def earlier_turn(it: dict[str, Any], _: str) -> list[dict[str, Any]]:
        answered = {"role": "assistant", "content": it["answer"]}
        return [*it["messages"], answered, *it["messages"]]

    return {
        "none (the student)": lambda it, _: it["messages"],
        "reference appended (default)": lambda it, _: teacher_prompt(
            it["messages"], it["answer"], HintFormat(APPENDED)
        ),
        "reference after the question, ' {hint}'": lambda it, _: teacher_prompt(
            it["messages"], it["answer"], HintFormat(" {hint}")
        ),
        "reference as an earlier answered turn": earlier_turn,
        "scorer feedback on its own answer": lambda it, c: feedback.prompt(it["messages"], it, c)[
            0
        ],
        "symbolic restatement, replacing the question": lambda it, _: teacher_prompt(
            it["messages"], symbolic(it["messages"][-1]["content"]), HintFormat("{hint}", "replace")
        ),
    }


def answer_logprobs(prompts: list[list[dict[str, Any]]], answers: list[str]) -> list[float]:
    """log p(answer + <|im_end|> | prompt) under the base model, summed over the answer's
    tokens (prompts left-padded, the answer's tokens the last positions)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(MODEL)
    model = AutoModelForCausalLM.from_pretrained(MODEL).eval()
    out: list[float] = []
    for start in range(0, len(prompts), BATCH):
        chunk = range(start, min(start + BATCH, len(prompts)))
        texts = [
            tok.apply_chat_template(prompts[i], add_generation_prompt=True, tokenize=False)
            for i in chunk
        ]
        heads = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
        tails = [
            tok(answers[i] + "<|im_end|>", add_special_tokens=False)["input_ids"] for i in chunk
        ]
        width = max(len(h) + len(t) for h, t in zip(heads, tails, strict=True))
        ids = torch.full((len(heads), width), tok.pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, (h, t) in enumerate(zip(heads, tails, strict=True)):
            ids[row, width - len(h) - len(t) :] = torch.tensor(h + t)
            mask[row, width - len(h) - len(t) :] = 1
        with torch.no_grad():
            logp = model(input_ids=ids, attention_mask=mask).logits.float().log_softmax(-1)
        for row, t in enumerate(tails):
            n = len(t)
            target = ids[row, width - n :, None]
            out.append(float(logp[row, width - n - 1 : width - 1].gather(-1, target).sum()))
    return out


def by_tag(items: list[dict[str, Any]], values: list[float]) -> dict[str, float]:
    groups: dict[str, list[float]] = defaultdict(list)
    for it, v in zip(items, values, strict=True):
        for tag in ("all", *it["tags"]):
            groups[tag].append(v)
    return {tag: sum(v) / len(v) for tag, v in groups.items()}


def teacher_table() -> str:
    import torch

    torch.set_num_threads(1)
    items = read_jsonl(SUITE)
    score = numeric_scorer()
    student = generate(MODEL, [it["messages"] for it in items])
    student_ok = [score(it, c).value for it, c in zip(items, student, strict=True)]
    lines = [
        "| teacher's prompt | pass@1 | words | symbolic | broken / fixed vs student "
        "| mean log p(reference), words | symbolic |",
        "|---|---:|---:|---:|---|---:|---:|",
    ]
    for name, form in hint_formats().items():
        prompts = [form(it, c) for it, c in zip(items, student, strict=True)]
        first = next(i for i, it in enumerate(items) if "words" in it["tags"])
        print(f"{name}: {prompts[first]!r}", flush=True)
        completions = generate(MODEL, prompts)
        ok = [score(it, c).value for it, c in zip(items, completions, strict=True)]
        acc = by_tag(items, ok)
        logp = by_tag(items, answer_logprobs(prompts, [it["answer"] for it in items]))
        broken = sum(s == 1 and t == 0 for s, t in zip(student_ok, ok, strict=True))
        fixed = sum(s == 0 and t == 1 for s, t in zip(student_ok, ok, strict=True))
        lines.append(
            f"| {name} | {100 * acc['all']:.1f}% | {100 * acc['words']:.1f}% "
            f"| {100 * acc['symbolic']:.1f}% | {broken} / {fixed} "
            f"| {logp['words']:.2f} | {logp['symbolic']:.2f} |"
        )
    return "\n".join(lines)


# -- scale -----------------------------------------------------------------------------------


def prepare(work: Path) -> None:
    """The replay demo's data (measure_replay.py's steps 1-2) and a copy of the prompts with
    each question's symbolic restatement in a `symbolic` field."""
    work.mkdir(parents=True, exist_ok=True)
    log = HERE / "traces" / "replay_production.jsonl"
    sh(TUNELOOP, "ingest", "-f", "openai_chat", log, "--out", work / "traces.jsonl")
    sh(TUNELOOP, "corpus", "build", HERE / "corpus_replay.yaml", "--out", work / "data")
    teachers = HERE / "teachers.yaml"
    replay = ("replay", "--traces", work / "traces.jsonl", "--teachers", teachers)
    sh(TUNELOOP, *replay, "--out", work / "replay")
    rows = read_jsonl(work / "data" / "grpo.jsonl")
    for row in rows:
        row["symbolic"] = symbolic(row["messages"][-1]["content"])
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    (work / "data" / "grpo_symbolic.jsonl").write_text(text)


def channel_scale(work: Path, composite: dict[str, Any], batches: int) -> dict[str, float]:
    """Mean loss and gradient norm of GRPO and self-distillation on the first `batches`
    batches of the composite arm's training, at the base (no step taken)."""
    import torch

    from tuneloop.train.common import load_model, load_tokenizer, quiet
    from tuneloop.train.data import read_rows
    from tuneloop.train.methods.composite import build_composite_trainer, composite_rows
    from tuneloop.train.settings import TrainSettings

    quiet()
    data = "grpo_symbolic.jsonl" if composite.get("hint_field") == "symbolic" else "grpo.jsonl"
    settings = {k: v for k, v in COMPOSITE.items() if k != "data"}
    s = TrainSettings(
        **settings, steps=batches, seed=0, torch_threads=1, lora={"r": 64, "alpha": 64},
        composite={"alpha": 1.0, **composite},
    )  # fmt: skip
    torch.manual_seed(0)  # the same samples for every configuration
    trainer = build_composite_trainer(
        load_model(MODEL),
        load_tokenizer(MODEL),
        composite_rows(read_rows(work / "data" / data), s),
        s,
        out_dir=work / "scale",
        nproc=1,
        default_scorer="numeric",
    )
    model = trainer.model
    model.train()
    trainer.current_gradient_accumulation_steps = 1
    sums: dict[str, float] = defaultdict(float)
    batch_iter = iter(trainer.get_train_dataloader())
    for _ in range(batches):
        inputs = trainer._prepare_inputs(next(batch_iter))
        for name, loss in trainer.channel_losses(model, inputs).items():
            model.zero_grad()
            loss.backward()
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            sums[f"loss_{name}"] += loss.item() / batches
            sums[f"grad_{name}"] += math.sqrt(sum(float((g**2).sum()) for g in grads)) / batches
    return dict(sums)


def scale_table(work: Path, batches: int) -> str:
    import torch

    torch.set_num_threads(1)
    if not (work / "data" / "grpo_symbolic.jsonl").is_file():
        prepare(work)
    lines = [
        f"Mean over the first {batches} batches (8 prompts × 4 samples), at the base:",
        "",
        "| hint | divergence | loss GRPO | loss self-distill | ‖∇‖ GRPO | ‖∇‖ self-distill "
        "| ratio |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    hints = {"reference appended": {}, "symbolic restatement": SYMBOLIC_HINT}
    for hint, hint_settings in hints.items():
        for name, divergence in DIVERGENCES.items():
            m = channel_scale(work, {**hint_settings, **divergence}, batches)
            ratio = m["grad_self_distill"] / max(m["grad_grpo"], 1e-12)
            lines.append(
                f"| {hint} | {name} | {m['loss_grpo']:.4f} | {m['loss_self_distill']:.3f} "
                f"| {m['grad_grpo']:.3f} | {m['grad_self_distill']:.3f} | {ratio:.0f}× |"
            )
            print(lines[-1], flush=True)
    return "\n".join(lines)


# -- sweep -----------------------------------------------------------------------------------


def arms() -> list[tuple[str, dict[str, Any]]]:
    """(name, train section without its budget) for every arm, α 0 first."""
    pairs = {"beta": 0.5, "pairs": "replay/dpo.jsonl"}
    out = [("α 0 (GRPO + replay-DPO)", {**COMPOSITE, "composite": {"alpha": 0.0, **pairs}})]
    for alpha in ALPHAS:
        for name, divergence in DIVERGENCES.items():
            composite = {"alpha": alpha, **divergence, **pairs}
            out.append((f"α {alpha:g}, {name}, reference", {**COMPOSITE, "composite": composite}))
    for alpha in ALPHAS:
        composite = {"alpha": alpha, **SYMBOLIC_HINT, **pairs}
        symbolic_arm = {**COMPOSITE, "data": "data/grpo_symbolic.jsonl", "composite": composite}
        out.append((f"α {alpha:g}, reverse KL, symbolic", symbolic_arm))
    for name, hint in REAL_HINTS.items():
        out.append((f"α 0.1, reverse KL, {name}", {**COMPOSITE, "composite": {**hint, **pairs}}))
    base = {"teacher": "base", **pairs}
    for alpha in ALPHAS:
        composite = {"alpha": alpha, **SYMBOLIC_HINT, **base}
        symbolic_arm = {**COMPOSITE, "data": "data/grpo_symbolic.jsonl", "composite": composite}
        out.append((f"α {alpha:g}, reverse KL, symbolic, base teacher", symbolic_arm))
    reference = {"alpha": 0.5, **base}
    out.append(
        ("α 0.5, reverse KL, reference, base teacher", {**COMPOSITE, "composite": reference})
    )
    return out


def run_arm(name: str, arm: dict[str, Any], work: Path, seconds: float) -> dict[str, Any]:
    loop = work / "loop"
    train = {**mr.COMMON, **arm, "steps": mr.MAX_STEPS, "max_seconds": seconds}
    train["data"] = str(work / arm["data"])
    train["composite"] = {**arm["composite"], "pairs": str(work / arm["composite"]["pairs"])}
    if "hint_rows" in arm["composite"]:
        train["composite"]["hint_rows"] = str(work / arm["composite"]["hint_rows"])
    figures = round_figures(mr.loop_config(work, train), loop, name)
    if figures["stop"] != "max_seconds":
        raise SystemExit(f"{name}: training ended by {figures['stop']}, not the budget")
    kept = work / "arms" / f"{len(list((work / 'arms').glob('*'))):02d}"
    shutil.copytree(loop / "report", kept)
    shutil.copy(loop / "train" / "adapter" / "metrics.jsonl", kept / "metrics.jsonl")
    metrics = read_jsonl(kept / "metrics.jsonl")
    distill = [m["loss_self_distill"] for m in metrics if "loss_self_distill" in m]
    return figures | {"distill": sum(distill) / len(distill) if distill else None}


def sweep_table(results: list[dict[str, Any]], seconds: float) -> str:
    pp = lambda x: f"{100 * x:+.1f}"  # noqa: E731
    lines = [
        f"Measured {date.today().isoformat()} on {platform.machine()} (CPU only, one torch "
        f"thread, a machine shared with other jobs: step counts differ by arm, seconds do "
        f"not); base pass@1 {100 * results[0]['pre']:.1f}% on the {results[0]['n']}-item "
        f"suite; {seconds:.0f} s of training per arm.",
        "",
        "| arm | lr | steps | trained s | mean self-distill loss | pass@1 | Δ vs base (pts) "
        "| 95% CI | p | fixed / broken | words | symbolic |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|---|---:|---:|",
    ]
    for r in results:
        lo, hi = r["ci"]
        distill = "—" if r["distill"] is None else f"{r['distill']:.3f}"
        lines.append(
            f"| {r['arm']} | {r['lr']:g} | {r['steps']} | {r['seconds']:.1f} | {distill} "
            f"| {100 * r['post']:.1f}% | {pp(r['delta'])} | {pp(lo)} to {pp(hi)} "
            f"| {r['p']:.3g} | {r['flips'][0]} / {r['flips'][1]} "
            f"| {tag_change(r, 'words')} | {tag_change(r, 'symbolic')} |"
        )
    return "\n".join(lines)


def sweep(work: Path, seconds: float, only: str | None) -> str:
    if work.exists():
        shutil.rmtree(work)
    (work / "arms").mkdir(parents=True)
    t0 = time.perf_counter()
    prepare(work)
    wanted = None if only is None else only.split(";")
    chosen = [(n, a) for n, a in arms() if wanted is None or any(w in n for w in wanted)]
    results = []
    for name, arm in chosen:
        results.append(run_arm(name, arm, work, seconds))
        (work / "table.md").write_text(sweep_table(results, seconds) + "\n")  # so far
    text = sweep_table(results, seconds)
    text += f"\n\nWhole measurement: {time.perf_counter() - t0:.0f} s wall."
    (work / "table.md").write_text(text + "\n")
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["teacher", "scale", "sweep"])
    parser.add_argument("--seconds", type=float, default=SECONDS, help="sweep: per arm")
    parser.add_argument("--lr", type=float, default=COMPOSITE["learning_rate"], help="sweep")
    parser.add_argument("--batches", type=int, default=4, help="scale: batches measured")
    parser.add_argument(
        "--only",
        default=None,
        help="sweep: only the arms whose name contains one of these (';'-separated)",
    )
    parser.add_argument("--work", type=Path, default=mr.ROOT / "runs" / "measure-selfdistill")
    args = parser.parse_args()
    COMPOSITE["learning_rate"] = args.lr
    if args.what == "teacher":
        print(teacher_table())
    elif args.what == "scale":
        print(scale_table(args.work.resolve(), args.batches))
    else:
        print(sweep(args.work.resolve(), args.seconds, args.only))


if __name__ == "__main__":
    main()
