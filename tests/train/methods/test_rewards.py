from __future__ import annotations

import json
from typing import Any

import pytest

from tuneloop.plugins import Score
from tuneloop.train.methods.rewards import BANDS, band_counts, completion_text, scorer_reward


def _exact(**kw: Any) -> Any:
    def score(item: dict, completion: str) -> Score:
        return Score(1.0 if completion.strip() == item["answer"] else 0.0, {"kw": kw})

    return score


def test_reward_is_the_scorer_value_on_each_rows_reference() -> None:
    seen: list[str] = []

    def get(name: str) -> Any:
        seen.append(name)
        return _exact

    reward = scorer_reward(None, "exact", get=get)
    items = [json.dumps({"answer": "4"}), json.dumps({"answer": "5", "scorer": "exact2"})]
    completions = [[{"role": "assistant", "content": "4"}], [{"role": "assistant", "content": "4"}]]
    assert reward(completions=completions, item=items, prompts=["a", "b"]) == [1.0, 0.0]
    assert seen == ["exact", "exact2"]


def test_fixed_scorer_overrides_the_row() -> None:
    names: list[str] = []
    reward = scorer_reward("fixed", "dflt", get=lambda n: names.append(n) or _exact)
    reward(completions=["1"], item=[json.dumps({"answer": "1", "scorer": "other"})])
    assert names == ["fixed"]


def test_registered_numeric_scorer_is_used_by_default() -> None:
    reward = scorer_reward(None, "numeric")
    item = json.dumps({"answer": "82"})
    assert reward(completions=["82", "81"], item=[item, item]) == [1.0, 0.0]


def test_completion_text_handles_message_lists() -> None:
    assert completion_text([{"role": "assistant", "content": "a"}]) == "a"
    assert completion_text("b") == "b"


def test_trajectory_scorers_get_the_messages_with_their_tool_calls() -> None:
    reward = scorer_reward("tool_call_valid", "numeric")
    item = json.dumps({"answer": "7", "tools": ["calculator"]})
    call = {"id": "c1", "type": "function", "function": {"name": "calculator"}}
    good = dict(call, function={"name": "calculator", "arguments": '{"expression": "3+4"}'})
    bad = dict(call, function={"name": "calculator", "arguments": "{not json"})
    turn = [
        {"role": "assistant", "content": None, "tool_calls": [good, bad]},
        {"role": "tool", "tool_call_id": "c1", "content": "7"},
        {"role": "assistant", "content": "7"},
    ]
    # flattened to text there would be no calls at all, and the score would be 1.0
    assert reward(completions=[turn], item=[item]) == [0.5]


def test_prompts_are_counted_per_band_once_per_group() -> None:
    """TRL lays out each prompt's G completions side by side: a run of equal items is one."""
    a = json.dumps({"answer": "1", "band": "hard"})
    b = json.dumps({"answer": "2", "band": "medium"})
    c = json.dumps({"answer": "3", "band": "hard"})
    plain = json.dumps({"answer": "4"})
    items = [a, a, a, b, b, b, c, c, c, plain, plain, plain]
    counts = band_counts(items, [json.loads(i) for i in items])
    assert counts == {"hard": 2, "medium": 1}


def test_the_band_counts_reach_trls_log_metric(monkeypatch: pytest.MonkeyPatch) -> None:
    logged: list[tuple[str, float]] = []
    reward = scorer_reward(None, "numeric")
    hard = json.dumps({"answer": "1", "band": "hard"})
    plain = json.dumps({"answer": "1"})
    reward(completions=["1", "2"], item=[plain, plain], log_metric=lambda *kv: logged.append(kv))
    assert logged == []  # no band seen yet: an unbanded corpus logs nothing
    reward(completions=["1", "2"], item=[hard, hard], log_metric=lambda *kv: logged.append(kv))
    assert logged == [("band_easy", 0), ("band_hard", 1), ("band_medium", 0), ("band_unknown", 0)]
    logged.clear()
    # under torchrun TRL averages over the processes: each logs its count × the world size
    monkeypatch.setenv("WORLD_SIZE", "2")
    reward(completions=["1", "2"], item=[plain, plain], log_metric=lambda *kv: logged.append(kv))
    assert ("band_hard", 0) in logged  # once seen, every band is logged (0 when absent)
    logged.clear()
    reward(completions=["1"], item=[hard], log_metric=lambda *kv: logged.append(kv))
    assert ("band_hard", 2) in logged


def test_the_known_bands_are_the_corpus_builders() -> None:
    from tuneloop.data.corpus.bands import BANDS as CORPUS_BANDS

    assert set(BANDS) == set(CORPUS_BANDS)
