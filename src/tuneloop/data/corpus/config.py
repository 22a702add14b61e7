"""The corpus-build config (`corpus.yaml`): pydantic models, every error at once with its YAML path.

    sources:
      - {path: traces/production.jsonl, format: openai_chat, name: production}
    filter: {min_score: 0.5}
    decontaminate: {suites: [suite.jsonl]}

Every section derives from `tuneloop.config.Section` (frozen, no unknown keys, defaults
validated), as loop.yaml's do. Relative paths resolve against the YAML file's folder. The
pure helpers (`dedup`, `decontam`, `training_rows`, `bands`) do not take these models: the
steps (`steps.py`) unpack them into plain arguments.

`load_corpus_config` reports the schema's errors, and with them `corpus_problems`' (a
missing source, suite, sample log or judge file, an unknown ingester format or scorer;
`config.load`'s `semantic`), each naming its YAML key and line: a schema error hides none of
them. When the schema holds, `tuneloop corpus build` checks its inputs before any work
(`corpus.pipeline`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, model_validator

from tuneloop.config import ConfigPath, Section, load_yaml_model
from tuneloop.data.decontam import Mutation
from tuneloop.errors import InputError, did_you_mean
from tuneloop.registry import ingesters, scorers

Band = Literal["hard", "medium", "easy", "unknown"]


class SourceSpec(Section):
    path: ConfigPath
    """A trace file, or a folder: a session folder of a document format (a Cline task), a
    folder of JSONL files (a rotated traffic log: `traffic-1.jsonl`, `traffic-2.jsonl`, …
    then `traffic.jsonl`, read oldest first), or with `format: auto` any mix of the two."""
    format: str = "openai_chat"
    """Registered ingester (`tuneloop plugins` lists them: openai_chat, claude_code,
    codex_cli, cline, aider, gemini_cli, openhands, litellm, otel, generic_jsonl, or a
    plugin), or `auto`: each file or session folder by its shape."""
    name: str | None = None
    """Source name written into each row's `source` (default: the file's stem)."""
    options: dict[str, Any] = {}
    """Ingester options (e.g. generic_jsonl field names)."""

    @property
    def source_name(self) -> str:
        """What its rows' `source` is: `name`, else the file's (or folder's) stem."""
        return self.name or self.path.stem


class ScrubSpec(Section):
    emails: bool = True
    """Replace e-mail addresses."""
    secrets: bool = True
    """Replace API keys, tokens, bearer credentials and PEM private keys."""
    ips: bool = True
    """Replace IPv4 / IPv6 addresses."""
    replacement: str = "<{kind}>"
    """Placeholder; `{kind}` becomes EMAIL, SECRET, IP or an extra pattern's kind."""
    extra_patterns: dict[str, str] = {}
    """kind → regular expression, scrubbed as well."""


class FilterSpec(Section):
    min_score: float | None = Field(default=0.5, ge=0, le=1)
    """Keep rows whose normalized feedback score is ≥ this (thumbs up = 1, down = 0);
    None keeps every rated row."""
    keep_unrated: bool = False
    """Also keep rows without any feedback."""


class DedupSpec(Section):
    exact: bool = True
    """Drop later rows with the same (source, normalized prompt)."""
    near: bool = True
    """Drop near-duplicates by MinHash LSH."""
    threshold: float = Field(default=0.8, gt=0, lt=1)
    """Jaccard threshold on token 5-gram shingles."""
    num_perm: int = Field(default=128, ge=16)
    """MinHash permutations."""
    shingle_size: int = Field(default=5, ge=1)
    """Tokens per shingle."""


class AuditSpec(Section):
    enabled: bool = True
    """Plant canaries and report recall per mutation (in provenance.json)."""
    canaries: int = Field(default=20, ge=1)
    """Canaries planted per mutation (fewer when the suites hold fewer items)."""
    seed: int = 0
    """Seed of the draw of items and of the mutations."""
    min_recall: float | None = Field(default=None, ge=0, le=1)
    """Fail the build (exit 2, nothing written) when any mutation's recall is below this."""
    min_recall_by_mutation: dict[Mutation, float] = {}
    """Per-mutation bars, overriding `min_recall` (e.g. `{verbatim: 1.0}`)."""


class DecontamSpec(Section):
    suites: list[ConfigPath] = []
    """Every suite the corpus must not contain (eval suites, gate suites)."""
    n: int = Field(default=13, ge=1)
    """n-gram size (13 as in GPT-3 / lm-eval); shorter items use their whole length."""
    min_tokens: int = Field(default=4, ge=1)
    """Items with fewer tokens are matched by whole-prompt exact match only."""
    number_words: bool = True
    """Match English number words as digits on both sides ("thirty-eight" = "38")."""
    audit: AuditSpec = AuditSpec()
    """The recall audit: disguised suite items planted as canaries, recall per disguise."""


class ChampionSpec(Section):
    base_url: str | None = None
    """OpenAI-compatible endpoint serving the champion (a server root or its `/v1`)."""
    model: str | None = None
    """Model name to request (with `base_url`)."""
    serve: Literal["base"] | None = None
    """`base`: inside a loop (`tuneloop run`), the data phase serves the round's base model —
    the champion it starts from — with the loop's `serve:` settings while it samples, and
    takes it down before anything else runs; set instead of `base_url` and `model`."""
    samples: int = Field(default=8, ge=1)
    """Completions per prompt (k); the pass rate is the mean score over them."""
    temperature: float = Field(default=1.0, ge=0)
    """Sampling temperature."""
    max_tokens: int = Field(default=256, gt=0)
    """Longest completion."""
    api_key_env: str | None = None
    """Environment variable holding the API key, if the endpoint needs one."""
    concurrency: int = Field(default=8, ge=1)
    """Requests in flight."""

    @model_validator(mode="after")
    def _one_endpoint(self) -> ChampionSpec:
        if (self.base_url is None) == (self.serve is None):
            raise ValueError("set either base_url (with model) or serve: base")
        if self.base_url is not None and self.model is None:
            raise ValueError("base_url needs model: the model name to request")
        return self


class BandsSpec(Section):
    sample_log: ConfigPath | None = None
    """A sample-log folder from `tuneloop eval` on the training prompts (e.g. the champion's
    eval of a previous build's grpo.jsonl, which is suite-shaped)."""
    champion: ChampionSpec | None = None
    """Sample the champion at this endpoint on every GRPO prompt and score each completion
    against its reference (instead of `sample_log`)."""
    outputs: list[Literal["sft", "grpo"]] = ["sft", "grpo"]
    """Outputs whose rows are banded and filtered by `keep`."""
    suite: ConfigPath | None = None
    """The suite that log evaluated (default: the path recorded in its summary)."""
    edges: tuple[float, float] = (0.2, 0.8)
    """(lo, hi): hard ≤ lo < medium < hi ≤ easy."""
    keep: list[Band] = ["hard", "medium", "easy", "unknown"]
    """Bands to keep. `edges: [0, 1]` with `keep: [medium]` keeps the prompts the champion
    sometimes solves (0 < pass rate < 1): the band GRPO learns from (all-0 or all-1 groups
    give no advantage signal)."""

    @model_validator(mode="after")
    def _ordered(self) -> BandsSpec:
        lo, hi = self.edges
        if not 0 <= lo < hi <= 1:
            raise ValueError(f"edges must satisfy 0 ≤ lo < hi ≤ 1 (got {list(self.edges)})")
        if (self.sample_log is None) == (self.champion is None):
            raise ValueError("set exactly one of sample_log and champion")
        return self


class GrpoSpec(Section):
    enabled: bool = True
    """Write grpo.jsonl: a prompt set of rows that carry a verifiable answer (a reference
    logged with the trace, a user's correction, or an accepted answer)."""
    scorer: str | None = None
    """Scorer for rows whose trace names none; None leaves it to the trainer's default
    (the loop suite's `default_scorer`)."""
    scorer_args: dict[str, Any] = {}
    """Arguments for `scorer`."""
    accept_min_score: float | None = Field(default=None, ge=0, le=1)
    """Also take a rated answer with feedback score ≥ this as its prompt's reference
    (origin `accepted`); None never does. Only sound where a user's thumbs-up verifies."""


class PreferenceSpec(Section):
    enabled: bool = True
    """Write preference pairs when rated answers to the same prompt disagree."""
    min_margin: float = Field(default=0.5, gt=0, le=1)
    """Smallest feedback-score gap between chosen and rejected."""


class JudgeCutSpec(Section):
    file: ConfigPath
    """The judge file (`tuneloop.scorers.judge`: endpoint, model, key variable, price, rubric;
    mode `grade`) that grades the rows no label speaks for (`corpus/judge_cut.py`)."""
    min_grade: float | None = Field(default=None, ge=0, le=1)
    """Keep a judged row when its grade is at least this; None: the judge file's
    `pass_threshold`."""
    concurrency: int = Field(default=4, ge=1)
    """Judge requests in flight at once."""


class ExecutorSpec(Section):
    kind: Literal["local", "ray"] = "local"
    """Where the per-row steps run: `local` (this process) or `ray` (Ray Data; `pip install
    'tuneloop[ray]'`). The outputs are byte-identical either way (see `corpus/ray.py`)."""
    address: str | None = None
    """Ray cluster to join: `auto`, `ray://HOST:10001`, or HOST:PORT; None starts a local
    cluster in this process (`ray.init`)."""
    num_cpus: int | None = Field(default=None, ge=1)
    """CPUs of a local cluster started here; None: all of this machine's."""
    batch_size: int = Field(default=8192, ge=1)
    """Traces per Ray task: large enough that scheduling and pickling are a small share."""


class CorpusConfig(Section):
    sources: list[SourceSpec] = Field(min_length=1)
    """Trace files to ingest."""
    scrub: ScrubSpec = ScrubSpec()
    """What to scrub from every trace before anything is written."""
    filter: FilterSpec = FilterSpec()
    """The feedback threshold rows must pass."""
    dedup: DedupSpec = DedupSpec()
    """Exact and near-duplicate removal."""
    decontaminate: DecontamSpec = DecontamSpec()
    """Suites the corpus must not contain, and the matching rule's parameters."""
    bands: BandsSpec | None = None
    """Difficulty bands from a sample log; None skips the step."""
    preference: PreferenceSpec = PreferenceSpec()
    """Preference pairs from disagreeing feedback."""
    grpo: GrpoSpec = GrpoSpec()
    """The GRPO prompt set (prompt, reference answer, scorer)."""
    judge: JudgeCutSpec | None = None
    """Keep unlabelled rows (no feedback, no reference, no correction) by an LLM judge's
    grade, after decontamination; None: the feedback filter decides them
    (`filter.keep_unrated`)."""
    seed: int = 0
    """Seed of the final shuffle."""
    executor: ExecutorSpec = ExecutorSpec()
    """Where the per-row steps run (`tuneloop corpus build --executor` overrides `kind`)."""
    out_dir: ConfigPath = Path("corpus")
    """Output folder for `tuneloop corpus build` when --out is not given."""


def load_corpus_config(path: Path) -> CorpusConfig:
    """Read and validate a corpus.yaml; raise InputError listing every error with its YAML
    key and line — when the schema fails, `corpus_problems`' too (a build checks its inputs
    itself once the schema holds, `corpus.pipeline`)."""
    return load_yaml_model(path, CorpusConfig, "corpus config", semantic=corpus_problems)


def resolved_corpus_yaml(path: Path) -> str:
    """The corpus config at `path` as YAML with every path absolute: a copy elsewhere (an
    archive's `inputs/corpus.yaml`) reads the same files."""
    return yaml.safe_dump(load_corpus_config(path).model_dump(mode="json"), sort_keys=False)


def corpus_problems(cfg: CorpusConfig) -> list[tuple[str, str]]:
    """(key, message) for each input a build would miss: a source, suite, sample log or judge
    file that does not exist, an ingester format or a scorer that is not registered."""
    out = []
    for i, s in enumerate(cfg.sources):
        if not (s.path.is_file() or s.path.is_dir()):
            out.append((f"sources.{i}.path", f"{s.path} not found"))
        try:
            if s.format != "auto":
                ingesters.get(s.format)  # imports the built-ins and entry points on first use
        except InputError as err:
            out.append((f"sources.{i}.format", str(err)))
    out += [
        (f"decontaminate.suites.{i}", f"{p} not found")
        for i, p in enumerate(cfg.decontaminate.suites)
        if not p.is_file()
    ]
    if cfg.bands is not None and cfg.bands.sample_log and not cfg.bands.sample_log.exists():
        out.append(("bands.sample_log", f"{cfg.bands.sample_log} not found (run `tuneloop eval`)"))
    name = cfg.grpo.scorer
    if name is not None and name not in scorers:
        out.append(("grpo.scorer", f"unknown scorer {name!r}{did_you_mean(name, scorers.names())}"))
    if cfg.judge is not None and not cfg.judge.file.is_file():
        out.append(("judge.file", f"{cfg.judge.file}: judge file not found"))
    return out
