"""The flywheel's error budget: one α for every round that gates in a ledger (`gate.sequence`).

    bar = round_bar(cfg.gate, cfg.gate.sequence, ledger_path, run_id)   # the round's bar
    budget = alpha_budget(cfg.gate, ledger_path)                          # status, dashboard

Each round gates with a one-sided test at its bar's α. Over 20 rounds with no real
improvement, at α = 0.05 each, the chance of at least one false promotion is 1 − 0.95²⁰ ≈ 64%.
A sequence rule makes `gate.alpha` the whole sequence's α and gives round k of the sequence
its own α_k (the formulas are `tuneloop.stats.sequence`'s):

- `alpha_spending`: α_k from a series declared in advance whose sum is at most α (`basel`
  α·6/(π²k²), `geometric`, `uniform` over a horizon). P(any false promotion over every round)
  ≤ Σ α_k ≤ α by the union bound — Bonferroni over the declared series — whatever the rounds
  decided and however they depend on each other.
- `lord`: LORD++ (Ramdas, Yang, Wainwright & Jordan 2017, with the γ of Javanmard & Montanari
  2018): each promotion earns α back for later rounds. It bounds the false discovery rate at
  α; when no round is a real improvement, P(any false promotion) ≤ w0.

Which rounds form the sequence: those whose bar was sealed in this ledger under a rule — one
row each in the ledger's `alpha_spent` table, written in the transaction that seals the bar
(`spend_alpha`, called by `gate.seal.seal_bar`; for `tuneloop gate`, which seals nothing, by
the verdict's transaction). A new round is round k = 1 + their number; a round sealed again (a
resumed round) keeps its k and α_k. A round sealed and never decided has spent its α_k all the
same — deliberately conservative: its test may have been run and looked at. LORD's promotions
("rejections") are the rounds whose verdict promoted or awaits approval (the test rejected
either way), matched to their seal by bar and items hash; a promotion decided after a later
round was sealed only raises the α of the rounds after it.

What is refused (`InputError`, exit 2, nothing written), inside the seal's transaction and, for
`tuneloop run`, already before training (`round_bar` checks the same): a bar asking more than
the α_k of its k; a `uniform` series past its horizon ("the sequence's α is spent"); a rule or
α other than the one the sequence's first round declared; a bar made for another k or other
promotions than the ledger's now (a round sealed meanwhile); and a bar without a rule in a
ledger whose sequence has begun — it would be tested outside the budget, so rule and no rule
never mix silently. Rounds sealed before the rule was turned on are outside the sequence:
`AlphaBudget.before` lists them with their α, and they are not counted in it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, computed_field

from tuneloop.config import BarConfig, GateConfig
from tuneloop.config.gate import SequenceConfig, sequence_problem
from tuneloop.errors import InputError
from tuneloop.gate.bar import Bar, SequenceTerm
from tuneloop.gate.ledger import AlphaSpend, Ledger, SealedBar, open_ledger
from tuneloop.gate.verdict_record import GateVerdict
from tuneloop.records.base import validate_as
from tuneloop.stats.sequence import lord_alpha, spending_alpha

PROMOTED = frozenset({"promote", "awaiting_approval"})
"""Verdicts whose test rejected H0: LORD's rejections."""

_SLACK = 1e-12
"""Relative tolerance when comparing a bar's α with the α_k allowed (float rounding only)."""


class SpentAlpha(BaseModel):
    """The α one round spent."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seal_id: str
    """The round's seal id (its run id)."""
    k: int
    """Its place: in the sequence (1-based), or among the rounds outside it."""
    alpha: float
    """The α its bar was sealed (or judged) at."""
    promoted: bool | None
    """Whether its verdict promoted (or awaits approval); None: not decided yet."""
    spent_at: str
    """When the α was spent: the seal's time, or the verdict's for a round never sealed."""


class AlphaBudget(BaseModel):
    """The flywheel's error budget as the ledger holds it (`alpha_budget`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rule: Literal["alpha_spending", "lord", "none"]
    """The sequence's rule: the ledger's once its first round is sealed, else gate.sequence's;
    `none` without either."""
    how: str
    """The rule in words (`alpha spending, basel series, flywheel α 0.05`); "" for none."""
    total: float
    """The whole sequence's α (gate.alpha); with no rule, the α each round is tested at."""
    rounds: list[SpentAlpha]
    """The rounds of the sequence, k = 1, 2, …; with no rule, every round that spent α (each
    at its own, bounded by nothing), oldest first."""
    spent: float
    """Σ α over `rounds` (decided or not): the α the sequence spent; with no rule, the union
    bound of the chance of a false promotion among them, which nothing keeps below gate.alpha."""
    remaining: float | None
    """alpha_spending: total − spent; lord: the wealth left (LORD++'s W(t)); none: None."""
    next_k: int
    """The next new round's place: in the sequence, or (no rule) among the rounds."""
    next_alpha: float
    """The α the next new round's bar gets (no rule: gate.alpha); 0 when it would be refused
    (`refusal` says why)."""
    refusal: str | None = None
    """Why the next new round's seal would be refused (the sequence is spent, the config's
    rule is not the ledger's), or None."""
    before: list[SpentAlpha]
    """Under a rule, the rounds that spent α outside it — sealed or judged before it was
    turned on — oldest first, each at its own α (empty with no rule: they are `rounds`)."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def before_rule(self) -> int:
        """How many rounds spent α before the rule (`before`)."""
        return len(self.before)

    def risk(self, rounds: list[SpentAlpha] | None = None) -> float:
        """1 − ∏(1 − α) over `rounds` (default: `before` under a rule, `rounds` without one):
        the chance of at least one false promotion among rounds outside any bound, when none
        was a real improvement and their tests are independent (Σ α bounds it without
        independence)."""
        if rounds is None:
            rounds = self.rounds if self.rule == "none" else self.before
        return 1.0 - math.prod(1.0 - r.alpha for r in rounds)


# ---- the rule, pure ------------------------------------------------------------------------


def term_for(
    sequence: SequenceConfig, total: float, k: int, rejections: Sequence[int] = ()
) -> SequenceTerm:
    """Round k's place in the sequence `sequence` of α `total` (LORD: after `rejections`)."""
    problem = sequence_problem(total, sequence)
    if problem:
        raise InputError(problem)
    if sequence.rule == "lord":
        w0 = sequence.w0 if sequence.w0 is not None else total / 2
        return SequenceTerm(
            rule="lord", k=k, total_alpha=total, w0=w0, rejections=tuple(sorted(rejections))
        )
    return SequenceTerm(
        rule="alpha_spending",
        k=k,
        total_alpha=total,
        series=sequence.series,
        ratio=sequence.ratio if sequence.series == "geometric" else None,
        horizon=sequence.horizon if sequence.series == "uniform" else None,
    )


def term_alpha(term: SequenceTerm) -> float:
    """α_k of a place in the sequence (`tuneloop.stats.sequence`)."""
    if term.rule == "lord":
        return lord_alpha(term.k, term.total_alpha, list(term.rejections or ()), term.w0)
    return spending_alpha(
        term.k,
        term.total_alpha,
        term.series or "basel",
        ratio=term.ratio if term.ratio is not None else 0.5,
        horizon=term.horizon,
    )


def with_term(bar: Bar, term: SequenceTerm | None) -> Bar:
    """`bar` at its place in the sequence: `alpha` α_k and `sequence` the term."""
    if term is None:
        return bar
    return bar.model_copy(update={"alpha": term_alpha(term), "sequence": term})


def lord_remaining(term: SequenceTerm, spent: float, promotions: int) -> float:
    """LORD++'s wealth after spending `spent` with `promotions` rejections: W0 − spent, plus
    (α − W0) for the first rejection and α for each later one (Ramdas et al. 2017, §3)."""
    w0, alpha = term.w0 or 0.0, term.total_alpha
    earned = (alpha - w0) + alpha * (promotions - 1) if promotions else 0.0
    return w0 - spent + earned


# ---- the ledger's sequence ---------------------------------------------------------------


@dataclass(frozen=True)
class _History:
    """What the ledger says about the α its rounds spent."""

    where: str
    spends: list[AlphaSpend] = field(default_factory=list)
    """The sequence's rounds, by k."""
    seals: list[SealedBar] = field(default_factory=list)
    """Every round's sealed bar, oldest first."""
    verdicts: list[GateVerdict] = field(default_factory=list)

    def spend_of(self, seal_id: str) -> AlphaSpend | None:
        return next((s for s in self.spends if s.seal_id == seal_id), None)

    def is_sealed(self, seal_id: str) -> bool:
        return any(s.seal_id == seal_id for s in self.seals) or self.spend_of(seal_id) is not None

    def verdict_of(self, seal_id: str) -> GateVerdict | None:
        """The verdict that judged the round: against its seal (same bar and items), or — a
        `tuneloop gate` round, never sealed — under its run id."""
        seal = next((s for s in self.seals if s.seal_id == seal_id), None)
        for v in self.verdicts:
            if seal is None and v.run_id == seal_id:
                return v
            if seal is not None and (v.bar_sha256, v.items_sha256) == (
                seal.bar_sha256,
                seal.items_sha256,
            ):
                return v
        return None

    def promoted(self, seal_id: str) -> bool | None:
        v = self.verdict_of(seal_id)
        return None if v is None else v.decision in PROMOTED

    def rejections(self) -> list[int]:
        """The places k of the sequence's rounds that promoted so far (LORD)."""
        return [s.k for s in self.spends if self.promoted(s.seal_id)]

    def rounds(self) -> list[SpentAlpha]:
        return [
            SpentAlpha(
                seal_id=s.seal_id,
                k=s.k,
                alpha=s.alpha,
                promoted=self.promoted(s.seal_id),
                spent_at=s.spent_at,
            )
            for s in self.spends
        ]

    def before(self) -> list[SpentAlpha]:
        """Rounds outside the sequence: bars sealed without a rule, and verdicts of rounds
        never sealed (`tuneloop gate`, an old ledger), oldest first."""
        inside = {s.seal_id for s in self.spends}
        found: list[tuple[str, str, float, bool | None]] = []
        judged: set[str] = set()
        for seal in self.seals:
            v = self.verdict_of(seal.seal_id)
            if v is not None:
                judged.add(v.run_id)
            if seal.seal_id not in inside:
                alpha = self._alpha(seal.bar, f"seal {seal.seal_id!r}")
                promoted = None if v is None else v.decision in PROMOTED
                found.append((seal.sealed_at, seal.seal_id, alpha, promoted))
        for v in self.verdicts:
            if v.run_id not in judged and v.run_id not in inside:
                alpha = self._alpha(v.bar, f"verdict {v.run_id!r}")
                found.append((v.decided_at, v.run_id, alpha, v.decision in PROMOTED))
        found.sort(key=lambda f: f[0])
        return [
            SpentAlpha(seal_id=seal_id, k=i, alpha=alpha, promoted=promoted, spent_at=at)
            for i, (at, seal_id, alpha, promoted) in enumerate(found, start=1)
        ]

    def _alpha(self, bar: dict[str, object], what: str) -> float:
        return validate_as(Bar, dict(bar), f"{self.where}: the bar of {what}").alpha


def _read(ledger: Ledger) -> _History:
    return _History(ledger.where, ledger.alpha_spent(), ledger.bar_seals(), ledger.verdicts())


def _has_sequence(ledger_path: Path | None) -> bool:
    """Whether a round of the ledger was sealed under a sequence rule (no file: none)."""
    if ledger_path is None or not Path(ledger_path).is_file():
        return False
    with open_ledger(Path(ledger_path)) as ledger:
        return bool(ledger.alpha_spent())


def _history(ledger_path: Path | None) -> _History:
    """The ledger's history; an empty one when there is no ledger file (none is created)."""
    if ledger_path is None or not Path(ledger_path).is_file():
        return _History(str(ledger_path))
    with open_ledger(Path(ledger_path)) as ledger:
        return _read(ledger)


# ---- the round's bar, and the α it spends ------------------------------------------------


def round_bar(
    bar: BarConfig, sequence: SequenceConfig | None, ledger_path: Path | None, seal_id: str | None
) -> Bar:
    """The bar round `seal_id` is sealed and judged with: `bar`'s keys and, under a sequence
    rule, its α_k — the k it was sealed at (a resumed round keeps it), or for a round not
    sealed yet (or `seal_id` None) the next one. Read-only: no ledger file is created.

    Refuses (InputError) what sealing a new round would refuse (see the module docstring),
    so that a run is refused before it trains."""
    base = Bar.of(bar)
    if sequence is None and not _has_sequence(ledger_path):
        return base  # no rule, and none begun in this ledger: nothing else to read
    history = _history(ledger_path)
    own = history.spend_of(seal_id) if seal_id is not None else None
    if own is not None:  # its k, and the promotions it was sealed after; settings as configured
        if sequence is None:
            return base  # judged without the rule: the seal refuses the other bar
        return with_term(base, term_for(sequence, bar.alpha, own.k, own.term.rejections or ()))
    if seal_id is not None and sequence is None and history.is_sealed(seal_id):
        return base  # sealed before the rule: its α was spent outside the sequence
    return with_term(base, _next_term(sequence, bar.alpha, history))


def _next_term(
    sequence: SequenceConfig | None, total: float, history: _History
) -> SequenceTerm | None:
    """The next new round's place in the sequence (None: no rule); refuses what its seal
    would refuse."""
    if sequence is None:
        _refuse_outside(history, total)
        return None
    term = term_for(sequence, total, len(history.spends) + 1, history.rejections())
    _refuse_other_rule(history, term)
    _refuse_spent(history, term)
    return term


def spend_alpha(ledger: Ledger, seal_id: str, bar: Bar, at: str) -> AlphaSpend | None:
    """Record the α round `seal_id` spends with `bar`, inside the caller's transaction (the
    seal's, or the verdict's of a round never sealed); None when the bar has no rule. The
    same round and bar again is a no-op. Refuses (InputError; the caller's transaction rolls
    back) a bar that would overspend or mix (module docstring)."""
    if bar.sequence is None and not ledger.alpha_spent():
        return None  # no rule, and none begun in this ledger
    history = _read(ledger)
    own = history.spend_of(seal_id)
    if own is not None:
        if own.bar_sha256 == bar.sha256():
            return own
        raise InputError(
            f"round {seal_id!r} already spent α_{own.k} = {own.alpha:.4g} of the sequence in "
            f"{history.where} at {own.spent_at}, with another bar; a new decision is a new "
            "round with a new run id"
        )
    term = bar.sequence
    if term is None:
        _refuse_outside(history, bar.alpha)
        return None
    _refuse_other_rule(history, term)
    k, rejections = len(history.spends) + 1, tuple(history.rejections())
    if term.k != k or (term.rule == "lord" and term.rejections != rejections):
        raise InputError(
            f"round {seal_id!r}: its bar was made for round {term.k} of the sequence"
            f"{_after(term.rejections)}, but {history.where} now makes it round {k}"
            f"{_after(rejections if term.rule == 'lord' else None)} (another round was sealed "
            "or decided meanwhile); nothing was sealed — run it again, and its bar gets "
            f"round {k}'s α"
        )
    _refuse_spent(history, term)
    allowed = term_alpha(term)
    if bar.alpha > allowed * (1 + _SLACK):
        raise InputError(
            f"round {seal_id!r}: its bar asks alpha {bar.alpha:g}, but gate.sequence "
            f"({term.describe()}) allows round {k} of the sequence α_{k} = {allowed:.4g} in "
            f"{history.where}; nothing was sealed. A round may not spend more than the rule "
            "gives it: let the rule set the bar's alpha (gate.alpha is the whole sequence's "
            "α), or gate in another ledger"
        )
    spent = AlphaSpend(
        seal_id=seal_id,
        k=k,
        rule=term.rule,
        alpha=bar.alpha,
        total_alpha=term.total_alpha,
        bar_sha256=bar.sha256(),
        spent_at=at,
        term=term,
    )
    ledger.add_alpha_spent(spent)
    return spent


def _after(rejections: Sequence[int] | None) -> str:
    if rejections is None:
        return ""
    return f" after promotions in rounds {list(rejections)}" if rejections else " (no promotion)"


def _refuse_outside(history: _History, alpha: float) -> None:
    """A round without a rule in a ledger whose sequence has begun is refused: it would spend
    α outside the budget the sequence bounds."""
    if history.spends:
        first = history.spends[0].term
        raise InputError(
            f"gate.sequence: {history.where} holds a sequence of {len(history.spends)} "
            f"round(s) under a rule ({first.describe()}), and this round's bar has none: it "
            f"would be tested at α {alpha:g} outside the budget. Set gate.sequence (and "
            f"gate.alpha {first.total_alpha:g}) as the sequence declared them, or gate in "
            "another ledger"
        )


def _refuse_other_rule(history: _History, term: SequenceTerm) -> None:
    """A sequence keeps the rule and α its first round declared."""
    if history.spends and history.spends[0].term.settings() != term.settings():
        first = history.spends[0]
        raise InputError(
            f"gate.sequence: the sequence in {history.where} was declared by its first round "
            f"({first.seal_id!r}, {first.spent_at}) as {first.term.describe()}, and "
            f"{len(history.spends)} round(s) spent α under it; this round asks for "
            f"{term.describe()}. A sequence's rule and α are fixed once it has begun (another "
            "could spend more than the α declared): restore gate.sequence and gate.alpha, or "
            "start a new error budget, on purpose, in another ledger"
        )


def _refuse_spent(history: _History, term: SequenceTerm) -> None:
    """A round the rule gives α 0 cannot promote: refused, not run."""
    if term_alpha(term) > 0:
        return
    given = (  # only a uniform series ends; the others' α_k only shrinks (to 0 in floats)
        f"gave its {term.horizon} rounds α {term.total_alpha / term.horizon:.4g} each, and "
        if term.horizon
        else ""
    )
    raise InputError(
        f"the sequence's α is spent: gate.sequence ({term.describe()}) {given}round {term.k} "
        f"may spend nothing (α_{term.k} = 0) in {history.where}. Stop the flywheel here, or "
        "start a new error budget, on purpose, in another ledger (gate.ledger)"
    )


# ---- the budget, for status and the dashboard --------------------------------------------


def alpha_budget(gate: GateConfig | None, ledger_path: Path | None) -> AlphaBudget:
    """α spent and remaining in the ledger's sequence, each round's α_k, and what the next
    new round gets under `gate` (None — a dashboard read from a ledger alone: the ledger's
    own rule, continued as declared). Read-only: no ledger file is created."""
    history = _history(ledger_path)
    rounds, before = history.rounds(), history.before()
    spent = sum(r.alpha for r in rounds)
    declared = history.spends[0].term if history.spends else None
    configured = term_for(gate.sequence, gate.alpha, 1) if gate and gate.sequence else None
    shown = declared or configured
    if shown is None:
        total = gate.alpha if gate else (before[-1].alpha if before else BarConfig().alpha)
        return AlphaBudget(
            rule="none",
            how="",
            total=total,
            rounds=before,
            spent=sum(r.alpha for r in before),
            remaining=None,
            next_k=len(before) + 1,
            next_alpha=total,
            before=[],
        )
    next_alpha, refusal = _next_alpha(gate, history, shown)
    if shown.rule == "lord":
        remaining = lord_remaining(shown, spent, sum(1 for r in rounds if r.promoted))
    else:
        remaining = max(0.0, shown.total_alpha - spent)
    return AlphaBudget(
        rule=shown.rule,
        how=shown.describe(),
        total=shown.total_alpha,
        rounds=rounds,
        spent=spent,
        remaining=remaining,
        next_k=len(rounds) + 1,
        next_alpha=next_alpha,
        refusal=refusal,
        before=before,
    )


def _next_alpha(
    gate: GateConfig | None, history: _History, declared: SequenceTerm
) -> tuple[float, str | None]:
    """(α of the next new round, why it would be refused or None)."""
    try:
        if gate is not None:
            term = _next_term(gate.sequence, gate.alpha, history)
            return (term_alpha(term) if term else gate.alpha), None
        k = len(history.spends) + 1
        rejections = tuple(history.rejections()) if declared.rule == "lord" else None
        term = declared.model_copy(update={"k": k, "rejections": rejections})
        _refuse_spent(history, term)
        return term_alpha(term), None
    except InputError as err:
        return 0.0, str(err)
