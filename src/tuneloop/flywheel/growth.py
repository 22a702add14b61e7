"""Growth after dedup: how many of the labels since the last round the next round's corpus
build would keep as new training rows — what `flywheel.triggers.min_new_labels` counts.

    traffic = read_traffic([Path("runs/flywheel/traffic")])
    growth = count_growth(traffic, since, corpus=Path("flywheel_corpus.yaml"),
                          trained_rows=Path("runs/flywheel/data/sft.jsonl"), suites=[suite])
    growth.labelled, growth.trainable, growth.removed

Why: 49 cycles of one monitoring prompt are 49 new labels and one training row, and a floor
counted before dedup fires rounds that train on nothing new.

The candidates are the exchanges `count_new_labels` counts (chat exchanges labelled after
`since`). Each goes through the corpus build's own steps, in the build's order and with the
corpus config's settings — the source's ingester (feedback joined as a build joins it), the
scrubber, the row cut, the feedback filter, the exact and near-dup keys, the decontamination
rule (`data.corpus.steps`, `data.dedup`, `data.decontam`) — after the rows the last round
trained on, which precede every new row in the next build as the log's older lines do. Each
label that does not count is counted under the step that drops it (`Growth.removed`, in order):

- `no_row`: the build makes no row of it (an error response, no assistant message, feedback
  the ingester cannot join, or a traffic log the corpus config does not read);
- `filter`: the feedback filter drops it (a thumbs-down without a correction);
- `exact_duplicate`: an earlier new row has its exact key (source and normalized prompt);
- `near_duplicate`: a near-duplicate (MinHash LSH) of an earlier new row, with `dedup.near`;
- `already_trained`: its exact key or (with `dedup.near`) its near-dup buckets match a row the
  last round trained on (`trained_rows`);
- `contaminated`: it contains an item of a suite: the loop's (`suites`) or the corpus
  config's `decontaminate.suites`.

Without a corpus config (the loop trains on a fixed `train.data`) the rows are matched on the
prompt alone and decontaminated with the corpus defaults; nothing is filtered (`NO_CORPUS`).
A response with several choices makes a row per choice, as the ingester does, so that one
label may then count more than one row.

Deliberately not applied: difficulty bands (`bands:` needs the champion's pass rates, from a
sample log or sampled from its endpoint — the note says so when the config has them), and the
recall audit (it fails a build, it removes no row). Near dedup against the last round's rows
puts them in the LSH buckets in the order of their file (the build shuffles it), which matters
only for rows that were near-duplicates of each other.

Cost. An `Exchange` holds the request, not the response, so the traffic files are read again
(with the ingester's reader) — but only the lines of labelled exchanges and their feedback go
through the ingester; the last round's rows (with their MinHash signatures) and the suites'
decontamination indexes are kept by (path, mtime, size) for the life of the process. Measured
on a 5,000-exchange log (2.6 MB, 2,521 labelled; the 480-item flywheel suite; 2,207 trained
rows; 2 shared CPU cores), median of 10 calls: 0.09 s with 100 labels since the last round,
0.12 s with 500 (≈ 0.07 s of either is re-reading the log; `read_traffic` itself takes 0.075 s),
0.35-0.40 s before the first round, when all 2,521 are candidates; the first call of a process
adds ≈ 0.1 s (the suite's index, the trained rows). Reading the log whole with the ingester
would take 0.28 s before any step.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, cast

import numpy as np
from pydantic import BaseModel, ConfigDict

from tuneloop.data.corpus.config import (
    CorpusConfig,
    DecontamSpec,
    DedupSpec,
    FilterSpec,
    ScrubSpec,
    SourceSpec,
    load_corpus_config,
)
from tuneloop.data.corpus.pipeline import with_suites
from tuneloop.data.corpus.steps import (
    exact_keys,
    feedback_gone,
    lsh_params,
    row_text,
    scrubber,
)
from tuneloop.data.corpus.training_rows import Row, to_row
from tuneloop.data.decontam import SuiteIndex, build_index, find_contaminated
from tuneloop.data.dedup import LshParams, exact_duplicates, lsh_duplicates, signatures
from tuneloop.data.files import source_files
from tuneloop.data.ingest import ingest_files, reads_documents
from tuneloop.data.ingest.base import read_json_lines
from tuneloop.data.text import normalized_prompt
from tuneloop.errors import InputError
from tuneloop.flywheel.exchanges import Exchange, Traffic, labelled_ids, parse_line
from tuneloop.plugins import Converter
from tuneloop.records import iter_jsonl
from tuneloop.records.trace import Trace
from tuneloop.registry import ingesters
from tuneloop.suite import item_prompt_text, load_suite

STEPS = (
    "no_row",
    "filter",
    "exact_duplicate",
    "near_duplicate",
    "already_trained",
    "contaminated",
)
"""Why a new label is not a new training row, in the build's step order (a match with a row
the last round trained on, by exact key or near-dup, is `already_trained`)."""

NO_CORPUS = "no corpus config: exact dedup on the prompt and decontamination against the suite only"
NO_BANDS = "difficulty bands not applied (they need the champion's pass rates)"


class Growth(BaseModel):
    """New labels since the last round, and how many of them the next round would train on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    labelled: int
    """New labels as `count_new_labels` counts them: chat exchanges labelled after the last
    round started, each once."""
    trainable: int
    """Of those, the rows the next round's corpus build would keep that the last round did
    not train on: what `min_new_labels` is compared with."""
    removed: dict[str, int]
    """Why the others do not count: how many each step dropped (`STEPS`, in that order; a step
    that dropped none is left out). With one choice per response, `labelled` = `trainable` +
    the sum of these."""
    note: str | None = None
    """What of the corpus build the count does not apply, when it does not apply all of it."""


@dataclass(frozen=True)
class _Steps:
    """The corpus steps a new label must survive, as the next build would run them."""

    fmt: str
    options: dict[str, Any]
    source: str
    """The rows' `source` (part of the exact key)."""
    by_prompt: bool
    """Match rows on the prompt alone, whatever their source (without a corpus config)."""
    files: list[Path]
    """The traffic files the build reads; empty when it reads none."""
    scrub: ScrubSpec
    filter: FilterSpec
    dedup: DedupSpec
    decontaminate: DecontamSpec
    notes: list[str] = field(default_factory=list)


def count_growth(
    traffic: Traffic,
    since: float | None,
    *,
    corpus: Path | None,
    trained_rows: Path | None,
    suites: Sequence[Path],
) -> Growth:
    """The labels after `since` (all time when None) and the rows the next corpus build would
    make of them that are new (see the module docstring). `corpus`: the loop's `data.corpus`
    (None: it trains on `train.data`); `trained_rows`: the last round's training rows (None
    before the first round); `suites`: the loop's suites (the corpus config's are added).
    InputError when the corpus config does not load, a suite or `trained_rows` does not read.
    Costs ≈ 0.1 s a call on a 5,000-exchange log (the module docstring's "Cost")."""
    steps = _steps(corpus, suites, traffic.files)
    note = "; ".join(steps.notes) or None
    ids = labelled_ids(traffic, since)
    labelled = len(ids)
    if labelled == 0:
        return Growth(labelled=0, trainable=0, removed={}, note=note)
    traces = _labelled_traces(steps, ids)
    scrub = scrubber(steps.scrub)
    made = [(t.source_id, to_row(scrub.trace(t))) for t in traces]
    rows = [row for _, row in made if row is not None]
    removed: Counter[str] = Counter()
    made_of = {_exchange_of(source_id, ids) for source_id, row in made if row is not None}
    removed["no_row"] = labelled - len(made_of & ids)
    gone = feedback_gone(rows, steps.filter.min_score, steps.filter.keep_unrated)
    removed["filter"] = len(gone)
    rows = [r for i, r in enumerate(rows) if i not in gone]
    trained = _trained(trained_rows, steps.by_prompt) if trained_rows else ()
    if steps.dedup.exact:
        rows = _drop_exact(rows, trained, removed)
    if steps.dedup.near and rows:
        rows = _drop_near(rows, trained_rows, lsh_params(steps.dedup), removed)
    rows = _drop_contaminated(rows, steps.decontaminate, removed)
    return Growth(
        labelled=labelled,
        trainable=len(rows),
        removed={step: removed[step] for step in STEPS if removed[step]},
        note=note,
    )


def _exchange_of(source_id: str, ids: set[str]) -> str:
    """The exchange a trace is of: its id, or `<id>` of a choice's `<id>#<n>`."""
    return source_id if source_id in ids else source_id.rpartition("#")[0]


def _steps(corpus: Path | None, suites: Sequence[Path], traffic: list[Path]) -> _Steps:
    """The steps of the corpus config at `corpus` (InputError naming it when it does not
    load), or the defaults without one; with the traffic files the build reads."""
    if corpus is None:
        return _Steps(
            fmt="openai_chat",
            options={},
            source="",  # the trained rows' source is "" too (`_trained`)
            by_prompt=True,
            files=list(traffic),
            scrub=ScrubSpec(emails=False, secrets=False, ips=False),
            filter=FilterSpec(min_score=None, keep_unrated=True),
            dedup=DedupSpec(near=False),
            decontaminate=DecontamSpec(suites=list(dict.fromkeys(map(_resolved, suites)))),
            notes=[NO_CORPUS],
        )
    cfg = with_suites(load_corpus_config(corpus), suites)
    spec, files = _traffic_source(cfg, traffic)
    notes = [] if cfg.bands is None else [NO_BANDS]
    if spec is None and traffic:
        notes.insert(0, f"{corpus} reads none of the traffic log's files: no label makes a row")
    return _Steps(
        fmt=spec.format if spec else "openai_chat",
        options=dict(spec.options) if spec else {},
        source=spec.source_name if spec else "",
        by_prompt=False,
        files=files,
        scrub=cfg.scrub,
        filter=cfg.filter,
        dedup=cfg.dedup,
        decontaminate=cfg.decontaminate,
        notes=notes,
    )


def _resolved(path: Path) -> Path:
    return Path(path).resolve()


def _traffic_source(cfg: CorpusConfig, traffic: list[Path]) -> tuple[SourceSpec | None, list[Path]]:
    """The first source of the config that reads a traffic file, with the files it reads."""
    logged = {_resolved(p) for p in traffic}
    for spec in cfg.sources:
        files = source_files(spec.path) if spec.path.exists() else []
        if logged.intersection(map(_resolved, files)):
            return spec, files
    return None, []


def _labelled_traces(steps: _Steps, ids: set[str]) -> list[Trace]:
    """The traces the source's ingester makes of the exchanges `ids`, feedback joined as the
    build joins it: one converter over the files in order (it joins across files), fed the
    lines of those exchanges and every feedback line naming one — all a trace of them is made
    of — so that the other exchanges of the log cost a JSON parse, not a trace."""
    factory = ingesters.get(steps.fmt)
    if reads_documents(factory):  # a session document is read whole: its traces, by id
        whole, _, _ = ingest_files(steps.fmt, steps.files, dict(steps.options), source=steps.source)
        return [t for t in whole if t.source_id in ids or t.source_id.rpartition("#")[0] in ids]
    convert = cast(Converter, factory(**steps.options))
    traces: list[Trace] = []
    for path in steps.files:
        try:
            lines = [
                (n, obj) for n, obj in read_json_lines(path, []) if _names(obj, f"{path}:{n}", ids)
            ]
        except FileNotFoundError:
            continue  # rotated away since it was listed: the next look reads it by its new name
        traces += [t for t in convert(str(path), lines) if isinstance(t, Trace)]
    for trace in traces:
        trace.source = steps.source
    return traces


def _names(obj: dict[str, Any], where: str, ids: set[str]) -> bool:
    """Whether a log line is one of the exchanges `ids` or feedback on one (or on a choice)."""
    try:
        line = parse_line(obj, where)
    except InputError:
        return False  # not a line the flywheel counted; the ingester accounts for it itself
    if isinstance(line, Exchange):
        return line.completion_id in ids
    return line.completion_id in ids or line.completion_id.rpartition("#")[0] in ids


def _drop_exact(rows: list[Row], trained: Sequence[Row], removed: Counter[str]) -> list[Row]:
    """Rows whose exact key no trained row and no earlier new row has (`dedup.exact`)."""
    first = exact_duplicates([*exact_keys(trained), *exact_keys(rows)])
    old = len(trained)
    for i in range(len(rows)):
        if old + i in first:
            removed["already_trained" if first[old + i] < old else "exact_duplicate"] += 1
    return [r for i, r in enumerate(rows) if old + i not in first]


def _drop_near(
    rows: list[Row],
    trained_path: Path | None,
    params: LshParams,
    removed: Counter[str],
) -> list[Row]:
    """Rows no trained row and no earlier new row is a near-duplicate of (MinHash LSH)."""
    old = _trained_signatures(trained_path, params) if trained_path else None
    new = signatures([r.text for r in rows], params)
    sig = new if old is None else np.vstack([old, new])
    start = len(sig) - len(new)
    hit = lsh_duplicates(sig, params)
    for i in range(len(rows)):
        if start + i in hit:
            removed["already_trained" if hit[start + i] < start else "near_duplicate"] += 1
    return [r for i, r in enumerate(rows) if start + i not in hit]


def _drop_contaminated(rows: list[Row], spec: DecontamSpec, removed: Counter[str]) -> list[Row]:
    """Rows that contain no item of any suite, by the build's rule and settings."""
    if not rows or not spec.suites:
        return rows
    indexes = [_suite_index(p, spec.n, spec.min_tokens, spec.number_words) for p in spec.suites]
    texts = indexes[0].keyed([row_text(r) for r in rows])  # number words once, for all suites
    hit: set[int] = set()
    for index in indexes:
        hit.update(find_contaminated(texts, index, keyed=True))
    removed["contaminated"] += len(hit)
    return [r for i, r in enumerate(rows) if i not in hit]


def _stamp(path: Path, what: str) -> tuple[Path, int, int]:
    """(path, mtime, size): the key a cached reading of `path` is kept under."""
    try:
        st = os.stat(path)
    except OSError as err:
        raise InputError(f"{path}: cannot read {what} ({err.strerror or err})") from None
    return Path(path), st.st_mtime_ns, st.st_size


def _suite_index(path: Path, n: int, min_tokens: int, number_words: bool) -> SuiteIndex:
    """A suite's decontamination index, as `decontam.decontaminate_sets` builds it."""
    return _cached_index(_stamp(path, "the suite"), n, min_tokens, number_words)


@lru_cache(maxsize=16)
def _cached_index(
    stamp: tuple[Path, int, int], n: int, min_tokens: int, number_words: bool
) -> SuiteIndex:
    path = stamp[0]
    items = [(i.id, item_prompt_text(i)) for i in load_suite(path).items]
    return build_index(str(path), items, n, min_tokens, number_words=number_words)


def _trained(path: Path, by_prompt: bool) -> tuple[Row, ...]:
    """The rows of the last round's training file, keyed as the build keys its rows."""
    return _cached_trained(_stamp(path, "the last round's training rows"), by_prompt)


@lru_cache(maxsize=4)
def _cached_trained(stamp: tuple[Path, int, int], by_prompt: bool) -> tuple[Row, ...]:
    path = stamp[0]
    out = []
    for lineno, obj in iter_jsonl(path):
        messages = _row_messages(obj)
        if messages is None:
            raise InputError(
                f"{path}:{lineno}: a training row needs a 'messages' list or a 'prompt'"
            )
        source, source_id = obj.get("source"), obj.get("source_id")
        out.append(
            Row(
                messages=messages,
                source="" if by_prompt or not isinstance(source, str) else source,
                source_id=str(source_id or f"{path.name}:{lineno}"),
                score=None,
                prompt_key=normalized_prompt(messages),
            )
        )
    return tuple(out)


def _row_messages(obj: dict[str, Any]) -> list[dict[str, Any]] | None:
    """A training row's messages, whatever the method's shape: `messages`, or `prompt` (a
    message list or a string; TRL's preference and prompt-completion rows)."""
    for key in ("messages", "prompt"):
        value = obj.get(key)
        if isinstance(value, list):
            return [m for m in value if isinstance(m, dict)]
        if key == "prompt" and isinstance(value, str):
            return [{"role": "user", "content": value}]
    return None


def _trained_signatures(path: Path, params: LshParams) -> np.ndarray:
    """MinHash signatures of the last round's rows (kept: they cost ~0.15 ms a row)."""
    return _cached_signatures(_stamp(path, "the last round's training rows"), params)


@lru_cache(maxsize=4)
def _cached_signatures(stamp: tuple[Path, int, int], params: LshParams) -> np.ndarray:
    rows = _cached_trained(stamp, False)
    sig = signatures([r.text for r in rows], params)
    sig.flags.writeable = False  # shared between calls
    return sig
