"""`tuneloop corpus build CONFIG`: traces → a clean SFT corpus, a GRPO prompt set and
preference pairs — one output per training method (sft, grpo, dpo).

Run: `tuneloop corpus build examples/arith/corpus.yaml --out runs/corpus`, or from Python
`build_corpus(Path("corpus.yaml"), Path("out"))`. The pipeline, in order:

1. ingest every source with its registered ingester (lines not turned into traces go to
   `rejects.jsonl`; ingested + rejected = lines read, per source);
2. scrub e-mails, secrets and IPs from every trace (and from reject excerpts);
3. rows: cut each trace after its last assistant message; traces without one are removed;
   preference pairs are drawn here, before the filter, from rated answers that disagree, and
   so are GRPO prompts: rows that carry a verifiable answer (a logged reference, a user's
   correction, or — with `grpo.accept_min_score` — an answer rated right), whatever the
   answer's own rating (a GRPO row keeps the prompt and the reference, not the answer);
4. feedback filter (`filter.min_score`, `filter.keep_unrated`);
5. exact dedup on (source, normalized prompt); 6. near-dup removal (MinHash LSH); GRPO
   prompts are deduplicated on the normalized prompt alone (one reference per prompt);
7. decontamination against every configured suite (also applied to preference pairs and
   GRPO prompts), with the recall audit: disguised suite items planted as canaries, recall
   per disguise reported, `decontaminate.audit.min_recall` enforced (`decontam/audit.py`);
8. the judge cut (optional, `judge:`): rows no label speaks for, kept by an LLM judge's grade
   (`judge_cut.py`; the feedback filter leaves them to it);
9. difficulty bands (optional): pass rates from a sample log or sampled from the champion's
   endpoint (`bands.champion`), e.g. keeping 0 < pass rate < 1 for GRPO; 10. seeded shuffle.
Every removed row is listed in `removed.jsonl` with its step and reason. `traces.jsonl` holds
every ingested trace, scrubbed, as canonical `tuneloop.trace/1` records (before the filter,
dedup and decontamination: it is what the replay phase replays, and the loop decontaminates
the replay's outputs instead). `provenance.json`
records the source files with sha256, the count after every step, every parameter, the
scrub counts, the per-suite decontamination report, the judge cut (which judge, asked, kept,
dropped, errors, cost), the output hashes, the executor and what made the near-dup
signatures (rensa version and algorithm version, seed, bands).

`executor.kind: ray` (or `--executor ray`) runs the per-row steps (scrub, row cut, MinHash
signatures) on Ray Data and everything order-dependent here, with byte-identical outputs;
`ray.py` says which step runs where and why.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from tuneloop.data.corpus.champion_rates import OUTSIDE_LOOP
from tuneloop.data.corpus.config import CorpusConfig, load_corpus_config
from tuneloop.data.corpus.judge_cut import apply_judge, judge_problems
from tuneloop.data.corpus.ray import import_ray, row_pass
from tuneloop.data.corpus.steps import (
    Build,
    apply_bands,
    feedback_gone,
    grpo_row,
    lsh_params,
    remove_contaminated,
    remove_duplicates,
    scrubber,
    start_build,
)
from tuneloop.data.corpus.training_rows import row_or_id
from tuneloop.data.dedup import LshParams, sketch_info
from tuneloop.data.files import (
    json_bytes,
    jsonl_bytes,
    write_files,
)
from tuneloop.data.ingest.sources import ingest_planned, plan_sources
from tuneloop.endpoint import Endpoint
from tuneloop.errors import InputError, did_you_mean, refuse_overwriting_inputs
from tuneloop.records import sha256_bytes, sha256_file, sha256_path
from tuneloop.registry import scorers
from tuneloop.scrub import Scrubber

# restated by loop/corpus_data.py's OUTPUT_FILES, which must not load this package: change both
SFT_FILE, PREF_FILE, GRPO_FILE = "sft.jsonl", "preference.jsonl", "grpo.jsonl"
REJECTS_FILE, REMOVED_FILE, PROVENANCE_FILE = "rejects.jsonl", "removed.jsonl", "provenance.json"
TRACES_FILE = "traces.jsonl"


@dataclass
class CorpusResult:
    """What `build_corpus` wrote."""

    sft_path: Path
    preference_path: Path | None
    """None when no feedback pairs exist."""
    grpo_path: Path | None
    """None when no row carries a verifiable answer (or `grpo.enabled` is false)."""
    provenance_path: Path
    counts: dict[str, int]
    """Rows after each step, in order."""


def build_corpus(
    config_path: Path,
    out_dir: Path,
    *,
    progress: bool = True,
    extra_suites: Sequence[Path] = (),
    executor: Literal["local", "ray"] | None = None,
    champion: Endpoint | None = None,
) -> CorpusResult:
    """Build the corpus described by `config_path` into `out_dir` (see module docstring).
    `extra_suites` are decontaminated against as well (the loop's suites); `executor`
    overrides the config's `executor.kind`; `champion` is where the loop serves its base for
    `bands.champion.serve: base`."""
    cfg = with_suites(load_corpus_config(config_path), extra_suites)
    if executor is not None and executor != cfg.executor.kind:
        spec = cfg.executor.model_copy(update={"kind": executor})
        cfg = cfg.model_copy(update={"executor": spec})
    _check_inputs(cfg, config_path)
    sampled = cfg.bands.champion if cfg.bands is not None else None
    if sampled is not None and sampled.serve is not None and champion is None:
        raise InputError(f"{config_path}: {OUTSIDE_LOOP}")
    out_dir = Path(out_dir)
    _check_outputs(cfg, config_path, out_dir)
    with _Progress(progress, total=9 + (cfg.judge is not None)) as step:
        step("ingest")
        traces, rejects, sources = _ingest(cfg)
        _check_records(cfg, sources)
        step("scrub")
        scrub = scrubber(cfg.scrub)
        made, signed, ran, trace_lines = None, None, {"kind": "local"}, None
        if cfg.executor.kind == "ray":
            lsh = _lsh(cfg) if cfg.dedup.near else None
            done = row_pass(traces, scrub, lsh, cfg.executor)
            made, signed, ran = done.rows, done.signatures, done.executor
            trace_lines, traces = done.trace_lines, []
        else:
            traces = [scrub.trace(t) for t in traces]
        rejects = [scrub.value(r) for r in rejects]
        step("rows")
        b = start_build(made if made is not None else map(row_or_id, traces), cfg)
        b.rejects, b.sources, b.scrubber = rejects, sources, scrub
        b.traces, b.trace_lines, b.signatures, b.executor = traces, trace_lines, signed, ran
        _cut_rows(b, cfg, step)
        step("bands")
        if cfg.bands is not None:
            apply_bands(b, cfg, champion)
        step("shuffle")
        random.Random(cfg.seed).shuffle(b.rows)
        b.counts["shuffle"] = len(b.rows)
        step("write")
        return _write(out_dir, cfg, config_path, b)


def _cut_rows(b: Build, cfg: CorpusConfig, step: Callable[[str], None]) -> None:
    """Filter, dedup, decontaminate, and the judge cut last: only the survivors of the cheap
    steps cost judge calls, and no suite item is ever shown to the judge."""
    step("filter")
    spare = cfg.judge is not None  # unlabelled rows are the judge's to decide
    f = cfg.filter
    gone = feedback_gone(b.rows, f.min_score, f.keep_unrated, spare_unlabelled=spare)
    b.drop("filter", gone)
    step("dedup")
    remove_duplicates(b, cfg)
    step("decontaminate")
    remove_contaminated(b, cfg)
    if cfg.judge is not None:
        step("judge")
        apply_judge(b, cfg.judge)


def _lsh(cfg: CorpusConfig) -> LshParams:
    return lsh_params(cfg.dedup)


def with_suites(cfg: CorpusConfig, extra: Sequence[Path]) -> CorpusConfig:
    """`cfg` with the suites in `extra` that it does not list yet added to decontaminate."""
    have = {p.resolve() for p in cfg.decontaminate.suites}
    new = [Path(p).resolve() for p in extra if Path(p).resolve() not in have]
    if not new:
        return cfg
    spec = cfg.decontaminate.model_copy(update={"suites": [*cfg.decontaminate.suites, *new]})
    return cfg.model_copy(update={"decontaminate": spec})


def _check_inputs(cfg: CorpusConfig, config_path: Path) -> None:
    """Every missing input at once, by config key, before any work starts."""
    missing = [
        f"sources.{i}.path: {s.path} not found"
        for i, s in enumerate(cfg.sources)
        if not (s.path.is_file() or s.path.is_dir())
    ]
    missing += [
        f"decontaminate.suites.{i}: {p} not found"
        for i, p in enumerate(cfg.decontaminate.suites)
        if not p.is_file()
    ]
    if cfg.bands is not None and cfg.bands.sample_log and not cfg.bands.sample_log.exists():
        missing.append(f"bands.sample_log: {cfg.bands.sample_log} not found (run `tuneloop eval`)")
    missing += _unknown_scorers(cfg)
    if cfg.judge is not None:
        missing += judge_problems(cfg.judge)
    if cfg.executor.kind == "ray":
        try:
            import_ray()
        except InputError as err:
            missing.append(f"executor.kind: {err}")
    if missing:
        raise InputError(f"{config_path}: {len(missing)} error(s)\n  " + "\n  ".join(missing))


OUTPUT_FILES = (
    SFT_FILE,
    PREF_FILE,
    GRPO_FILE,
    REJECTS_FILE,
    REMOVED_FILE,
    PROVENANCE_FILE,
    TRACES_FILE,
)


def _check_outputs(cfg: CorpusConfig, config_path: Path, out_dir: Path) -> None:
    """Refuse an out_dir whose outputs would replace an input, or that is a source folder
    (whose `*.jsonl` the next build would read back as traces)."""
    for i, spec in enumerate(cfg.sources):
        if spec.path.is_dir() and spec.path.resolve() == out_dir.resolve():
            raise InputError(
                f"out_dir {out_dir}: is the folder of sources.{i}.path; a build would read "
                "its own outputs back as traces (choose another out_dir)"
            )
    inputs = [config_path, *cfg.decontaminate.suites]
    inputs += [f for spec in cfg.sources for f in _listed(spec.path)]
    if cfg.bands is not None and cfg.bands.sample_log:
        inputs.append(cfg.bands.sample_log)
    if cfg.judge is not None:
        inputs.append(cfg.judge.file)
    refuse_overwriting_inputs([("out_dir", out_dir / name) for name in OUTPUT_FILES], inputs)


def _listed(path: Path) -> list[Path]:
    """Every file under a source (a session folder's files too), for the overwrite check."""
    return sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]


def _check_records(cfg: CorpusConfig, sources: list[dict[str, Any]]) -> None:
    """Refuse a source that read lines but made no record (a wrong `format`), and a build
    with no record at all: never an empty corpus with exit 0."""
    for i, (spec, got) in enumerate(zip(cfg.sources, sources, strict=True)):
        if got["traces"] == 0 and (got["lines_read"] or len(sources) == 1):
            raise InputError(
                Scrubber().text(  # a path can hold a secret too
                    f"sources.{i}.path: {spec.path}: 0 records with format {spec.format} "
                    f"({got['lines_read']} lines read, {got['rejected']} rejected); nothing "
                    + ("written — is the format right?" if got["lines_read"] else "written")
                )
            )
    if not any(got["traces"] for got in sources):
        raise InputError("sources: 0 records in every source; nothing written")


def _ingest(cfg: CorpusConfig) -> tuple[list[Any], list[dict[str, Any]], list[dict[str, Any]]]:
    traces: list[Any] = []
    rejects: list[dict[str, Any]] = []
    sources: list[dict[str, Any]] = []
    for spec in cfg.sources:
        name = spec.source_name
        plan = plan_sources([spec.path], spec.format)
        files = plan.sources
        t, r, report = ingest_planned(plan, dict(spec.options), source=name)
        traces.extend(t)
        rejects.extend({**x.to_json(), "source": name} for x in r)
        sources.append(
            {
                "name": name,
                "path": str(spec.path),
                "format": spec.format,
                "sha256": sha256_path(spec.path),
                "files": [str(f) for f in files],
                **report.to_json(),
            }
        )
    return traces, rejects, sources


def _unknown_scorers(cfg: CorpusConfig) -> list[str]:
    name = cfg.grpo.scorer
    if name is None or name in scorers:
        return []
    return [f"grpo.scorer: unknown scorer {name!r}{did_you_mean(name, scorers.names())}"]


def _write(out_dir: Path, cfg: CorpusConfig, config_path: Path, b: Build) -> CorpusResult:
    # Every file is built in memory and written together (`write_files`): a full disk leaves
    # the folder as it was, never a new sft.jsonl beside an old provenance.json.
    scrub = b.scrubber.value
    sft, pref = out_dir / SFT_FILE, (out_dir / PREF_FILE if b.pairs else None)
    grpo = out_dir / GRPO_FILE if b.prompts else None
    random.Random(cfg.seed).shuffle(b.pairs)
    random.Random(cfg.seed).shuffle(b.prompts)
    files: dict[Path, bytes] = {
        sft: jsonl_bytes([r.to_json() for r in b.rows]),
        **({pref: jsonl_bytes(b.pairs)} if pref is not None else {}),
        **({grpo: jsonl_bytes([grpo_row(r, cfg) for r in b.prompts])} if grpo else {}),
        out_dir / REJECTS_FILE: jsonl_bytes(b.rejects),
        out_dir / TRACES_FILE: b.trace_lines
        if b.trace_lines is not None
        else jsonl_bytes([t.to_json() for t in b.traces]),
        # removal reasons name suite files and source ids
        out_dir / REMOVED_FILE: jsonl_bytes(scrub(b.removed)),
    }
    outputs = {p.name: sha256_bytes(data) for p, data in files.items()}
    provenance = {
        "schema": "tuneloop.corpus_provenance/2",
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "config": str(Path(config_path).resolve()),
        "config_sha256": sha256_file(config_path),
        "parameters": cfg.model_dump(mode="json"),
        "sources": b.sources,
        "counts": b.counts,
        "rows_trimmed": b.trimmed,
        "removed_by_step": dict(Counter(r["step"] for r in b.removed)),
        "scrubbed": {},
        "decontamination": b.suites,
        "preference": {"pairs": len(b.pairs), "removed_by_decontamination": b.pairs_decontaminated},
        "grpo": {
            "prompts": len(b.prompts),
            "counts": b.prompt_counts,
            "by_origin": dict(Counter(r.reference.origin for r in b.prompts if r.reference)),
        },
        "decontamination_audit": b.audit,
        "judge": b.judge_cut,
        "outputs": outputs,
        "executor": b.executor,
        "near_dedup": sketch_info(_lsh(cfg)) if cfg.dedup.near else None,
    }
    # paths, source names and config values can hold a secret too (a token in a file name)
    provenance = scrub(provenance)
    provenance["scrubbed"] = dict(sorted(b.scrubber.counts.items()))
    prov = out_dir / PROVENANCE_FILE
    files[prov] = json_bytes(provenance)
    write_files(files)
    for path, name in ((pref, PREF_FILE), (grpo, GRPO_FILE)):
        if path is None and (out_dir / name).exists():
            (out_dir / name).unlink()  # a stale file from an earlier build would mislead
    return CorpusResult(
        sft_path=sft,
        preference_path=pref,
        grpo_path=grpo,
        provenance_path=prov,
        counts=dict(b.counts),
    )


class _Progress:
    """A rich progress bar over the build steps (silent when disabled)."""

    def __init__(self, enabled: bool, total: int) -> None:
        self.enabled, self.total = enabled, total
        self._bar: Any = None

    def __enter__(self) -> Callable[[str], None]:
        if self.enabled:
            from rich.progress import Progress

            self._bar = Progress(transient=True)
            self._bar.start()
            self._task = self._bar.add_task("corpus build", total=self.total)
        return self._step

    def _step(self, name: str) -> None:
        if self._bar is not None:
            self._bar.update(self._task, description=f"corpus build: {name}", advance=1)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
