"""Ordinary mistakes in the data commands: one line naming the file (and line), exit status 2,
and nothing half-written. Run through `tuneloop.cli.main`, as the console script does."""

from __future__ import annotations

import errno
import json
import sys

import pytest

from tuneloop.cli import main
from tuneloop.data import files

from ..installed import tuneloop
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


# ---- issue 25: outputs that are inputs, empty results, odd input files (installed script) ----


def _log(tmp_path, name: str = "log.jsonl"):
    return write_jsonl(tmp_path / name, [exchange(1, "What is 1 + 1?", "2", "up")])


@pytest.mark.parametrize("option", ["--out", "--rejects"])
def test_ingest_refuses_an_output_that_is_its_input(tmp_path, option):
    """Issue 25 defect 7: `--out` or `--rejects` equal to the input replaced it, exit 0."""
    log = _log(tmp_path)
    before = log.read_bytes()
    (tmp_path / "link.jsonl").symlink_to(log)
    args = ["--out", str(tmp_path / "out.jsonl"), option, str(tmp_path / "link.jsonl")]
    ran = tuneloop("ingest", "-f", "openai_chat", log, *args, cwd=tmp_path)
    ran.assert_input_error(option, "is the input", str(log))
    assert log.read_bytes() == before and not (tmp_path / "out.jsonl").exists()


def test_ingest_refuses_the_same_path_for_out_and_rejects(tmp_path):
    log, out = _log(tmp_path), tmp_path / "o.jsonl"
    ran = tuneloop("ingest", "-f", "openai_chat", log, "-o", out, "--rejects", out, cwd=tmp_path)
    ran.assert_input_error("--rejects", "give each output its own path")
    assert not out.exists()


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"", "0 lines read"),
        (b'[{"messages": [{"role": "user", "content": "hi"}]}]\n', "a JSON array"),
        (None, "0 records with --format claude_code"),
    ],
)
def test_ingest_that_makes_no_record_exits_2_and_writes_nothing(tmp_path, content, why):
    """Issue 25 defect 13: an empty result (wrong --format, empty file) exited 0."""
    log = _log(tmp_path) if content is None else tmp_path / "log.jsonl"
    if content is not None:
        log.write_bytes(content)
    fmt = "claude_code" if content is None else "openai_chat"
    ran = tuneloop("ingest", "-f", fmt, log, "-o", tmp_path / "out" / "t.jsonl", cwd=tmp_path)
    ran.assert_input_error(str(log), "0 records", f"--format {fmt}", why)
    assert len(ran.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_ingest_reads_bom_crlf_and_rejects_only_the_line_that_is_not_utf8(tmp_path):
    lines = [json.dumps(exchange(i, f"What is {i} + 1?", str(i + 1), "up")) for i in range(3)]
    log = tmp_path / "log.jsonl"
    bad = lines[1].replace("What", "Wh\xe4t").encode("latin-1")  # one byte that is not UTF-8
    log.write_bytes(
        b"\xef\xbb\xbf" + lines[0].encode() + b"\r\n" + bad + b"\r\n" + lines[2].encode()
    )
    out = tmp_path / "t.jsonl"
    ran = tuneloop("ingest", "-f", "openai_chat", log, "-o", out, cwd=tmp_path)
    assert ran.code == 0, ran.output
    assert "3 lines read, 2 records written" in ran.stdout
    assert "\ufffd" not in out.read_text(encoding="utf-8")
    (reject,) = [json.loads(x) for x in (tmp_path / "t.rejects.jsonl").read_text().splitlines()]
    assert reject["line"] == 2 and "not UTF-8" in reject["reason"]


def test_ingest_reads_a_traffic_folder_and_joins_feedback_across_rotation(tmp_path):
    """Issue 25 defect 4: 3 corrections after a rotation gave 0 training rows."""
    logs = tmp_path / "traffic"
    logs.mkdir()
    write_jsonl(logs / "traffic-1.jsonl", [exchange(i, f"What is {i} + 1?", "?") for i in range(3)])
    fb = [
        {"type": "feedback", "completion_id": f"r{i}", "verdict": "down", "correction": str(i + 1)}
        for i in range(3)
    ]
    write_jsonl(logs / "traffic.jsonl", fb)
    out = tmp_path / "t.jsonl"
    ran = tuneloop("ingest", "-f", "openai_chat", logs, "-o", out, cwd=tmp_path)
    assert ran.code == 0, ran.output
    assert "6 lines read, 3 records written (6 lines ingested), 0 lines rejected" in ran.stdout
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["feedback"]["correction"] for r in rows] == ["1", "2", "3"]


def test_an_out_of_range_rating_rejects_its_line(tmp_path):
    rated = {**exchange(1, "What is 1 + 1?", "2"), "rating": 7}
    log = write_jsonl(tmp_path / "log.jsonl", [rated, exchange(2, "What is 2 + 1?", "3", "up")])
    ran = tuneloop("ingest", "-f", "openai_chat", log, "-o", tmp_path / "t.jsonl", cwd=tmp_path)
    assert ran.code == 0, ran.output
    assert "1 records written" in ran.stdout
    (reject,) = [json.loads(x) for x in (tmp_path / "t.rejects.jsonl").read_text().splitlines()]
    assert reject["line"] == 1 and "rating 7 is out of range" in reject["reason"]


def test_corpus_build_refuses_an_out_dir_holding_a_source_named_like_an_output(tmp_path):
    """Issue 25 defect 7: the source `sft.jsonl` in out_dir was replaced by the build."""
    src = _log(tmp_path, "sft.jsonl")
    before = src.read_bytes()
    cfg = tmp_path / "corpus.yaml"
    cfg.write_text("sources: [{path: sft.jsonl, format: openai_chat}]\nout_dir: .\n")
    ran = tuneloop("corpus", "build", cfg, cwd=tmp_path)
    ran.assert_input_error("out_dir", "is the input", "sft.jsonl")
    assert src.read_bytes() == before and not (tmp_path / "provenance.json").exists()
    cfg.write_text("sources: [{path: logs, format: openai_chat}]\nout_dir: logs\n")
    (tmp_path / "logs").mkdir()
    _log(tmp_path / "logs")
    tuneloop("corpus", "build", cfg, cwd=tmp_path).assert_input_error("out_dir", "sources.0.path")


def test_corpus_build_with_the_wrong_format_exits_2_and_writes_nothing(tmp_path):
    """Issue 25 defect 13, corpus side."""
    _log(tmp_path)
    cfg = tmp_path / "corpus.yaml"
    cfg.write_text("sources: [{path: log.jsonl, format: claude_code}]\nout_dir: corpus\n")
    ran = tuneloop("corpus", "build", cfg, cwd=tmp_path)
    ran.assert_input_error("sources.0.path", "log.jsonl", "0 records with format claude_code")
    assert not (tmp_path / "corpus").exists()


@pytest.mark.parametrize(
    ("out", "message"),
    [
        ("file/t.jsonl", "a folder on the path is a file"),
        ("folder", "it is a folder, not a file"),
    ],
)
def test_ingest_into_a_path_that_cannot_be_a_file_gives_the_right_advice(tmp_path, out, message):
    """Was "cannot write: File exists … (free space or fix the folder's permissions)"."""
    log = _log(tmp_path)
    (tmp_path / "file").write_text("x")
    (tmp_path / "folder").mkdir()
    ran = tuneloop("ingest", "-f", "openai_chat", log, "-o", out, cwd=tmp_path)
    ran.assert_input_error(out, message, "give another output path")
    assert "free space" not in ran.output


def test_ingest_refuses_a_file_given_twice(tmp_path):
    """Was: every record written twice, exit 0."""
    log = _log(tmp_path)
    ran = tuneloop("ingest", "-f", "openai_chat", log, "./log.jsonl", "-o", "t.jsonl", cwd=tmp_path)
    ran.assert_input_error("log.jsonl", "given twice")
    assert not (tmp_path / "t.jsonl").exists()


def test_ingest_of_a_folder_without_jsonl_names_it(tmp_path):
    (tmp_path / "logs").mkdir()
    ran = tuneloop("ingest", "-f", "openai_chat", "logs", "-o", "t.jsonl", cwd=tmp_path)
    ran.assert_input_error("logs", "no *.jsonl file")
