"""The corpus build's `provenance.json` (`tuneloop.corpus_provenance/2`), read typed.

The shape is the one `tuneloop.data.corpus` writes; secrets in it are already scrubbed.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from tuneloop.records.base import Record


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class Match(_Part):
    """One decontamination rule that matched a row."""

    rule: str
    """The rule (exact prompt, n-gram overlap, …)."""
    items: list[str]
    """The suite item ids it matched."""


class RemovedRow(_Part):
    """A training row removed because it contains suite items."""

    source: str
    """Source name."""
    source_id: str
    """The row's id in its source."""
    matches: list[Match]
    """Why it was removed."""


class SuiteDecontamination(_Part):
    """What one suite removed from the corpus."""

    suite: str
    """Path of the suite."""
    sha256: str
    """sha256 of the suite file."""
    revision: str
    """The suite's revision (sha256 of its canonical content)."""
    items: int
    """Items in the suite."""
    rows_removed: int
    """Training rows removed."""
    removed: list[RemovedRow]
    """Every removed row, with the rules that matched."""
    preference_pairs_removed: list[str]
    """Source ids of removed preference pairs."""
    grpo_prompts_removed: list[str] = []
    """Source ids of removed GRPO prompts."""


class PreferenceCounts(_Part):
    """Preference pairs written."""

    pairs: int
    """Pairs in the preference file."""
    removed_by_decontamination: int
    """Pairs removed because they contain suite items."""


class GrpoCounts(_Part):
    """The GRPO prompt set written (grpo.jsonl)."""

    prompts: int = 0
    """Prompts in grpo.jsonl."""
    counts: dict[str, int] = {}
    """Prompts left after each step: candidates, dedup, decontaminate, bands."""
    by_origin: dict[str, int] = {}
    """Prompts by where their reference came from: reference, correction, accepted."""


class MutationRecall(_Part):
    """The recall audit's figure for one mutation."""

    planted: int
    """Canaries planted (disguised suite items)."""
    caught: int
    """Canaries decontamination removed."""
    recall: float | None
    """caught / planted; None when none could be planted (not measured)."""
    missed: list[dict[str, str]] = []
    """Up to 10 missed canaries: suite and item id."""


class JudgeCut(_Part):
    """The judge cut (corpus.yaml `judge:`): unlabelled rows graded by an LLM judge."""

    file: str
    """Path of the judge file."""
    sha256: str
    """sha256 of the judge file."""
    model: str
    """The judge's model id."""
    endpoint: str
    """Where it was asked."""
    rubric_sha256: str
    """sha256 of the rubric it graded by."""
    min_grade: float
    """A row was kept with a grade at least this."""
    asked: int
    """Rows graded (unlabelled rows that survived filter, dedup and decontamination)."""
    kept: int
    """Of those, rows kept (grade ≥ min_grade)."""
    below_grade: int
    """Rows dropped for a grade below min_grade."""
    errors: int
    """Rows dropped because the judge could not grade them (unparsable, unreachable)."""
    cached: int
    """Grades read from the judge's cache (nothing asked this time)."""
    cost_usd: float
    """What the grades cost to make (cached ones included; calls without usage count 0)."""
    cost_usd_this_run: float
    """What this build paid (grades not in the cache)."""


class CorpusProvenance(Record):
    """How a corpus was built: config, sources, per-step counts, what was removed and why."""

    KIND = "corpus_provenance"
    VERSION = 2

    created_at: str
    """ISO-8601 UTC time of the build."""
    config: str
    """Path of the corpus config."""
    config_sha256: str
    """sha256 of the corpus config file."""
    parameters: dict[str, Any]
    """The resolved corpus config."""
    sources: list[dict[str, Any]]
    """Each source: name, path, format, sha256 and its ingest counts."""
    counts: dict[str, int]
    """Rows left after each step, in order."""
    rows_trimmed: int
    """Rows whose trace went on after its last assistant message (cut there)."""
    removed_by_step: dict[str, int]
    """Rows removed by each step."""
    scrubbed: dict[str, int]
    """Secrets scrubbed, by kind."""
    decontamination: list[SuiteDecontamination]
    """One entry per suite checked."""
    preference: PreferenceCounts
    """Preference pairs."""
    grpo: GrpoCounts = GrpoCounts()
    """The GRPO prompt set."""
    decontamination_audit: dict[str, MutationRecall] | None = None
    """Recall per mutation (verbatim, rewrapped, in_filler, case_whitespace,
    numbers_spelled); None when the audit was off or no suite was given."""
    judge: JudgeCut | None = None
    """The judge cut; None when the build had no `judge:`."""
    outputs: dict[str, str]
    """Output file name → sha256."""
    executor: dict[str, Any] = {"kind": "local"}
    """Where the per-row steps ran: `{kind: local}`, or `{kind: ray, address, ray_version,
    cluster_cpus, tasks}` (version 2; a version-1 file was always built locally)."""
    near_dedup: dict[str, Any] | None = None
    """What made the near-dup signatures (`dedup.sketch_info`: sketch, rensa version, its
    algorithm version, seed, LSH bands × rows); None when near-dup was off or the file is older."""
