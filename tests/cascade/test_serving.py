"""Composition equals serving, on real models: each tier evaluated alone (embedded server,
greedy, logprobs), composed offline, then the chosen cascade served and evaluated as one
endpoint — the same answer per item from the tier composition predicted, at the cost it
predicted."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tuneloop.cascade import Tier, compose_logs
from tuneloop.evaluate import EvalSettings, evaluate
from tuneloop.samplelog import load_sample_log
from tuneloop.serving import serving
from tuneloop.stats.cascade import compose

ARITH = Path(__file__).resolve().parents[2] / "examples" / "arith"
TIERS = {"base": ARITH / "model", "adder": ARITH / "teachers" / "adder"}
PRICES = {"base": 0.2, "adder": 4.0}
N_ITEMS = 48


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    lines = (ARITH / "suite.jsonl").read_text().splitlines()
    path = tmp_path_factory.mktemp("suite") / "suite.jsonl"
    path.write_text("\n".join(lines[::7][:N_ITEMS]) + "\n")  # additions and subtractions
    return path


def settings(logprobs: bool) -> EvalSettings:
    return EvalSettings(n_samples=1, temperature=0.0, max_tokens=8, logprobs=logprobs)


@pytest.fixture(scope="module")
def tier_logs(suite: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("tiers")
    for name, folder in TIERS.items():
        with serving(folder) as ep:
            evaluate(ep.base_url, ep.model, suite, out / name, settings(True), progress=False)
    return {name: out / name for name in TIERS}


def test_the_served_cascade_answers_each_item_as_composition_predicted(
    suite: Path, tier_logs: dict[str, Path], tmp_path: Path
) -> None:
    rows = {n: {r.item_id: r for r in load_sample_log(tier_logs[n])[1]} for n in TIERS}
    ids = sorted(rows["base"])
    scores = [[rows[n][i].value for i in ids] for n in TIERS]
    confs = [[rows[n][i].confidence.mean_logprob for i in ids] for n in TIERS]  # type: ignore[union-attr]
    costs = [[rows[n][i].completion_tokens * PRICES[n] / 1e6 for i in ids] for n in TIERS]  # type: ignore[operator]
    # a threshold that splits the items between the tiers: midway between two of the base
    # tier's distinct confidences near their median (as compose writes a served threshold)
    distinct = np.unique(confs[0])
    assert len(distinct) > 2, "the base tier's confidences do not split the items"
    mid = len(distinct) // 2
    threshold = float((distinct[mid - 1] + distinct[mid]) / 2)
    composed_score, composed_cost, composed_tier = compose(scores, confs, costs, [threshold])
    assert 0 < composed_tier.sum() < len(ids)
    descriptor = {
        "kind": "cascade",
        "name": "arith-cascade",
        "components": [
            {
                "name": "base",
                "path": str(TIERS["base"]),
                "usd_per_1m": PRICES["base"],
                "signal": "mean_logprob",
                "threshold": threshold,
            },
            {"name": "adder", "path": str(TIERS["adder"]), "usd_per_1m": PRICES["adder"]},
        ],
    }
    path = tmp_path / "cascade.json"
    path.write_text(json.dumps(descriptor))
    with serving(path) as ep:
        summary = evaluate(
            ep.base_url,
            ep.model,
            suite,
            tmp_path / "cascade",
            settings(False),
            model_identity=ep.identity,
            progress=False,
        )
    assert summary.model.startswith("arith-cascade@sha256:")
    served = {r.item_id: r for r in load_sample_log(tmp_path / "cascade")[1]}
    names = list(TIERS)
    for k, item in enumerate(ids):
        row, tier = served[item], names[composed_tier[k]]
        assert row.cascade is not None and row.cascade.tier == tier, item
        assert row.completion == rows[tier][item].completion, item
        assert row.cost_usd == pytest.approx(composed_cost[k]), item
    assert np.mean([served[i].value for i in ids]) == pytest.approx(composed_score.mean())


def test_the_composed_descriptor_names_the_tiers_folders_and_is_servable(
    tier_logs: dict[str, Path],
) -> None:
    tiers = [Tier(n, tier_logs[n], PRICES[n], path=TIERS[n]) for n in TIERS]
    record = compose_logs(tiers, objective="min_cost_non_inferior", epsilon=0.5)
    assert record.descriptor is not None
    from tuneloop.cascade_spec import read_cascade

    spec = read_cascade(record.descriptor, "composition.json")
    assert [t.path for t in spec.tiers] == [str(TIERS["base"]), str(TIERS["adder"])]
    assert spec.tiers[0].threshold is not None and spec.tiers[0].threshold <= 0
