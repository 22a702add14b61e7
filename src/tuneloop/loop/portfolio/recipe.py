"""A round's training recipe, as its champion records it (`stage: refine` reads it back).

The recipe is the whole `train:` section and `data.output` the challenger was trained with:
in a portfolio round the selected challenger's (its overrides applied), else the round's own.
The promoted champion's descriptor carries it (`recipe`), so the ledger knows what each
champion was made with and a refinement round varies one factor of exactly that.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuneloop.config import LoopConfig
from tuneloop.loop.layout import RunLayout
from tuneloop.records import read_record_if_exists
from tuneloop.records.selection import PortfolioRecord


def recipe_of(cfg: LoopConfig) -> dict[str, Any]:
    """The training recipe of a config: `train` (every key) and `data.output`."""
    return {"train": cfg.train.model_dump(mode="json"), "data.output": cfg.data.output}


def recipe_overrides(recipe: dict[str, Any]) -> dict[str, Any]:
    """A recorded recipe as challenger overrides: every `train` key, and `data.output`."""
    out: dict[str, Any] = {f"train.{k}": v for k, v in recipe.get("train", {}).items()}
    if recipe.get("data.output") is not None:
        out["data.output"] = recipe["data.output"]
    return out


def round_recipe(cfg: LoopConfig, workdir: Path) -> dict[str, Any]:
    """The recipe of what this round's gate judges: the selected challenger's, or the
    round's own."""
    record = read_record_if_exists(RunLayout(workdir).portfolio_record, PortfolioRecord)
    if record is not None and record.selected is not None:
        row = next(r for r in record.challengers if r.name == record.selected)
        return row.recipe | {"challenger": row.name}
    return recipe_of(cfg)
