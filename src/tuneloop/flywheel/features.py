"""Drift between what the champion was trained on and what it is asked now, feature by feature.

    drift = measure_drift(Path("runs/loop/data/sft.jsonl"), recent_exchanges(traffic, since),
                          features=["locale"], tags=tag_index(suite.items))

Every request (and every training row of the reference) is reduced to categorical features:

- `tag`: the request's `metadata.tag` (or the first of `metadata.tags`); else the first tag
  of the suite item whose prompt text it matches (case and spacing ignored); else `none`.
- `prompt_words`: the number of whitespace-separated words of its user turns, binned at
  fixed edges 0-4, 5-8, 9-16, 17-32, 33+ (words, not tokens: no tokenizer needed, and the
  bins only have to be the same on both sides).
- every name in `flywheel.triggers.features`: that `metadata` key's value as a category
  (strings as they are, other JSON values as their JSON text), `none` when absent.

Each feature's histogram over the reference (the last round's training rows, `sft.jsonl`)
is compared with recent traffic by PSI (`tuneloop.stats.drift.psi`) with an explicit floor
`PSI_EPS` = 1e-4 for empty bins — larger than the stats default of 1e-6, so that one
category seen on one side only does not dwarf every other term — and banded the usual way
(Siddiqi 2006): < 0.1 stable, 0.1–0.25 moderate, > 0.25 significant. A metadata feature no
reference row carries is marked not measured rather than reported as total drift: training
rows keep `metadata` only when the corpus step wrote it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from tuneloop import stats
from tuneloop.errors import InputError
from tuneloop.flywheel.exchanges import Exchange
from tuneloop.records import iter_jsonl
from tuneloop.suite import SuiteItem, item_prompt_text, normalize_prompt

Band = Literal["stable", "moderate", "significant"]

PSI_EPS = 1e-4
"""Floor of an empty bin's proportion in PSI (see the module docstring)."""
LENGTH_BINS: tuple[tuple[int, str], ...] = ((4, "0-4"), (8, "5-8"), (16, "9-16"), (32, "17-32"))
"""(upper edge, label) of the prompt-length bins; longer prompts fall in `OVER_LABEL`."""
OVER_LABEL = "33+"
BUILTIN_FEATURES = ("tag", "prompt_words")
NONE = "none"


class FeatureDrift(BaseModel):
    """One feature's histograms on both sides and the PSI between them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    feature: str
    """`tag`, `prompt_words`, or a metadata key."""
    psi: float | None
    """PSI of recent traffic against the reference; None when not measured."""
    band: Band | None
    """stable (< 0.1), moderate (0.1–0.25), significant (> 0.25); None when not measured."""
    reference: dict[str, int]
    """Counts per category in the reference (the last round's training rows)."""
    recent: dict[str, int]
    """Counts per category in recent traffic."""
    note: str | None = None
    """Why the feature was not measured."""


def length_bin(words: int) -> str:
    """The prompt-length bin of a prompt of `words` words."""
    return next((label for edge, label in LENGTH_BINS if words <= edge), OVER_LABEL)


def psi_band(value: float) -> Band:
    if value < 0.1:
        return "stable"
    return "moderate" if value <= 0.25 else "significant"


def tag_index(items: Iterable[SuiteItem]) -> dict[str, str]:
    """Normalized prompt text → first tag, for the suite items that have a tag."""
    return {normalize_prompt(item_prompt_text(i)): i.tags[0] for i in items if i.tags}


def _category(value: Any) -> str:
    if value is None:
        return NONE
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def request_features(
    messages: list[Any], metadata: Mapping[str, Any], names: Sequence[str], tags: Mapping[str, str]
) -> dict[str, str]:
    """The categorical features of one chat (see the module docstring)."""
    text = item_prompt_text({"messages": messages})
    tag = metadata.get("tag")
    listed = metadata.get("tags")
    if not isinstance(tag, str) and isinstance(listed, list) and listed:
        tag = listed[0]
    if not isinstance(tag, str):
        tag = tags.get(normalize_prompt(text), NONE)
    out = {"tag": tag, "prompt_words": length_bin(len(text.split()))}
    out.update({name: _category(metadata.get(name)) for name in names})
    return out


def reference_features(
    sft_path: Path, names: Sequence[str], tags: Mapping[str, str]
) -> list[dict[str, str]]:
    """Features of the request of every training row of `sft_path`, whatever the method's row
    shape: `messages` (SFT, GRPO prompt rows) or `prompt` (TRL's preference and
    prompt-completion rows: a message list or a string), with optional `metadata`."""
    out = []
    for lineno, row in iter_jsonl(sft_path):
        messages, meta = _request_messages(row), row.get("metadata")
        if messages is None:
            raise InputError(
                f"{sft_path}:{lineno}: a training row needs a 'messages' list or a 'prompt'"
            )
        out.append(request_features(messages, meta if isinstance(meta, dict) else {}, names, tags))
    return out


def _request_messages(row: Mapping[str, Any]) -> list[Any] | None:
    for key in ("messages", "prompt"):
        value = row.get(key)
        if isinstance(value, list):
            return value
        if key == "prompt" and isinstance(value, str):
            return [{"role": "user", "content": value}]
    return None


def feature_drift(
    reference: Sequence[Mapping[str, str]],
    recent: Sequence[Mapping[str, str]],
    names: Sequence[str],
) -> list[FeatureDrift]:
    """PSI per feature (built-ins first, then `names`) between two lists of feature dicts."""
    result = []
    for feature in (*BUILTIN_FEATURES, *names):
        ref = Counter(r[feature] for r in reference)
        rec = Counter(r[feature] for r in recent)
        note = _not_measured(feature, ref, rec, names)
        value = None if note else _psi(feature, ref, rec)
        result.append(
            FeatureDrift(
                feature=feature,
                psi=value,
                band=None if value is None else psi_band(value),
                reference=dict(sorted(ref.items())),
                recent=dict(sorted(rec.items())),
                note=note,
            )
        )
    return result


def _not_measured(
    feature: str, ref: Counter[str], rec: Counter[str], names: Sequence[str]
) -> str | None:
    if not ref:
        return "no reference rows (the last round's training data)"
    if not rec:
        return "no recent traffic"
    if feature in (*names, "tag") and set(ref) == {NONE}:
        # an untagged reference against tagged traffic is a difference of bookkeeping, not drift
        return f"no reference row carries metadata '{feature}'"
    return None


def _psi(feature: str, ref: Counter[str], rec: Counter[str]) -> float:
    if feature == "prompt_words":
        bins = [label for _, label in LENGTH_BINS] + [OVER_LABEL]
    else:
        bins = sorted(set(ref) | set(rec))
    return stats.psi([ref[b] for b in bins], [rec[b] for b in bins], eps=PSI_EPS)


def measure_drift(
    reference_rows: Path | None,
    recent: Sequence[Exchange],
    *,
    features: Sequence[str],
    tags: Mapping[str, str],
) -> list[FeatureDrift]:
    """Drift of recent exchanges against the training rows in `reference_rows` (None: none)."""
    ref = reference_features(reference_rows, features, tags) if reference_rows else []
    rec = [request_features(e.messages, e.metadata, features, tags) for e in recent]
    return feature_drift(ref, rec, features)
