"""Preflight: everything about a loop.yaml that can be checked before any phase runs.

    warnings = check_before_compute(cfg, Path("loop.yaml"), overrides)   # InputError if bad

Run by `tuneloop check` and at the start of `tuneloop run` (also `--plan`). It checks, all at
once: every plugin name against its registry (serve.backend, train.method, every scorer the
suite and the GRPO reward name); every slice against `suite.slices`, loading the suite; every
input path (exists, readable, folder or file), with the `replay:` section's teachers file
(`tuneloop.replay.teachers.check_replay`) and the `tracking:` section's MLflow store
(`tuneloop.tracking.check_uri`); and the rules that tie sections together — the
gate slice is evaluated and leaves at least one item for the report, holds at least
`gate.min_items`, pass@k has k ≤ eval.n_samples, training has a data source, an external
endpoint is an http(s) URL, `serve.backend: vllm` has a vLLM environment
(`tuneloop.vllm_env`: `scripts/setup --vllm` builds it), a replay has traces and a replay
output training reads has a replay (`loop.corpus_data.replay_problems`); and what training
would refuse after eval_pre — `train.distributed` settings this machine cannot run,
`train.diloco` settings DiLoCo refuses (`train.distributed.diloco.diloco_problems`), a
`train.data` line that is not JSON or a row the method cannot read. Errors are collected and
raised as one `InputError`, each naming its YAML key and line in the same format as `load_config`'s
validation errors; nothing is written. `gate.alpha` ∈ (0, 0.5) is a bound of the config model
itself, so it is reported with the other validation errors before preflight runs.

A replay whose outputs no training reads is warned about, and so is what `tuneloop watch` and
`status` would refuse in the `flywheel:` section (`flywheel_problems`: a traffic path that does
not exist; their `semantic`, so that a schema error hides none of it), and checkpoints a
walk-back after an unhealthy end could not use (`train.walkback.walk_back_problems`: none
kept while `on_collapse: abort` or `reward_drop` asks for one, or too few to reach past a
collapse window). The other warning is
about the gate's power (`gate_power.py`): the minimum detectable effect (MDE) of the gate
slice's size, one-sided at gate.alpha with 80% power (Miller 2024; the formula of
`tuneloop.stats.power`). The gate promotes only when Δ ≥ margin *and* the one-sided test is
significant; when the MDE exceeds the margin, a true improvement between the two — one the
margin calls worth shipping — will most often be rejected as not significant. The spread of
item differences comes from the round's own eval_pre log when it exists (as `tuneloop power`
does with one pilot log); otherwise from a stated conservative assumption (see
`ASSUMED_SD_DIFF`). A warning never changes the exit status.

Memory is planned before compute (`capacity.py`): from the base's config.json and the
round's settings, the peak of training and of serving (`tuneloop.memory`: weights, gradients,
AdamW, activations, the LM head's tiles, KV cache, runtime) against this machine's RAM or
GPU; a note when it fits, an error under the setting at fault naming the settings that would
fit when it cannot.

Deliberately not checked here: anything that needs a model's weights, a server or the
network.

`checks.py` holds every check and the shell that locates findings in the YAML; `findings.py`
the `Findings` every check adds to; `suite_checks.py` the suite's scorers and slices;
`gate_power.py` the power warning; `judge.py` an LLM judge's file, its right to decide the gate
and its error in the power; `capacity.py` the memory check, with `training_fit.py`,
`serving_fit.py`, `row_tokens.py` and `machine.py` below it.
"""

from tuneloop.loop.preflight.checks import check_before_compute, flywheel_problems, preflight
from tuneloop.loop.preflight.findings import Finding, Findings
from tuneloop.loop.preflight.gate_power import (
    ASSUMED_SD_DIFF,
    POWER,
    check_power,
    gate_items_needed,
    gate_mde,
)

__all__ = [
    "ASSUMED_SD_DIFF",
    "POWER",
    "Finding",
    "Findings",
    "check_before_compute",
    "check_power",
    "flywheel_problems",
    "gate_items_needed",
    "gate_mde",
    "preflight",
]
