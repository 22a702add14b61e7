"""Ordinary mistakes in the data commands: one line naming the file (and line), exit status 2,
and nothing half-written. Run through `tuneloop.cli.main`, as the console script does."""

from __future__ import annotations

import errno
import json
import sys

import pytest

from tuneloop.cli import main
from tuneloop.data import files

from .conftest import exchange, write_jsonl


def run_cli(args: list[str], monkeypatch, capsys) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["tuneloop", *args])
    with pytest.raises(SystemExit) as done:
        main()
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


def test_corpus_stats_on_a_binary_file(tmp_path, monkeypatch, capsys):
    blob = tmp_path / "model.bin"
    blob.write_bytes(b'{"messages": []}\n\x00\x01\xff\xfe binary \x89PNG\n')
    code, _, err = run_cli(["corpus", "stats", str(blob)], monkeypatch, capsys)
    assert code == 2
    assert (
        err.strip()
        == f"error: {blob}:2: binary data, not UTF-8 JSON text; expected a corpus JSONL file"
    )


def test_ingest_rejects_a_deeply_nested_line_and_keeps_the_rest(tmp_path, monkeypatch, capsys):
    log = tmp_path / "log.jsonl"
    deep = '{"messages": ' + "[" * 100_000 + "]" * 100_000 + "}"
    good = json.dumps(exchange(1, "What is 1 + 1?", "2"))
    log.write_text(good + "\n" + deep + "\n" + good.replace('"r1"', '"r2"') + "\n")
    out = tmp_path / "t.jsonl"
    code, printed, err = run_cli(
        ["ingest", "-f", "openai_chat", str(log), "-o", str(out)], monkeypatch, capsys
    )
    assert code == 0, err
    assert "3 lines read, 2 records written" in printed and "nested deeper than" in printed
    (reject,) = [json.loads(x) for x in (tmp_path / "t.rejects.jsonl").read_text().splitlines()]
    assert reject["file"] == str(log) and reject["line"] == 2


def test_a_full_disk_leaves_no_output_and_says_so(tmp_path, monkeypatch, capsys):
    log = write_jsonl(tmp_path / "log.jsonl", [exchange(1, "What is 1 + 1?", "2")])
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "t.jsonl"
    out.write_text("earlier run\n")
    real = files._write_fd

    def half_then_full(fd: int, data: bytes) -> None:
        real(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files, "_write_fd", half_then_full)
    code, _, err = run_cli(
        ["ingest", "-f", "openai_chat", str(log), "-o", str(out)], monkeypatch, capsys
    )
    assert code == 2
    assert err.count("\n") == 1 and "disk is full" in err and str(out) in err
    assert sorted(p.name for p in out_dir.iterdir()) == ["t.jsonl"]  # no temp, no rejects
    assert out.read_text() == "earlier run\n"  # the earlier output is untouched


def test_a_full_disk_during_corpus_build_writes_nothing(tmp_path, monkeypatch, capsys):
    write_jsonl(tmp_path / "log.jsonl", [exchange(1, "What is 1 + 1?", "2", "up")])
    cfg = tmp_path / "corpus.yaml"
    cfg.write_text("sources: [{path: log.jsonl}]\n")

    def full(fd: int, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files, "_write_fd", full)
    out = tmp_path / "corpus"
    code, _, err = run_cli(["corpus", "build", str(cfg), "--out", str(out)], monkeypatch, capsys)
    assert code == 2 and "disk is full" in err and "Traceback" not in err
    assert not out.exists() or not any(out.iterdir())
