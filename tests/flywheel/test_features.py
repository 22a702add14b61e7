"""Request features, histograms and PSI with its bands, against hand-computed values."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tuneloop.errors import InputError
from tuneloop.flywheel.exchanges import Exchange
from tuneloop.flywheel.features import (
    PSI_EPS,
    feature_drift,
    length_bin,
    measure_drift,
    psi_band,
    request_features,
    tag_index,
)
from tuneloop.suite import SuiteItem


def chat(text: str) -> list[dict]:
    return [{"role": "system", "content": "be brief"}, {"role": "user", "content": text}]


def ex(text: str, **meta: object) -> Exchange:
    request: dict = {"model": "m", "messages": chat(text)}
    if meta:
        request["metadata"] = meta
    return Exchange(timestamp=1.0, completion_id="c", request=request)


@pytest.mark.parametrize(
    ("words", "label"),
    [
        (0, "0-4"),
        (4, "0-4"),
        (5, "5-8"),
        (8, "5-8"),
        (9, "9-16"),
        (16, "9-16"),
        (17, "17-32"),
        (32, "17-32"),
        (33, "33+"),
        (500, "33+"),
    ],
)
def test_length_bins_have_fixed_edges(words: int, label: str) -> None:
    assert length_bin(words) == label


@pytest.mark.parametrize(
    ("value", "band"),
    [
        (0.0, "stable"),
        (0.0999, "stable"),
        (0.1, "moderate"),
        (0.25, "moderate"),
        (0.2501, "significant"),
        (3.0, "significant"),
    ],
)
def test_psi_bands(value: float, band: str) -> None:
    assert psi_band(value) == band


def test_tag_comes_from_metadata_then_the_suite_then_none() -> None:
    item = SuiteItem("q1", chat("What is 2 + 2?"), None, "numeric", ("add",), {})
    tags = tag_index([item, SuiteItem("q2", chat("x"), None, "numeric", (), {})])
    assert tags == {"what is 2 + 2?": "add"}
    assert request_features(chat("what  is 2 + 2?"), {}, [], tags)["tag"] == "add"
    assert request_features(chat("what is 2 + 2?"), {"tag": "mul"}, [], tags)["tag"] == "mul"
    assert request_features(chat("hi"), {"tags": ["sub", "x"]}, [], tags)["tag"] == "sub"
    assert request_features(chat("hi"), {}, [], tags)["tag"] == "none"


def test_named_metadata_features_are_categories() -> None:
    meta = {"locale": "de", "tier": 3, "flags": {"b": 1, "a": 2}}
    got = request_features(
        chat("one two three four five"), meta, ["locale", "tier", "flags", "x"], {}
    )
    assert got == {
        "tag": "none",
        "prompt_words": "5-8",  # the user turn only: the system prompt is not counted
        "locale": "de",
        "tier": "3",
        "flags": '{"a": 2, "b": 1}',
        "x": "none",
    }


def write_rows(path: Path, texts: list[str], **meta: object) -> Path:
    rows = [
        {
            "messages": [*chat(t), {"role": "assistant", "content": "ok"}],
            **({"metadata": meta} if meta else {}),
        }
        for t in texts
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_psi_of_prompt_lengths_matches_a_hand_computed_value(tmp_path: Path) -> None:
    short, medium = "two plus two", "what is two plus two please"
    ref = write_rows(tmp_path / "sft.jsonl", [short, short, medium, medium])
    recent = [ex(short), ex(short), ex(short), ex(medium)]
    drift = {d.feature: d for d in measure_drift(ref, recent, features=["locale"], tags={})}
    # reference 1/2, 1/2 over the two used bins, recent 3/4, 1/4; empty bins match (term 0):
    # (3/4 − 1/2)·ln(3/2) + (1/4 − 1/2)·ln(1/2) = (1/4)·ln 3
    words = drift["prompt_words"]
    assert words.psi == pytest.approx(0.25 * math.log(3), rel=1e-12)
    assert words.band == "significant"
    assert words.reference == {"0-4": 2, "5-8": 2} and words.recent == {"0-4": 3, "5-8": 1}
    # untagged training rows: tag drift is not measured (not a PSI of 'none' vs real tags)
    assert (
        drift["tag"].psi is None and drift["tag"].note == "no reference row carries metadata 'tag'"
    )
    locale = drift["locale"]
    assert locale.psi is None and locale.band is None
    assert locale.note == "no reference row carries metadata 'locale'"


def test_a_category_seen_on_one_side_only_uses_the_explicit_floor() -> None:
    reference = [{"tag": "a", "prompt_words": "0-4"}] * 2
    recent = [{"tag": "a", "prompt_words": "0-4"}, {"tag": "b", "prompt_words": "0-4"}]
    tag = feature_drift(reference, recent, [])[0]
    expected = (0.5 - 1.0) * math.log(0.5 / 1.0) + (0.5 - PSI_EPS) * math.log(0.5 / PSI_EPS)
    assert tag.feature == "tag" and tag.psi == pytest.approx(expected, rel=1e-12)


def test_drift_is_not_measured_without_one_side(tmp_path: Path) -> None:
    no_ref = measure_drift(None, [ex("hi")], features=[], tags={})
    assert {d.note for d in no_ref} == {"no reference rows (the last round's training data)"}
    ref = write_rows(tmp_path / "sft.jsonl", ["hi"], locale="de")
    no_traffic = measure_drift(ref, [], features=["locale"], tags={})
    assert [d.psi for d in no_traffic] == [None, None, None]
    assert {d.note for d in no_traffic} == {"no recent traffic"}
    measured = measure_drift(ref, [ex("hi", locale="fr")], features=["locale"], tags={})
    assert measured[2].psi is not None and measured[2].band == "significant"


def test_a_bad_training_row_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "sft.jsonl"
    path.write_text('{"messages": []}\n{"chosen": "x"}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"sft.jsonl:2: a training row needs a 'messages' list"):
        measure_drift(path, [ex("hi")], features=[], tags={})


def test_preference_and_prompt_rows_are_references_too(tmp_path: Path) -> None:
    """`status` exited 2 on a round trained on DPO pairs: only `messages` rows were read."""
    path = tmp_path / "train.jsonl"
    rows = [
        {"prompt": [{"role": "user", "content": "two words"}], "chosen": "a", "rejected": "b"},
        {"prompt": "one two three", "completion": "c"},
        {"messages": chat("hi")},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    _tag, words = measure_drift(path, [ex("hi")], features=[], tags={})
    assert words.reference == {"0-4": 3} and words.psi == 0.0
