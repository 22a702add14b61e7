"""The corpus build's row steps (rows, filter, dedup, decontaminate, bands) and their state.

`pipeline.build_corpus` runs them in that order on one `Build` (with the judge cut,
`judge_cut.py`, between decontaminate and bands); each step removes rows by index through
`Build.drop` / `Build.drop_prompts`, which record why in removed.jsonl.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tuneloop.data.corpus.bands import band_of, prompt_pass_rates
from tuneloop.data.corpus.champion_rates import champion_pass_rates
from tuneloop.data.corpus.config import CorpusConfig, DedupSpec, ScrubSpec
from tuneloop.data.corpus.training_rows import (
    Row,
    grpo_candidates,
    preference_pairs,
    prompt_duplicates,
    prompt_row,
)
from tuneloop.data.decontam import RowText, decontaminate_sets, recall_failures, suite_report
from tuneloop.data.dedup import (
    LshParams,
    exact_duplicates,
    exact_key,
    lsh_duplicates,
    near_duplicates,
)
from tuneloop.data.text import conversation_text
from tuneloop.endpoint import Endpoint
from tuneloop.errors import InputError
from tuneloop.scrub import Scrubber, ScrubRules


@dataclass
class Build:
    """Mutable state threaded through the steps (pure helpers do the work)."""

    rows: list[Row]
    counts: dict[str, int] = field(default_factory=dict)
    removed: list[dict[str, Any]] = field(default_factory=list)
    pairs: list[dict[str, Any]] = field(default_factory=list)
    rejects: list[dict[str, Any]] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)
    scrubber: Scrubber = field(default_factory=Scrubber)
    """Also applied to removed.jsonl and provenance.json: they name files and ids."""
    suites: list[dict[str, Any]] = field(default_factory=list)
    pairs_decontaminated: int = 0
    prompts: list[Row] = field(default_factory=list)
    """GRPO prompt candidates (rows with a reference), filtered alongside the rows."""
    prompt_counts: dict[str, int] = field(default_factory=dict)
    audit: dict[str, Any] | None = None
    trimmed: int = 0
    """Rows whose trace went on after its last assistant message (cut there)."""
    traces: list[Any] = field(default_factory=list)
    """Every ingested trace, scrubbed (written as `traces.jsonl`)."""
    trace_lines: bytes | None = None
    """`traces.jsonl` itself when the Ray executor rendered it (then `traces` is empty)."""
    executor: dict[str, Any] = field(default_factory=lambda: {"kind": "local"})
    """Where the per-row steps ran (provenance.json `executor`)."""
    signatures: dict[int, Any] | None = None
    """Each row's MinHash signature by `id(row)` when the Ray executor computed them with
    the rows; None: the near-dup step computes them."""
    judge_cut: dict[str, Any] | None = None
    """What the judge cut asked, kept and dropped, and at what cost (provenance.json
    `judge`); None without `judge:`."""

    def drop_prompts(self, step: str, gone: dict[int, str]) -> None:
        """Remove GRPO prompts by index, recording why (step `grpo_<step>`)."""
        for i in sorted(gone):
            r = self.prompts[i]
            self.removed.append(
                {
                    "step": f"grpo_{step}",
                    "source": r.source,
                    "source_id": r.source_id,
                    "reason": gone[i],
                }
            )
        self.prompts = [r for i, r in enumerate(self.prompts) if i not in gone]
        self.prompt_counts[step] = len(self.prompts)

    def drop(self, step: str, gone: dict[int, str]) -> None:
        """Remove rows by index, recording why, and count what is left."""
        for i in sorted(gone):
            r = self.rows[i]
            self.removed.append(
                {"step": step, "source": r.source, "source_id": r.source_id, "reason": gone[i]}
            )
        self.rows = [r for i, r in enumerate(self.rows) if i not in gone]
        self.counts[step] = len(self.rows)


def start_build(made: Iterable[Row | tuple[str, str]], cfg: CorpusConfig) -> Build:
    """The build's rows from each trace's `row_or_id` (computed here or on the workers)."""
    rows, removed, n = [], [], 0
    for row in made:
        n += 1
        if isinstance(row, tuple):
            source, source_id = row
            removed.append(
                {
                    "step": "rows",
                    "source": source,
                    "source_id": source_id,
                    "reason": "no assistant message",
                }
            )
        else:
            rows.append(row)
    b = Build(rows=rows, counts={"traces": n, "rows": len(rows)}, removed=removed)
    b.trimmed = sum(1 for r in rows if r.trimmed)
    b.pairs = preference_pairs(rows, cfg.preference.min_margin) if cfg.preference.enabled else []
    if cfg.grpo.enabled:
        b.prompts = grpo_candidates(rows, cfg.grpo.accept_min_score)
        b.prompt_counts["candidates"] = len(b.prompts)
    return b


def feedback_gone(
    rows: list[Row], min_score: float | None, keep_unrated: bool, *, spare_unlabelled: bool = False
) -> dict[int, str]:
    """index → reason for every row the feedback filter removes. `spare_unlabelled`: leave
    rows no label speaks for (no feedback, no reference) to the judge cut."""
    gone = {}
    for i, r in enumerate(rows):
        if r.score is None:
            if spare_unlabelled and r.reference is None:
                continue
            if not keep_unrated:
                gone[i] = "unrated (filter.keep_unrated is false)"
        elif min_score is not None and r.score < min_score:
            gone[i] = f"feedback score {r.score:g} < filter.min_score {min_score:g}"
    return gone


def scrubber(spec: ScrubSpec) -> Scrubber:
    """The scrubber of a build's `scrub:` section (applied to every trace before its row)."""
    return Scrubber(ScrubRules(**spec.model_dump()))


def exact_keys(rows: Sequence[Row]) -> list[str]:
    """Each row's exact-dedup key: its source and normalized prompt (`dedup.exact_key`)."""
    return [exact_key(r.source, r.prompt_key) for r in rows]


def lsh_params(spec: DedupSpec) -> LshParams:
    """The near-dup settings of a build's `dedup:` section."""
    return LshParams(spec.threshold, spec.num_perm, spec.shingle_size)


def row_text(row: Row) -> RowText:
    """What decontamination sees of an SFT row: the whole conversation and its prompt."""
    return RowText(row.text, row.prompt)


def remove_duplicates(b: Build, cfg: CorpusConfig) -> None:
    """Exact dedup, then near-dup (MinHash LSH) of the rows; GRPO prompts on their prompt."""
    if cfg.dedup.exact:
        dup = exact_duplicates(exact_keys(b.rows))
        b.drop(
            "exact_dedup",
            {i: f"same source and prompt as {b.rows[j].source_id}" for i, j in dup.items()},
        )
    if cfg.dedup.near:
        params = lsh_params(cfg.dedup)
        if b.signatures is not None and b.rows:
            sig = np.stack([b.signatures[id(r)] for r in b.rows])
            near = lsh_duplicates(sig, params)
        else:
            near = near_duplicates([r.text for r in b.rows], params)
        b.drop(
            "near_dedup", {i: f"near-duplicate of {b.rows[j].source_id}" for i, j in near.items()}
        )
    b.drop_prompts("dedup", prompt_duplicates(b.prompts))


def remove_contaminated(b: Build, cfg: CorpusConfig) -> None:
    """Decontaminate rows, preference pairs and GRPO prompts against every suite, with the
    recall audit; raise InputError (nothing written) when a mutation's recall is below its bar."""
    spec, audit = cfg.decontaminate, cfg.decontaminate.audit
    user = "\n".join
    run = decontaminate_sets(
        {
            "rows": [row_text(r) for r in b.rows],
            "preference": [
                RowText(
                    _pair_text(p),
                    user(m["content"] or "" for m in p["prompt"] if m["role"] == "user"),
                )
                for p in b.pairs
            ],
            "grpo": [_prompt_text(r) for r in b.prompts],
        },
        spec.suites,
        n=spec.n,
        min_tokens=spec.min_tokens,
        number_words=spec.number_words,
        canaries=audit.canaries if audit.enabled else None,
        seed=audit.seed,
    )
    if run.audit is not None:
        failed = recall_failures(
            run.audit,
            audit.min_recall,
            {str(k): v for k, v in audit.min_recall_by_mutation.items()},
        )
        if failed:
            raise InputError(
                "decontamination recall audit failed; nothing was written:\n  "
                + "\n  ".join(failed)
                + "\n  (per-mutation figures: run with the bar lowered and read "
                "provenance.json `decontamination_audit`)"
            )
    b.suites = [
        suite_report(
            found,
            [(r.source, r.source_id) for r in b.rows],
            [p["source_id"] for p in b.pairs],
            [r.source_id for r in b.prompts],
        )
        for found in run.suites
    ]
    b.audit = run.audit
    b.drop("decontaminate", {i: run.why(i, "rows") for i in run.removed("rows")})
    pair_gone = run.removed("preference")
    b.pairs = [p for i, p in enumerate(b.pairs) if i not in pair_gone]
    b.pairs_decontaminated = len(pair_gone)
    b.drop_prompts("decontaminate", {i: run.why(i, "grpo") for i in run.removed("grpo")})


def _prompt_text(row: Row) -> RowText:
    """What decontamination sees of a GRPO prompt: its prompt and its reference answer."""
    assert row.reference is not None
    return RowText(conversation_text(row.messages[:-1]) + "\n" + row.reference.answer, row.prompt)


def _pair_text(pair: dict[str, Any]) -> str:
    return conversation_text([*pair["prompt"], *pair["chosen"], *pair["rejected"]])


def apply_bands(b: Build, cfg: CorpusConfig, champion: Endpoint | None = None) -> None:
    """Tag rows and GRPO prompts with their pass rate and band; drop those not in `keep`.
    `champion`: where the loop serves its base (`bands.champion.serve: base`)."""
    assert cfg.bands is not None
    spec = cfg.bands
    if spec.sample_log is not None:
        rates = prompt_pass_rates(spec.sample_log, spec.suite)
    else:
        assert spec.champion is not None
        prompts = [grpo_row(r, cfg) for r in b.prompts]
        rates = champion_pass_rates(prompts, spec.champion, cfg.grpo.scorer or "numeric", champion)
    for output, rows, drop in (("sft", b.rows, b.drop), ("grpo", b.prompts, b.drop_prompts)):
        if output not in spec.outputs:
            continue
        gone = {}
        for i, r in enumerate(rows):
            r.pass_rate = rates.get(r.prompt_key)
            r.band = band_of(r.pass_rate, *spec.edges)
            if r.band not in spec.keep:
                gone[i] = f"band {r.band} (pass rate {r.pass_rate}) not in bands.keep"
        drop("bands", gone)


def grpo_row(row: Row, cfg: CorpusConfig) -> dict[str, Any]:
    """A GRPO candidate as its grpo.jsonl row, with the config's default scorer."""
    out = prompt_row(row, cfg.grpo.scorer, dict(cfg.grpo.scorer_args))
    assert out is not None  # candidates are rows `prompt_row` accepts
    return out
