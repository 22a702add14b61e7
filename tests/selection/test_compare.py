"""compare_logs: the decision record from sample logs on disk, and every refusal."""

from __future__ import annotations

from pathlib import Path

import pytest
from scipy.stats import binomtest

from tuneloop.config.portfolio import SelectionConfig
from tuneloop.errors import InputError
from tuneloop.records import canonical_json, read_record, sha256_bytes, sha256_file, write_record
from tuneloop.records.selection import SelectionDecision
from tuneloop.selection import compare_logs

from .conftest import REVISION, MakeArm

ITEMS = [f"q{i:02d}" for i in range(20)]
TAGS = {item: ["even" if i % 2 == 0 else "odd"] for i, item in enumerate(ITEMS)}


def gate_log_sha256(folder: Path) -> str:
    """The evidence hash of a log (`samplelog.log_sha256`, what the gate binds), written out."""
    parts = {n: sha256_file(folder / n) for n in ("samples.jsonl", "summary.json")}
    return sha256_bytes(canonical_json(parts).encode())


def _scores(right: set[int], n_samples: int = 2) -> dict[str, list[float | None]]:
    return {item: [1.0 if i in right else 0.0] * n_samples for i, item in enumerate(ITEMS)}


def _three(make_arm: MakeArm) -> list[tuple[str, Path]]:
    """a: items 0-9 right; b: 0-17 right (8 wins, 0 losses); c: 0-11 right (2 wins)."""
    a = make_arm("a", _scores(set(range(10))), tokens=40, tags=TAGS, temperature=0.0)
    b = make_arm("b", _scores(set(range(18))), tokens=90, tags=TAGS, temperature=0.7)
    c = make_arm("c", _scores(set(range(12))), tokens=20, tags=TAGS, temperature=1.0)
    return [("a", a), ("b", b), ("c", c)]


def test_default_stays_decision_record(make_arm: MakeArm, tmp_path: Path) -> None:
    arms = _three(make_arm)
    rule = SelectionConfig(sign_p=0.10, non_inferiority_epsilon=0.05)
    d = compare_logs(arms, rule, default="a", same_model=True)
    assert d.chosen == "b" and d.default == "a" and d.n_items == 20
    assert d.suite_revision == REVISION
    assert d.rule == rule.model_dump(mode="json")
    assert d.rule_sha256 == sha256_bytes(canonical_json(rule.model_dump(mode="json")).encode())
    assert d.item_ids_sha256 == sha256_bytes(canonical_json(sorted(ITEMS)).encode())
    by_arm = {a.name: a for a in d.arms}
    assert [a.name for a in d.arms] == ["a", "b", "c"]
    assert by_arm["b"].mean == pytest.approx(0.9)
    assert by_arm["b"].tags == pytest.approx({"even": 0.9, "odd": 0.9})
    assert by_arm["a"].cost == 40.0 and by_arm["c"].cost == 20.0
    assert by_arm["c"].settings["temperature"] == 1.0 and by_arm["c"].model == "m0"
    for name, folder in arms:
        assert by_arm[name].log == str(folder)
        assert by_arm[name].log_sha256 == gate_log_sha256(folder)
    pairs = {p.candidate: p for p in d.pairs}
    assert set(pairs) == {"b", "c"}
    b, c = pairs["b"], pairs["c"]
    assert (b.wins, b.losses, b.ties, b.default) == (8, 0, 12, "a")
    assert b.sign_p == pytest.approx(binomtest(8, 8, 0.5).pvalue, rel=1e-12)
    assert b.advantage == pytest.approx(0.4) and b.beats_default and b.non_inferior
    assert [(t.tag, t.n_items, t.non_inferior) for t in b.tags] == [
        ("even", 10, True),
        ("odd", 10, True),
    ]
    assert (c.wins, c.losses) == (2, 0)
    assert c.sign_p == pytest.approx(binomtest(2, 2, 0.5).pvalue, rel=1e-12)
    assert not c.beats_default
    assert "'b' replaces default 'a'" in d.reason
    # the record round-trips through the catalogued reader
    write_record(tmp_path / "d.json", d)
    assert read_record(tmp_path / "d.json", SelectionDecision) == d


def test_the_default_stays_when_the_sign_test_is_not_small_enough(make_arm: MakeArm) -> None:
    arms = _three(make_arm)
    d = compare_logs(arms, SelectionConfig(sign_p=0.001), default="a", same_model=True)
    assert d.chosen == "a"
    assert d.reason.startswith("default 'a' stays: 'b' advantage +0.400 but sign-test p 0.0078")


def test_no_default_means_the_cheapest_and_given_costs_replace_tokens(make_arm: MakeArm) -> None:
    arms = _three(make_arm)
    d = compare_logs(arms, SelectionConfig(), default=None, same_model=True)
    assert d.default == "c"  # 20 tokens per sample
    assert "no default given: 'c' is the cheapest arm, cost 20" in d.reason
    d = compare_logs(
        arms, SelectionConfig(), default=None, costs={"a": 1.0, "b": 2.0}, same_model=True
    )
    assert d.default == "a"  # c's cost is unknown: last
    assert {a.name: a.cost for a in d.arms} == {"a": 1.0, "b": 2.0, "c": None}


def test_best_mean_records_pairs_against_the_chosen_arm(make_arm: MakeArm) -> None:
    arms = _three(make_arm)
    d = compare_logs(arms, SelectionConfig(rule="best_mean"), default=None, same_model=True)
    assert d.chosen == "b" and d.default is None
    assert {(p.candidate, p.default) for p in d.pairs} == {("a", "b"), ("c", "b")}
    a = next(p for p in d.pairs if p.candidate == "a")
    assert (a.wins, a.losses) == (0, 8) and a.advantage == pytest.approx(-0.4)


def test_missing_and_harness_errors_count_zero_and_items_average_samples(
    make_arm: MakeArm,
) -> None:
    a = make_arm("a", {"x": [1.0, 1.0], "y": [1.0, 0.0]})
    b = make_arm("b", {"x": [1.0, None], "y": [-1.0, 1.0]})  # None: missing, -1: harness error
    d = compare_logs([("a", a), ("b", b)], SelectionConfig(), default="a", same_model=True)
    means = {arm.name: arm.mean for arm in d.arms}
    assert means == pytest.approx({"a": 0.75, "b": 0.5})
    (p,) = d.pairs
    assert (p.wins, p.losses, p.ties) == (0, 1, 1)
    assert [t.tag for t in p.tags] == [""]  # untagged items


def test_refusals_name_the_log_folder(make_arm: MakeArm, tmp_path: Path) -> None:
    rule = SelectionConfig()
    a = make_arm("a", _scores({1}))
    cases: list[tuple[list[tuple[str, Path]], dict[str, object], str]] = [
        ([("a", a)], {}, "at least 2 sample logs, got 1"),
        ([("a", a), ("a", make_arm("a2", _scores({2})))], {}, "a2: arm name 'a' is also"),
        (
            [("a", a), ("r", make_arm("r", _scores({2}), revision="c" * 64))],
            {},
            f"{tmp_path / 'r'}: suite revision cccccccccccc differs from {a}'s",
        ),
        (
            [("a", a), ("i", make_arm("i", {"q00": [1.0], "zz": [0.0]}))],
            {},
            f"{tmp_path / 'i'}: evaluated other items than {a}",
        ),
        (
            [("a", a), ("m", make_arm("m", _scores({2}), model="other"))],
            {},
            f"{tmp_path / 'm'}: model 'other' differs from {a}'s 'm0'",
        ),
        ([("a", a), ("n", tmp_path / "nope")], {}, f"{tmp_path / 'nope'}: not a sample log"),
        ([("a", a), ("b", make_arm("b", _scores({2})))], {"default": "bb"}, "did you mean 'b'"),
    ]
    for arms, kw, message in cases:
        with pytest.raises(InputError) as err:
            compare_logs(arms, rule, default=kw.get("default"), same_model=True)  # type: ignore[arg-type]
        assert message in str(err.value)


def test_the_loop_compares_different_models_on_the_same_items(make_arm: MakeArm) -> None:
    a = make_arm("a", _scores({1}), model="challenger-a")
    b = make_arm("b", _scores({1, 2}), model="challenger-b", temperature=0.2)
    d = compare_logs([("a", a), ("b", b)], SelectionConfig(), default="a", same_model=False)
    assert {arm.model for arm in d.arms} == {"challenger-a", "challenger-b"}
