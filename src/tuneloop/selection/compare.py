"""`compare_logs`: one arm chosen among several sample logs of the same items, by a sealed rule.

Each arm is a sample log (`tuneloop.samplelog`). An item's score is the mean over its samples,
and a `missing` or `harness_error` sample counts 0, as in the gate. The logs must share the
suite revision and the item ids (and, for `tuneloop select`, the model); their sampling
settings may differ — that is what an eval-time variant varies (temperature, max_tokens,
system prompt) — so `samplelog.check_comparable`, which refuses exactly that, is not used.
The rule (`config.portfolio.SelectionConfig`) is applied by `tuneloop.stats.selection`; this
module only reads the logs, lays the scores out, and fills the `SelectionDecision` record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tuneloop import stats
from tuneloop.config.portfolio import SelectionConfig
from tuneloop.errors import InputError, did_you_mean
from tuneloop.records import canonical_json, sha256_bytes
from tuneloop.records.selection import ArmFigures, PairFigures, SelectionDecision, TagFigures
from tuneloop.samplelog import (
    SAMPLES_FILE,
    SUMMARY_FILE,
    EvalSummary,
    SampleRow,
    items_sha256,
    load_sample_log,
    log_sha256,
    mean_completion_tokens,
    score_grid,
)


@dataclass(frozen=True)
class _Arm:
    name: str
    folder: Path
    summary: EvalSummary
    rows: list[SampleRow]


def rule_sha256(rule: SelectionConfig) -> str:
    """sha256 of the rule's canonical JSON: what is sealed before any arm has a number."""
    return sha256_bytes(canonical_json(rule.model_dump(mode="json")).encode())


def _folder(path: Path) -> Path:
    path = Path(path)
    return path.parent if path.is_file() else path


def _load(name: str, path: Path, scorer: str | None) -> _Arm:
    folder = _folder(path)
    if not (folder / SUMMARY_FILE).exists():
        raise InputError(
            f"{path}: not a sample log (no {SUMMARY_FILE}); `tuneloop eval` writes one"
        )
    summary, rows = load_sample_log(folder, scorer)
    return _Arm(name, folder, summary, rows)


def _check_arms(arms: Sequence[tuple[str, Path]], default: str | None) -> None:
    if len(arms) < 2:
        given = ", ".join(str(p) for _, p in arms) or "none"
        raise InputError(f"selection needs at least 2 sample logs, got {len(arms)} ({given})")
    seen: dict[str, Path] = {}
    for name, path in arms:
        if not name:
            raise InputError(f"{path}: the arm has an empty name; name it NAME=PATH")
        if name in seen:
            raise InputError(
                f"{path}: arm name {name!r} is also {seen[name]}'s; give each arm its own name "
                "(NAME=PATH)"
            )
        seen[name] = Path(path)
    if default is not None and default not in seen:
        raise InputError(
            f"the default {default!r} is not one of the arms ({', '.join(seen)})"
            f"{did_you_mean(default, seen)}"
        )


def _check_same_items(arms: Sequence[_Arm], same_model: bool) -> None:
    first = arms[0]
    ids = set(first.summary.item_ids)
    for arm in arms[1:]:
        s = arm.summary
        if s.suite_revision != first.summary.suite_revision:
            raise InputError(
                f"{arm.folder}: suite revision {s.suite_revision[:12]} differs from "
                f"{first.folder}'s {first.summary.suite_revision[:12]}; evaluate every arm on "
                "the same suite"
            )
        other = set(s.item_ids)
        if other != ids:
            extra, lacking = sorted(other - ids), sorted(ids - other)
            what = []
            if extra:
                what.append(f"{len(extra)} item(s) not in {first.folder} (e.g. {extra[0]!r})")
            if lacking:
                what.append(f"lacks {len(lacking)} of its item(s) (e.g. {lacking[0]!r})")
            raise InputError(
                f"{arm.folder}: evaluated other items than {first.folder}: {'; '.join(what)}; "
                "arms are compared on the same items"
            )
        if same_model and s.model != first.summary.model:
            raise InputError(
                f"{arm.folder}: model {s.model!r} differs from {first.folder}'s "
                f"{first.summary.model!r}; `tuneloop select` compares settings of one model "
                "(logs of different models or items are refused here)"
            )
    if not ids:
        raise InputError(f"{first.folder}: the logs evaluated no items")


def cost_text(cost: float | None) -> str:
    """A cost as printed: `12.5`, or `unknown`."""
    return "unknown" if cost is None else f"{cost:g}"


def _cheapest(names: Sequence[str], costs: Mapping[str, float | None]) -> str:
    return min(names, key=lambda n: (costs[n] is None, costs[n] or 0.0, n))


def _pair(test: stats.CandidateTest) -> PairFigures:
    p = test.paired
    return PairFigures(
        candidate=test.candidate,
        default=test.default,
        n_items=p.n_items,
        mean_candidate=p.mean_candidate,
        mean_default=p.mean_default,
        advantage=p.advantage,
        wins=p.wins,
        losses=p.losses,
        ties=p.ties,
        sign_p=p.sign_p,
        tags=[
            TagFigures(
                tag=t.tag,
                n_items=t.n_items,
                mean_candidate=t.mean_candidate,
                mean_default=t.mean_default,
                difference=t.difference,
                non_inferior=t.non_inferior,
            )
            for t in test.tags
        ],
        non_inferior=test.non_inferior,
        beats_default=test.beats_default,
    )


def _settings(summary: EvalSummary) -> dict[str, object]:
    out: dict[str, object] = summary.sampling.model_dump(mode="json")
    if summary.agent is not None:
        out["agent"] = summary.agent.model_dump(mode="json")
    return out


def compare_logs(
    arms: Sequence[tuple[str, Path]],
    rule: SelectionConfig,
    *,
    default: str | None,
    costs: Mapping[str, float | None] | None = None,
    same_model: bool,
    scorer: str | None = None,
) -> SelectionDecision:
    """Apply `rule` to the named sample logs (same suite revision and items; with
    `same_model`, the same model) and return the decision, with every figure it rests on.

    `default` is `default_stays`' default arm (None: the cheapest; ties by name) and is
    ignored by `best_mean`. `costs` gives each arm's cost (a missing name: unknown); None
    takes each arm's mean completion tokens per sample from its rows. `scorer` reads the logs
    on that scorer's output (`samplelog.rows_on_scorer`). Refusals are `InputError`s naming
    the log folder.
    """
    _check_arms(arms, default)
    loaded = [_load(name, path, scorer) for name, path in arms]
    _check_same_items(loaded, same_model)
    item_ids = list(loaded[0].summary.item_ids)
    items = set(item_ids)

    scores: dict[str, np.ndarray] = {}
    item_tags: list[set[str]] = [set() for _ in item_ids]
    for arm in loaded:
        grid = score_grid(
            arm.rows, item_ids, arm.summary.sampling.n_samples, str(arm.folder / SAMPLES_FILE)
        )
        scores[arm.name] = grid.values.mean(axis=1)
        for i, t in enumerate(grid.tags):
            item_tags[i].update(t)
    tags = [sorted(t) for t in item_tags]
    cost = {
        arm.name: (
            costs.get(arm.name) if costs is not None else mean_completion_tokens(arm.rows, items)
        )
        for arm in loaded
    }

    if rule.rule == "default_stays":
        picked = default is None
        default = default if default is not None else _cheapest(list(scores), cost)
        chosen = stats.default_stays(
            scores,
            tags,
            default,
            sign_p=rule.sign_p,
            epsilon=rule.non_inferiority_epsilon,
            costs=cost,
        )
        tests = chosen.tests
        reason = chosen.reason
        if picked:
            reason += (
                f" (no default given: {default!r} is the cheapest arm, cost "
                f"{cost_text(cost[default])})"
            )
    else:
        chosen = stats.best_mean(scores, cost)
        reference = chosen.chosen
        tests = tuple(
            stats.against_default(
                name,
                s,
                reference,
                scores[reference],
                tags,
                sign_p=rule.sign_p,
                epsilon=rule.non_inferiority_epsilon,
            )
            for name, s in scores.items()
            if name != reference
        )
        reason = chosen.reason
    return SelectionDecision(
        rule=rule.model_dump(mode="json"),
        rule_sha256=rule_sha256(rule),
        suite_revision=loaded[0].summary.suite_revision,
        item_ids_sha256=items_sha256(item_ids),
        n_items=len(item_ids),
        default=chosen.default,
        arms=[
            ArmFigures(
                name=arm.name,
                log=str(arm.folder),
                log_sha256=log_sha256(arm.folder),
                model=arm.summary.model,
                settings=_settings(arm.summary),
                n_items=len(item_ids),
                mean=float(scores[arm.name].mean()),
                tags=stats.tag_means(scores[arm.name], tags),
                cost=cost[arm.name],
            )
            for arm in loaded
        ],
        pairs=[_pair(t) for t in tests],
        chosen=chosen.chosen,
        reason=reason,
    )
