"""One look per gate item, whatever the suite revision (issue 25): the fake loop of
tests/loop/fakeloop.py promotes once, then the suite is edited the ways a user would."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tuneloop.config import load_config
from tuneloop.errors import InputError
from tuneloop.gate.ledger import open_ledger
from tuneloop.loop.layout import slice_ids

from ..installed import tuneloop
from . import fakeloop
from .fakeloop import runner, write_config

EXAMPLE = Path(__file__).parents[2] / "examples" / "arith"


@pytest.fixture(autouse=True)
def _calls() -> None:
    fakeloop.CALLS.clear()


def promoted(tmp: Path) -> tuple[Path, Path]:
    """A loop that promoted once (the demo's state in the issue): (config, ledger). Its
    train.data is the example's, so that `tuneloop check` passes it too."""
    config = write_config(tmp, train={"data": str(EXAMPLE / "train_prompts.jsonl")})
    runner(config).run()
    assert verdict(tmp)["decision"] == "promote"
    fakeloop.CALLS.clear()
    return config, tmp / "ledger" / "ledger.db"


def verdict(tmp: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((tmp / "work" / "gate" / "verdict.json").read_text())


def n_verdicts(ledger: Path) -> int:
    con = sqlite3.connect(ledger)
    try:
        return int(con.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0])
    finally:
        con.close()


def edit_answer(suite: Path, item_id: str) -> None:
    rows = [json.loads(line) for line in suite.read_text().splitlines()]
    for row in rows:
        if row["id"] == item_id:
            row["answer"] += "0"  # one character
    suite.write_text("".join(json.dumps(r) + "\n" for r in rows))


def add_items(suite: Path, n: int) -> list[str]:
    start = fakeloop.N_ITEMS
    rows = [
        {
            "id": f"new{i:04d}",
            "messages": [{"role": "user", "content": f"What is {i} + 2?"}],
            "answer": str(i + 2),
            "tags": ["add" if i % 2 else "sub"],
        }
        for i in range(start, start + n)
    ]
    with suite.open("a") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in rows))
    return [r["id"] for r in rows]


def a_gate_item(config: Path) -> str:
    return slice_ids(load_config(config), "gate")[0]


def test_editing_one_item_is_refused_before_compute_through_the_installed_script(
    tmp_path: Path,
) -> None:
    """The issue's scenario: one character of one answer changed, then `tuneloop run`."""
    config, ledger = promoted(tmp_path)
    before, work = n_verdicts(ledger), snapshot(tmp_path / "work")
    item = a_gate_item(config)
    edit_answer(tmp_path / "suite.jsonl", item)
    for command in ("check", "run"):
        proc = tuneloop(command, config)
        assert proc.code == 2, proc.output
        assert "Traceback" not in proc.stderr
        assert "suite.item_changes (default): 1 item(s) of slice 'gate'" in proc.stderr
        assert item in proc.stderr and "refused before any phase ran" in proc.stderr
    assert n_verdicts(ledger) == before  # 0 new verdicts
    assert snapshot(tmp_path / "work") == work  # no phase ran: not a file of the round moved


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if p.is_file()
    }


def test_a_new_revision_with_no_new_items_gives_no_second_look(tmp_path: Path) -> None:
    """Re-tagging every item is a new revision with the same content: nothing is fresh, and
    the refusal says how many items are fresh and no longer suggests a new revision."""
    config, ledger = promoted(tmp_path)
    suite = tmp_path / "suite.jsonl"
    rows = [json.loads(line) for line in suite.read_text().splitlines()]
    suite.write_text("".join(json.dumps({**r, "tags": ["retagged"]}) + "\n" for r in rows))
    proc = tuneloop("run", config)
    assert proc.code == 2, proc.output
    assert "is fresh (0 fresh, " in proc.stderr and "already looked at" in proc.stderr
    assert "a new revision brings" not in proc.stderr
    assert n_verdicts(ledger) == 1 and fakeloop.CALLS == []


def test_forty_new_items_gate_on_the_new_items_only(tmp_path: Path) -> None:
    config, ledger = promoted(tmp_path)
    first = set(verdict(tmp_path)["item_ids"])
    new = add_items(tmp_path / "suite.jsonl", 40)
    runner(config, ["gate.min_items=5"]).run()
    judged = verdict(tmp_path)["item_ids"]
    assert judged and set(judged) <= set(new)  # every judged item is new
    assert set(judged) == set(slice_ids(load_config(config), "gate")) - first
    assert n_verdicts(ledger) == 2
    with open_ledger(ledger) as db:  # each look recorded with the item's content hash
        looks = db.item_looks(judged)
        assert all(len(v) == 1 and v[0].content_sha256 for v in looks.values())


def test_fewer_fresh_items_than_min_items_is_refused_before_compute(tmp_path: Path) -> None:
    config, ledger = promoted(tmp_path)
    add_items(tmp_path / "suite.jsonl", 40)
    with pytest.raises(InputError, match=r"gate.min_items.*only the \d+ fresh items"):
        runner(config).run()
    assert fakeloop.CALLS == [] and n_verdicts(ledger) == 1


def test_a_changed_item_declared_new_is_judged_and_logged(tmp_path: Path) -> None:
    config, ledger = promoted(tmp_path)
    item = a_gate_item(config)
    edit_answer(tmp_path / "suite.jsonl", item)
    new = add_items(tmp_path / "suite.jsonl", 40)
    runner(config, ["suite.item_changes=new", "gate.min_items=5"]).run()
    judged = set(verdict(tmp_path)["item_ids"])
    assert item in judged and judged - {item} <= set(new)
    with open_ledger(ledger) as db:
        (change,) = db.item_changes()
        looks = db.item_looks([item])[item]
    assert change.item_id == item and change.old_sha256 == looks[0].content_sha256
    assert change.new_sha256 == looks[1].content_sha256 != change.old_sha256
    log = (ledger.parent / "EXPERIMENT-LOG.md").read_text()
    assert "changed item(s) judged as new items" in log and f"`{item}`" in log
    # judged once under its new content, it is consumed again
    fakeloop.CALLS.clear()
    with pytest.raises(InputError, match="refused before any phase ran"):
        runner(config, ["suite.item_changes=new", "gate.min_items=5", "train.steps=3"]).run()
    assert fakeloop.CALLS == []


def test_reset_stays_the_only_way_to_look_again_and_is_logged(tmp_path: Path) -> None:
    config, ledger = promoted(tmp_path)
    with pytest.raises(InputError, match="tuneloop ledger reset"):
        runner(config, ["train.steps=3"]).run()
    proc = tuneloop("ledger", "reset", ledger, "--reason", "new holdout policy")
    assert proc.code == 0, proc.stderr
    assert "one-look history reset by" in (ledger.parent / "EXPERIMENT-LOG.md").read_text()
    runner(config, ["train.steps=3"]).run()
    assert n_verdicts(ledger) == 2
    assert set(verdict(tmp_path)["item_ids"]) == set(slice_ids(load_config(config), "gate"))


def test_ledger_consumed_shows_the_content_hash(tmp_path: Path) -> None:
    config, ledger = promoted(tmp_path)
    proc = tuneloop("ledger", "consumed", ledger, "--items")
    assert proc.code == 0, proc.stderr
    item = a_gate_item(config)
    line = next(x for x in proc.stdout.splitlines() if x.startswith(f"{item} "))
    from tuneloop.suite import load_suite

    sha = load_suite(tmp_path / "suite.jsonl").by_id()[item].content_sha256
    assert f"content {sha[:12]}" in line


def test_a_renewed_item_is_judged_and_other_changes_are_still_refused(tmp_path: Path) -> None:
    """`tuneloop ledger renew` records one change with a reason; `suite.item_changes` stays
    `refuse`, so every other change is still refused at check and run."""
    config, ledger = promoted(tmp_path)
    suite = tmp_path / "suite.jsonl"
    original = suite.read_text()
    one, two = slice_ids(load_config(config), "gate")[:2]
    edit_answer(suite, one)
    edit_answer(suite, two)
    new = add_items(suite, 40)
    check = tuneloop("check", config, "gate.min_items=5")
    check.assert_input_error("suite.item_changes", one, two, "tuneloop ledger renew")
    renew = tuneloop(
        "ledger", "renew", ledger, "--suite", suite, "--item", one, "--reason", "typo fixed"
    )
    assert renew.code == 0, renew.output
    check = tuneloop("check", config, "gate.min_items=5")
    check.assert_input_error("suite.item_changes", "1 item(s)", two)
    assert f"{one}" not in check.stderr.split("already looked at:", 1)[1]
    with pytest.raises(InputError, match=two):
        runner(config, ["gate.min_items=5"]).run()
    assert fakeloop.CALLS == []

    suite.write_text(original)  # `two` restored; `one` holds exactly its renewed content
    edit_answer(suite, one)
    add_items(suite, 40)
    assert tuneloop("check", config, "gate.min_items=5").code == 0
    runner(config, ["gate.min_items=5"]).run()
    judged = set(verdict(tmp_path)["item_ids"])
    assert one in judged and judged - {one} <= set(new)
    with open_ledger(ledger) as db:
        (change,) = db.item_changes()  # the renewal; the run recorded no other
    assert change.item_id == one and change.run_id == "" and "typo fixed" in change.reason
    log = (ledger.parent / "EXPERIMENT-LOG.md").read_text()
    assert "renewed as new items" in log and "typo fixed" in log
