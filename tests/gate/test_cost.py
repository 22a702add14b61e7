"""The bar's cost condition (`gate.cost`, `tuneloop.gate.cost`) on constructed sample logs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from tuneloop.config import GateConfig
from tuneloop.config.gate import CostBarConfig
from tuneloop.errors import InputError
from tuneloop.gate import Bar, adjudicate, pretest
from tuneloop.gate.bar import load_bar
from tuneloop.gate.command import print_verdict
from tuneloop.gate.cost import ItemCosts, item_costs, judge_cost
from tuneloop.gate.ledger import open_ledger
from tuneloop.gate.seal import check_seal, seal_bar
from tuneloop.gate.verdict import GateVerdict
from tuneloop.records import read_record, write_jsonl
from tuneloop.samplelog import SampleRow, load_sample_log

from ..installed import tuneloop as installed
from .conftest import flat, improved, item_id

pytestmark = pytest.mark.filterwarnings("ignore")
SLICE = [item_id(i) for i in range(60)]
CHAMP_USD, CHALL_USD = 0.001, 0.0005
"""Per sample: the challenger costs half the champion's."""


def priced(log: Path, cost: Callable[[SampleRow], float | None]) -> Path:
    """Rewrite a sample log's rows with `cost_usd = cost(row)`."""
    _, rows = load_sample_log(log)
    write_jsonl(
        log / "samples.jsonl", [r.model_copy(update={"cost_usd": cost(r)}).to_json() for r in rows]
    )
    return log


@pytest.fixture
def arms(make_log) -> tuple[Path, Path]:  # type: ignore[no-untyped-def]
    """A champion and a better challenger that costs half as much per sample."""
    champ = priced(make_log("champ", flat(200, 0.0)), lambda r: CHAMP_USD)
    chall = priced(make_log("chall", improved(200, every=2)), lambda r: CHALL_USD)
    return champ, chall


def judge(champ: Path, chall: Path, tmp: Path, cost: CostBarConfig | None, run_id: str = "r1"):  # type: ignore[no-untyped-def]
    return adjudicate(
        champ,
        chall,
        bar=Bar(cost=cost),
        slice_name="gate",
        item_ids=SLICE,
        ledger_path=tmp / "ledger.db",
        out_dir=tmp / "out" / run_id,
        run_id=run_id,
    )


def test_the_figures_are_means_over_items_of_means_over_samples(make_log) -> None:  # type: ignore[no-untyped-def]
    # item 0: samples 1e-4 and 3e-4 → 2e-4; item 1: a harness error still paid 9e-4, its ok
    # sample 3e-4 → 6e-4; item 2: one sample missing (no answer, no cost) → its other, 5e-4;
    # item 3: no costed sample in the challenger → left out of both arms
    log = make_log("chall", [[1.0, 1.0], [1.0, 1.0], [1.0, None], [None, None]])
    usd = {(0, 0): 1e-4, (0, 1): 3e-4, (1, 0): 9e-4, (1, 1): 3e-4, (2, 0): 5e-4}
    rows = [
        r.model_copy(update={"cost_usd": usd.get((int(r.item_id[-4:]), r.sample_index))})
        for r in load_sample_log(log)[1]
    ]
    rows[2] = rows[2].model_copy(update={"status": "harness_error", "score": None})
    ids = [item_id(i) for i in range(4)]
    chall = item_costs(rows, ids, str(log))
    assert chall.unpriced == ()
    np.testing.assert_allclose(chall.per_item[:3], [2e-4, 6e-4, 5e-4])
    assert np.isnan(chall.per_item[3])
    champ = ItemCosts(np.array([1e-3, 1e-3, 1e-3, 1e-3]), (), "champ")
    result = judge_cost(champ, chall, CostBarConfig(max_usd_per_item=5e-4))
    assert result.n_items == 3
    assert result.champion_usd_per_item == pytest.approx(1e-3)
    assert result.challenger_usd_per_item == pytest.approx(13e-4 / 3)
    assert result.ratio == pytest.approx(13e-4 / 3 / 1e-3)
    assert [(c.name, c.passed) for c in result.conditions] == [("max_usd_per_item", True)]


@pytest.mark.parametrize(
    ("limits", "failed"),
    [
        ({"max_usd_per_item": 0.0006}, []),
        ({"max_usd_per_item": 0.0004}, ["max_usd_per_item"]),
        ({"max_ratio_to_champion": 0.6}, []),
        ({"max_ratio_to_champion": 0.4}, ["max_ratio_to_champion"]),
        ({"max_usd_per_item": 0.0006, "max_ratio_to_champion": 0.6}, []),
        ({"max_usd_per_item": 0.0006, "max_ratio_to_champion": 0.4}, ["max_ratio_to_champion"]),
        (
            {"max_usd_per_item": 0.0004, "max_ratio_to_champion": 0.4},
            ["max_usd_per_item", "max_ratio_to_champion"],
        ),
    ],
)
def test_each_limit_passes_or_fails_and_a_failure_rejects(
    arms, tmp_path: Path, limits, failed
) -> None:  # type: ignore[no-untyped-def]
    champ, chall = arms
    v = judge(champ, chall, tmp_path, CostBarConfig(**limits))
    assert v.cost is not None
    assert v.cost.champion_usd_per_item == pytest.approx(CHAMP_USD)
    assert v.cost.challenger_usd_per_item == pytest.approx(CHALL_USD)
    assert v.cost.ratio == pytest.approx(0.5) and v.cost.n_items == len(SLICE)
    assert [c.name for c in v.cost.conditions] == list(limits)
    assert [c.limit for c in v.cost.conditions] == list(limits.values())
    assert [c.name for c in v.cost.conditions if not c.passed] == failed
    assert v.cost.passed == (not failed)
    assert v.decision == ("reject" if failed else "promote")
    # every other condition held: the reasons are exactly the failed cost limits, with figures
    assert len(v.reasons) == len(failed)
    for name, reason in zip(failed, v.reasons, strict=True):
        assert reason.startswith("cost: challenger 0.0005 USD per item") and name in reason
    if "max_ratio_to_champion" in failed:
        assert "= 0.5 × the champion's 0.001 USD (> max_ratio_to_champion 0.4" in v.reasons[-1]
    names = [c.name for c in v.conditions]
    assert names[-len(limits) :] == [f"cost:{n}" for n in limits]
    # a portfolio's pretest applies the same conditions
    d = pretest(champ, chall, bar=Bar(cost=CostBarConfig(**limits)), item_ids=SLICE)
    assert d.promote == (not failed) and [c.name for c in d.conditions] == names


def test_a_figure_at_its_limit_holds_despite_float_rounding() -> None:
    costs = np.array([0.1, 0.2, 0.3]) * 1e-3  # mean 2e-4, not exactly in binary
    chall = ItemCosts(costs, (), "chall")
    champ = ItemCosts(costs * 2, (), "champ")
    both = CostBarConfig(max_usd_per_item=2e-4, max_ratio_to_champion=0.5)
    assert judge_cost(champ, chall, both).passed


def test_a_champion_that_cost_nothing_admits_only_a_challenger_that_costs_nothing() -> None:
    free = ItemCosts(np.zeros(3), (), "champ")
    limits = CostBarConfig(max_ratio_to_champion=0.6)
    result = judge_cost(free, ItemCosts(np.full(3, 1e-4), (), "chall"), limits)
    assert result.ratio is None and not result.passed
    assert result.conditions[0].value is None
    assert judge_cost(free, ItemCosts(np.zeros(3), (), "chall"), limits).passed


def test_no_item_with_a_cost_in_both_arms_fails_closed() -> None:
    none = ItemCosts(np.full(3, np.nan), (), "chall")
    result = judge_cost(ItemCosts(np.ones(3), (), "champ"), none, CostBarConfig(max_usd_per_item=1))
    assert result.n_items == 0 and result.challenger_usd_per_item is None and not result.passed


def test_an_unpriced_log_is_refused_naming_it_and_how_to_price_it(
    make_log, arms, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    champ, _ = arms
    unpriced = make_log("unpriced", improved(200, every=2))
    with pytest.raises(InputError) as err:
        judge(champ, unpriced, tmp_path, CostBarConfig(max_ratio_to_champion=0.6))
    msg = str(err.value)
    assert str(unpriced) in msg and "no cost_usd" in msg and "gate.cost" in msg
    assert "eval.usd_per_1m" in msg and "cascade" in msg
    assert not (tmp_path / "ledger.db").exists() and not (tmp_path / "out").exists()
    # without a cost condition the same logs are judged as before
    assert judge(champ, unpriced, tmp_path, None).decision == "promote"


def test_the_command_exits_2_on_an_unpriced_log_and_prints_the_cost_line(
    make_log, arms, suite_file, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    champ, chall = arms
    bar = tmp_path / "bar.yaml"
    bar.write_text("cost:\n  max_ratio_to_champion: 0.6\n")
    unpriced = make_log("unpriced", improved(200, every=2))
    ledger = tmp_path / "ledger.db"
    common = ("--slice", "gate", "--suite", suite_file, "--ledger", ledger, "--bar", bar)
    ran = installed("gate", "--champion", champ, "--challenger", unpriced, *common)
    ran.assert_input_error(str(unpriced), "no cost_usd", "eval.usd_per_1m")
    assert not ledger.exists()
    ran = installed("gate", "--champion", champ, "--challenger", chall, *common)
    assert ran.code == 0, ran.output
    assert "Cost per item on" in ran.stdout and "max_ratio_to_champion 0.6 held" in ran.stdout


def test_unset_the_verdict_is_written_as_before(arms, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    champ, chall = arms
    v = judge(champ, chall, tmp_path, None)
    data = json.loads((tmp_path / "out" / "r1" / "verdict.json").read_text())
    assert data["schema"] == "tuneloop.verdict/2" and "cost" not in data
    assert "cost" not in data["bar"] and v.bar_sha256 == Bar().sha256()
    assert [c.name for c in v.conditions] == [
        "min_items",
        "missing_champion",
        "missing_challenger",
        "significance",
        "margin",
    ]
    assert "Cost per item" not in (tmp_path / "EXPERIMENT-LOG.md").read_text()


def test_set_the_verdict_is_version_3_and_every_output_shows_the_cost(
    arms, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    champ, chall = arms
    v = judge(champ, chall, tmp_path, CostBarConfig(max_usd_per_item=0.0004))
    path = tmp_path / "out" / "r1" / "verdict.json"
    data = json.loads(path.read_text())
    assert data["schema"] == "tuneloop.verdict/3"
    assert data["bar"]["cost"] == {"max_usd_per_item": 0.0004}
    assert data["cost"]["conditions"] == [
        {
            "name": "max_usd_per_item",
            "limit": 0.0004,
            "value": pytest.approx(CHALL_USD),
            "passed": False,
        }
    ]
    assert read_record(path, GateVerdict) == v
    with open_ledger(tmp_path / "ledger.db") as ledger:
        assert ledger.verdict("r1") == v
    line = (
        "Cost per item on 60 items: challenger 0.0005 USD, champion 0.001 USD (ratio 0.5); "
        "max_usd_per_item 0.0004 FAILED"
    )
    assert f"- {line}\n" in (tmp_path / "EXPERIMENT-LOG.md").read_text()
    print_verdict(v.to_json())
    assert line in " ".join(capsys.readouterr().out.split())  # rich wraps at its width


def test_the_seal_holds_the_cost_condition(arms, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    champ, chall = arms
    db = tmp_path / "l.db"
    capped = Bar(cost=CostBarConfig(max_ratio_to_champion=0.6))
    sealed = seal_bar(db, "r1", capped, "gate", SLICE, "2026-12-01T00:00:00Z")
    assert sealed.bar["cost"] == {"max_ratio_to_champion": 0.6}
    assert sealed.bar_sha256 == capped.sha256() != Bar().sha256()
    for moved in (Bar(), Bar(cost=CostBarConfig(max_ratio_to_champion=0.9))):
        with pytest.raises(InputError, match="was sealed at .*cost max_ratio_to_champion 0.6"):
            seal_bar(db, "r1", moved, "gate", SLICE, "later")
    with open_ledger(db) as ledger:
        check_seal(sealed, capped, "gate", SLICE, ledger)
        with pytest.raises(InputError, match="against another bar is refused"):
            check_seal(sealed, Bar(), "gate", SLICE, ledger)
    # an unset limit is left out of the sealed bytes, as an unset `cost` is
    assert Bar(cost=CostBarConfig(max_usd_per_item=1e-4)).to_dict()["cost"] == {
        "max_usd_per_item": 1e-4
    }
    # the loop seals `Bar.of(cfg.gate)`: the gate section's cost travels with it
    assert Bar.of(GateConfig(cost={"max_ratio_to_champion": 0.6})) == capped


def test_a_cost_section_needs_a_limit_and_is_checked_like_any_bar_key(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="max_usd_per_item, max_ratio_to_champion or both"):
        GateConfig(cost={})
    path = tmp_path / "bar.yaml"
    path.write_text("cost:\n  max_usd: 0.1\n  max_ratio_to_champion: 0\n")
    with pytest.raises(InputError) as err:
        load_bar(path)
    msg = str(err.value)
    assert "cost.max_usd (line 2): unknown key" in msg
    assert "cost.max_ratio_to_champion (line 3): must be > 0" in msg
    path.write_text("cost:\n  max_usd_per_item: 0.0004\n")
    assert load_bar(path).cost == CostBarConfig(max_usd_per_item=0.0004)
