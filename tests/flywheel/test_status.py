"""One look at the flywheel: champion, labels, drift, audit accuracy, triggers, rendering."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
import typer
from scipy.stats import binomtest
from typer.testing import CliRunner

from tuneloop.config.flywheel import FlywheelConfig, TriggersConfig
from tuneloop.errors import InputError
from tuneloop.flywheel.command import status as status_command
from tuneloop.flywheel.render import render_status
from tuneloop.flywheel.status import (
    FlywheelStatus,
    LastRound,
    audit_accuracy,
    current_champion,
    gather_status,
)
from tuneloop.flywheel.triggers import PacingState
from tuneloop.gate.promotion import register_champion
from tuneloop.records import parse_record, write_jsonl, write_record
from tuneloop.samplelog import EvalSummary, SampleRow, SamplingParams
from tuneloop.suite import SuiteItem

START = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc).timestamp()


def sample_log(folder: Path, scores: list[float | None], n_samples: int = 1) -> Path:
    """One row per (item, sample); None writes a `missing` row."""
    items = [f"q{i}" for i in range(len(scores) // n_samples)]
    rows = []
    for k, score in enumerate(scores):
        item, index = items[k // n_samples], k % n_samples
        status = "ok" if score is not None else "missing"
        rows.append(
            SampleRow(
                suite_revision="r1",
                item_id=item,
                sample_index=index,
                model="champ@sha",
                seed=0,
                score=score,
                status=status,
                completion="x" if score else None,
            ).to_json()
        )
    folder.mkdir(parents=True)
    write_jsonl(folder / "samples.jsonl", rows)
    summary = EvalSummary(
        suite_path="suite.jsonl",
        suite_revision="r1",
        slice="audit",
        item_ids=items,
        model="champ@sha",
        endpoint="http://x/v1",
        sampling=SamplingParams(n_samples=n_samples, temperature=0.0, max_tokens=8),
    )
    write_record(folder / "summary.json", summary)
    return folder


def test_audit_accuracy_matches_scipys_wilson(tmp_path: Path) -> None:
    log = sample_log(tmp_path / "audit", [1.0] * 7 + [0.0, 0.0, None])
    acc = audit_accuracy(log)
    ci = binomtest(7, 10).proportion_ci(confidence_level=0.95, method="wilson")
    assert acc.accuracy == 0.7 and acc.items == 10 and acc.not_scored == 1
    assert acc.wilson == pytest.approx((ci.low, ci.high), abs=1e-12)
    assert acc.model == "champ@sha"


def test_audit_accuracy_averages_samples_within_items(tmp_path: Path) -> None:
    log = sample_log(tmp_path / "audit", [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0], n_samples=2)
    assert audit_accuracy(log).accuracy == pytest.approx((0.5 + 1 + 0 + 1) / 4)


def test_champion_is_read_without_creating_the_ledger(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.db"
    assert current_champion(ledger) is None and not ledger.exists()
    assert current_champion(None) is None
    register_champion(ledger, {"path": "base/", "sha256": "ab" * 32}, run_id=None)
    register_champion(ledger, {"model": "m2@sha256:ff"}, run_id="loop-2")
    champ = current_champion(ledger)
    assert champ is not None
    assert (champ.version, champ.via, champ.run_id, champ.summary) == (
        2,
        "registered",
        "loop-2",
        "m2@sha256:ff",
    )
    assert champ.since.endswith("Z")


def world(tmp_path: Path) -> tuple[FlywheelConfig, LastRound, Path]:
    """A ledger, a traffic folder, the last round's training rows and audit log."""
    ledger = tmp_path / "ledger.db"
    register_champion(ledger, {"model": "champ@sha"}, run_id="loop-1")
    rows = [
        {"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": "a"}]}
        for q in ["2 + 2", "2 + 2", "what is the sum of 3 and 4", "what is the sum of 3 and 4"]
    ]
    write_jsonl(tmp_path / "sft.jsonl", rows)
    logs = tmp_path / "logs"
    logs.mkdir()
    lines = []
    for k, q in enumerate(["2 + 2"] * 3 + ["what is the sum of 3 and 4"]):
        lines.append(
            {
                "timestamp": START + 10 + k,
                "response": {"id": f"c{k}"},
                "request": {"model": "m", "messages": [{"role": "user", "content": q}]},
            }
        )
    lines.append(
        {
            "timestamp": START - 50,
            "response": {"id": "old"},
            "request": {"model": "m", "messages": [{"role": "user", "content": "old"}]},
        }
    )
    lines += [
        {"type": "feedback", "completion_id": c, "verdict": "down", "timestamp": START + 60}
        for c in ("c0", "c1", "old", "gone")
    ]
    write_jsonl(logs / "traffic.jsonl", lines)
    last = LastRound(
        run_id="loop-1",
        started_at=START,
        training_rows=tmp_path / "sft.jsonl",
        audit_log=sample_log(tmp_path / "audit", [1.0] * 7 + [0.0] * 3),
    )
    triggers = TriggersConfig(
        min_new_labels=3,
        drift_psi=0.25,
        drift_min_requests=4,
        accuracy_floor=0.95,
        min_interval_s=3600,
    )
    return FlywheelConfig(traffic=[logs], triggers=triggers), last, ledger


def test_gather_status_measures_everything(tmp_path: Path) -> None:
    flywheel, last, ledger = world(tmp_path)
    status = gather_status(flywheel, ledger_path=ledger, last_round=last, now=START + 7200)
    assert status.champion is not None and status.champion.version == 1
    assert status.since == "2026-12-01T12:00:00+00:00" and status.last_round == "loop-1"
    t = status.traffic
    assert (t.exchanges, t.recent, t.new_labels, t.orphan_feedback) == (5, 4, 3, 1)
    drift = {d.feature: d for d in status.drift}
    assert drift["prompt_words"].band == "significant"  # 1/2–1/2 → 3/4–1/4: (1/4)·ln 3
    assert status.audit is not None and status.audit.accuracy == 0.7
    # wilson upper bound of 7/10 ≈ 0.892 < 0.95: accuracy fires, as do labels (3) and drift
    assert status.triggers.fired == ["new_labels", "drift", "accuracy"]
    assert status.triggers.run
    # the record round-trips through its schema
    again = parse_record(json.loads(json.dumps(status.to_json())), FlywheelStatus, "status")
    assert again == status


def test_pacing_is_reported(tmp_path: Path) -> None:
    flywheel, last, ledger = world(tmp_path)
    pacing = PacingState(last_round_at=START)
    status = gather_status(
        flywheel, ledger_path=ledger, last_round=last, pacing=pacing, now=START + 600
    )
    assert status.triggers.fired and not status.triggers.run
    text = render_status(status)
    assert "min interval: 3600 s between round starts" in text
    assert "a trigger fired, but pacing holds the round" in text


def test_render_status_lines(tmp_path: Path) -> None:
    flywheel, last, ledger = world(tmp_path)
    text = render_status(
        gather_status(flywheel, ledger_path=ledger, last_round=last, now=START + 7200)
    )
    lines = text.splitlines()
    assert lines[1].startswith("champion   v1 champ@sha (since ")
    assert "traffic    5 exchanges in 1 files; 4 since round loop-1 started" in text
    assert "labels     3 new labelled rows (1 feedback lines for unknown completions)" in text
    assert "drift      tag           not measured: no reference row carries metadata 'tag'" in text
    assert "prompt_words  PSI 0.275  significant" in text
    assert "audit      0.700 (95% Wilson 0.397–0.892) on 10 items, model champ@sha" in text
    assert "triggers   new_labels  FIRES  3 new labelled rows (fires at 3)" in text
    assert lines[-1] == "next       a round would start now (new_labels, drift, accuracy)"


def test_status_before_any_round_or_champion(tmp_path: Path) -> None:
    status = gather_status(
        FlywheelConfig(), ledger_path=tmp_path / "l.db", last_round=None, now=START
    )
    assert status.champion is None and status.audit is None and status.since is None
    assert [d.psi for d in status.drift] == [None, None]
    text = render_status(status)
    assert "champion   none yet: the first round records flywheel.bootstrap" in text
    assert "tuneloop champion" not in text  # it shows champions; it registers none
    assert "audit      not measured" in text
    assert "no round yet: all traffic is new" in text
    assert not (tmp_path / "l.db").exists()


def test_the_command_reads_loop_yaml_and_the_workdir(tmp_path: Path) -> None:
    suite = tmp_path / "suite.jsonl"
    item = {"id": "q1", "messages": [{"role": "user", "content": "2 + 2"}], "answer": "4"}
    suite.write_text(json.dumps(item) + "\n", encoding="utf-8")
    (tmp_path / "loop.yaml").write_text(
        "base_model: model\nworkdir: runs/loop\nsuite: {path: suite.jsonl}\n", encoding="utf-8"
    )
    app = typer.Typer()
    app.command()(status_command)
    runner = CliRunner()
    result = runner.invoke(app, [str(tmp_path / "loop.yaml")])
    assert result.exit_code == 0, result.output
    assert "champion   none yet" in result.output
    result = runner.invoke(app, [str(tmp_path / "loop.yaml"), "--json"])
    assert json.loads(result.output)["schema"] == "tuneloop.flywheel_status/3"


def test_suite_items_tag_requests(tmp_path: Path) -> None:
    flywheel, last, ledger = world(tmp_path)
    item = SuiteItem("q", [{"role": "user", "content": "2 + 2"}], None, "numeric", ("add",), {})
    status = gather_status(
        flywheel, ledger_path=ledger, last_round=last, suite=[item], now=START + 7200
    )
    tag = next(d for d in status.drift if d.feature == "tag")
    assert tag.reference == {"add": 2, "none": 2} and tag.recent == {"add": 3, "none": 1}


def test_last_round_comes_from_the_workdir_state(tmp_path: Path) -> None:
    from tuneloop.flywheel.watch import last_round
    from tuneloop.loop.state import RunState, SupersededRun, save_state

    workdir = tmp_path / "runs"
    assert last_round(workdir, None, None) is None
    workdir.mkdir()
    save_state(
        workdir,
        RunState(
            run_id="loop-a", config_path="loop.yaml", created_at="2026-12-01T12:00:00.000+00:00"
        ),
    )
    first = last_round(workdir, tmp_path / "train.jsonl", None)
    assert first is not None and (first.run_id, first.started_at) == ("loop-a", START)
    assert first.training_rows == tmp_path / "train.jsonl"  # no corpus built: train.data
    (workdir / "data").mkdir()
    (workdir / "data" / "sft.jsonl").write_text("", encoding="utf-8")
    redo = SupersededRun(run_id="loop-a", superseded_at="2026-12-01T13:00:00+00:00", reason="r")
    save_state(
        workdir,
        RunState(
            run_id="loop-b",
            config_path="loop.yaml",
            created_at="2026-12-01T12:00:00.000+00:00",
            previous_runs=[redo],
        ),
    )
    second = last_round(workdir, None, tmp_path / "audit")
    assert second is not None and (second.run_id, second.started_at) == ("loop-b", START + 3600)
    assert second.training_rows == workdir / "data" / "sft.jsonl"
    assert second.audit_log == tmp_path / "audit"


# ---- issue 25: rounds run by hand, refusals, the audit part, a fresh flywheel --------------


def _flywheel(tmp: Path, gate_size: int = 50, **flywheel: object) -> Path:
    """The fake loop's config as a flywheel (`base_model: champion`), its traffic in tmp."""
    import yaml

    from ..loop.fakeloop import write_config

    data = tmp / "train.jsonl"
    turns = [{"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": "4"}]
    data.write_text(json.dumps({"messages": turns}) + "\n")
    path = write_config(
        tmp,
        suite={"rolling": {"audit_fraction": 0.2, "gate_size": gate_size, "seed": 0}},
        gate={"min_items": 40},
        train={"data": str(data)},
    )
    cfg = yaml.safe_load(path.read_text())
    cfg["base_model"] = "champion"
    cfg["flywheel"] = {"bootstrap": str(tmp / "base"), "traffic": [str(tmp / "traffic")]}
    cfg["flywheel"].update(flywheel)
    path.write_text(yaml.safe_dump(cfg))
    if not cfg["flywheel"].get("serve", {}).get("managed"):
        (tmp / "traffic").mkdir()  # a managed proxy's the watcher creates
    return path


def _labels(tmp: Path, n: int, at: float) -> None:
    """`n` exchanges, each with a thumbs-down and a correction, timed `at`."""
    (tmp / "traffic").mkdir(exist_ok=True)
    with (tmp / "traffic" / "traffic.jsonl").open("a") as fh:
        for _ in range(n):
            cid = f"chatcmpl-{at}-{fh.tell()}"
            request = {"messages": [{"role": "user", "content": "What is 2 + 3?"}]}
            answer = {"index": 0, "message": {"role": "assistant", "content": "6"}}
            response = {"id": cid, "choices": [answer]}
            exchange = {"timestamp": at, "request": request, "response": response}
            feedback = {"type": "feedback", "completion_id": cid, "verdict": "down",
                        "correction": "5", "timestamp": at}  # fmt: skip
            fh.write(json.dumps(exchange) + "\n" + json.dumps(feedback) + "\n")


def _status(config: Path) -> dict:
    from ..installed import tuneloop

    ran = tuneloop("status", config, "--json", cwd=config.parent)
    assert ran.code == 0, ran.output
    return json.loads(ran.stdout)


def test_rounds_run_by_hand_count_and_a_refused_one_moves_no_line(tmp_path: Path) -> None:
    """Issue 25 item 10: rounds run by hand (`run --round next`) were invisible to status
    (labels they trained on counted as new), and a round refused before training reset the
    count. The ledger is the one record of which labels a round took."""
    import time

    from ..installed import tuneloop
    from ..loop.fakeloop import run_round

    config = _flywheel(tmp_path, gate_size=90)  # 192 pool items: two gate slices
    _labels(tmp_path, 3, time.time() - 60)
    assert run_round(config) == 0
    seen = _status(config)
    assert (seen["last_round"], seen["traffic"]["new_labels"]) == ("r0001", 0)
    assert run_round(config) == 0
    time.sleep(1.1)  # the ledger keeps seconds
    _labels(tmp_path, 2, time.time())
    time.sleep(1.1)
    with pytest.raises(InputError, match="no fresh gate slice"):
        run_round(config)  # r0003: refused before training, took nothing
    seen = _status(config)
    assert (seen["last_round"], seen["traffic"]["new_labels"]) == ("r0002", 2)
    text = tuneloop("status", config, cwd=tmp_path).stdout
    assert "since round r0002 started" in text
    assert "r0001  promoted          by hand" in text and "r0003  refused" in text
    assert "no fresh gate slice" in text and "no rounds yet" not in text


def test_audit_accuracy_is_the_audit_parts_alone(tmp_path: Path) -> None:
    """Issue 25 item 10: the round's log holds audit + gate items; the audit accuracy (and
    `accuracy_floor`) counted all of them instead of the audit part's."""
    from tuneloop.config import load_config
    from tuneloop.suite import load_suite, rolling_of

    from ..loop.fakeloop import run_round

    config = _flywheel(tmp_path, gate_size=90, triggers={"accuracy_floor": 0.9})
    assert run_round(config) == 0
    cfg = load_config(config)
    audit = set(rolling_of(load_suite(cfg.suite.path), cfg.suite).audit_ids)
    log = tmp_path / "work" / "rounds" / "r0001" / "eval_post" / "samples.jsonl"
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(rows) > len(audit)  # the gate slice's items are in the log too
    scores = [r["score"] for r in rows if r["item_id"] in audit]
    seen = _status(config)["audit"]
    assert seen["items"] == len(audit) == len(scores)
    assert seen["accuracy"] == pytest.approx(sum(scores) / len(scores))


def test_status_of_a_fresh_flywheel_says_no_rounds_yet(tmp_path: Path) -> None:
    """Issue 25 item 15: the example's own `status` hint exited 2 before the watcher had run
    (its traffic folder does not exist yet), and named `tuneloop champion` as the way to
    register a champion (it only shows them)."""
    from ..installed import tuneloop

    config = _flywheel(tmp_path, serve={"managed": True, "port": 8100})
    files = sorted(tmp_path.rglob("*"))
    ran = tuneloop("status", config, cwd=tmp_path)
    assert ran.code == 0, ran.output
    assert "no rounds yet" in ran.stdout and "tuneloop champion" not in ran.stdout
    assert f"{tmp_path / 'traffic'} does not exist yet" in ran.stdout
    assert "Traceback" not in ran.output
    assert sorted(tmp_path.rglob("*")) == files  # status creates nothing
    # a traffic path that is not the managed proxy's is a typo until proven otherwise
    (tmp_path / "other").mkdir()
    typo = _flywheel(tmp_path / "other")
    (tmp_path / "other" / "traffic").rmdir()
    tuneloop("status", typo).assert_input_error("flywheel.traffic.0", "does not exist")


def test_an_audit_log_given_is_used_or_refused(tmp_path: Path) -> None:
    """`status --audit-log PATH` ignored PATH before the first round (silently "not
    measured"), and a missing PATH was not named."""
    from ..installed import tuneloop

    config = _flywheel(tmp_path)
    missing = tuneloop("status", config, "--audit-log", tmp_path / "nope", cwd=tmp_path)
    missing.assert_input_error("--audit-log", "nope")
    log = sample_log(tmp_path / "audit", [1.0, 0.0, 1.0, 1.0])  # items q0..q3: not the suite's
    ran = tuneloop("status", config, "--audit-log", log, cwd=tmp_path)
    ran.assert_input_error(str(log), "none of the audit part's 48 items")


def test_status_counts_growth_after_dedup_and_states_power_and_alpha(tmp_path: Path) -> None:
    """Issue 32: 49 labelled copies of one prompt are one new training row; the next gate's
    MDE and the α spent are stated at every look (the installed script)."""
    import time

    from ..installed import tuneloop

    config = _flywheel(tmp_path, gate_size=50, triggers={"min_new_labels": 2})
    _labels(tmp_path, 49, time.time() - 60)
    seen = _status(config)
    growth = seen["traffic"]["growth"]
    assert (seen["traffic"]["new_labels"], growth["labelled"], growth["trainable"]) == (49, 49, 1)
    assert growth["removed"] == {"exact_duplicate": 48}
    new_labels = seen["triggers"]["firings"][0]
    assert (new_labels["value"], new_labels["fired"]) == (1, False)
    power = seen["triggers"]["power"]
    assert power["slice"] == "gate-000" and power["items"] == 50 and not power["held"]
    assert power["mde"] > 0.2 and seen["alpha"]["rule"] == "none"
    text = tuneloop("status", config, cwd=tmp_path).stdout
    assert "1 new training rows from 49 new labels after the corpus steps (48 exact" in text
    assert "power      gate gate-000: MDE" in text
    assert "alpha      no gate.sequence rule: 0 rounds gated" in text
