"""`tuneloop eval`: a thin typer wrapper over `tuneloop.evaluate.evaluate`.

    tuneloop eval --endpoint http://127.0.0.1:8000 --model tiny \
        --suite examples/arith/suite.jsonl --slice dev --n-samples 4 --temperature 0.7 \
        --out runs/pre

`--endpoint` given more than once spreads the suite over several replicas of the model
(`--concurrency` requests in flight on each; see `tuneloop.client.replicas`).
Its settings options are generated from `EvalConfig` and `SlicingConfig` (one definition
with loop.yaml; `--timeout` is a deprecated spelling of `--request-timeout-s`). Imports the
runner only when the command runs, so `tuneloop --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path

import typer

from tuneloop.config import EvalConfig, SlicingConfig
from tuneloop.config.options import settings_options
from tuneloop.envkeys import read_api_key
from tuneloop.errors import require_writable_dir


@settings_options(SlicingConfig, param="slicing")
@settings_options(EvalConfig, param="settings", aliases={"--timeout": "request_timeout_s"})
def evaluate(
    endpoint: list[str] = typer.Option(
        ...,
        help="OpenAI-compatible base URL (server root or /v1); repeat it for several replicas "
        "of the model, which share the suite.",
    ),
    model: str = typer.Option(..., help="Model name to send in requests."),
    suite: Path = typer.Option(..., help="Suite JSONL."),
    out: Path = typer.Option(..., help="Sample-log folder (resumed if it exists)."),
    api_key_env: str | None = typer.Option(None, help="Environment variable holding the key."),
    model_identity: str | None = typer.Option(None, help="Identity to record (name@sha256:…)."),
    progress: bool = typer.Option(True, help="Show a progress bar."),
    *,
    settings: EvalConfig,
    slicing: SlicingConfig,
) -> None:
    """Evaluate a model on a suite; writes samples.jsonl and summary.json into --out.

    The settings options are loop.yaml's `eval:` and `suite:` keys (`--n-samples`, `--slice`).
    """
    from tuneloop.evaluate.runner import evaluate as run_eval

    require_writable_dir(out, "--out")
    api_key = read_api_key(api_key_env, "--api-key-env")
    summary = run_eval(
        endpoint,
        model,
        suite,
        out,
        settings,
        slicing=slicing,
        api_key=api_key,
        model_identity=model_identity,
        progress=progress,
    )
    counts = summary.counts
    mean = f"{summary.mean_score:.4f}" if summary.mean_score is not None else "n/a"
    typer.echo(
        f"{out}: mean score {mean} over {len(summary.item_ids)} items × "
        f"{summary.sampling.n_samples} samples (ok {counts.get('ok', 0)}, harness errors "
        f"{counts.get('harness_error', 0)}, missing {counts.get('missing', 0)}, "
        f"retries {summary.retries})"
    )
