"""frontier.svg and the printed frontier of `tuneloop compose`, on constructed tier logs."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.cascade.test_compose import tiers, write_tier
from tests.installed import tuneloop
from tuneloop.cascade import compose_logs
from tuneloop.cascade.plot import frontier_svg, shown_rows
from tuneloop.records import read_record
from tuneloop.records.composition import CompositionRecord, Point, TierFigures

SVG = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def classed(root: ET.Element, tag: str, cls: str) -> list[ET.Element]:
    return [e for e in root.iter(SVG + tag) if cls in e.get("class", "").split()]


def texts(root: ET.Element) -> list[str]:
    return ["".join(e.itertext()) for e in root.iter(SVG + "text")]


def test_a_mark_per_setting_and_tier_and_the_choice_labelled(tmp_path: Path) -> None:
    record = compose_logs(tiers(tmp_path))
    root = parse(frontier_svg(record))
    assert root.tag == SVG + "svg"
    assert len(classed(root, "circle", "point")) == len(record.frontier) == 2
    assert len(classed(root, "rect", "tier")) == 2
    said = texts(root)
    assert "small alone" in said and "big alone" in said
    assert "Cascade accuracy/cost frontier: small → big" in said
    assert "cost per item ($, mean over items)" in said
    assert "accuracy (mean item score)" in said
    (chosen,) = classed(root, "g", "chosen")
    assert "chosen: thresholds -2 → 75.0%, $3.5e-05 per item" in texts(chosen)
    # min_cost_non_inferior: the best tier alone less ε, across the plot; no budget
    assert len(classed(root, "line", "floor")) == 1 and not classed(root, "line", "budget")
    assert "big alone 75.0% − ε 0 = 75.0%" in said


def test_a_budget_is_a_vertical_line(tmp_path: Path) -> None:
    record = compose_logs(tiers(tmp_path), objective="max_accuracy_under_cost", budget=2e-5)
    root = parse(frontier_svg(record))
    (line,) = classed(root, "line", "budget")
    assert line.get("x1") == line.get("x2") and line.get("y1") != line.get("y2")
    assert not classed(root, "line", "floor")
    said = texts(root)
    assert "budget $2e-05 per item" in said
    assert any(t.startswith("chosen: thresholds -3 → 50.0%") for t in said)


def test_an_epsilon_floor_is_a_horizontal_line(tmp_path: Path) -> None:
    record = compose_logs(tiers(tmp_path), epsilon=0.25)
    root = parse(frontier_svg(record))
    (line,) = classed(root, "line", "floor")
    assert line.get("y1") == line.get("y2") and line.get("x1") != line.get("x2")
    assert "big alone 75.0% − ε 0.25 = 50.0%" in texts(root)


def test_nothing_chosen_is_said_and_nothing_ringed(tmp_path: Path) -> None:
    record = compose_logs(tiers(tmp_path), objective="max_accuracy_under_cost", budget=1e-6)
    root = parse(frontier_svg(record))
    assert not classed(root, "g", "chosen")
    assert "nothing chosen: no setting meets the objective" in texts(root)


def test_the_same_record_gives_the_same_bytes(tmp_path: Path) -> None:
    one = compose_logs(tiers(tmp_path / "one"))
    two = compose_logs(tiers(tmp_path / "two"))  # other folders, same logs
    assert frontier_svg(one) == frontier_svg(one) == frontier_svg(two)
    assert frontier_svg(one) != frontier_svg(compose_logs(tiers(tmp_path / "x"), epsilon=0.3))


def test_a_long_frontier_with_every_setting_marked() -> None:
    n = 40
    front = [
        Point(
            thresholds=[-2 + i / 10, -1.0], accuracy=i / n, cost=1e-6 * (1 + i), coverage=[1, 0, 0]
        )
        for i in range(n)
    ]
    front.append(Point(thresholds=[math.inf, -0.5], accuracy=1.0, cost=1e-4, coverage=[0, 0, 1]))
    figures = [
        TierFigures(
            name=name, log=name, log_sha256="0", model=name, usd_per_1m=1, accuracy=a, cost=c
        )
        for name, a, c in (("a<b", 0.0, 1e-6), ("mid", 0.5, 3e-5), ("big", 0.9, 9e-5))
    ]
    record = CompositionRecord(
        signal="mean_logprob",
        objective="max_accuracy_under_cost",
        budget=2e-4,
        epsilon=0.0,
        n_items=n,
        item_ids_sha256="0",
        tiers=figures,
        frontier=front,
        chosen=front[-1],
        chosen_sha256="0",
        reason="",
        descriptor=None,
    )
    svg = frontier_svg(record)
    root = parse(svg)  # a tier named a<b is escaped
    assert len(classed(root, "circle", "point")) == n + 1
    assert len(classed(root, "rect", "tier")) == 3 and "a<b alone" in texts(root)
    assert "chosen: thresholds ∞, -0.5 → 100.0%, $0.0001 per item" in texts(root)


def test_the_table_keeps_the_ends_and_the_choice() -> None:
    assert shown_rows(3, 1) == [0, 1, 2]
    for n in range(1, 60):
        for chosen in [None, *range(n)]:
            rows = shown_rows(n, chosen)
            assert len(rows) <= 15 and rows == sorted(set(rows))
            assert rows[0] == 0 and rows[-1] == n - 1
            assert chosen is None or chosen in rows
            assert n > 15 or len(rows) == n


def test_the_installed_command_draws_and_prints_the_frontier(tmp_path: Path) -> None:
    # small is wrong on every item with distinct confidences and big right on all: each
    # threshold hands one more item on, so the frontier has 21 settings
    ids = [f"q{i:02d}" for i in range(20)]
    small = write_tier(
        tmp_path / "small", "small", [0.0] * 20, [-i / 10 for i in range(20)], items=ids
    )
    big = write_tier(tmp_path / "big", "big", [1.0] * 20, None, items=ids)
    out = tmp_path / "o"
    prices = ("--price", "small=1", "--price", "big=10")
    ran = tuneloop(
        "compose", f"small={small}", f"big={big}", *prices, "--epsilon", "0.42", "--out", out
    )
    assert ran.code == 0, ran.output
    record = read_record(out / "composition.json", CompositionRecord)
    assert len(record.frontier) == 21 and record.chosen == record.frontier[12]  # 60% ≥ 58%
    svg = (out / "frontier.svg").read_text()
    assert svg == frontier_svg(record)  # drawn from what was written
    assert len(classed(parse(svg), "circle", "point")) == 21
    lines = ran.stdout.splitlines()
    assert "(15 of 21 shown)" in lines[0]
    alone = next(i for i, line in enumerate(lines) if "each tier alone" in line)
    rows = [line for line in lines[:alone] if line.startswith("│")]
    numbers = [int(row.split("│")[1]) for row in rows]
    assert len(rows) == 15 and numbers[0] == 1 and numbers[-1] == 21 and 13 in numbers
    (chosen,) = [row for row in rows if "chosen" in row]
    assert chosen.startswith("│ 13 ") and "60.0%" in chosen
    assert any(line.startswith("│ big ") and "100.0%" in line for line in lines[alone:])
    assert "chosen: the cheapest setting" in ran.stdout
    assert f"wrote {out / 'composition.json'} and {out / 'frontier.svg'}" in ran.stdout
