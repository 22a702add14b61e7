"""`tuneloop compose`: a thin typer wrapper (numpy loads inside the command) that writes
composition.json and frontier.svg and prints the frontier."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tuneloop.cascade.plot import frontier_svg, shown_rows
from tuneloop.config import SlicingConfig, parse_slice_fractions
from tuneloop.errors import InputError, require_writable_dir
from tuneloop.records import atomic_write_text, write_record
from tuneloop.records.cascade_table import thresholds_text
from tuneloop.suite import load_suite, resolve_slice

if TYPE_CHECKING:
    from tuneloop.records.composition import CompositionRecord

COMPOSITION_FILE = "composition.json"
FRONTIER_FILE = "frontier.svg"


def _tier(arg: str, prices: dict[str, float]) -> tuple[str, Path, float]:
    name, sep, path = arg.partition("=")
    if not sep or not name or not path:
        raise InputError(f"{arg}: expected NAME=LOG (a tier's sample-log folder), cheapest first")
    if name not in prices:
        raise InputError(f"--price: tier {name!r} has no price (give --price {name}=USD_PER_1M)")
    return name, Path(path), prices[name]


def _prices(args: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for arg in args:
        name, _, value = arg.partition("=")
        try:
            price = float(value)
        except ValueError:
            raise InputError(f"--price {arg}: expected NAME=USD_PER_1M_TOKENS") from None
        if price < 0 or price != price:
            raise InputError(f"--price {arg}: a price is a number ≥ 0")
        out[name] = price
    return out


def compose(
    tiers: Annotated[
        list[str], typer.Argument(help="Tiers in order, cheapest first: NAME=SAMPLE_LOG_FOLDER.")
    ],
    price: Annotated[
        list[str],
        typer.Option(help="NAME=USD per million completion tokens, once per tier."),
    ],
    out: Annotated[Path, typer.Option(help="Folder for composition.json and frontier.svg.")],
    signal: Annotated[
        str,
        typer.Option(
            help="Confidence each tier hands off on: mean_logprob, min_margin (from logprobs) "
            "or agreement (among an item's samples)."
        ),
    ] = "mean_logprob",
    objective: Annotated[
        str,
        typer.Option(
            help="min_cost_non_inferior (cheapest at least as accurate as the best single tier "
            "less --epsilon) or max_accuracy_under_cost (needs --budget)."
        ),
    ] = "min_cost_non_inferior",
    budget: Annotated[
        float | None, typer.Option(min=0, help="Dollars per item, for max_accuracy_under_cost.")
    ] = None,
    epsilon: Annotated[float, typer.Option(min=0, help="Accuracy allowed below the best.")] = 0.0,
    suite: Annotated[
        Path | None, typer.Option(help="The suite the logs evaluated, to compose on --slice only.")
    ] = None,
    slice_name: Annotated[
        str | None,
        typer.Option("--slice", help="Compose on this slice only (the validation part)."),
    ] = None,
    slices: Annotated[
        str, typer.Option(help="The suite's slices, as loop.yaml's suite.slices.")
    ] = "dev=0.5,gate=0.5",
    calibrate: Annotated[
        bool,
        typer.Option(
            help="Map each handing-off tier's signal to P(correct) by an isotonic fit on the "
            "composed items first; thresholds are then probabilities."
        ),
    ] = False,
) -> None:
    """A cascade's accuracy/cost frontier from each tier's own sample log, and the threshold
    a declared objective picks — no model is called. Choose on validation items only. Writes
    composition.json and frontier.svg (the frontier drawn) to --out."""
    from tuneloop.cascade.compose import Tier, compose_logs  # numpy

    if signal not in ("mean_logprob", "min_margin", "agreement"):
        raise InputError(f"--signal {signal!r}: mean_logprob, min_margin or agreement")
    if objective not in ("min_cost_non_inferior", "max_accuracy_under_cost"):
        raise InputError(
            f"--objective {objective!r}: min_cost_non_inferior or max_accuracy_under_cost"
        )
    prices = _prices(price)
    parsed = [_tier(t, prices) for t in tiers]
    if len({n for n, _, _ in parsed}) != len(parsed):
        raise InputError("compose: a tier name is given twice")
    require_writable_dir(out, "--out")
    items = None
    if slice_name is not None:
        if suite is None:
            raise InputError("--slice: give --suite, the suite the tiers were evaluated on")
        slicing = SlicingConfig(slices=parse_slice_fractions(slices))
        items = resolve_slice(load_suite(suite), slicing, slice_name)
    record = compose_logs(
        [Tier(n, p, usd) for n, p, usd in parsed],
        signal=signal,  # type: ignore[arg-type]
        objective=objective,  # type: ignore[arg-type]
        budget=budget,
        epsilon=epsilon,
        item_ids=items,
        calibrate=calibrate,
    )
    out.mkdir(parents=True, exist_ok=True)
    write_record(out / COMPOSITION_FILE, record)
    atomic_write_text(out / FRONTIER_FILE, frontier_svg(record))
    _print(record)
    print(f"wrote {out / COMPOSITION_FILE} and {out / FRONTIER_FILE}")


def _print(record: CompositionRecord) -> None:
    """The frontier (thinned to 15 rows: both ends, the choice, and evenly between; the row
    numbers show what was left out), each tier alone, and the choice with its reason."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    front = record.frontier
    chosen = front.index(record.chosen) if record.chosen in front else None
    rows = shown_rows(len(front), chosen)
    names = escape(", ".join(t.name for t in record.tiers))
    title, caption = "accuracy/cost frontier, cheapest first", f"{names}: share of items answered"
    if len(rows) < len(front):
        title += f" ({len(rows)} of {len(front)} shown)"
        caption += f"; all {len(front)} in {COMPOSITION_FILE}"
    table = Table(title=title, caption=caption)
    table.add_column("#", justify="right")
    table.add_column("thresholds", no_wrap=True)
    table.add_column("accuracy", justify="right")
    table.add_column("$/item", justify="right", no_wrap=True)
    for t in record.tiers:
        table.add_column(escape(t.name), justify="right")
    if chosen is not None:
        table.add_column("")
    for i in rows:
        p = front[i]
        table.add_row(
            str(i + 1),
            thresholds_text(p.thresholds),
            f"{p.accuracy:.1%}",
            f"{p.cost:.3g}",
            *(f"{c:.0%}" for c in p.coverage),
            *([] if chosen is None else ["chosen" if i == chosen else ""]),
            style="bold" if i == chosen else None,
        )
    alone = Table(title="each tier alone")
    for name in ("tier", "model", "$/1M tokens", "accuracy", "$/item"):
        alone.add_column(name, justify="left" if name in ("tier", "model") else "right")
    for t in record.tiers:
        figures = (f"{t.usd_per_1m:g}", f"{t.accuracy:.1%}", f"{t.cost:.3g}")
        alone.add_row(escape(t.name), escape(t.model), *figures)
    console = Console()
    console.print(table)
    console.print(alone)
    said = "chosen: " if record.chosen is not None else "nothing chosen: "
    console.print(said + record.reason, markup=False)
