"""CLI of the data phase: `tuneloop ingest`, `tuneloop corpus build`, `tuneloop corpus stats`.

Thin typer wrappers over `tuneloop.data.ingest.ingest_files`,
`tuneloop.data.corpus.build_corpus` and `tuneloop.data.corpus.corpus_stats`; nothing heavy is
imported at module level (`tuneloop --help` imports this module).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from tuneloop.errors import InputError, refuse_overwriting_inputs

corpus_app = typer.Typer(
    name="corpus",
    help="Build a clean training corpus from traces, and describe one.",
    no_args_is_help=True,
    add_completion=False,
)


def _parse_options(items: list[str] | None) -> dict[str, Any]:
    import yaml

    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise InputError(
                f"--opt {item!r}: expected KEY=VALUE, e.g. --opt messages=conversations"
            )
        out[key] = yaml.safe_load(raw) if raw else ""
    return out


def ingest(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="Trace files, or folders: a session folder (Cline task, OpenHands events), "
            "else the folder's *.jsonl, oldest first (with --format auto: every file in it)."
        ),
    ],
    format: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            help="Ingester (`tuneloop plugins` lists them), or `auto`: each file or session "
            "folder by its shape, said per format.",
        ),
    ],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Output JSONL of tuneloop.trace/1 records.")
    ],
    rejects: Annotated[
        Path | None, typer.Option(help="Rejects JSONL (default: <out>.rejects.jsonl).")
    ] = None,
    opt: Annotated[
        list[str] | None, typer.Option("--opt", help="Ingester option KEY=VALUE (repeatable).")
    ] = None,
    scrub: Annotated[
        bool, typer.Option(help="Scrub e-mails, secrets and IPs before writing.")
    ] = True,
) -> None:
    """Convert trace files with one ingester (or `--format auto`); print records read, traces
    written, records rejected and records skipped by kind.

    Refused (exit 2, nothing written): an output that is one of the inputs, and an ingest that
    makes no record at all (an empty file, or the wrong --format: the error says what the file
    looks like)."""
    from rich.console import Console

    from tuneloop.data.files import jsonl_bytes, write_files
    from tuneloop.data.ingest import detect_format
    from tuneloop.data.ingest.sources import ingest_planned, plan_sources, shown_paths
    from tuneloop.scrub import Scrubber

    options = _parse_options(opt)
    rejects = rejects or out.with_name(out.name.removesuffix(".jsonl") + ".rejects.jsonl")
    plan = plan_sources(files, format)
    refuse_overwriting_inputs([("--out", out), ("--rejects", rejects)], plan.sources)
    if format == "auto":
        for fmt, sources in plan.groups.items():
            typer.echo(f"auto: {fmt} for {len(sources)} source(s): {shown_paths(sources)}")
        if plan.unknown:
            n = len(plan.unknown)
            typer.echo(
                f"auto: {n} file(s) of no known format, skipped: {shown_paths(plan.unknown)}"
            )
    with Console(stderr=True).status(f"ingesting {len(plan.sources)} source(s)"):
        traces, bad, report = ingest_planned(plan, options)
    scrubber = Scrubber()
    unit = "records" if plan.documents else "lines"
    if not traces:
        first = f"; {bad[0].file}:{bad[0].line}: {bad[0].reason}" if bad else ""
        looks = detect_format(plan.sources[0]) if format != "auto" else None
        hint = (
            f"; {plan.sources[0]} looks like --format {looks}"
            if looks not in (None, format)
            else ""
        )
        message = (
            f"{', '.join(map(str, files))}: 0 records with --format {format} "
            f"({report.lines_read} {unit} read, {report.rejected} rejected{first}){hint}; "
            "nothing written"
        )
        raise InputError(scrubber.text(message) if scrub else message)
    rows = [(scrubber.trace(t) if scrub else t).to_json() for t in traces]
    reject_rows = [scrubber.value(r.to_json()) if scrub else r.to_json() for r in bad]
    write_files({out: jsonl_bytes(rows), rejects: jsonl_bytes(reject_rows)})  # both or neither
    typer.echo(
        f"{report.lines_read} {unit} read, {report.traces} records written ({report.ingested} "
        f"{unit} ingested), {report.rejected} {unit} rejected → {rejects}"
    )
    for reason, n in sorted(report.reasons.items()):
        typer.echo(f"  rejected {n:>6}  {scrubber.text(reason) if scrub else reason}")
    for kind, n in sorted(report.skipped.items()):
        typer.echo(f"  skipped  {n:>6}  {kind}")
    if scrub and scrubber.counts:
        typer.echo(
            "  scrubbed " + ", ".join(f"{k}: {v}" for k, v in sorted(scrubber.counts.items()))
        )


@corpus_app.command("build")
def build(
    config: Annotated[Path, typer.Argument(help="The corpus config (corpus.yaml).")],
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Output folder (default: out_dir in the config)."),
    ] = None,
    executor: Annotated[
        str | None,
        typer.Option(
            help="Where the per-row steps run: local or ray (Ray Data; default: the config's "
            "executor.kind). The outputs are the same bytes either way."
        ),
    ] = None,
) -> None:
    """Ingest, scrub, filter, dedup, decontaminate, judge, band, shuffle → SFT, GRPO, preference."""
    from tuneloop.data.corpus import build_corpus, load_corpus_config
    from tuneloop.records import CorpusProvenance, read_record

    if executor not in (None, "local", "ray"):
        raise InputError(f"--executor: expected local or ray (got {executor!r})")
    out_dir = out or load_corpus_config(config).out_dir
    result = build_corpus(config, out_dir, executor=executor)  # type: ignore[arg-type]
    record = read_record(result.provenance_path, CorpusProvenance)
    prov = record.to_json()
    typer.echo("  ".join(f"{k}: {v}" for k, v in result.counts.items()))
    if record.judge is not None:
        j = record.judge
        typer.echo(
            f"judged: {j.asked} asked, {j.kept} kept, {j.below_grade} dropped below grade "
            f"{j.min_grade:g}, {j.errors} judge errors, ${j.cost_usd:.4f} "
            f"(${j.cost_usd_this_run:.4f} this run; {j.cached} cached) — judge {j.model}"
        )
    for suite in prov["decontamination"]:
        typer.echo(f"decontamination {suite['suite']}: {suite['rows_removed']} row(s) removed")
        for row in suite["removed"]:
            why = "; ".join(f"{m['rule']} {','.join(m['items'])}" for m in row["matches"])
            typer.echo(f"  {row['source']}/{row['source_id']}: {why}")
    if prov["scrubbed"]:
        typer.echo("scrubbed " + ", ".join(f"{k}: {v}" for k, v in prov["scrubbed"].items()))
    for mutation, fig in (prov.get("decontamination_audit") or {}).items():
        recall = "not measured" if fig["recall"] is None else f"{fig['recall']:.3f}"
        typer.echo(f"recall audit {mutation}: {recall} ({fig['caught']}/{fig['planted']} caught)")
    typer.echo(f"SFT rows → {result.sft_path}")
    if result.grpo_path:
        typer.echo(f"GRPO prompts ({prov['grpo']['prompts']}) → {result.grpo_path}")
    if result.preference_path:
        typer.echo(f"preference pairs ({prov['preference']['pairs']}) → {result.preference_path}")
    typer.echo(f"provenance → {result.provenance_path}")


@corpus_app.command("stats")
def stats(
    file: Annotated[Path, typer.Argument(help="A corpus JSONL (SFT or preference rows).")],
    tokenizer: Annotated[
        Path | None, typer.Option(help="Hugging Face tokenizer folder for token lengths.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Rows, turns, tool calls, length percentiles, sources, share ending with an assistant turn."""
    from tuneloop.data.corpus import corpus_stats

    result = corpus_stats(file, tokenizer)
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("statistic", "value", title=str(file))
    for key, value in result.items():
        if key == "file":
            continue
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items())
        elif isinstance(value, float):
            value = f"{value:.3f}"
        table.add_row(key, str(value))
    Console().print(table)
