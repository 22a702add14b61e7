"""The corpus-build config (`corpus.yaml`): pydantic models, every error at once with its YAML path.

    sources:
      - {path: traces/production.jsonl, format: openai_chat, name: production}
    filter: {min_score: 0.5}
    decontaminate: {suites: [suite.jsonl]}

Relative paths resolve against the YAML file's folder. Phase code does not take these models:
`corpus.build_corpus` unpacks them into the plain arguments of the pure steps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from tuneloop.config import ConfigPath
from tuneloop.errors import InputError
from tuneloop.registry import did_you_mean

Band = Literal["hard", "medium", "easy", "unknown"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


class SourceSpec(_Section):
    path: ConfigPath
    """A trace file (JSONL)."""
    format: str = "openai_chat"
    """Registered ingester: `openai_chat`, `claude_code`, `generic_jsonl`, or a plugin."""
    name: str | None = None
    """Source name written into each row's `source` (default: the file's stem)."""
    options: dict[str, Any] = {}
    """Ingester options (e.g. generic_jsonl field names)."""


class ScrubSpec(_Section):
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


class FilterSpec(_Section):
    min_score: float | None = Field(default=0.5, ge=0, le=1)
    """Keep rows whose normalized feedback score is ≥ this (thumbs up = 1, down = 0);
    None keeps every rated row."""
    keep_unrated: bool = False
    """Also keep rows without any feedback."""


class DedupSpec(_Section):
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


class DecontamSpec(_Section):
    suites: list[ConfigPath] = []
    """Every suite the corpus must not contain (eval suites, gate suites)."""
    n: int = Field(default=13, ge=1)
    """n-gram size (13 as in GPT-3 / lm-eval); shorter items use their whole length."""
    min_tokens: int = Field(default=4, ge=1)
    """Items with fewer tokens are matched by whole-prompt exact match only."""


class BandsSpec(_Section):
    sample_log: ConfigPath
    """A sample-log folder from `tuneloop eval` on the training prompts."""
    suite: ConfigPath | None = None
    """The suite that log evaluated (default: the path recorded in its summary)."""
    edges: tuple[float, float] = (0.2, 0.8)
    """(lo, hi): hard ≤ lo < medium < hi ≤ easy."""
    keep: list[Band] = ["hard", "medium", "easy", "unknown"]
    """Bands to keep."""

    @model_validator(mode="after")
    def _ordered(self) -> BandsSpec:
        lo, hi = self.edges
        if not 0 <= lo < hi <= 1:
            raise ValueError(f"edges must satisfy 0 ≤ lo < hi ≤ 1 (got {list(self.edges)})")
        return self


class PreferenceSpec(_Section):
    enabled: bool = True
    """Write preference pairs when rated answers to the same prompt disagree."""
    min_margin: float = Field(default=0.5, gt=0, le=1)
    """Smallest feedback-score gap between chosen and rejected."""


class CorpusConfig(_Section):
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
    seed: int = 0
    """Seed of the final shuffle."""
    out_dir: ConfigPath = Field(default=Path("corpus"), validate_default=True)
    """Output folder for `tuneloop corpus build` when --out is not given."""


def load_corpus_config(path: Path) -> CorpusConfig:
    """Read and validate a corpus.yaml; raise InputError listing every error with its path."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        node, data = yaml.compose(text), yaml.safe_load(text)
    except FileNotFoundError:
        raise InputError(f"{path}: corpus config not found") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise InputError(f"{where}: invalid YAML: {getattr(err, 'problem', err)}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping at the top level")
    try:
        return CorpusConfig.model_validate(data, context={"base_dir": path.parent.resolve()})
    except ValidationError as err:
        lines = _line_map(node)
        msgs = [_format(e, lines) for e in err.errors()]
        raise InputError(f"{path}: {len(msgs)} error(s)\n  " + "\n  ".join(msgs)) from None


def _line_map(node: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], int]:
    out: dict[tuple[str, ...], int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = (*prefix, str(key_node.value))
            out[key] = key_node.start_mark.line + 1
            out.update(_line_map(value_node, key))
    elif isinstance(node, yaml.SequenceNode):
        for i, value_node in enumerate(node.value):
            out[(*prefix, str(i))] = value_node.start_mark.line + 1
            out.update(_line_map(value_node, (*prefix, str(i))))
    return out


def _model_at(loc: tuple[str, ...]) -> type[BaseModel] | None:
    model: type[BaseModel] = CorpusConfig
    for part in loc:
        if part.isdigit():
            continue
        field = model.model_fields.get(part)
        ann = field.annotation if field else None
        args = getattr(ann, "__args__", ())
        inner = next(
            (a for a in (ann, *args) if isinstance(a, type) and issubclass(a, BaseModel)), None
        )
        if inner is None:
            return None
        model = inner
    return model


def _format(e: Any, lines: dict[tuple[str, ...], int]) -> str:
    loc = tuple(str(p) for p in e["loc"] if not str(p).startswith("function-"))
    dotted = ".".join(loc) or "(top level)"
    line = lines.get(loc)
    where = f"{dotted} (line {line})" if line else dotted
    if e["type"] == "extra_forbidden":
        parent = _model_at(loc[:-1])
        hint = did_you_mean(loc[-1], parent.model_fields) if parent else ""
        return f"{where}: unknown key{hint}"
    if e["type"] == "missing":
        return f"{where}: required key is missing"
    got = e.get("input")
    return (
        f"{where}: {e['msg']} (got {got!r})"
        if not isinstance(got, (dict, list))
        else f"{where}: {e['msg']}"
    )
