"""The watcher in-process, with the fake round command and an injected clock: a trigger runs
one round, exit statuses, resuming an open round, pacing, approval of spend, status."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tuneloop.cli import build_app
from tuneloop.errors import InputError
from tuneloop.flywheel.watch import (
    RoundTrigger,
    WatchState,
    classify_exit,
    last_round_of,
    round_artifacts,
    round_command,
)
from tuneloop.records import read_record

from .watch_world import make_world


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_trigger_fires_and_exactly_one_round_runs(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    world.add_labels(3)
    watcher = world.watcher()
    step = watcher.step()
    assert (step.action, step.round_id, step.settled) == ("round", "r0001", True)
    assert world.count("start", "r0001") == 1 and world.count("done", "r0001") == 1
    row = watcher.state.round("r0001")
    assert row is not None
    assert (row.status, row.exit_code, row.outcome, row.attempts) == (
        "finished",
        0,
        "promoted",
        1,
    )
    trigger = read_record(row.trigger_file, RoundTrigger)
    assert trigger.fired == ["new_labels"] and trigger.observations.new_labels == 3
    assert trigger.estimate.eval_items == 4 and trigger.estimate.eval_samples == 16
    assert trigger.estimate.train_steps == 45
    # labels are counted since the round started: nothing new, so no second round
    assert watcher.step().action == "idle"
    assert [r.round_id for r in watcher.state.rounds()] == ["r0001"]
    kinds = [d.kind for d in watcher.state.decisions()]
    assert kinds == ["poll", "round", "start", "finished", "poll"]
    assert "FIRES (3 new training rows from 3 new labels (fires at 2))" in world.echoed[0]
    pacing = watcher.state.pacing()
    assert pacing.rounds_today == 1 and pacing.consecutive_rejects == 0


@pytest.mark.parametrize(
    ("rc", "status", "outcome"),
    [
        (0, "finished", "promoted"),
        (1, "finished", "not promoted"),
        (2, "refused", "refused"),
        (3, "finished", "failed: a phase failed"),
        (143, "interrupted", "interrupted"),
        (130, "interrupted", "interrupted"),
        (-15, "interrupted", "interrupted"),
        (-9, "finished", "failed: killed by SIGKILL"),
        (7, "finished", "failed: exit 7"),
    ],
)
def test_exit_statuses_of_the_round_command(rc: int, status: str, outcome: str) -> None:
    got_status, got_outcome = classify_exit(rc)
    assert got_status == status and got_outcome.startswith(outcome)


def test_a_refused_round_says_why_and_counts_no_training(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    world.set_plan(exit=2, say="error: no fresh gate slice left; make a new suite revision")
    world.add_labels(2)
    watcher = world.watcher()
    step = watcher.step()
    assert step.settled
    row = watcher.state.round("r0001")
    assert row is not None and (row.status, row.exit_code) == ("refused", 2)
    last = watcher.state.decisions()[-1]
    assert last.kind == "refused"
    assert last.message.endswith("error: no fresh gate slice left; make a new suite revision")
    pacing = watcher.state.pacing()
    assert pacing.train_seconds_today == 0.0 and pacing.consecutive_rejects == 1


def test_an_open_round_is_resumed_before_any_new_look(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    world.set_plan(exit=143)  # as if SIGTERMed: state saved, resumable
    world.add_labels(2)
    watcher = world.watcher()
    assert not watcher.step().settled
    row = watcher.state.round("r0001")
    assert row is not None and row.status == "interrupted"
    world.set_plan(exit=1)
    world.add_labels(5)  # would fire a new trigger, but the open round comes first
    step = watcher.step()
    assert (step.round_id, step.settled) == ("r0001", True)
    row = watcher.state.round("r0001")
    assert row is not None and (row.status, row.exit_code, row.attempts) == ("finished", 1, 2)
    assert world.count("start", "r0001") == 2 and world.count("done", "r0001") == 1
    assert "resumed (attempt 2)" in watcher.state.decisions()[-2].message


def test_pacing_min_interval_then_backoff_after_a_rejection(tmp_path: Path) -> None:
    t0 = 1_900_000_000.0
    world = make_world(tmp_path, triggers={"min_interval_s": 100, "backoff_factor": 2})
    world.set_plan(exit=1)  # rejected
    world.add_labels(2, at=t0 - 10)
    clock = Clock(t0)
    watcher = world.watcher(clock)
    assert watcher.step().round_id == "r0001"
    world.add_labels(2, at=t0 + 5)
    clock.now = t0 + 50
    held = watcher.step()
    assert held.action == "held" and held.wait_s == pytest.approx(150)  # 100 × 2 after a reject
    assert "backoff: 200 s between round starts (1 rejected in a row)" in world.echoed[-1]
    clock.now = t0 + 199
    assert watcher.step().action == "held"
    clock.now = t0 + 200
    assert watcher.step().round_id == "r0002"
    assert watcher.state.pacing().consecutive_rejects == 2


def test_min_interval_after_a_promotion(tmp_path: Path) -> None:
    t0 = 1_900_000_000.0
    world = make_world(tmp_path, triggers={"min_interval_s": 100})
    world.add_labels(2, at=t0 - 10)
    clock = Clock(t0)
    watcher = world.watcher(clock)
    assert watcher.step().round_id == "r0001"
    world.add_labels(2, at=t0 + 5)
    clock.now = t0 + 30
    held = watcher.step()
    assert held.action == "held" and held.wait_s == pytest.approx(70)
    assert "min interval: 100 s" in world.echoed[-1]


def test_polls_back_off_while_nothing_fires(tmp_path: Path) -> None:
    world = make_world(tmp_path, poll_s=1, triggers={"backoff_factor": 2, "max_backoff_s": 5})
    clock = Clock(1_900_000_000.0)
    watcher = world.watcher(clock)
    waits = []
    for _ in range(5):
        waits.append(watcher.step().wait_s)
        clock.now += waits[-1]
    assert waits == [1, 2, 4, 5, 5]
    world.add_labels(2, at=clock.now - 1)
    assert watcher.step().round_id == "r0001"
    assert watcher.step().wait_s == 1  # a round resets the backoff


def test_daily_cap_holds_until_midnight(tmp_path: Path) -> None:
    t0 = 1_900_000_000.0  # 2030-03-17T17:46:40Z
    world = make_world(tmp_path, triggers={"max_rounds_per_day": 1})
    world.add_labels(2, at=t0 - 10)
    clock = Clock(t0)
    watcher = world.watcher(clock)
    assert watcher.step().round_id == "r0001"
    world.add_labels(2, at=t0 + 5)
    clock.now = t0 + 60
    held = watcher.step()
    midnight = 1_900_022_400.0
    assert held.action == "held" and held.wait_s == pytest.approx(midnight - clock.now)
    assert "daily cap: 1 rounds today" in world.echoed[-1]
    clock.now = midnight + 1
    assert watcher.step().round_id == "r0002"


def test_spend_approval_holds_the_round_until_approve(tmp_path: Path) -> None:
    world = make_world(tmp_path, approval={"spend": True})
    world.add_labels(2)
    watcher = world.watcher()
    step = watcher.step()
    assert (step.action, step.round_id) == ("awaiting_approval", "r0001")
    assert world.events() == []  # nothing ran
    assert (
        "awaits approval of its spend: 4 items per arm (16 completions), 45 training "
        in (world.echoed[-1])
    )
    assert "seconds unknown (no finished round yet)" in world.echoed[-1]
    assert f"approve with: tuneloop approve r0001 --config {world.config}" in world.echoed[-1]
    assert watcher.step().action == "awaiting_approval"  # and stays so
    runner = CliRunner()
    app = build_app()
    result = runner.invoke(app, ["approve", "r0001", "--config", str(world.config)])
    assert result.exit_code == 0, result.output
    assert "approved round r0001" in result.output
    step = watcher.step()
    assert (step.round_id, step.settled) == ("r0001", True)
    row = watcher.state.round("r0001")
    assert row is not None and row.approved_by and row.status == "finished"
    # the next round's estimate takes the last finished round's wall time
    world.add_labels(2)
    watcher.step()
    second = watcher.state.round("r0002")
    assert second is not None and second.trigger.estimate.seconds is not None
    assert second.trigger.estimate.seconds_basis == "wall time of round r0001"
    # approving a round that is not waiting is refused; an unknown id goes to the gate ledger
    again = runner.invoke(app, ["approve", "r0001", "--config", str(world.config)])
    assert isinstance(again.exception, InputError)
    assert "round r0001 is finished, not awaiting approval" in str(again.exception)


def test_approve_without_a_watcher_round_is_the_gate_approval(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    app = build_app()
    result = CliRunner().invoke(app, ["approve", "loop-1", "--config", str(world.config)])
    assert isinstance(result.exception, InputError)
    assert "ledger/loop.db: no ledger here" in str(result.exception)
    plain = CliRunner().invoke(app, ["approve", "loop-1", "--ledger", str(tmp_path / "x.db")])
    assert "x.db: no ledger here" in str(plain.exception)


def test_round_ids_skip_folders_an_earlier_state_left(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    (world.workdir / "rounds" / "r0001").mkdir(parents=True)
    world.add_labels(2)
    assert world.watcher().step().round_id == "r0002"


def test_last_round_reads_the_rounds_artifacts(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    world.add_labels(2)
    watcher = world.watcher()
    watcher.step()
    state = watcher.state
    assert round_artifacts(world.workdir, "r0001", True) == (None, None)
    last = last_round_of(state, world.workdir, tmp_path / "train.jsonl", None)
    assert last is not None and last.run_id == "r0001"
    assert last.training_rows == tmp_path / "train.jsonl"
    data = world.workdir / "rounds" / "r0001" / "data"
    data.mkdir()
    (data / "sft.jsonl").write_text("", encoding="utf-8")
    last = last_round_of(state, world.workdir, None, None)
    assert last is not None and last.training_rows == data / "sft.jsonl"


def test_round_command_template() -> None:
    config = Path("/x/loop.yaml")
    argv = round_command(None, config)
    assert argv[1:] == [
        "-m",
        "tuneloop",
        "run",
        "/x/loop.yaml",
        "--round",
        "{round}",
        "--trigger-file",
        "{trigger_file}",
    ]
    assert round_command("srun tuneloop run {config} --round {round}", config) == [
        "srun",
        "tuneloop",
        "run",
        "/x/loop.yaml",
        "--round",
        "{round}",
    ]
    with pytest.raises(InputError, match="has no \\{round\\}"):
        round_command("tuneloop run {config}", config)
    with pytest.raises(InputError, match="cannot split"):
        round_command("echo 'unclosed", config)


def test_an_unstartable_round_command_is_an_input_error_and_stays_resumable(
    tmp_path: Path,
) -> None:
    world = make_world(tmp_path)
    world.add_labels(2)
    watcher = world.watcher()
    watcher.site = type(watcher.site)(
        **{**watcher.site.__dict__, "round_command": ["/no/such/tool", "{round}"]}
    )
    with pytest.raises(InputError, match="cannot start the round command '/no/such/tool'"):
        watcher.step()
    row = watcher.state.round("r0001")
    assert row is not None and row.status == "interrupted"


def test_status_shows_the_watchers_rounds_and_decisions(tmp_path: Path) -> None:
    world = make_world(tmp_path, approval={"spend": True})
    runner = CliRunner()
    app = build_app()
    before = runner.invoke(app, ["status", str(world.config)])
    assert before.exit_code == 0, before.output
    assert "rounds     no rounds yet" in before.output
    assert not (world.workdir / "flywheel.db").exists()  # status creates nothing
    world.add_labels(2)
    world.watcher().step()
    result = runner.invoke(app, ["status", str(world.config)])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "approval   spend needs tuneloop approve; promotion automatic" in out
    assert "r0001  awaiting_approval new_labels" in out
    assert "since round r0001 started" in out  # the line between old and new traffic
    assert "decisions " in out and "approval: round r0001 (new_labels) awaits approval" in out
    as_json = json.loads(runner.invoke(app, ["status", str(world.config), "--json"]).output)
    assert as_json["last_round"] == "r0001"


def test_the_state_refuses_a_file_that_is_not_sqlite(tmp_path: Path) -> None:
    bad = tmp_path / "flywheel.db"
    bad.write_text("not a database, " * 100, encoding="utf-8")
    with pytest.raises(InputError, match="not a readable flywheel state"):
        WatchState.open(bad)
    with pytest.raises(InputError, match="no flywheel state here"):
        WatchState.open(tmp_path / "none.db", create=False)


def test_run_once_and_max_rounds(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    watcher = world.watcher()
    assert watcher.run(once=True) == 0
    assert [d.kind for d in watcher.state.decisions()] == ["poll"]
    world.add_labels(2)
    started = time.monotonic()
    assert watcher.run(max_rounds=1) == 0
    assert time.monotonic() - started < 5
    assert [r.round_id for r in watcher.state.rounds()] == ["r0001"]


def test_exit_1_awaiting_promotion_approval_is_no_rejection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tuneloop.gate.ledger import RoundOutcome, RoundStart, open_ledger

    world = make_world(tmp_path)
    world.set_plan(exit=1)
    # what the round itself appends (written here before it runs: the watcher must still
    # allocate r0001, so its id-skipping does not see these rows)
    monkeypatch.setattr("tuneloop.flywheel.watch.watcher.ledger_rounds", lambda _: [])
    with open_ledger(tmp_path / "ledger" / "loop.db") as ledger, ledger.transaction():
        ledger.add_round(RoundStart(round_id="r0001", started_at="2026-12-01", gate_slice="g"))
        ledger.add_outcome(
            RoundOutcome(
                round_id="r0001",
                ended_at="2026-12-01",
                outcome="awaiting_approval",
                run_id="loop-abc",
            )
        )
    world.add_labels(2)
    watcher = world.watcher()
    watcher.step()
    row = watcher.state.round("r0001")
    assert row is not None and row.exit_code == 1
    # the command to run, with the user's own config (it was "--config …")
    approve = f"tuneloop approve loop-abc --config {world.config}"
    assert row.outcome == f"awaiting promotion approval: {approve}"
    assert watcher.state.pacing().consecutive_rejects == 0


def test_an_unchanged_look_is_reused_and_a_changed_one_read_again(tmp_path: Path) -> None:
    world = make_world(tmp_path, poll_s=1, triggers={"min_new_labels": 3, "backoff_factor": 2})
    clock = Clock(time.time())
    watcher = world.watcher(clock)
    world.add_labels(2)
    assert watcher.step().wait_s == 1 and not watcher.looker.reused
    clock.now += 1
    step = watcher.step()
    assert watcher.looker.reused and step.wait_s == 2  # pacing is evaluated afresh
    assert world.echoed[-1].endswith("[inputs unchanged since the last look]")
    assert "2 new training rows from 2 new labels" in world.echoed[-1]
    world.add_labels(1)  # the log grew: read again, and now it fires
    assert watcher.step().round_id == "r0001" and not watcher.looker.reused


def test_a_promotion_re_serves_and_a_refused_switch_keeps_the_old(tmp_path: Path) -> None:
    from tuneloop.errors import PhaseFailed

    world = make_world(tmp_path)
    world.add_labels(3)
    watcher = world.watcher()
    calls: list[str] = []

    def reserve() -> str:
        calls.append("reserve")
        if len(calls) > 1:
            raise PhaseFailed("champion v3 was not served; still serving champion v2")
        return "champion v2 switched (was v1)"

    watcher.on_promoted = reserve
    assert watcher.step().settled
    assert calls == ["reserve"]
    assert any("reserve: champion v2 switched (was v1)" in line for line in world.echoed)
    world.add_labels(3)
    assert watcher.step().settled
    assert any("not served (still the old)" in line for line in world.echoed)
    assert [d.kind for d in watcher.state.decisions()].count("reserve") == 2


def test_round_ids_skip_rounds_the_ledger_holds(tmp_path: Path) -> None:
    """A round run by hand and refused before it was planned has a ledger row and no folder;
    the watcher does not reuse its id (the round command would only re-report the refusal)."""
    from tuneloop.gate.ledger import RoundOutcome, RoundStart, open_ledger

    world = make_world(tmp_path)
    with open_ledger(tmp_path / "ledger" / "loop.db") as ledger, ledger.transaction():
        ledger.add_round(RoundStart(round_id="r0001", started_at="2026-12-01", gate_slice=""))
        ledger.add_outcome(RoundOutcome(round_id="r0001", ended_at="2026-12-01", outcome="refused"))
    world.add_labels(2)
    assert world.watcher().step().round_id == "r0002"


def test_a_refused_round_leaves_its_labels_new(tmp_path: Path) -> None:
    """Issue 25 item 10: a round refused before training reset the new-label count (the
    labels before it counted as trained on); it trained on nothing."""
    from ...installed import tuneloop

    world = make_world(tmp_path)
    world.set_plan(exit=2, say="error: no fresh gate slice")
    world.add_labels(2, at=time.time() - 5)
    watcher = world.watcher()
    assert watcher.step().settled
    assert watcher.state.round("r0001").status == "refused"  # type: ignore[union-attr]
    ran = tuneloop("status", world.config, "--json", cwd=tmp_path)
    assert ran.code == 0, ran.output
    seen = json.loads(ran.stdout)
    assert seen["last_round"] is None and seen["traffic"]["new_labels"] == 2
