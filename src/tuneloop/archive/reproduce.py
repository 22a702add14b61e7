"""Compare a re-run of an archived round with the original: the pure core of
`tuneloop archive reproduce` (the loop's `loop/reproduce.py` runs the round and reads both
rounds' records into `RoundNumbers`).

    tuneloop archive reproduce ROOT/RUN   # 0 identical or across hardware, 1 a defect

The numbers are compared exactly, not within a tolerance: greedy decoding and seeded training
on the same hardware give the same bytes, so any difference there is a defect (an unseeded
step, a nondeterministic kernel, an input that changed). Across hardware — another CPU model,
vector ISA, torch CPU kernel set or GPU — floating-point sums may round differently and a
difference is expected; it is reported with both machines and is not a failure. A machine
archived before tuneloop recorded its CPU cannot be compared, so a difference then cannot be
ruled a non-defect: it fails like one, saying why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tuneloop.errors import EXIT_OK, EXIT_REJECT
from tuneloop.provenance import Hardware

Outcome = Literal["identical", "defect", "across_hardware", "hardware_unknown"]

EXIT_CODES: dict[Outcome, int] = {
    "identical": EXIT_OK,
    "across_hardware": EXIT_OK,
    "defect": EXIT_REJECT,
    "hardware_unknown": EXIT_REJECT,
}
VERDICTS: dict[Outcome, str] = {
    "identical": "identical: the re-run gives the original's numbers and verdict exactly",
    "defect": "DEFECT: the re-run differs on the same hardware (same CPU, ISA, torch "
    "kernels and GPUs), where it must give the same bytes",
    "across_hardware": "differs across hardware: expected (floating-point rounding depends "
    "on the CPU and kernels); not a defect",
    "hardware_unknown": "differs, and the original's hardware was not recorded (archived "
    "by an older tuneloop): a defect cannot be ruled out",
}


@dataclass(frozen=True)
class RoundNumbers:
    """What a round concluded: its delta report's headline and its gate's decision."""

    delta: float
    delta_ci: tuple[float, float]
    p_two_sided: float
    pre_mean: float
    post_mean: float
    decision: str | None
    """promote, reject or awaiting_approval; None when the gate was off."""


@dataclass(frozen=True)
class Row:
    """One line of the comparison table."""

    name: str
    original: str
    rerun: str
    difference: str
    """`=` when equal."""


@dataclass(frozen=True)
class Reproduction:
    rows: tuple[Row, ...]
    outcome: Outcome
    original: Hardware
    rerun: Hardware

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.outcome]


def compare_rounds(
    original: RoundNumbers, rerun: RoundNumbers, original_hw: Hardware, rerun_hw: Hardware
) -> Reproduction:
    """The table of both rounds' numbers and what their difference, if any, means."""
    rows = (
        _number("Δ (post − pre)", original.delta, rerun.delta),
        _number("Δ CI low", original.delta_ci[0], rerun.delta_ci[0]),
        _number("Δ CI high", original.delta_ci[1], rerun.delta_ci[1]),
        _number("p (two-sided)", original.p_two_sided, rerun.p_two_sided),
        _number("pre mean", original.pre_mean, rerun.pre_mean),
        _number("post mean", original.post_mean, rerun.post_mean),
        _decision(original.decision, rerun.decision),
    )
    outcome: Outcome
    if all(r.difference == "=" for r in rows):
        outcome = "identical"
    elif not original_hw.known or not rerun_hw.known:
        outcome = "hardware_unknown"
    else:
        outcome = "defect" if original_hw == rerun_hw else "across_hardware"
    return Reproduction(rows, outcome, original_hw, rerun_hw)


def _number(name: str, a: float, b: float) -> Row:
    # repr: the shortest text that reads back as the same float, so equal text is equal bits
    return Row(name, repr(a), repr(b), "=" if a == b else f"{b - a:+.3g}")


def _decision(a: str | None, b: str | None) -> Row:
    def text(d: str | None) -> str:
        return d if d is not None else "(gate off)"

    return Row("gate decision", text(a), text(b), "=" if a == b else "changed")


def render(rep: Reproduction) -> list[str]:
    """The table, both machines' hardware, and the outcome in words."""
    head = Row("", "original", "re-run", "difference")
    rows = (head, *rep.rows)
    widths = [max(len(getattr(r, f)) for r in rows) for f in ("name", "original", "rerun")]
    lines = [
        f"{r.name:<{widths[0]}}  {r.original:<{widths[1]}}  {r.rerun:<{widths[2]}}  "
        f"{r.difference}".rstrip()
        for r in rows
    ]
    return [
        *lines,
        "",
        f"original hardware: {rep.original.describe()}",
        f"re-run hardware:   {rep.rerun.describe()}",
        _same(rep.original, rep.rerun),
        VERDICTS[rep.outcome],
    ]


def _same(a: Hardware, b: Hardware) -> str:
    if not (a.known and b.known):
        return "hardware: not recorded for the original"
    return "same hardware" if a == b else "different hardware"
