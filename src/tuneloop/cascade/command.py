"""`tuneloop compose`: a thin typer wrapper (numpy loads inside the command)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tuneloop.config import SlicingConfig, parse_slice_fractions
from tuneloop.errors import InputError, require_writable_dir
from tuneloop.records import write_record
from tuneloop.suite import load_suite, resolve_slice

COMPOSITION_FILE = "composition.json"


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
    out: Annotated[Path, typer.Option(help="Folder for composition.json.")],
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
) -> None:
    """A cascade's accuracy/cost frontier from each tier's own sample log, and the threshold
    a declared objective picks — no model is called. Choose on validation items only."""
    from rich.console import Console
    from rich.table import Table

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
    )
    out.mkdir(parents=True, exist_ok=True)
    write_record(out / COMPOSITION_FILE, record)
    table = Table(
        "thresholds", "accuracy", "$ per item", "coverage", title="accuracy/cost frontier"
    )
    for p in record.frontier:
        mark = " ✓" if record.chosen is not None and p == record.chosen else ""
        table.add_row(
            ", ".join(f"{t:.3g}" for t in p.thresholds) + mark,
            f"{p.accuracy:.1%}",
            f"{p.cost:.3g}",
            " / ".join(f"{c:.0%}" for c in p.coverage),
        )
    console = Console()
    console.print(table)
    for t in record.tiers:
        console.print(f"{t.name} alone: {t.accuracy:.1%} at ${t.cost:.3g} per item")
    console.print(f"chosen: {record.reason}")
    console.print(f"wrote {out / COMPOSITION_FILE}")
