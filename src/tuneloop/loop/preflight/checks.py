"""Every preflight check of a loop.yaml (the core, `preflight`) and the shell that reports them.

`preflight(cfg)` runs each check into one `Findings` and writes nothing; `check_before_compute`
locates each finding's key in the YAML (`key (line n)`, as `load_config` does) and raises the
errors as one `InputError`, or returns the warnings. What is checked: the package docstring.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from tuneloop.config import LoopConfig, read_yaml
from tuneloop.config.load import line_map, locator
from tuneloop.errors import InputError
from tuneloop.loop.corpus_data import output_problems, replay_problems, replay_unused
from tuneloop.loop.integrity import changed_items_problem  # how load_config names a key
from tuneloop.loop.layout import ledger_path
from tuneloop.loop.portfolio.preflight import portfolio_problems
from tuneloop.loop.preflight.capacity import check_memory
from tuneloop.loop.preflight.findings import Findings
from tuneloop.loop.preflight.gate_power import check_power
from tuneloop.loop.preflight.judge import check_judge, judge_attenuation, judged
from tuneloop.loop.preflight.model import check_model
from tuneloop.loop.preflight.suite_checks import check_slices, load_checked_suite
from tuneloop.loop.validation_slice import validation_slice_problems
from tuneloop.registry import Registry, scorers, serve_backends, trainers
from tuneloop.suite import Suite
from tuneloop.vllm_env import find_vllm

# ---- the shell: locate findings in the YAML, raise or return ---------------------------------


def check_before_compute(
    cfg: LoopConfig, config_path: Path, overrides: list[str] | None = None
) -> list[str]:
    """Run `preflight`; raise InputError listing every error with its key and line, else
    return the warnings (`warning: key (line n): …`) and the notes (the model's facts) for the
    caller to print to stderr."""
    found = preflight(cfg)
    where = _locator(Path(config_path), overrides)
    warnings = [f"warning: {where(w.key)}: {w.message}" for w in found.warnings]
    warnings += found.notes
    if found.errors:
        errors = [f"{where(e.key)}: {e.message}" for e in found.errors]
        raise InputError(
            f"{config_path}: {len(errors)} error(s)\n  " + "\n  ".join([*errors, *warnings])
        )
    return warnings


def _locator(config_path: Path, overrides: list[str] | None) -> Callable[[str], str]:
    """key → `key (line n)` as in load_config's errors; `(override)` / `(default)` otherwise."""
    try:
        _, node = read_yaml(config_path, "config file")
    except InputError:  # the config loaded a moment ago; without lines the keys still stand
        node = None
    return locator(line_map(node), overrides)


# ---- the core: every check, every finding ----------------------------------------------------


def preflight(cfg: LoopConfig) -> Findings:
    """Every problem (and the power warning) of `cfg`; reads inputs, writes nothing."""
    from tuneloop.backend_choice import resolve_serve

    found = Findings()
    try:  # `serve.backend: auto` is checked as what it will be
        cfg, _ = resolve_serve(cfg)
    except InputError as err:  # a set but broken serve.vllm.env
        found.error("serve.vllm.env", str(err).removeprefix("serve.vllm.env: "))
    _check_plugins(cfg, found)
    _check_paths(cfg, found)
    _check_rules(cfg, found)
    _check_external(cfg, found)
    _check_training(cfg, found)
    _check_flywheel(cfg, found)
    suite = load_checked_suite(cfg, found)
    check_judge(cfg, suite, found)
    _check_challenger(cfg, found, suite)
    refused = len(found.errors)
    tokens = check_model(cfg, suite, found)
    if len(found.errors) == refused:  # a base the model check refuses is not sized
        check_memory(cfg, suite, found, tokens)
    for key, message in portfolio_problems(cfg, suite):
        found.error(key, message)
    if suite is not None:
        gate_items = check_slices(cfg, suite, found)
        if gate_items:
            judge = judge_attenuation(cfg) if judged(cfg, suite) else None
            check_power(cfg, gate_items, found, judge)
            _check_item_changes(cfg, found)
    return found


def _check_item_changes(cfg: LoopConfig, found: Findings) -> None:
    """A gate item changed under a consumed id (`tuneloop.gate.looks`), unless declared new."""
    if cfg.gate.enabled and not cfg.gate.allow_slice_reuse:
        problem = changed_items_problem(cfg)
        if problem:
            found.error("suite.item_changes", problem)


def _check_plugins(cfg: LoopConfig, found: Findings) -> None:
    named: list[tuple[str, Registry[Any], str | None]] = [
        ("serve.backend", serve_backends, cfg.serve.backend),
        ("train.method", trainers, cfg.train.method),
        ("suite.default_scorer", scorers, cfg.suite.default_scorer),
        ("train.grpo.scorer", scorers, cfg.train.grpo.scorer),
        ("report.scorer", scorers, cfg.report.scorer),
        ("gate.scorer", scorers, cfg.gate.scorer),
        # `eval.metrics.0`: the YAML path (its line, or `(override)`), as pydantic names it
        *((f"eval.metrics.{i}", scorers, name) for i, name in enumerate(cfg.eval.metrics)),
    ]
    for key, registry, name in named:
        if name is not None:
            try:
                registry.get(name)  # imports the built-ins and entry points on first use
            except InputError as err:
                found.error(key, str(err))


def _check_path(found: Findings, key: str, path: Path, kind: Literal["file", "folder"]) -> bool:
    if not path.exists():
        found.error(key, f"{path}: not found")
    elif kind == "folder" and not path.is_dir():
        found.error(key, f"{path}: expected a folder, found a file")
    elif kind == "file" and not path.is_file():
        found.error(key, f"{path}: expected a file, found a folder")
    elif not os.access(path, os.R_OK | (os.X_OK if kind == "folder" else 0)):
        found.error(key, f"{path}: not readable (permissions)")
    else:
        return True
    return False


def _check_paths(cfg: LoopConfig, found: Findings) -> None:
    base = cfg.base_model if isinstance(cfg.base_model, Path) else cfg.flywheel.bootstrap
    # a round's config (`base_model: champion`, no champion yet) holds the bootstrap as its base
    bootstrap = cfg.flywheel.bootstrap is not None and base == cfg.flywheel.bootstrap
    own = isinstance(cfg.base_model, Path) and not bootstrap
    key = "base_model" if own else "flywheel.bootstrap"
    if base is None:
        return  # `champion` with no bootstrap: the round needs a champion in the ledger
    if _check_path(found, key, base, "folder") and not (base / "config.json").is_file():
        found.error(key, f"{base}: not a Hugging Face model folder (no config.json in it)")
    _check_path(found, "suite.path", cfg.suite.path, "file")
    if cfg.train.data is not None:
        _check_path(found, "train.data", cfg.train.data, "file")
    if cfg.train.sft_warmup_data is not None:
        _check_path(found, "train.sft_warmup_data", cfg.train.sft_warmup_data, "file")
        if cfg.train.method not in ("grpo", "composite") or cfg.train.sft_warmup_steps == 0:
            found.error(
                "train.sft_warmup_data",
                "is read only by a GRPO or composite warm-up: set train.sft_warmup_steps > 0 "
                "(method grpo or composite), or remove it",
            )
    if cfg.data.corpus is not None and _check_path(found, "data.corpus", cfg.data.corpus, "file"):
        from tuneloop.data.corpus import load_corpus_config

        try:
            load_corpus_config(cfg.data.corpus)
        except InputError as err:
            found.error("data.corpus", str(err).replace("\n  ", "\n    "))
    from tuneloop.replay.teachers import check_replay

    for key, message in check_replay(cfg.replay):
        found.error(key, message)
    _check_tracking(cfg, found)
    # Outputs need not exist yet, but what exists must be of the right kind.
    for key, path, kind in (
        ("workdir", cfg.workdir, "folder"),
        ("archive.root", cfg.archive.root, "folder"),
        ("gate.ledger", cfg.gate.ledger, "file"),
    ):
        if path is not None and path.exists() and path.is_dir() != (kind == "folder"):
            found.error(
                key,
                f"{path}: expected a {kind}, found a {'file' if kind == 'folder' else 'folder'}",
            )
    _check_outside_workdir(cfg, found)


def _check_outside_workdir(cfg: LoopConfig, found: Findings) -> None:
    """The archives and the ledger outlive a workdir: inside it, every archive would copy the
    ones before it and clearing the workdir would clear them (and the one-look history)."""
    work = cfg.workdir.resolve()
    root = cfg.archive.root
    if cfg.archive.enabled and root is not None and root.resolve().is_relative_to(work):
        found.error(
            "archive.root",
            f"{root} is inside workdir {cfg.workdir}: each archive would copy the ones before "
            "it, and clearing the workdir would delete them; leave it unset (<workdir>/../"
            "archive) or choose a folder outside the workdir",
        )
    ledger = cfg.gate.ledger
    if ledger is not None and ledger.resolve().is_relative_to(work):
        found.warn(
            "gate.ledger",
            f"{ledger} is inside workdir {cfg.workdir}: clearing the workdir would clear the "
            "one-look history; leave it unset (beside the archives) or move it outside",
        )


def _check_tracking(cfg: LoopConfig, found: Findings) -> None:
    """`tracking.mlflow`: the client installed, a store MLflow accepts (`tuneloop.tracking`)."""
    if cfg.tracking.mlflow is None:
        return
    from tuneloop.tracking import check_uri

    errors, warnings = check_uri(cfg.tracking.mlflow, ledger_path(cfg).parent)
    for message in errors:
        found.error("tracking.mlflow", message)
    for message in warnings:
        found.warn("tracking.mlflow", message)


def flywheel_problems(cfg: LoopConfig) -> list[tuple[str, str]]:
    """(key, message) for what `tuneloop watch` and `status` refuse in the `flywheel:` section
    at their start: a managed service with no folder for its traffic log, a traffic path that
    does not exist (the managed log folder aside: the watcher creates it). Their `semantic`
    (`load_config`), so that a schema error hides none of these; `check` warns of them."""
    fw, out = cfg.flywheel, []
    log_dir = fw.serve.log_dir or (fw.traffic[0] if fw.traffic else None)
    if fw.serve.managed and (log_dir is None or log_dir.suffix == ".jsonl"):
        out.append(
            (
                "flywheel.serve.log_dir",
                "the managed proxy needs a folder for its traffic log; set it, or make the "
                "first flywheel.traffic entry a folder",
            )
        )
    for i, path in enumerate(fw.traffic):
        if not path.exists() and not (fw.serve.managed and path == log_dir):
            out.append(
                (
                    f"flywheel.traffic.{i}",
                    f"{path} does not exist (expected a traffic log file or a folder holding "
                    "traffic.jsonl, written by the serving proxy)",
                )
            )
    return out


def _check_flywheel(cfg: LoopConfig, found: Findings) -> None:
    """`flywheel_problems`: errors of `watch`, warnings of `check` and `run` (a round reads
    its traffic through `data.corpus`, not through `flywheel.traffic`)."""
    for key, message in flywheel_problems(cfg):
        found.warn(key, f"{message}; `tuneloop watch` and `status` refuse it")


def _check_training(cfg: LoopConfig, found: Findings) -> None:
    """`train.distributed` / `train.adapter` settings this machine cannot run (a missing
    deepspeed or bitsandbytes, 4-bit without a GPU), `train.diloco` settings DiLoCo refuses
    (steps not a multiple of inner_steps, a method other than sft, a lighthouse that is no
    URL), and a `train.data` file whose rows training would refuse (a broken JSON line, a row
    the method cannot read): all found before eval_pre spends compute. Checkpoints a walk-back
    cannot use (`train.health.on_unhealthy`) are a warning."""
    if cfg.merge.zero_adapter:
        return  # the control arm trains nothing
    from tuneloop.train.distributed.diloco import diloco_problems
    from tuneloop.train.strategy import strategy_problems
    from tuneloop.train.walkback import walk_back_problems

    for key, message in [*strategy_problems(cfg.train), *diloco_problems(cfg.train)]:
        found.error(key, message)
    for key, message in walk_back_problems(cfg.train):
        found.warn(key, message)
    data = cfg.train.data
    if data is not None and data.is_file() and os.access(data, os.R_OK):
        problem = _train_rows_problem(data, cfg.train.method)
        if problem is not None:
            found.error("train.data", problem)


def _train_rows_problem(path: Path, method: str) -> str | None:
    """What training would refuse in the rows of `path` (the first bad line, named
    `file:line`), for the built-in methods' row shapes; None when they read."""
    from tuneloop.train.data import dpo_rows, grpo_rows, read_rows, sft_rows

    shapes = {"sft": sft_rows, "grpo": grpo_rows, "dpo": dpo_rows}
    try:
        rows = read_rows(path)
        if method in shapes:
            shapes[method](rows)
    except InputError as err:
        return str(err)
    return None


def _check_rules(cfg: LoopConfig, found: Findings) -> None:
    g = cfg.gate
    if g.enabled and g.metric == "pass_at_k" and g.k > cfg.eval.n_samples:
        found.error(
            "gate.k",
            f"pass@{g.k} needs at least {g.k} samples per item, but eval.n_samples is "
            f"{cfg.eval.n_samples}; raise eval.n_samples or lower gate.k",
        )
    for key, message in [*output_problems(cfg), *replay_problems(cfg)]:
        found.error(key, message)
    unused = replay_unused(cfg)
    if unused is not None:
        found.warn("replay.teachers", unused)
    if not cfg.merge.zero_adapter and cfg.train.data is None and cfg.data.corpus is None:
        found.error(
            "train.data",
            "training has no data: set train.data (a JSONL) or data.corpus (a corpus-build "
            "config whose output the data phase writes)",
        )


def _check_challenger(cfg: LoopConfig, found: Findings, suite: Suite | None) -> None:
    """`serve.challenger: adapter` needs a backend that serves adapters, a trained LoRA adapter
    and a rank vLLM takes — refused here, not when eval_post starts its server. `cascade`
    needs its `cascade:` section, composed on a slice that is not the gate's."""
    if cfg.serve.challenger == "cascade":
        _check_cascade(cfg, found, suite)
    elif cfg.cascade is not None:
        found.error("cascade", "is set but serve.challenger is not `cascade`: it would be ignored")
    if cfg.serve.challenger != "adapter":
        return
    from tuneloop.serve.adapter import VLLM_LORA_RANKS
    from tuneloop.serving import serves_adapters

    if cfg.serve.backend != "external" and not serves_adapters(cfg.serve.backend):
        found.error(
            "serve.challenger",
            f"adapter: serve.backend {cfg.serve.backend!r} serves merged models only; use "
            "serve.backend: vllm, or serve.challenger: merged",
        )
    if cfg.merge.zero_adapter:
        found.error(
            "serve.challenger",
            "adapter: merge.zero_adapter trains no adapter to serve; the control arm is "
            "serve.challenger: merged",
        )
    elif cfg.train.adapter != "lora":
        found.error(
            "serve.challenger",
            f"adapter: train.adapter {cfg.train.adapter!r} trains every weight, not a LoRA "
            "adapter; set train.adapter: lora, or serve.challenger: merged",
        )
    elif cfg.train.lora.r > VLLM_LORA_RANKS[-1]:
        found.error(
            "train.lora.r",
            f"{cfg.train.lora.r} is above vLLM's largest LoRA rank ({VLLM_LORA_RANKS[-1]}); "
            "serve.challenger: adapter cannot serve it",
        )


def _check_cascade(cfg: LoopConfig, found: Findings, suite: Suite | None) -> None:
    if cfg.cascade is None:
        found.error("serve.challenger", "cascade: needs a `cascade:` section (its tiers)")
        return
    if cfg.portfolio is not None:
        found.error(
            "serve.challenger",
            "cascade: a portfolio round's challengers are training recipes; a cascade "
            "challenger in a portfolio is not supported yet (run the cascade round alone)",
        )
    if cfg.gate.enabled and suite is not None:
        for key, message in validation_slice_problems(
            cfg, suite, cfg.cascade.slice, "cascade.slice", "a cascade's thresholds"
        ):
            found.error(key, message)
    if cfg.cascade.signal == "agreement" and cfg.eval.n_samples < 2:
        found.error("cascade.signal", "agreement needs eval.n_samples of at least 2")
    for i, tier in enumerate(cfg.cascade.tiers):
        if tier.path is not None and not (tier.path / "config.json").is_file():
            found.error(f"cascade.tiers.{i}.path", f"{tier.path}: not a model folder")


def _check_external(cfg: LoopConfig, found: Findings) -> None:
    """The serving settings a backend reads only when it starts (minutes into a run): the
    vLLM environment (`tuneloop.vllm_env`), the API key's variable, the external URLs.

    EXTEND HERE as `serve.external` grows. That pre and post name different models unless
    `aa_control` is set is already a validation rule of the config model (ExternalConfig),
    reported by load_config before preflight runs.
    """
    serve = cfg.serve
    if serve.backend == "vllm":
        try:  # a missing vLLM environment, minutes before the first server would start
            find_vllm(serve.vllm.env)
        except InputError as err:
            found.error("serve.vllm.env", str(err).removeprefix("serve.vllm.env: "))
    if serve.backend != "external":
        key_env, key_path = serve.api_key_env, "serve.api_key_env"
    else:
        ext = serve.external
        key_env, key_path = ext.api_key_env, "serve.external.api_key_env"
        bad: dict[str, str] = {}  # key → URL; a shared base_url is reported once
        for arm in ("pre", "post"):
            url, _ = ext.arm_endpoint(arm)
            if url is not None and not url.startswith(("http://", "https://")):
                own = getattr(ext, arm).base_url is not None
                bad[f"serve.external.{arm}.base_url" if own else "serve.external.base_url"] = url
        for key, url in bad.items():
            found.error(key, f"expected an http(s) URL ending in /v1 (got {url!r})")
    if key_env and not os.environ.get(key_env):
        found.error(key_path, f"environment variable {key_env} is not set or empty")
