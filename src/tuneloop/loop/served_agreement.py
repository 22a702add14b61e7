"""Does the adapter served on its base answer as the merged model does? The doctor's check
before a round evaluates an adapter challenger (`serve.challenger: adapter`).

    result = served_agreement(cfg, merged_dir, adapter_dir, folder, decoding)
    result.line()        # "64/64 identical (100.0%)"

The merged model and the adapter on the base are each served on the round's backend — one
after the other, never both at once, so a small machine holds one server — and asked the
same prompts greedily (temperature 0, one sample, the eval's `max_tokens` and the base's
decoding contract); `tuneloop.evaluate.agreement` pairs the two logs. The prompts are the
first `merge.agreement_items` items the round evaluates outside the gate slice: what the
report reads anyway, so the challenger shows nothing of the gate's items before the bar is
sealed. The logs stay in the doctor's folder (`agreement/merged`, `agreement/adapter`) for a
person to read; `doctor.json` carries the counts and the first differing pairs.

Identical text is the expectation in float32 (measured on the demo: 320 of 320); in bf16 the
two paths round differently (vLLM applies LoRA as a separate matmul) and a few greedy
continuations may part ways, which the figure shows rather than hides.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuneloop.config import LoopConfig
from tuneloop.endpoint import Decoding
from tuneloop.evaluate.agreement import Agreement
from tuneloop.records import write_jsonl
from tuneloop.suite import Suite, SuiteItem

AGREEMENT_DIR = "agreement"
"""The doctor's subfolder with the two logs and the prompts they answered."""


def agreement_items(cfg: LoopConfig, suite: Suite) -> list[SuiteItem]:
    """The first `merge.agreement_items` items the round evaluates, less the gate slice's."""
    from tuneloop.suite import resolve_slice

    chosen = set(resolve_slice(suite, cfg.suite, cfg.eval.slice)) if cfg.eval.slice else None
    held = set(resolve_slice(suite, cfg.suite, cfg.gate.slice)) if cfg.gate.enabled else set()
    kept = [i for i in suite.items if (chosen is None or i.id in chosen) and i.id not in held]
    return kept[: cfg.merge.agreement_items]


def served_agreement(
    cfg: LoopConfig,
    merged: Path,
    adapter: Path,
    folder: Path,
    decoding: Decoding | None,
) -> Agreement:
    """Serve `merged`, then `adapter` on `cfg.base`, greedily on `agreement_items`; the
    pairing of their completions. Logs and the prompt file go under `folder/agreement/`."""
    from tuneloop.evaluate import evaluate
    from tuneloop.evaluate.agreement import agreement
    from tuneloop.serving import serving
    from tuneloop.suite import load_suite

    out = folder / AGREEMENT_DIR
    out.mkdir(parents=True, exist_ok=True)
    suite = load_suite(cfg.suite.path, cfg.suite.default_scorer)
    prompts = out / "suite.jsonl"
    write_jsonl(prompts, [_row(i.raw, i.id, i.scorer) for i in agreement_items(cfg, suite)])
    greedy = cfg.eval.model_copy(update={"n_samples": 1, "temperature": 0.0, "slice": None})
    for arm, model, served_adapter in (("merged", merged, None), ("adapter", cfg.base, adapter)):
        log = out / f"{arm}.server.log"
        with serving(
            model, cfg.serve, log_path=log, decoding=decoding, adapter=served_adapter
        ) as endpoint:
            evaluate(
                [endpoint.base_url],
                endpoint.model,
                prompts,
                out / arm,
                greedy,
                api_key=endpoint.api_key,
                model_identity=f"{arm}:{endpoint.model}",
            )
    return agreement(out / "merged", out / "adapter")


def _row(raw: dict[str, Any], item_id: str, scorer: str) -> dict[str, Any]:
    return {**raw, "id": item_id, "scorer": scorer}
