"""The `portfolio:` section of loop.yaml: a set of challengers per round, its budget, the spend
approval, and the sealed rule that picks one on a validation slice.

    portfolio:
      challengers:                       # each a set of overrides of the round's train recipe
        - {name: sft-lr1e-3, overrides: {train.learning_rate: 0.001}}
        - {name: sft-lr3e-4, overrides: {train.learning_rate: 0.0003}}
      # or generated: stage: family (one per value of `factor`, default train.method) or
      # stage: refine (the champion's recipe, `factor` varied over `values`)
      budget: {max_seconds: 600}         # the round is refused before compute when over
      approval: {spend: true}            # or {spend: {standing: {max_seconds: 900}}}
      selection: {rule: default_stays, slice: validation, default: sft-lr1e-3, sign_p: 0.10}

Models only: the challengers are expanded, costed and run by `tuneloop.loop.portfolio`, and
the rules are applied by `tuneloop.selection`. A challenger varies the training recipe only
(`train.*`, `data.output`); the suite, serving, evaluation and gate belong to the round and are
the same for every arm, so a difference between challengers is the recipe's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from tuneloop.config.base import SafeName, Section
from tuneloop.config.train import TrainConfig
from tuneloop.errors import did_you_mean


def _override_field(key: str) -> tuple[Any, str | None]:
    """(the `train:` field a challenger's override key names, why the key cannot be an
    override); both None for `data.output`."""
    if key == "data.output":
        return None, None
    parts = key.split(".")
    if parts[0] != "train" or len(parts) < 2:
        return None, (
            f"{key!r} is not part of the training recipe: a challenger overrides only keys "
            "under train. or data.output (the suite, serving, evaluation and gate are the "
            "round's, the same for every arm)"
        )
    model: Any = TrainConfig
    field = None
    for i, part in enumerate(parts[1:], start=1):
        if model is None:
            return None, f"{'.'.join(parts[:i])} is a value, not a section"
        if part not in model.model_fields:
            hint = did_you_mean(part, model.model_fields)
            return None, f"unknown key {'.'.join(parts[: i + 1])!r}{hint}"
        field = model.model_fields[part]
        model = next(
            (
                a
                for a in (field.annotation, *getattr(field.annotation, "__args__", ()))
                if _is_section(a)
            ),
            None,
        )
    return field, None


def override_key_problem(key: str) -> str | None:
    """Why `key` cannot be a challenger's override (None when it can): a dotted path to a
    field of `train:` (sections included, e.g. `train.lora.r`), or `data.output`."""
    return _override_field(key)[1]


def _is_path(field: Any) -> bool:
    """A `ConfigPath` (or an optional one) field."""
    annotation = field.annotation if field is not None else None
    for a in (annotation, *getattr(annotation, "__args__", ())):
        if a is Path or getattr(a, "__origin__", None) is Path:  # Annotated[Path, …]
            return True
    return False


def _valid_factor(factor: str | None) -> str | None:
    """A stage's `factor` is a key a challenger may override."""
    problem = override_key_problem(factor) if factor is not None else None
    if problem is not None:
        raise ValueError(problem)
    return factor


def _is_section(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, Section)


class ChallengerConfig(Section):
    name: SafeName
    """The challenger's name (a folder under the round's `challengers/`), unique in the
    portfolio."""
    overrides: dict[str, Any] = {}
    """Dotted keys of loop.yaml under `train.` (method, its settings, data, adapter or full,
    seed, …) or `data.output`, and their values, e.g. `{train.learning_rate: 0.0003}`; the
    rest of the round's config is the same for every challenger."""
    default: bool = False
    """This is the default challenger of `selection.rule: default_stays` (at most one; none:
    the cheapest by the cost estimate)."""

    @model_validator(mode="before")
    @classmethod
    def _paths(cls, data: Any, info: ValidationInfo) -> Any:
        """A path among the overrides resolves against the YAML file's folder, as every path
        in loop.yaml does."""
        base = (info.context or {}).get("base_dir")
        overrides = data.get("overrides") if isinstance(data, dict) else None
        if base is None or not isinstance(overrides, dict):
            return data
        resolved = {}
        for key, value in overrides.items():
            if (
                isinstance(key, str)
                and isinstance(value, str)
                and _is_path(_override_field(key)[0])
            ):
                value = str((Path(base) / Path(value).expanduser()).resolve())
            resolved[key] = value
        return data | {"overrides": resolved}

    @model_validator(mode="after")
    def _keys(self) -> ChallengerConfig:
        problems = [p for p in map(override_key_problem, self.overrides) if p is not None]
        if problems:
            raise ValueError(f"challenger {self.name!r}: " + "; ".join(problems))
        return self


class BudgetConfig(Section):
    max_seconds: float = Field(gt=0)
    """Most training seconds the round's challengers may take together, by the estimate made
    before any compute (each challenger's `train.max_seconds`, or its steps × the step time
    measured on this machine, `seconds_per_step`)."""
    max_usd: float | None = Field(default=None, gt=0)
    """Most teacher dollars the round may spend (the replay's estimate from the teachers'
    prices); None: no dollar limit."""
    max_eval_samples: int | None = Field(default=None, gt=0)
    """Most completions the round may evaluate (validation for every challenger, the two arms
    of the gate); None: no limit."""
    seconds_per_step: float | None = Field(default=None, gt=0)
    """Seconds per training step for a challenger without `train.max_seconds` when no earlier
    run on this machine measured one; None: such a challenger needs `train.max_seconds`."""


class StandingApproval(Section):
    max_seconds: float = Field(gt=0)
    """A round whose estimated training seconds are at most this is approved without asking
    (and the approval is logged as standing)."""
    max_usd: float | None = Field(default=None, ge=0)
    """…and whose teacher dollars are at most this; None: dollars are not limited by it."""


class StandingSpend(Section):
    standing: StandingApproval
    """Rounds under these limits are approved in advance; a round over them waits for
    `tuneloop approve RUN --config loop.yaml`."""


class SpendApprovalConfig(Section):
    spend: bool | StandingSpend = False
    """`true`: the round stops after the estimate, listing the challengers and their costs,
    until `tuneloop approve RUN --config loop.yaml`; `{standing: {max_seconds, max_usd}}`:
    approved in advance under those limits (logged); `false`: no sign-off."""


class SelectionConfig(Section):
    rule: Literal["default_stays", "best_mean"] = "default_stays"
    """`default_stays`: the default challenger is chosen unless another is non-inferior on
    every tag (by `non_inferiority_epsilon`), has a positive paired advantage over it, and its
    exact two-sided sign test p is at most `sign_p`; `best_mean`: the highest validation mean,
    ties to the cheaper. Sealed in the ledger before any challenger is evaluated."""
    slice: str = "validation"
    """The suite slice the challengers are compared on: never the gate slice, never
    overlapping it (`suite.slices`, or `validation` of `suite.rolling`)."""
    sign_p: float = Field(default=0.10, gt=0, lt=1)
    """`default_stays`: the exact two-sided sign test's p must be at most this."""
    non_inferiority_epsilon: float = Field(default=0.05, ge=0, lt=1)
    """`default_stays`: a challenger is non-inferior on a tag when its mean there is at most
    this much below the default's."""


class StageConfig(Section):
    """One stage of a flywheel's staged search (`portfolio.stages`)."""

    stage: Literal["family", "refine"]
    """`family`: one challenger per value of `factor`; `refine`: the champion's recipe with
    `factor` set to each value."""
    factor: str | None = None
    """The dotted key this stage varies; `family` defaults to `train.method`."""
    values: list[Any] = Field(min_length=1)
    """One challenger per value."""

    _factor = field_validator("factor")(classmethod(lambda cls, f: _valid_factor(f)))

    @model_validator(mode="after")
    def _refine_factor(self) -> StageConfig:
        if self.stage == "refine" and self.factor is None:
            raise ValueError("stage: refine needs factor: the one key of the recipe it varies")
        return self


class PortfolioConfig(Section):
    challengers: list[ChallengerConfig] = []
    """The challengers, each named with its overrides (with `stage`, added to the generated
    ones)."""
    stage: Literal["family", "refine"] | None = None
    """Generate challengers: `family`, one per value of `factor` (default `train.method`);
    `refine`, the current champion's recipe (as the ledger recorded it) with `factor` set to
    each value — one factor per round, so a win is attributable."""
    factor: str | None = None
    """The dotted key `stage` varies (under `train.` or `data.output`); `family` defaults to
    `train.method`."""
    values: list[Any] = []
    """The values `stage` gives `factor`, one challenger each (named `<last key>=<value>`)."""
    stages: list[StageConfig] = []
    """A staged search over rounds (the flywheel's): while the champion has no recorded
    recipe, the first `family` stage; then the `refine` stages in turn on the champion's
    recipe, one factor per round (the n-th portfolio round decided since the champion was
    promoted takes refine stage n mod their number). Instead of `stage`/`factor`/`values`."""
    budget: BudgetConfig
    """What the round may spend, estimated before any compute; over it, the round is
    refused."""
    approval: SpendApprovalConfig = SpendApprovalConfig()
    """A person's sign-off on the estimate before anything is spent."""
    selection: SelectionConfig = SelectionConfig()
    """The sealed rule that picks the one challenger the gate adjudicates."""

    @field_validator("challengers")
    @classmethod
    def _names(cls, challengers: list[ChallengerConfig]) -> list[ChallengerConfig]:
        seen: set[str] = set()
        for c in challengers:
            if c.name in seen:
                raise ValueError(f"two challengers are named {c.name!r}; names must be unique")
            seen.add(c.name)
        defaults = [c.name for c in challengers if c.default]
        if len(defaults) > 1:
            raise ValueError(f"more than one challenger is the default: {defaults}")
        return challengers

    _factor = field_validator("factor")(classmethod(lambda cls, f: _valid_factor(f)))

    @model_validator(mode="after")
    def _some_challenger(self) -> PortfolioConfig:
        if self.stage is None and (self.factor is not None or self.values):
            raise ValueError("factor and values generate challengers only with a stage")
        if self.stage is not None and not self.values:
            raise ValueError(f"stage: {self.stage} needs values (one challenger each)")
        if self.stage == "refine" and self.factor is None:
            raise ValueError("stage: refine needs factor: the one key of the recipe it varies")
        if self.stages and self.stage is not None:
            raise ValueError("give either stage (this round's) or stages (over rounds), not both")
        if self.stages and not any(s.stage == "family" for s in self.stages):
            raise ValueError("stages needs a family stage for a champion with no recipe yet")
        if len(self.challengers) + len(self.values) + len(self.stages) == 0:
            raise ValueError("the portfolio is empty: list challengers, or a stage with values")
        return self

    def current_stage(self, has_recipe: bool, refined: int) -> StageConfig | None:
        """The stage this round runs: `stage` itself, or from `stages` (the champion has a
        recorded recipe or not; portfolio rounds decided since it was promoted)."""
        if self.stage is not None:
            return StageConfig(stage=self.stage, factor=self.factor, values=self.values)
        if not self.stages:
            return None
        refines = [s for s in self.stages if s.stage == "refine"]
        if not has_recipe or not refines:
            return next(s for s in self.stages if s.stage == "family")
        return refines[refined % len(refines)]
