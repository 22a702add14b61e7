"""The commands through `tuneloop.cli.main`, so exit statuses are the real ones."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

from tuneloop import cli
from tuneloop.suite import load_suite, slice_ids

from ..installed import Ran
from ..installed import tuneloop as installed
from .conftest import TAGS, flat, improved


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
    assert rc == 2 and f"none of the {n_gate} items of slice 'gate'" in out
    assert f"(0 fresh, {n_gate} already looked at)" in out
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


# ---- one look per item through the installed script (issue 25) ------------------------------


def edited_suite(suite: Path, out: Path, *, change: tuple[str, ...] = (), add: int = 0) -> Path:
    """A copy of `suite` with the answers of `change` edited and `add` new items appended."""
    rows = [json.loads(line) for line in suite.read_text().splitlines()]
    for row in rows:
        if row["id"] in change:
            row["answer"] += "0"
    start = len(rows)
    rows += [
        {
            "id": f"new-{i:04d}",
            "messages": [{"role": "user", "content": f"What is {i} + 2?"}],
            "answer": str(i + 2),
            "scorer": "numeric",
            "tags": [TAGS[i % 2]],
        }
        for i in range(start, start + add)
    ]
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def logs_on(make_log, suite: Path, name: str, every: int = 3) -> Path:  # type: ignore[no-untyped-def]
    loaded = load_suite(suite)
    ids = [i.id for i in loaded.items]
    return make_log(name, improved(len(ids), every), revision_=loaded.revision, item_ids=ids)


def verdict_items(folder: Path) -> list[str]:
    return json.loads((folder / "verdict.json").read_text())["item_ids"]


def n_rows(ledger: Path, table: str) -> int:
    con = sqlite3.connect(ledger)
    try:
        return int(con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
    finally:
        con.close()


@pytest.fixture
def looked(make_log, suite_file, tmp_path):  # type: ignore[no-untyped-def]
    """A ledger whose first verdict (run r1) looked at the gate slice of `suite_file`."""
    ledger = tmp_path / "ledger.db"
    log = logs_on(make_log, suite_file, "first")
    ran = installed(*gate_args(log, log, suite_file, ledger, "--run-id", "r1"))
    assert ran.code == 1, ran.output
    return ledger, set(verdict_items(tmp_path / "verdicts" / "r1"))


def test_gate_judges_only_the_fresh_items_and_says_how_many_it_left_out(
    looked, make_log, suite_file, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    ledger, first = looked
    suite = edited_suite(suite_file, tmp_path / "s2.jsonl", add=100)
    log = logs_on(make_log, suite, "second")
    gate_ids = slice_ids(load_suite(suite), {"dev": 0.5, "gate": 0.5}, "gate")
    ran = installed(*gate_args(log, log, suite, ledger, "--run-id", "r2"))
    assert ran.code == 1, ran.output
    judged = set(verdict_items(tmp_path / "verdicts" / "r2"))
    assert judged == set(gate_ids) - first and judged.isdisjoint(first)
    left = len(set(gate_ids) & first)
    assert f"judging {len(judged)} of the slice's {len(gate_ids)} items" in ran.stdout
    assert f"{left} already looked at are left out" in ran.stdout
    # the same two logs again: the same look, answered with the stored verdict
    again = installed(*gate_args(log, log, suite, ledger))
    assert again.code == 1 and n_rows(ledger, "verdicts") == 2, again.output


def test_gate_with_no_fresh_item_is_refused_with_the_counts_and_writes_nothing(
    looked, make_log, suite_file, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    ledger, first = looked
    suite = edited_suite(suite_file, tmp_path / "s2.jsonl")  # a new revision, no new item
    suite.write_text(suite.read_text().replace('"add"', '"plus"'))  # re-tagged: same content
    log = logs_on(make_log, suite, "second", every=2)
    before = (tmp_path / "EXPERIMENT-LOG.md").read_text()
    ran = installed(*gate_args(log, log, suite, ledger))
    ran.assert_input_error("--slice", f"(0 fresh, {len(first)} already looked at)", str(ledger))
    assert len(ran.stderr.strip().splitlines()) == 1
    assert "tuneloop ledger reset" in ran.stderr
    assert n_rows(ledger, "verdicts") == 1
    assert (tmp_path / "EXPERIMENT-LOG.md").read_text() == before


def test_gate_refuses_a_changed_item_unless_declared_new(
    looked, make_log, suite_file, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    ledger, first = looked
    item = sorted(first)[0]
    suite = edited_suite(suite_file, tmp_path / "s2.jsonl", change=(item,), add=100)
    log = logs_on(make_log, suite, "second")
    ran = installed(*gate_args(log, log, suite, ledger))
    ran.assert_input_error("--item-changes: 1 item(s) of slice 'gate'", item, "ledger renew")
    assert n_rows(ledger, "verdicts") == 1 and n_rows(ledger, "item_changes") == 0
    ran = installed(*gate_args(log, log, suite, ledger, "--item-changes", "new", "--run-id", "r2"))
    assert ran.code == 1, ran.output
    assert item in verdict_items(tmp_path / "verdicts" / "r2")
    assert n_rows(ledger, "item_changes") == 1


def test_ledger_renew_accepts_exactly_the_renewed_change(
    looked, make_log, suite_file, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    ledger, first = looked
    one, two = sorted(first)[:2]
    suite = edited_suite(suite_file, tmp_path / "s2.jsonl", change=(one, two), add=100)
    ran = installed(
        "ledger", "renew", ledger, "--suite", suite, "--item", one, "--reason", "typo in ref"
    )
    assert ran.code == 0, ran.output
    assert f"{one}: content" in ran.stdout and "is a new item" in ran.stdout
    log_text = (tmp_path / "EXPERIMENT-LOG.md").read_text()
    assert "renewed as new items" in log_text and "typo in ref" in log_text and one in log_text
    shown = installed("ledger", "consumed", ledger, "--items")
    assert "1 changed item(s) declared new items" in shown.stdout, shown.output
    (line,) = [x for x in shown.stdout.splitlines() if x.startswith(f"{one}  changed ")]
    assert "by tuneloop ledger renew" in line and "typo in ref" in line
    log = logs_on(make_log, suite, "second")
    ran = installed(*gate_args(log, log, suite, ledger))
    ran.assert_input_error("--item-changes: 1 item(s)", two)  # the other change: still refused
    assert one not in ran.stderr.split(":", 3)[-1]
    suite = edited_suite(suite_file, tmp_path / "s3.jsonl", change=(one,), add=100)
    log = logs_on(make_log, suite, "third")
    ran = installed(*gate_args(log, log, suite, ledger, "--run-id", "r3"))
    assert ran.code == 1, ran.output
    assert one in verdict_items(tmp_path / "verdicts" / "r3")
    # renewed for that content only: edited once more, it is a changed item again
    suite = edited_suite(tmp_path / "s3.jsonl", tmp_path / "s4.jsonl", change=(one,))
    log = logs_on(make_log, suite, "fourth")
    installed(*gate_args(log, log, suite, ledger)).assert_input_error("--item-changes", one)


def test_ledger_renew_refuses_what_it_cannot_renew(looked, suite_file, tmp_path) -> None:  # type: ignore[no-untyped-def]
    ledger, first = looked
    consumed = sorted(first)[0]
    fresh = next(i.id for i in load_suite(suite_file).items if i.id not in first)
    suite = edited_suite(suite_file, tmp_path / "s2.jsonl", change=(fresh,))

    def renew(*items: str, reason: str = "why") -> Ran:
        pairs = [x for i in items for x in ("--item", i)]
        return installed("ledger", "renew", ledger, "--suite", suite, *pairs, "--reason", reason)

    before = (n_rows(ledger, "item_changes"), (tmp_path / "EXPERIMENT-LOG.md").read_text())
    renew("nope-1").assert_input_error("--item", "not in", "nope-1")
    renew(fresh).assert_input_error("--item", "not consumed", fresh)
    renew(consumed).assert_input_error("--item", "not changed", consumed)
    renew(consumed, reason=" ").assert_input_error("--reason")
    after = (n_rows(ledger, "item_changes"), (tmp_path / "EXPERIMENT-LOG.md").read_text())
    assert after == before
    missing = tmp_path / "none" / "ledger.db"
    ran = installed(
        "ledger", "renew", missing, "--suite", suite, "--item", consumed, "--reason", "x"
    )
    ran.assert_input_error(str(missing), "no ledger here")
    assert not missing.exists() and not missing.parent.exists()


# ---- smaller defects a new user hit -----------------------------------------------------------


def test_a_run_id_that_climbs_out_of_the_verdict_folder_is_refused(
    make_log, suite_file, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    """`--run-id ../../evil` wrote the verdict two folders above the ledger's verdicts/."""
    log = make_log("champ", improved(200))
    ledger = tmp_path / "l" / "ledger.db"
    for bad in ("../../evil", "a/b", ".."):
        ran = installed(*gate_args(log, log, suite_file, ledger, "--run-id", bad))
        ran.assert_input_error("--run-id", repr(bad))
    assert not ledger.parent.exists() and not (tmp_path.parent / "evil").exists()


def test_a_missing_sample_log_names_the_option_and_the_command_that_writes_one(
    make_log, suite_file, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    log = make_log("champ", improved(200))
    ledger = tmp_path / "ledger.db"
    ran = installed(*gate_args(tmp_path / "nope", log, suite_file, ledger))
    ran.assert_input_error("--champion", "not a sample-log folder", "tuneloop evaluate")
    ran = installed(*gate_args(log, tmp_path / "nope", suite_file, ledger))
    ran.assert_input_error("--challenger", str(tmp_path / "nope"))
    assert not ledger.exists()


def test_an_unknown_slice_names_the_command_line_option(make_log, suite_file, tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = make_log("champ", improved(200))
    args = gate_args(log, log, suite_file, tmp_path / "ledger.db")
    args[args.index("--slice") + 1] = "gat"
    installed(*args).assert_input_error("unknown slice 'gat'", "did you mean 'gate'", "--slices")


def test_read_only_ledger_commands_on_a_missing_ledger_exit_2_and_create_nothing(
    tmp_path: Path,
) -> None:
    """`tuneloop champion --ledger typo.db` said "no champion recorded … yet", exit 0."""
    missing = tmp_path / "nope" / "ledger.db"
    for args in (
        ("champion", "--ledger", missing),
        ("champion", "--ledger", missing, "--json"),
        ("ledger", "consumed", missing),
        ("ledger", "consumed", missing, "--items"),
        ("approve", "r1", "--ledger", missing),
        ("ledger", "reset", missing, "--reason", "x"),
    ):
        ran = installed(*args)
        ran.assert_input_error(str(missing), "no ledger here")
        assert len(ran.stderr.strip().splitlines()) == 1, ran.stderr
    assert not missing.parent.exists()


def test_gate_under_a_sequence_rule_spends_alpha_k_and_refuses_a_round_without_it(
    tuneloop, make_log, suite_file, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    ledger = tmp_path / "ledger.db"
    log = logs_on(make_log, suite_file, "first")
    rc, out = tuneloop(*gate_args(log, log, suite_file, ledger, "--sequence", "alpha_spending"))
    assert rc == 1 and "α_1 = 0.0304:" in out, out
    (verdict,) = (tmp_path / "verdicts").glob("*/verdict.json")
    first = json.loads(verdict.read_text())
    assert first["bar"]["sequence"]["k"] == 1 and n_rows(ledger, "alpha_spent") == 1
    (significance,) = [c for c in first["conditions"] if c["name"] == "significance"]
    assert significance["detail"] == (
        "one-sided permutation test p = 1 (≥ α_1 = 0.0304: round 1 of the sequence, "
        "alpha spending, basel series, flywheel α 0.05)"
    )
    # the next round names no rule: it would be tested outside the budget — refused
    suite = edited_suite(suite_file, tmp_path / "s2.jsonl", add=100)
    second = logs_on(make_log, suite, "second")
    ran = installed(*gate_args(second, second, suite, ledger))
    ran.assert_input_error("gate.sequence", "1 round(s) under a rule", "bar has none")
    assert n_rows(ledger, "verdicts") == 1
    # a bar file's rule and --sequence must agree
    bar_file = tmp_path / "bar.yaml"
    bar_file.write_text("sequence: lord\n")
    ran = installed(
        *gate_args(second, second, suite, ledger, "--bar", bar_file, "--sequence", "alpha_spending")
    )
    ran.assert_input_error("sets sequence {'rule': 'lord'}", "give the rule once")
    # the rule from the bar file: the ledger's is alpha_spending, so lord is another rule
    ran = installed(*gate_args(second, second, suite, ledger, "--bar", bar_file))
    ran.assert_input_error("declared by its first round", "LORD++")
    ran = installed(*gate_args(second, second, suite, ledger, "--sequence", "alpha_spending"))
    assert ran.code == 1 and "α_2 = 0.0076:" in ran.stdout, ran.output
    assert n_rows(ledger, "alpha_spent") == 2
