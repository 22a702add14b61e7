"""`train`: validate, check hygiene, train (in process or under torchrun), record, publish.

Order: read and validate the data and refuse contamination *before* loading any model; train
in `<out>.partial/` beside `out_dir`, which holds `train_settings.json` (a versioned record with
data sha256, base model hash and the contamination allowance) from the start; then drop the
checkpoints and rename the folder into place, so `out_dir` is either absent or a complete
adapter (or, with `train.adapter: none`, a whole model). With `nproc > 1` the training itself
runs in N worker processes started by torchrun or `accelerate launch` (distributed/launch.py;
gloo on CPU); everything else stays in this process. With `train.diloco.replicas` it runs as
DiLoCo replica processes under torchft (distributed/diloco.py).

Resume (`train.checkpoint.every` > 0): a run that is killed or fails keeps `<out>.partial/` when
it holds a checkpoint, and the same command resumes there, saying so on stderr. Deliberately,
a re-run with other settings, data or base is refused rather than resumed or restarted: the
error names what differs and the folder to remove. A re-run whose adapter is already in
place returns it. `seconds` in the record counts only the last (resumed) segment, model
loading included; `train_seconds`, `steps_done` and `stop` (budget.py) count from the first
optimizer step and say whether `train.max_seconds` ended the run. Rows longer than
`train.max_length` are counted before training (lengths.py: `lengths.jsonl`, one line per row,
and the totals in the record).

Walk-back (`train.health.on_unhealthy`, walkback.py): when the trainer stopped on a health
check (it leaves `health_stop.json`, also from a torchrun worker) or finished with its reward
down by `train.health.reward_drop`, the newest checkpoint of the method's stage that passes
the same health checks becomes the adapter before the folder is published; the record says
which and why (`walk_back`, and `stop: unhealthy` for a stop). No checkpoint passing fails the
phase as before, keeping `<out>.partial/`.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tuneloop.errors import InputError, PhaseFailed
from tuneloop.records import (
    read_record,
    read_record_if_exists,
    sha256_file,
    sha256_tree,
    write_record,
)
from tuneloop.records.train_health import WalkBack
from tuneloop.records.train_metrics import METRICS_FILE, band_totals, read_train_metrics
from tuneloop.registry import trainers
from tuneloop.train.common import quiet
from tuneloop.train.data import Row, read_rows
from tuneloop.train.distributed import check_diloco, launch_workers, run_diloco
from tuneloop.train.hygiene import check_contamination
from tuneloop.train.lengths import COUNTED_METHODS, row_lengths, summarize, write_lengths
from tuneloop.train.resume import CHECKPOINTS, any_checkpoint
from tuneloop.train.settings import TrainRunRecord, TrainSettings
from tuneloop.train.strategy import check_strategy
from tuneloop.train.walkback import (
    HealthStop,
    forget_stop,
    read_stop,
    walk_back,
    walk_back_problems,
    walks_back,
)

SETTINGS_FILE = "train_settings.json"


def check_base(base: Path) -> None:
    if not (Path(base) / "config.json").is_file():
        raise InputError(
            f"{base}: not a Hugging Face model folder (no config.json); expected the base "
            "checkpoint (`tuneloop merge` produces one from an adapter)"
        )


def check_pairs(settings: TrainSettings) -> None:
    """Replay-DPO (composite, beta > 0) reads pairs; say so before a model is loaded."""
    c = settings.composite
    if settings.method == "composite" and c.beta > 0 and c.pairs is None:
        raise InputError(
            "train.composite.beta > 0 needs train.composite.pairs (--composite-pairs: a "
            "preference JSONL; `tuneloop corpus build` writes preference.jsonl, `tuneloop "
            "replay` dpo.jsonl)"
        )


def train(
    base: Path,
    data: Path,
    out_dir: Path,
    settings: TrainSettings,
    *,
    suite_paths: Sequence[Path] = (),
    default_scorer: str = "numeric",
    progress: bool = True,
) -> Path:
    """Train a LoRA adapter (or the whole model) on `data`; return its folder (`out_dir`).

    `settings` is loop.yaml's `train:` section (`TrainConfig`): the method, its knobs, the
    process count and the contamination allowance all come from it.
    """
    base, data, out_dir = Path(base), Path(data), Path(out_dir)
    trainers.get(settings.method)  # an unknown method is refused before anything is read
    check_pairs(settings)
    check_strategy(settings)
    if settings.diloco.replicas:
        check_diloco(settings)
        if settings.max_seconds is not None:
            raise InputError("train.max_seconds is not supported with train.diloco.replicas")
    check_base(base)
    rows = read_rows(data)
    warm = warmup_file(settings)
    if warm is not None and not warm.is_file():
        raise InputError(f"train.sft_warmup_data: {warm} not found (the warm-up's JSONL rows)")
    read = rows + (read_rows(warm) if warm is not None else [])  # both are trained on
    hits = check_contamination(read, suite_paths, settings.allow_contamination)
    record = run_record(base, data, settings, len(rows), hits, suite_paths)
    if out_dir.exists():
        return finished(out_dir, record)
    work = partial_dir(out_dir)
    start_or_resume(work, record)
    from tuneloop.train.budget import forget_clock, run_outcome  # transformers: not for `check`

    for key, message in walk_back_problems(settings):
        print(f"warning: {key}: {message}", file=sys.stderr)

    try:
        t0 = time.perf_counter()
        forget_clock(work)
        forget_stop(work)
        quiet()
        cut = count_truncation(base, rows, work, settings)
        stop = run_method(base, data, rows, work, settings, default_scorer, progress)
        walked = walk_back(work, settings, stop)
        if not has_trained_output(work):
            raise PhaseFailed(
                f"training ({settings.method}) finished without writing an adapter or model"
            )
        seconds = round(time.perf_counter() - t0, 3)
        done = {
            "seconds": seconds,
            **run_outcome(work),
            **cut,
            **ending(work, settings, stop, walked),
        }
        write_record(work / SETTINGS_FILE, record.model_copy(update=done))
        shutil.rmtree(work / CHECKPOINTS, ignore_errors=True)
        os.replace(work, out_dir)
    except BaseException:
        keep_or_remove(work)
        raise
    return out_dir


def run_method(
    base: Path,
    data: Path,
    rows: list[Row],
    work: Path,
    settings: TrainSettings,
    default_scorer: str,
    progress: bool,
) -> HealthStop | None:
    """Train into `work` (DiLoCo replicas, torchrun workers or this process); the health stop
    that ended it when it is to be walked back (`walkback.walks_back`), None when it finished.
    Any other failure, a stop to fail on included, is raised as it came."""
    method, nproc = settings.method, settings.nproc
    try:
        if settings.diloco.replicas:
            run_diloco(base, data, work, settings)
        elif nproc > 1:
            kw = {"nproc": nproc, "default_scorer": default_scorer, "progress": progress}
            launch_workers(method, base, data, work, settings, kw)
        else:
            trainers.get(method)(
                base,
                rows,
                work,
                settings,
                nproc=nproc,
                default_scorer=default_scorer,
                progress=progress,
            )
    except PhaseFailed:
        stop = read_stop(work)
        if stop is None or not walks_back(stop, settings):
            raise
        return stop
    return None


def ending(
    work: Path, settings: TrainSettings, stop: HealthStop | None, walked: WalkBack | None
) -> dict[str, Any]:
    """The record's fields on how training ended: a health stop's step (the budget file lacks
    the stopped stage), the walk-back, the prompts seen per band up to what is published."""
    out: dict[str, Any] = {"walk_back": walked}
    if stop is not None:
        out |= {"steps_done": stop.step, "train_seconds": None, "stop": "unhealthy"}
    metrics = work / METRICS_FILE
    if metrics.is_file():
        through = walked.step if walked is not None else None
        rows = read_train_metrics(metrics)
        out["prompts_by_band"] = band_totals(rows, settings.method, through)
    return out


def count_truncation(
    base: Path, rows: list[Row], work: Path, settings: TrainSettings
) -> dict[str, int]:
    """Each row's length against `train.max_length` (`lengths.py`), written to
    `lengths.jsonl`; the totals for the run record ({} for a method that does not truncate)."""
    if settings.method not in COUNTED_METHODS:
        return {}
    from tuneloop.train.common import load_tokenizer

    lengths = row_lengths(load_tokenizer(base), rows, settings.method, settings.max_length)
    write_lengths(work, lengths)
    summary = summarize(lengths, settings.max_length)
    if (line := summary.line(settings.method)) is not None:
        print(line, file=sys.stderr)
    return {
        "truncated_rows": summary.truncated_rows,
        "truncated_tokens": summary.truncated_tokens,
        "longest_row": summary.longest,
    }


def has_trained_output(folder: Path) -> bool:
    """A LoRA adapter, or (`train.adapter: none`) a whole model, is in `folder`."""
    return (folder / "adapter_config.json").is_file() or (folder / "config.json").is_file()


def warmup_file(settings: TrainSettings) -> Path | None:
    """The file GRPO's SFT warm-up reads instead of the GRPO rows, when there is one."""
    warms = settings.method in ("grpo", "composite") and settings.sft_warmup_steps > 0
    return settings.sft_warmup_data if warms else None


def run_record(
    base: Path,
    data: Path,
    settings: TrainSettings,
    n_rows: int,
    hits: list[str],
    suite_paths: Sequence[Path],
) -> TrainRunRecord:
    """What this run is (written into the work folder before training, then completed)."""
    return TrainRunRecord(
        method=settings.method,
        settings=settings.model_dump(mode="json"),
        base_model=str(base.resolve()),
        base_model_sha256=sha256_tree(base),
        data=str(data.resolve()),
        data_sha256=sha256_file(data),
        data_rows=n_rows,
        warmup_data_sha256=sha256_file(warm) if (warm := warmup_file(settings)) else None,
        allow_contamination=settings.allow_contamination,
        contaminated_rows=hits,
        suite_paths=[str(p) for p in suite_paths],
        nproc=settings.nproc,
        versions=library_versions(),
    )


RESUME_IGNORES = frozenset(
    {"checkpoint", "health", "torch_threads", "data", "sft_warmup_data", "max_seconds"}
)
"""Settings a resumed run may change: they do not change what is trained (the data is
compared by its sha256; `max_seconds` only when it stops)."""


def run_differences(old: TrainRunRecord, new: TrainRunRecord) -> list[str]:
    """Pure: what differs between two runs' identities (settings, data, base), by name."""
    out = [
        f"train.{k}"
        for k in sorted(set(old.settings) | set(new.settings))
        if k not in RESUME_IGNORES and old.settings.get(k) != new.settings.get(k)
    ]
    if old.data_sha256 != new.data_sha256:
        out.append("data (sha256)")
    if old.warmup_data_sha256 != new.warmup_data_sha256:
        out.append("sft_warmup_data (sha256)")
    if old.base_model_sha256 != new.base_model_sha256:
        out.append("base model (sha256)")
    return out


def finished(out_dir: Path, record: TrainRunRecord) -> Path:
    """`out_dir` when it already holds this run's adapter (a re-run); InputError otherwise."""
    done = out_dir / SETTINGS_FILE
    complete = has_trained_output(out_dir) and done.is_file()
    if complete and not run_differences(read_record(done, TrainRunRecord), record):
        print(f"train: {out_dir} already holds this run's adapter", file=sys.stderr)
        return out_dir
    raise InputError(f"{out_dir}: already exists; choose a new --out or remove it")


def partial_dir(out_dir: Path) -> Path:
    """Where a run trains before its adapter is renamed into place (checkpoints live there)."""
    return out_dir.with_name(f"{out_dir.name}.partial")


def start_or_resume(work: Path, record: TrainRunRecord) -> None:
    """Prepare `work`: resume a killed run's checkpoints there, or start it afresh.

    A folder of another run (other settings, data or base) is refused, not replaced: its
    checkpoints are a person's compute.
    """
    if work.exists() and any_checkpoint(work):
        old = read_record_if_exists(work / SETTINGS_FILE, TrainRunRecord)
        diff = ["its train_settings.json is missing"] if old is None else []
        diff = diff or run_differences(old, record)  # type: ignore[arg-type]
        if diff:
            raise InputError(
                f"{work}: holds checkpoints of a training run with other inputs "
                f"({', '.join(diff)}); restore them to resume, or remove the folder to start over"
            )
        print(f"train: resuming the run in {work}", file=sys.stderr, flush=True)
        return
    shutil.rmtree(work, ignore_errors=True)  # nothing resumable: a run killed before step 1
    work.mkdir(parents=True)
    write_record(work / SETTINGS_FILE, record)


def keep_or_remove(work: Path) -> None:
    """After a failed or killed run: keep `work` when it holds a checkpoint, else remove it."""
    if any_checkpoint(work):
        print(
            f"train: kept {work} (checkpoints); the same command resumes from the newest",
            file=sys.stderr,
            flush=True,
        )
    else:
        shutil.rmtree(work, ignore_errors=True)


def library_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("torch", "transformers", "trl", "peft"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "absent"
    return out
