import json

import typer
from typer.testing import CliRunner

from tuneloop.data.command import corpus_app, ingest

from .conftest import exchange, write_jsonl
from .ingest.test_claude_code import FIXTURE as CLAUDE

app = typer.Typer()
app.command("ingest")(ingest)
app.add_typer(corpus_app, name="corpus")
runner = CliRunner()


def test_ingest_prints_the_accounting_and_scrubs(tmp_path):
    out = tmp_path / "t.jsonl"
    r = runner.invoke(app, ["ingest", "--format", "claude_code", str(CLAUDE), "--out", str(out)])
    assert r.exit_code == 0, r.output
    # a record is a line: the snapshot and the informational system entry are skipped by kind
    assert r.output.startswith(
        "26 records read, 2 records written (19 records ingested), 5 records rejected"
    )
    assert "skipped       1  snapshot" in r.output and "skipped       1  system entry" in r.output
    text = out.read_text()
    assert "sk-ant-api03-FAKE" not in text and "<SECRET>" in text
    assert json.loads(text.splitlines()[0])["schema"] == "tuneloop.trace/1"
    assert len((tmp_path / "t.rejects.jsonl").read_text().splitlines()) == 5


def test_corpus_build_and_stats(tmp_path, tiny_suite):
    lines = [exchange(1, "What is 3 + 6?", "9", "up"), exchange(2, "What is 5 + 5?", "10", "up")]
    write_jsonl(tmp_path / "log.jsonl", lines)
    cfg = tmp_path / "corpus.yaml"
    cfg.write_text(
        "sources: [{path: log.jsonl, name: prod}]\ndecontaminate: {suites: [suite.jsonl]}\n"
    )
    r = runner.invoke(app, ["corpus", "build", str(cfg)])  # out_dir defaults to <config dir>/corpus
    assert r.exit_code == 0, r.output
    assert "1 row(s) removed" in r.output and "prod/r1: exact_prompt q1; ngram_6 q1" in r.output
    r = runner.invoke(app, ["corpus", "stats", str(tmp_path / "corpus" / "sft.jsonl"), "--json"])
    stats = json.loads(r.output)
    assert stats["rows"] == 1 and stats["sources"] == {"prod": 1}


def test_bad_option_syntax_is_an_input_error(tmp_path):
    r = runner.invoke(
        app,
        ["ingest", "-f", "generic_jsonl", str(CLAUDE), "-o", str(tmp_path / "x"), "--opt", "nokey"],
    )
    assert r.exit_code != 0 and "KEY=VALUE" in str(r.exception)
