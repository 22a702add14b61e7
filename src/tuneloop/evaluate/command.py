"""`tuneloop eval`: a thin typer wrapper over `tuneloop.evaluate.evaluate`.

    tuneloop eval --endpoint http://127.0.0.1:8000 --model tiny \
        --suite examples/arith/suite.jsonl --slice dev --n-samples 4 --temperature 0.7 \
        --out runs/pre

Imports the runner only when the command runs, so `tuneloop --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path

import typer

from tuneloop.envkeys import read_api_key
from tuneloop.errors import require_writable_dir
from tuneloop.suite import parse_slice_fractions


def evaluate(
    endpoint: str = typer.Option(..., help="OpenAI-compatible base URL (server root or /v1)."),
    model: str = typer.Option(..., help="Model name to send in requests."),
    suite: Path = typer.Option(..., help="Suite JSONL."),
    out: Path = typer.Option(..., help="Sample-log folder (resumed if it exists)."),
    slice_name: str | None = typer.Option(None, "--slice", help="Evaluate only this slice."),
    slices: str = typer.Option("dev=0.5,gate=0.5", help="Slice fractions by id hash."),
    stratify_by_tag: bool = typer.Option(False, help="Draw slices within each tag."),
    n_samples: int = typer.Option(1, help="Samples per item."),
    temperature: float = typer.Option(0.0, help="Sampling temperature (0 = greedy)."),
    top_p: float = typer.Option(1.0, help="Nucleus sampling mass."),
    max_tokens: int = typer.Option(32, help="Completion length limit."),
    seed: int = typer.Option(0, help="Base seed for per-sample seeds."),
    concurrency: int = typer.Option(32, help="Requests in flight."),
    max_retries: int = typer.Option(8, help="Retries per request (never scored)."),
    timeout: float = typer.Option(120.0, help="Per-request timeout in seconds."),
    default_scorer: str = typer.Option("numeric", help="Scorer for items naming none."),
    api_key_env: str | None = typer.Option(None, help="Environment variable holding the key."),
    model_identity: str | None = typer.Option(None, help="Identity to record (name@sha256:…)."),
    progress: bool = typer.Option(True, help="Show a progress bar."),
) -> None:
    """Evaluate a model on a suite; writes samples.jsonl and summary.json into --out."""
    from tuneloop.evaluate.runner import EvalSettings
    from tuneloop.evaluate.runner import evaluate as run_eval

    require_writable_dir(out, "--out")
    api_key = read_api_key(api_key_env, "--api-key-env")
    settings = EvalSettings(
        n_samples=n_samples,
        temperature=temperature,
        top_p=top_p,
        max_tokens=max_tokens,
        seed=seed,
        concurrency=concurrency,
        max_retries=max_retries,
        request_timeout_s=timeout,
    )
    summary = run_eval(
        endpoint,
        model,
        suite,
        out,
        settings,
        slice_name=slice_name,
        slices=parse_slice_fractions(slices),
        stratify_by_tag=stratify_by_tag,
        default_scorer=default_scorer,
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
