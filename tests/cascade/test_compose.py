"""`tuneloop compose` on constructed tier logs: the frontier, the choice, and each refusal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.installed import tuneloop
from tuneloop.cascade import Tier, compose_logs
from tuneloop.errors import InputError
from tuneloop.records import write_jsonl, write_record
from tuneloop.samplelog import Confidence, EvalSummary, SampleRow, SamplingParams

IDS = ["a", "b", "c", "d"]


def write_tier(
    folder: Path,
    model: str,
    scores: list[float],
    confidences: list[float] | None,
    tokens: int = 10,
    items: list[str] = IDS,
) -> Path:
    folder.mkdir(parents=True)
    rows = []
    for i, item in enumerate(items):
        conf = None
        if confidences is not None:
            conf = Confidence(mean_logprob=confidences[i], min_margin=1.0, tokens=tokens)
        row = SampleRow(
            suite_revision="rev",
            item_id=item,
            sample_index=0,
            model=model,
            seed=0,
            completion="x",
            completion_tokens=tokens,
            score=scores[i],
            scorer="numeric",
            confidence=conf,
        )
        rows.append(row.to_json())
    sampling = SamplingParams(n_samples=1, temperature=0.0, max_tokens=8, logprobs=True)
    return write_log(folder, model, rows, items, sampling)


def write_log(
    folder: Path, model: str, rows: list[dict], items: list[str], sampling: SamplingParams
) -> Path:
    write_jsonl(folder / "samples.jsonl", rows)
    summary = EvalSummary(
        suite_path="suite.jsonl",
        suite_revision="rev",
        item_ids=items,
        model=model,
        endpoint="x",
        sampling=sampling,
        started_at="2026-12-05T00:00:00Z",
    )
    write_record(folder / "summary.json", summary)
    return folder


def tiers(tmp_path: Path) -> list[Tier]:
    small = write_tier(tmp_path / "small", "small", [1, 1, 0, 0], [-0.1, -2.0, -0.2, -3.0])
    big = write_tier(tmp_path / "big", "big", [1, 0, 1, 1], None)
    return [Tier("small", small, 1.0), Tier("big", big, 10.0)]


def test_the_cheapest_setting_as_accurate_as_the_best_tier(tmp_path: Path) -> None:
    record = compose_logs(tiers(tmp_path))
    assert [(p.thresholds, p.accuracy) for p in record.frontier] == [([-3.0], 0.5), ([-2.0], 0.75)]
    assert record.chosen is not None and record.chosen.thresholds == [-2.0]
    # 10 tokens at $1/1M on every item, and $10/1M for the one handed off: 3.5e-5 per item
    assert record.chosen.cost == pytest.approx(3.5e-5)
    assert [t.cost for t in record.tiers] == pytest.approx([1e-5, 1e-4])
    assert "65% less than 'big' alone" in record.reason and record.chosen_sha256
    d = record.descriptor
    assert d is not None and d["kind"] == "cascade"
    assert d["composition_sha256"] == record.chosen_sha256
    first, last = d["components"]
    # served midway between the chosen -2.0 and the next lower confidence, -3.0: same items kept
    assert (first["name"], first["signal"], first["threshold"]) == ("small", "mean_logprob", -2.5)
    assert last["name"] == "big" and "threshold" not in last


def test_the_most_accurate_under_a_budget(tmp_path: Path) -> None:
    record = compose_logs(tiers(tmp_path), objective="max_accuracy_under_cost", budget=2e-5)
    assert record.chosen is not None and record.chosen.thresholds == [-3.0]
    none = compose_logs(tiers(tmp_path / "x"), objective="max_accuracy_under_cost", budget=1e-6)
    assert none.chosen is None and "no setting costs at most" in none.reason


def test_a_tier_that_hands_off_needs_confidences(tmp_path: Path) -> None:
    small = write_tier(tmp_path / "small", "small", [1, 1, 0, 0], None)
    big = write_tier(tmp_path / "big", "big", [1, 0, 1, 1], None)
    with pytest.raises(InputError, match="tier 'small' hands off on mean_logprob.*logprobs"):
        compose_logs([Tier("small", small, 1.0), Tier("big", big, 10.0)])


def test_a_tier_missing_items_is_refused(tmp_path: Path) -> None:
    small = write_tier(tmp_path / "small", "small", [1, 1, 0], [-1, -1, -1], items=IDS[:3])
    big = write_tier(tmp_path / "big", "big", [1, 0, 1, 1], None)
    with pytest.raises(InputError, match="tier 'small' has no answers for 1 of the items"):
        compose_logs([Tier("small", small, 1.0), Tier("big", big, 10.0)], item_ids=IDS)


def test_the_installed_command_writes_the_record(tmp_path: Path) -> None:
    t = tiers(tmp_path)
    args = [f"{x.name}={x.log}" for x in t]
    ran = tuneloop(
        "compose", *args, "--price", "small=1", "--price", "big=10", "--out", tmp_path / "o"
    )
    assert ran.code == 0, ran.stderr
    assert "chosen: the cheapest setting" in ran.stdout
    data = json.loads((tmp_path / "o" / "composition.json").read_text())
    assert data["schema"] == "tuneloop.composition/1" and data["chosen"]["thresholds"] == [-2.0]
    bad = tuneloop("compose", *args, "--price", "small=1", "--out", tmp_path / "p")
    assert bad.code == 2 and "tier 'big' has no price" in bad.stderr
    prices = ("--price", "small=1", "--price", "big=10")
    alone = tuneloop("compose", *args, *prices, "--slice", "validation", "--out", tmp_path / "q")
    assert alone.code == 2 and "--slice: give --suite" in alone.stderr


def test_agreement_among_samples_is_a_signal(tmp_path: Path) -> None:
    folder = tmp_path / "small"
    folder.mkdir()
    rows = []
    said = {"a": ["1", "1", "1"], "b": ["2", "3", "2"], "c": ["4", "5", "6"], "d": ["7", "7", "8"]}
    for item, answers in said.items():
        for k, text in enumerate(answers):
            row = SampleRow(
                suite_revision="rev",
                item_id=item,
                sample_index=k,
                model="small",
                seed=k,
                completion=text,
                completion_tokens=1,
                score=1.0 if item in "ab" else 0.0,
                scorer="numeric",
            )
            rows.append(row.to_json())
    write_log(
        folder, "small", rows, IDS, SamplingParams(n_samples=3, temperature=1.0, max_tokens=8)
    )
    big = write_tier(tmp_path / "big", "big", [1, 1, 1, 1], None)
    record = compose_logs([Tier("small", folder, 1.0), Tier("big", big, 10.0)], signal="agreement")
    # agreement 1, 2/3, 1/3, 2/3: keeping only 'a' (threshold 1) hands b, c, d to the big tier
    assert [p.thresholds for p in record.frontier][-1] == [1.0]
    assert record.chosen is not None and record.chosen.accuracy == 1.0
