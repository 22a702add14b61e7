"""`tuneloop ingest --format auto` and the bad inputs every format shares, through the
installed script: a folder mixing formats (each chosen and said), a wrong --format (named for
what the file looks like), an empty folder, a truncated document, a 100 MB file of one line —
one clear error each, exit 2, nothing written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tuneloop.data.ingest.documents import load_json_document
from tuneloop.errors import InputError

from ...installed import tuneloop

FIXTURES = Path(__file__).parents[1] / "fixtures"


def _mixed(tmp: Path) -> Path:
    folder = tmp / "logs"
    (folder / "nested").mkdir(parents=True)
    shutil.copy(FIXTURES / "openai_proxy.jsonl", folder / "proxy.jsonl")
    shutil.copy(FIXTURES / "claude_code_session.jsonl", folder / "nested" / "session.jsonl")
    (folder / "notes.txt").write_text("not a trace\n")
    return folder


def test_auto_sorts_a_mixed_folder_and_says_what_it_chose(tmp_path):
    out = tmp_path / "traces.jsonl"
    ran = tuneloop("ingest", _mixed(tmp_path), "--format", "auto", "--out", out)
    assert ran.code == 0, ran.output
    assert "auto: openai_chat for 1 source(s)" in ran.stdout
    assert "auto: claude_code for 1 source(s)" in ran.stdout
    assert "1 file(s) of no known format, skipped" in ran.stdout and "notes.txt" in ran.stdout
    assert "skipped       1  file of no known format" in ran.stdout
    sources = {json.loads(line)["source"] for line in out.read_text().splitlines()}
    assert len(sources) == 2


def test_a_wrong_format_names_what_the_file_looks_like(tmp_path):
    session = FIXTURES / "claude_code_session.jsonl"
    ran = tuneloop("ingest", session, "--format", "openai_chat", "--out", tmp_path / "t.jsonl")
    ran.assert_input_error("0 records with --format openai_chat", "looks like --format claude_code")
    assert len(ran.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "t.jsonl").exists()


@pytest.mark.parametrize("fmt", ["auto", "openai_chat"])
def test_an_empty_folder_is_refused(tmp_path, fmt):
    (tmp_path / "empty").mkdir()
    ran = tuneloop("ingest", tmp_path / "empty", "--format", fmt, "--out", tmp_path / "t.jsonl")
    ran.assert_input_error(str(tmp_path / "empty"))
    assert not (tmp_path / "t.jsonl").exists()


def test_a_truncated_document_names_the_file_and_where(tmp_path):
    path = tmp_path / "session.json"
    path.write_text('{"sessionId": "s", "messages": [{"type": "user", "content": "hi"}, {"ty')
    with pytest.raises(InputError, match=r"session.json:1:\d+: truncated"):
        load_json_document(path)


@pytest.mark.parametrize("fmt", ["auto", "openai_chat"])
def test_a_100_mb_file_of_one_line(tmp_path, fmt):
    huge = tmp_path / "huge.jsonl"
    with huge.open("w") as fh:
        fh.write('{"messages": "' + "x" * (100 * 2**20) + "\n")  # one line, never closed
    out = tmp_path / "t.jsonl"
    ran = tuneloop("ingest", huge, "--format", fmt, "--out", out, timeout=120)
    ran.assert_input_error(str(huge))
    assert len(ran.output) < 2000  # the line is never echoed whole
    assert not out.exists()


def test_auto_tells_every_format_apart_in_one_folder(tmp_path):
    """One real fixture of each format side by side (a Cline task folder among the files)."""
    picks = {
        "aider": "aider/chat-history.md",
        "claude_code": "claude_code/subagent.jsonl",
        "cline": "cline/1770858773985",
        "codex_cli": next((FIXTURES / "codex_cli").glob("rollout-*.jsonl")).relative_to(FIXTURES),
        "gemini_cli": "gemini_cli/session-2025-12-01T21-45-5b959dae.json",
        "litellm": "litellm/standard_logging_payload.json",
        "openai_chat": "openai_proxy.jsonl",
        "openhands": "openhands/v0/basic_interactions.json",
        "otel": "otel/openinference.json",
    }
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for fmt, rel in picks.items():
        src = FIXTURES / rel
        dst = mixed / f"{fmt}-{src.name}"
        shutil.copytree(src, dst) if src.is_dir() else shutil.copy(src, dst)
    out = tmp_path / "traces.jsonl"
    ran = tuneloop("ingest", mixed, "--format", "auto", "--out", out)
    assert ran.code == 0, ran.output
    for fmt in picks:
        assert f"auto: {fmt} for 1 source(s): {mixed / fmt}-" in ran.stdout, (fmt, ran.stdout)
    assert "no known format" not in ran.stdout
    assert len(out.read_text().splitlines()) >= len(picks)
