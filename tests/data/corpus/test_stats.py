import json

import pytest

from tests.data.conftest import write_jsonl
from tuneloop.data.corpus.stats import corpus_stats, percentiles
from tuneloop.errors import InputError

from ...installed import tuneloop


def test_percentiles_nearest_rank():
    assert percentiles([5, 1, 3, 2, 4]) == {"p50": 3, "p90": 5, "p99": 5, "p100": 5}
    assert percentiles([]) == {}


def test_stats_of_sft_and_preference_rows(tmp_path):
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    rows = [
        {
            "messages": [{"role": "user", "content": "ab"}, {"role": "assistant", "content": "cd"}],
            "source": "x",
        },
        {
            "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c", "content": "r"},
            ],
            "source": "y",
        },
        {
            "prompt": [{"role": "user", "content": "p"}],
            "chosen": [{"role": "assistant", "content": "c"}],
            "rejected": [{"role": "assistant", "content": "r"}],
        },
    ]
    s = corpus_stats(write_jsonl(tmp_path / "c.jsonl", rows))
    assert (s["rows"], s["turns"], s["tool_calls"]) == (3, 7, 1)
    assert s["sources"] == {"x": 1, "y": 1, "(none)": 1}
    assert s["final_assistant_share"] == pytest.approx(2 / 3)
    assert s["chars"]["p100"] == len("q\nf {}\nr")


def test_bad_rows_name_file_and_line(tmp_path):
    with pytest.raises(InputError, match=r"c.jsonl:2: expected 'messages'"):
        corpus_stats(write_jsonl(tmp_path / "c.jsonl", [{"messages": []}, {"text": "x"}]))


def test_token_percentiles_with_the_example_tokenizer(tmp_path):
    from tests.data.conftest import ARITH

    model = ARITH / "model"
    if not (model / "tokenizer.json").is_file():
        pytest.skip("examples/arith/model is not built (python examples/arith/build_model.py)")
    rows = [
        {
            "messages": [
                {"role": "user", "content": "What is 3 + 4?"},
                {"role": "assistant", "content": "7"},
            ]
        }
    ]
    s = corpus_stats(write_jsonl(tmp_path / "c.jsonl", rows), tokenizer=model)
    assert 0 < s["tokens"]["p50"] <= len("What is 3 + 4?\n7")


def test_missing_tokenizer_folder_is_an_input_error(tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [{"messages": [{"role": "user", "content": "x"}]}])
    with pytest.raises(InputError, match="--tokenizer"):
        corpus_stats(path, tokenizer=tmp_path / "nope")


def test_a_bom_and_crlf_are_read_and_a_json_array_is_named(tmp_path):
    """`corpus stats` refused a file saved with a byte-order mark (a Windows editor's)."""
    row = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
    (tmp_path / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + (row + "\r\n").encode() * 2)
    ran = tuneloop("corpus", "stats", "bom.jsonl", "--json", cwd=tmp_path)
    assert ran.code == 0, ran.output
    assert json.loads(ran.stdout)["rows"] == 2
    (tmp_path / "array.jsonl").write_text(f"[{row}]\n")
    ran = tuneloop("corpus", "stats", "array.jsonl", cwd=tmp_path)
    ran.assert_input_error("array.jsonl:1", "a JSON array")
