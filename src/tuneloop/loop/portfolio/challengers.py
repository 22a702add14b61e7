"""A portfolio's challengers: expanded from `portfolio:` (listed, `stage: family`, `stage:
refine` on the champion's recorded recipe), and each one's own round config.

A challenger is a set of overrides of the round's training recipe (`train.*`, `data.output`;
`config.portfolio.override_key_problem`). Its round (`challenger_config`) is the parent round
with those overrides, in its own workdir `challengers/<name>/`, reading the training rows the
parent's data and replay phases wrote (so every challenger trains on the same corpus build,
decontaminated once), evaluated on the selection slice only — never the gate slice, unless
`gate.adjudicate: all` — with no gate, archive or tracking of its own.

The recipe a promoted champion was trained with is recorded in its descriptor (`recipe`,
`loop.portfolio.recipe`), so `stage: refine` varies one factor of exactly that recipe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from tuneloop.config import ArchiveConfig, DataConfig, LoopConfig, TrainConfig
from tuneloop.config.portfolio import PortfolioConfig
from tuneloop.config.replay import ReplayConfig
from tuneloop.config.tracking import TrackingConfig
from tuneloop.errors import InputError
from tuneloop.loop.corpus_data import (
    composite_hint_rows,
    composite_pairs,
    corpus_file,
    corpus_output,
    output_phase,
)
from tuneloop.loop.layout import RunLayout
from tuneloop.loop.portfolio.recipe import recipe_overrides

Origin = Literal["listed", "family", "refine"]


@dataclass(frozen=True)
class Challenger:
    name: str
    overrides: dict[str, Any]
    origin: Origin
    default: bool = False
    where: str = "portfolio.challengers"
    """The config key that made it (for an error that names it)."""


def expand(
    portfolio: PortfolioConfig, champion_recipe: dict[str, Any] | None, refined: int = 0
) -> list[Challenger]:
    """The listed challengers, then the generated ones (`stage`, or this round's entry of
    `stages`; `refined`: portfolio rounds decided since the champion was promoted); InputError
    for a generated name that is taken, or a refinement without a recorded champion recipe."""
    out = [
        Challenger(c.name, dict(c.overrides), "listed", c.default, f"portfolio.challengers.{i}")
        for i, c in enumerate(portfolio.challengers)
    ]
    stage = portfolio.current_stage(champion_recipe is not None, refined)
    if stage is None:
        return out
    factor = stage.factor or "train.method"
    base: dict[str, Any] = {}
    if stage.stage == "refine":
        if champion_recipe is None:
            raise InputError(
                "portfolio.stage: refine varies the champion's recipe, but the ledger's "
                "champion has none recorded (a bootstrap, or promoted before portfolios); "
                "run a family round first (stage: family), or list the challengers"
            )
        base = recipe_overrides(champion_recipe)
    for value in stage.values:
        # a folder name: a path value goes by its last part
        name = f"{factor.rsplit('.', 1)[-1]}={str(value).rstrip('/').rsplit('/', 1)[-1]}"
        if any(c.name == name for c in out):
            raise InputError(f"portfolio.values: challenger {name!r} is also listed")
        out.append(Challenger(name, base | {factor: value}, stage.stage, where="portfolio.values"))
    return out


def effective_config(cfg: LoopConfig, ch: Challenger) -> LoopConfig:
    """The round's config with the challenger's overrides (InputError naming the challenger
    and the key when a value is refused)."""
    train = cfg.train.model_dump(mode="python")
    output = cfg.data.output
    for key, value in ch.overrides.items():
        if key == "data.output":
            output = value
            continue
        *parents, last = key.split(".")[1:]
        target = train
        for part in parents:  # an optional section that is off (None) starts empty
            if target.get(part) is None:
                target[part] = {}
            target = target[part]
        target[last] = value
    try:
        new_train = TrainConfig.model_validate(train)
        data = DataConfig.model_validate(cfg.data.model_dump(mode="python") | {"output": output})
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors()
        )
        raise InputError(f"{ch.where}: challenger {ch.name!r}: {problems}") from None
    return cfg.model_copy(update={"train": new_train, "data": data})


def challenger_config(
    cfg: LoopConfig, ch: Challenger, parent: RunLayout, eval_slice: str
) -> LoopConfig:
    """The challenger's own round: its recipe, its workdir, the parent's training rows, the
    evaluation on `eval_slice` only, and no gate, archive, tracking, data or replay phase."""
    mine = effective_config(cfg, ch)
    train = mine.train
    made = cfg.data.corpus is not None or cfg.replay.teachers is not None
    if train.data is None and made:  # the parent's corpus or replay output this recipe reads
        train = train.model_copy(
            update={"data": corpus_file(mine, parent.phase(output_phase(corpus_output(mine))))}
        )
    composite = train.composite.model_copy(
        update={
            "pairs": composite_pairs(mine, parent),
            "hint_rows": composite_hint_rows(mine, parent),
        }
    )
    return mine.model_copy(
        update={
            "name": f"{cfg.name}-{ch.name}",
            "workdir": parent.challenger(ch.name).workdir,
            "train": train.model_copy(update={"composite": composite}),
            "data": DataConfig(),
            "replay": ReplayConfig(),
            "eval": cfg.eval.model_copy(update={"slice": eval_slice}),
            "gate": cfg.gate.model_copy(update={"enabled": False}),
            "archive": ArchiveConfig(enabled=False),
            "tracking": TrackingConfig(),
            "portfolio": None,
        }
    )


def default_of(challengers: list[Challenger], costs: dict[str, float]) -> str:
    """The `default_stays` default: the one marked `default`, else the cheapest (then name)."""
    marked = [c.name for c in challengers if c.default]
    if marked:
        return marked[0]
    return min(challengers, key=lambda c: (costs[c.name], c.name)).name
