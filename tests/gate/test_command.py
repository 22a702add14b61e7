"""The commands through `tuneloop.cli.main`, so exit statuses are the real ones."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

from tuneloop import cli
from tuneloop.suite import load_suite, slice_ids

from .conftest import flat, improved


@pytest.fixture
def tuneloop(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    # Only this phase's commands: other phases may not be importable while they are built.
    monkeypatch.setattr(
        cli, "COMMANDS", {k: cli.COMMANDS[k] for k in ("gate", "champion", "approve")}
    )
    monkeypatch.setattr(cli, "GROUPS", {})

    def invoke(*args: str | Path) -> tuple[int, str]:
        monkeypatch.setattr(sys, "argv", ["tuneloop", *map(str, args)])
        with pytest.raises(SystemExit) as ex:
            cli.main()
        out = capsys.readouterr()
        return int(ex.value.code or 0), out.out + out.err

    return invoke


def gate_args(champ: Path, chall: Path, suite: Path, ledger: Path, *extra: str) -> list[str | Path]:
    return [
        "gate",
        "--champion",
        champ,
        "--challenger",
        chall,
        "--slice",
        "gate",
        "--suite",
        suite,
        "--ledger",
        ledger,
        *extra,
    ]


def test_aa_exits_1_then_second_look_exits_2_and_changes_nothing(
    tuneloop, make_log, suite_file, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    log = make_log("champ", improved(200))
    ledger = tmp_path / "ledger.db"
    rc, out = tuneloop(*gate_args(log, log, suite_file, ledger))
    assert rc == 1, out
    assert "decision: reject" in out and "significance" in out
    (verdict,) = (tmp_path / "verdicts").glob("*/verdict.json")
    first = json.loads(verdict.read_text())
    assert first["decision"] == "reject"
    n_gate = len(slice_ids(load_suite(suite_file), {"dev": 0.5, "gate": 0.5}, "gate"))
    assert first["stats"]["n_items"] == n_gate
    log_before = (tmp_path / "EXPERIMENT-LOG.md").read_text()
    rows_before = sqlite3.connect(ledger).execute("SELECT COUNT(*) FROM verdicts").fetchone()

    # the same evidence again is the same look: the stored verdict, nothing new recorded
    rc, out = tuneloop(*gate_args(log, log, suite_file, ledger))
    assert rc == 1 and "decision: reject" in out
    assert (tmp_path / "EXPERIMENT-LOG.md").read_text() == log_before
    again = [json.loads(p.read_text()) for p in (tmp_path / "verdicts").glob("*/verdict.json")]
    assert {v["decided_at"] for v in again} == {first["decided_at"]}

    # other evidence on the same items is a second look: refused, nothing written
    other = make_log("other", improved(200, every=4))
    rc, out = tuneloop(*gate_args(log, other, suite_file, ledger))
    assert rc == 2 and "already looked at" in out and f"{n_gate} of its {n_gate} items" in out
    assert (tmp_path / "EXPERIMENT-LOG.md").read_text() == log_before
    assert (
        sqlite3.connect(ledger).execute("SELECT COUNT(*) FROM verdicts").fetchone() == rows_before
    )

    rc, out = tuneloop(*gate_args(log, other, suite_file, ledger, "--allow-slice-reuse"))
    assert rc == 1 and "slice reuse explicitly allowed" in out


def test_promote_exits_0_and_champion_shows_it(tuneloop, make_log, suite_file, tmp_path) -> None:  # type: ignore[no-untyped-def]
    champ = make_log("champ", flat(200, 0.0))
    chall = make_log("chall", improved(200, every=2))
    desc = tmp_path / "desc.json"
    desc.write_text(json.dumps({"kind": "single", "path": "/m/merged", "sha256": "cd" * 32}))
    ledger = tmp_path / "ledger.db"
    rc, out = tuneloop(
        *gate_args(
            champ, chall, suite_file, ledger, "--challenger-descriptor", desc, "--run-id", "r1"
        )
    )
    assert rc == 0 and "decision: promote" in out and "champion v1" in out
    rc, out = tuneloop("champion", "--ledger", ledger, "--json")
    assert rc == 0
    shown = json.loads(out)
    assert (
        shown["current"]["version"] == 1 and shown["current"]["descriptor"]["path"] == "/m/merged"
    )
    rc, out = tuneloop("champion", "--ledger", ledger)
    assert rc == 0 and "current: v1" in out


def test_require_approval_exits_1_and_approve_promotes(
    tuneloop, make_log, suite_file, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    champ = make_log("champ", flat(200, 0.0))
    chall = make_log("chall", improved(200, every=2))
    ledger = tmp_path / "ledger.db"
    rc, out = tuneloop(
        *gate_args(champ, chall, suite_file, ledger, "--require-approval", "--run-id", "r9")
    )
    assert rc == 1 and "awaiting_approval" in out
    rc, out = tuneloop("champion", "--ledger", ledger)
    assert "no champion" in out
    rc, out = tuneloop("approve", "r9", "--ledger", ledger)
    assert rc == 0 and "champion v1" in out
    rc, out = tuneloop("approve", "r9", "--ledger", ledger)
    assert rc == 2 and "already approved" in out


def test_input_errors_exit_2(tuneloop, make_log, suite_file, tmp_path) -> None:  # type: ignore[no-untyped-def]
    champ = make_log("champ", flat(200, 0.0))
    other = make_log("other", flat(200, 0.0), temperature=0.0)
    ledger = tmp_path / "ledger.db"
    rc, out = tuneloop(*gate_args(champ, other, suite_file, ledger))
    assert rc == 2 and "temperature" in out
    bar = tmp_path / "bar.yaml"
    bar.write_text("alpah: 0.1\n")
    rc, out = tuneloop(*gate_args(champ, champ, suite_file, ledger, "--bar", bar))
    assert rc == 2 and "did you mean 'alpha'" in out
    rc, out = tuneloop(*gate_args(champ, champ, suite_file, ledger, "--slices", "dev=0.5,gate"))
    assert rc == 2 and "--slices" in out
    other_suite = tmp_path / "s2.jsonl"
    other_suite.write_text(suite_file.read_text().replace('"200"', '"999"'))
    rc, out = tuneloop(*gate_args(champ, champ, other_suite, ledger))
    assert rc == 2 and "suite revision" in out
    assert not ledger.exists()
