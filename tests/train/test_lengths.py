"""Truncation at `train.max_length` is counted per row (`train/lengths.py`) and matches what
training is fed: SFT's tokenized rows are exactly `kept` long."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import write_jsonl

from tuneloop.records import read_record
from tuneloop.train.common import load_tokenizer
from tuneloop.train.data import read_rows, sft_rows
from tuneloop.train.lengths import LENGTHS_FILE, RowLength, row_lengths, summarize
from tuneloop.train.methods.sft import tokenized_rows
from tuneloop.train.run import train
from tuneloop.train.settings import TrainRunRecord, TrainSettings


def _rows(tmp_path: Path) -> Path:
    short = [{"prompt": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(3)]
    long = {"prompt": "What is " + " + ".join("1" for _ in range(40)) + "?", "answer": "40"}
    return write_jsonl(tmp_path / "d.jsonl", [*short, long])


def test_sft_counts_what_the_tokenizer_keeps(tiny_model: Path, tmp_path: Path) -> None:
    rows = read_rows(_rows(tmp_path))
    tok = load_tokenizer(tiny_model)
    lengths = row_lengths(tok, rows, "sft", max_length=48)
    fed = tokenized_rows(tok, sft_rows(rows), 48)
    assert [x.kept for x in lengths] == [len(r["input_ids"]) for r in fed]
    assert [x.row for x in lengths] == [f"{tmp_path / 'd.jsonl'}:{i}" for i in range(1, 5)]
    assert [x.tokens > x.kept for x in lengths] == [False, False, False, True]
    assert row_lengths(tok, rows, "grpo", max_length=48) == []  # GRPO does not truncate


def test_summary_and_its_line() -> None:
    lengths = [RowLength("a:1", 10, 10), RowLength("a:2", 70, 64), RowLength("a:3", 90, 64)]
    s = summarize(lengths, 64)
    assert (s.rows, s.truncated_rows, s.truncated_tokens, s.longest) == (3, 2, 32, 90)
    assert s.line("sft") == (
        "sft: 2 of 3 rows longer than train.max_length 64 were truncated (32 tokens dropped; "
        "longest 90); per row in lengths.jsonl"
    )
    assert summarize(lengths[:1], 64).line("sft") is None


def test_the_run_writes_each_rows_length_and_the_totals(
    tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s = TrainSettings(method="sft", steps=1, batch_size=2, max_length=48, lora={"r": 4})
    out = train(tiny_model, _rows(tmp_path), tmp_path / "sft", s, progress=False)
    lines = [json.loads(x) for x in (out / LENGTHS_FILE).read_text().splitlines()]
    assert len(lines) == 4 and [x["truncated"] > 0 for x in lines] == [False] * 3 + [True]
    rec = read_record(out / "train_settings.json", TrainRunRecord)
    assert rec.truncated_rows == 1 and rec.truncated_tokens == lines[3]["truncated"]
    assert rec.longest_row == lines[3]["tokens"]
    assert "1 of 4 rows longer than train.max_length 48" in capsys.readouterr().err
