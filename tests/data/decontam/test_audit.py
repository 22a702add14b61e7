import random

import pytest

from tests.data.conftest import ARITH, exchange, write_jsonl
from tuneloop.data.corpus import build_corpus
from tuneloop.data.decontam.audit import (
    MUTATIONS,
    case_whitespace,
    in_filler,
    numbers_spelled,
    plant,
    recall_failures,
    recall_report,
    rewrapped,
)
from tuneloop.data.decontam.sets import decontaminate_sets
from tuneloop.errors import InputError
from tuneloop.records import CorpusProvenance, read_record

PROMPT = "What is the sum of 38 and 5 when you add them together?"


def test_mutations_disguise_the_prompt():
    rng = random.Random(0)
    assert all(len(line) <= 12 for line in rewrapped(PROMPT, rng).splitlines())
    assert PROMPT in in_filler(PROMPT, rng) and in_filler(PROMPT, rng) != PROMPT
    cased = case_whitespace(PROMPT, rng)
    assert cased != PROMPT and " ".join(cased.lower().split()) == PROMPT.lower()
    assert numbers_spelled(PROMPT, rng) == (
        "What is the sum of thirty-eight and five when you add them together?"
    )


def test_plant_is_seeded_and_skips_items_a_mutation_cannot_disguise():
    items = [("s", "a", "What is 3 + 4?"), ("s", "b", "Name a colour of the sky.")]
    canaries = plant(items, per_mutation=5, seed=1)
    assert canaries == plant(items, per_mutation=5, seed=1)
    by = {m: [c.item_id for c in canaries if c.mutation == m] for m in MUTATIONS}
    assert sorted(by["verbatim"]) == ["a", "b"] and by["numbers_spelled"] == ["a"]
    report = recall_report(canaries, caught=set())
    assert report["numbers_spelled"]["planted"] == 1 and report["verbatim"]["recall"] == 0.0
    assert recall_report([], set())["verbatim"]["recall"] is None  # not measured


def test_min_recall_names_the_mutation_and_the_figure():
    report = {
        "verbatim": {"planted": 4, "caught": 4, "recall": 1.0},
        "in_filler": {"planted": 4, "caught": 3, "recall": 0.75},
    }
    assert recall_failures(report, 0.5, {}) == []
    (msg,) = recall_failures(report, 0.5, {"in_filler": 0.9})
    assert "min_recall_by_mutation.in_filler" in msg and "0.750 (3/4 caught) < 0.9" in msg


@pytest.mark.parametrize("number_words, spelled", [(False, 0.0), (True, 1.0)])
def test_arith_recall_per_mutation(number_words, spelled):
    run = decontaminate_sets(
        {"rows": []}, [ARITH / "suite.jsonl"], number_words=number_words, canaries=40, seed=0
    )
    recall = {m: r["recall"] for m, r in run.audit.items()}
    assert recall == {
        "verbatim": 1.0,
        "rewrapped": 1.0,
        "in_filler": 1.0,
        "case_whitespace": 1.0,
        "numbers_spelled": spelled,
    }


def _config(tmp_path, audit: str) -> object:
    write_jsonl(tmp_path / "log.jsonl", [exchange(1, "What is 5 + 5?", "10", "up")])
    cfg = tmp_path / "corpus.yaml"
    cfg.write_text(
        "sources: [{path: log.jsonl}]\n"
        "decontaminate:\n  suites: [suite.jsonl]\n"
        f"  audit: {audit}\n"
    )
    return cfg


def test_build_reports_recall_and_leaves_no_canary(tmp_path, tiny_suite):
    result = build_corpus(_config(tmp_path, "{canaries: 3}"), tmp_path / "out", progress=False)
    prov = read_record(result.provenance_path, CorpusProvenance)
    assert prov.decontamination_audit is not None
    assert prov.decontamination_audit["verbatim"].planted == 3
    assert prov.decontamination_audit["verbatim"].recall == 1.0
    for path in (tmp_path / "out").iterdir():
        assert "OK." not in path.read_text() or path.name == "provenance.json", path.name


def test_build_below_min_recall_fails_and_writes_nothing(tmp_path, tiny_suite):
    # tiny_suite's items are 6-7 tokens: "in filler" is caught, so fail on a bar of 1.01
    # for numbers with the normalization switched off instead
    cfg = _config(tmp_path, "{canaries: 3, min_recall_by_mutation: {numbers_spelled: 0.9}}")
    cfg.write_text(cfg.read_text().replace("  audit:", "  number_words: false\n  audit:"))
    with pytest.raises(InputError) as err:
        build_corpus(cfg, tmp_path / "out", progress=False)
    assert "'numbers_spelled'" in str(err.value) and "0.000 (0/3 caught) < 0.9" in str(err.value)
    assert not (tmp_path / "out").exists()
