"""The gate's verdict record and the evidence it binds (read typed wherever it is used).

A verdict is reused only for exactly its `Evidence`: both logs' bytes, both models, the bar,
the slice's items and the suite revision. `samplelog.log_sha256` is how a sample log enters
it, `samplelog.items_sha256` how the slice's items do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from tuneloop.gate.bar import Bar
from tuneloop.records import Record, canonical_json, sha256_bytes
from tuneloop.samplelog import items_sha256, log_sha256
from tuneloop.stats.rater import corrected_difference

Outcome = Literal["promote", "reject", "awaiting_approval"]


class ArmSummary(BaseModel):
    """One arm as the verdict reports it."""

    log: str
    """The sample-log folder."""
    model: str
    """Model identity from the log's summary."""
    mean: float | None
    """Mean item score on the bar's metric over the slice."""
    unscored: int
    """(item, sample) keys without a scored completion."""
    missing_fraction: float
    """unscored / (items × samples)."""


class ConditionResult(BaseModel):
    """One condition of the rule (see `tuneloop.gate.rule`)."""

    name: str
    """Condition name."""
    passed: bool
    """Whether it held."""
    detail: str
    """The numbers and the threshold, in words."""
    values: dict[str, Any] = {}
    """The numbers, for machines."""


class CostCondition(BaseModel):
    """One limit of the bar's cost condition (`gate.cost`) and how the challenger stood."""

    name: Literal["max_usd_per_item", "max_ratio_to_champion"]
    """The limit's `gate.cost` key."""
    limit: float
    """Its value in the bar."""
    value: float | None
    """The challenger's figure: dollars per item, or its ratio to the champion's (None: no
    item had a cost in both arms, or the champion's cost nothing)."""
    passed: bool
    """Whether the limit held."""


class CostResult(BaseModel):
    """The bar's cost condition on the slice (`tuneloop.gate.cost`)."""

    n_items: int
    """Slice items with a cost in both arms: what both figures are means over."""
    champion_usd_per_item: float | None
    """The champion's mean cost per item in dollars (None: no such item)."""
    challenger_usd_per_item: float | None
    """The challenger's mean cost per item in dollars (None: no such item)."""
    ratio: float | None
    """challenger / champion (None: no such item, or the champion's cost nothing)."""
    conditions: list[CostCondition]
    """Each limit the bar sets, with the challenger's figure."""
    passed: bool
    """Whether every limit held."""

    def sentence(self) -> str:
        """Both figures and each limit, held or failed, in one line (the verdict's printout
        and its experiment-log entry)."""
        limits = "; ".join(
            f"{c.name} {c.limit:g} {'held' if c.passed else 'FAILED'}" for c in self.conditions
        )
        ratio = "n/a" if self.ratio is None else f"{self.ratio:.3g}"
        return (
            f"Cost per item on {self.n_items} items: challenger "
            f"{_usd(self.challenger_usd_per_item)}, champion {_usd(self.champion_usd_per_item)} "
            f"(ratio {ratio}); {limits}"
        )


def _usd(x: float | None) -> str:
    # "USD", not "$": two dollar signs on a Markdown line render as math on GitHub
    return "n/a" if x is None else f"{x:.6g} USD"


class JudgeNote(BaseModel):
    """The LLM judge that scored the gate slice, with its calibration against people: what a
    reviewer reads beside the Δ (it does not change the decision, which is on the observed Δ
    against the sealed bar)."""

    model: str
    """The judge's model id."""
    rubric_sha256: str
    """sha256 of the rubric that scored both arms."""
    calibration_sha256: str
    """sha256 of the calibration record the figures come from."""
    n: int
    """Human-labelled audit items the calibration measured."""
    agreement: float
    """Fraction of audit items on which judge and people agree."""
    kappa: float | None
    """Cohen's κ (None where undefined)."""
    fpr: float | None
    """False-positive rate: the judge passes what people failed."""
    fnr: float | None
    """False-negative rate: the judge fails what people passed."""
    youden_j: float | None
    """J = 1 − FPR − FNR: the factor by which the judge's error shrinks a true difference."""
    delta_observed: float | None = None
    """Δ as the judge scored it (what the bar was applied to)."""
    cost_usd: tuple[float | None, float | None] = (None, None)
    """What the judge's grades cost in the (champion, challenger) logs (each whole eval)."""
    delta_corrected: float | None = None
    """Δ / J: the difference in true pass rates the observed Δ corresponds to (Bross 1954;
    per arm, Rogan & Gladen 1978); None when J ≤ 0 or unknown."""

    def beside(self, delta: float | None, cost_usd: tuple[float | None, float | None]) -> JudgeNote:
        """This note with the slice's observed Δ, the Δ it corresponds to (Bross 1954) and
        what judging each arm cost."""
        corrected = None
        if delta is not None and self.youden_j is not None and 0 < self.youden_j <= 1:
            corrected = corrected_difference(delta, self.youden_j)
        update = {"delta_observed": delta, "delta_corrected": corrected, "cost_usd": cost_usd}
        return self.model_copy(update=update)

    def sentence(self) -> str:
        """The calibration and both Δs in one line."""
        kappa = "n/a" if self.kappa is None else f"{self.kappa:.3f}"
        rates = "; ".join(
            f"{name} {'n/a' if v is None else f'{v:.3f}'}"
            for name, v in (("FPR", self.fpr), ("FNR", self.fnr), ("J", self.youden_j))
        )
        text = (
            f"Judge {self.model} (rubric {self.rubric_sha256[:12]}): agreement "
            f"{self.agreement:.3f}, κ {kappa} on {self.n} human-labelled items; {rates}"
        )
        if self.delta_observed is not None and self.delta_corrected is not None:
            text += (
                f". Observed Δ {self.delta_observed:+.4f} ≈ true Δ {self.delta_corrected:+.4f} "
                "after the judge's error (Δ/J; Bross 1954, Rogan–Gladen 1978)"
            )
        if self.cost_usd != (None, None):
            text += f". Judge cost: champion {_usd(self.cost_usd[0])}, challenger " + _usd(
                self.cost_usd[1]
            )
        return text


class SliceReuse(BaseModel):
    """Present when the slice had been consumed before and reuse was explicitly allowed."""

    previous_runs: list[str]
    """Runs that looked at this slice earlier."""
    previous_at: list[str]
    """When they looked."""


class Evidence(BaseModel):
    """Exactly what a verdict judged; the verdict is reused only when all of it matches."""

    champion_log_sha256: str
    """sha256 of the champion log's samples.jsonl and summary.json."""
    challenger_log_sha256: str
    """sha256 of the challenger log's samples.jsonl and summary.json."""
    champion_model: str
    """The champion model's sha256 (or, outside the loop, its logged identity)."""
    challenger_model: str
    """The challenger model's sha256 (or, outside the loop, its logged identity)."""
    bar_sha256: str
    """Hash of the bar's canonical JSON."""
    items_sha256: str
    """Hash of the slice's sorted item ids."""
    suite_revision: str
    """The suite revision both logs were evaluated on."""

    def sha256(self) -> str:
        return sha256_bytes(canonical_json(self.model_dump(mode="json")).encode())


class GateVerdict(Record):
    """The outcome of one gate round."""

    KIND = "verdict"
    VERSION = 3

    run_id: str
    """The run being adjudicated."""
    decided_at: str
    """ISO-8601 UTC time of the decision."""
    decision: Outcome
    """promote, reject, or awaiting_approval (the rule said promote; approval is required)."""
    reasons: list[str]
    """Every failed condition, in words (empty unless rejected)."""
    conditions: list[ConditionResult]
    """Every condition with the numbers behind it."""
    stats: dict[str, Any]
    """n_items, arm means, delta, p_value, one-sided lower bound, wins/losses/ties."""
    bar: dict[str, Any]
    """The bar the round was judged against."""
    bar_sha256: str
    """Hash of the bar's canonical JSON."""
    slice: str
    """The gate slice's name."""
    suite_revision: str
    """The suite revision both logs were evaluated on."""
    items_sha256: str
    """Hash of the slice's sorted item ids (the slice's identity in the ledger)."""
    sampling: dict[str, Any]
    """The shared sampling budget of both logs."""
    champion: ArmSummary
    challenger: ArmSummary
    champion_version: int | None
    """Ledger champion version in service when the round was decided (None: none yet)."""
    new_champion_version: int | None = None
    """The version created by this promotion, if any."""
    challenger_descriptor: dict[str, Any] | None = None
    """What becomes the champion on promotion."""
    slice_reuse: SliceReuse | None = None
    """Set when the slice had been consumed before and reuse was allowed."""
    seed: int = 0
    """Seed of the permutation test and bootstrap."""
    bar_registered_at: str | None = None
    """When the bar was fixed (bar file mtime, or config time), as the caller reported it."""
    warnings: list[str] = []
    """Things a reviewer should know that do not change the decision (e.g. a bar fixed after
    the challenger's evaluation started)."""
    evidence: Evidence | None = None
    """What was judged (None only in version-1 verdicts, which are never reused)."""
    evidence_sha256: str | None = None
    """Hash of `evidence`: the key under which the ledger finds this verdict again."""
    item_ids: list[str] = []
    """The slice's item ids, as consumed in the ledger."""
    sealed_at: str | None = None
    """When the bar was sealed in the ledger (before the post evaluation), if it was."""
    adjudication: dict[str, Any] | None = None
    """A portfolio round's adjudication (`gate.adjudicate`): `rule` (`selected`: the one
    challenger the sealed selection chose on its slice; `all`: every challenger on this slice,
    α split by Holm), the number of challengers, the nominal α and the α this verdict was
    decided at (`alpha_used`), and the challengers' p-values under `all`. None: a
    one-challenger round."""
    promoted: bool = False
    """Whether the champion was recorded with the verdict (standalone gate) — in the loop the
    promotion is a later step, recorded in `promote/promotion.json` and the ledger."""
    cost: CostResult | None = None
    """The bar's cost condition (`gate.cost`): both arms' dollars per item and each limit.
    None: the bar sets none (and the verdict is written as version 2)."""
    judge: JudgeNote | None = None
    """The LLM judge that scored the slice and its calibration (None: no judge; left out of
    the file then, so such a verdict reads and hashes as before)."""

    def to_json(self) -> dict[str, Any]:
        # `adjudication` and `cost` came later: each left out while unset, so a verdict
        # without them reads and hashes as it always did; one with a cost is version 3, which
        # a reader that predates cost conditions refuses
        data = super().to_json()
        if data.get("adjudication") is None:
            data.pop("adjudication", None)
        if self.cost is None:
            del data["cost"]
        if self.judge is None:
            del data["judge"]
        data["schema"] = f"tuneloop.{self.KIND}/{2 if self.cost is None else 3}"
        return data


def make_evidence(
    logs: tuple[Path, Path],
    models: tuple[str, str],
    bar: Bar,
    item_ids: list[str],
    suite_revision: str,
) -> Evidence:
    """The evidence of a (champion log, challenger log) pair judged against `bar` on items."""
    return Evidence(
        champion_log_sha256=log_sha256(logs[0]),
        challenger_log_sha256=log_sha256(logs[1]),
        champion_model=models[0],
        challenger_model=models[1],
        bar_sha256=bar.sha256(),
        items_sha256=items_sha256(item_ids),
        suite_revision=suite_revision,
    )
