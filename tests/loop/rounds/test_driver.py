"""Flywheel rounds (`tuneloop run --round`): lineage, rolling slices, refusals, crash resume.

The real round orchestration, report, gate, capstone, archive and promote phases run on the
fake model phases of `fakeloop.py` (seconds per round).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tuneloop.archive import verify_archive
from tuneloop.config import load_config
from tuneloop.errors import InputError
from tuneloop.gate.ledger import Champion, Round, open_ledger
from tuneloop.loop.layout import ROUND_FILE
from tuneloop.loop.rounds import RoundRecord
from tuneloop.loop.rounds.driver import choose_round
from tuneloop.records import Manifest, read_record

from ...installed import tuneloop
from ..fakeloop import CALLS, STRONG_STEPS, run_round, write_config

HERE = Path(__file__).resolve().parents[1]
"""tests/loop, where fakeloop.py is."""


def flywheel_config(tmp: Path, gate_size: int = 50) -> Path:
    data = tmp / "train.jsonl"
    data.write_text(json.dumps({"prompt": "What is 2 + 2?", "answer": "4"}) + "\n")
    path = write_config(
        tmp,
        suite={"rolling": {"audit_fraction": 0.2, "gate_size": gate_size, "seed": 0}},
        gate={"min_items": 40},
        train={"data": str(data)},
    )
    text = path.read_text().replace(f"base_model: {tmp / 'base'}", "base_model: champion")
    path.write_text(text + f"flywheel:\n  bootstrap: {tmp / 'base'}\n")
    return path


def ledger_rows(tmp: Path) -> tuple[list[Champion], list[Round]]:
    with open_ledger(tmp / "ledger" / "ledger.db") as ledger:
        return ledger.champions(), ledger.rounds()


def round_record(tmp: Path, round_id: str) -> RoundRecord:
    return read_record(tmp / "work" / "rounds" / round_id / ROUND_FILE, RoundRecord)


def test_two_rounds_each_from_the_last_champion(tmp_path: Path) -> None:
    config = flywheel_config(tmp_path)
    assert run_round(config) == 0
    assert run_round(config) == 0
    champs, history = ledger_rows(tmp_path)
    # the bootstrap champion is recorded as such, then each round's promotion
    assert [(c.version, c.via) for c in champs][0] == (1, "bootstrap")
    assert [c.version for c in champs] == [1, 2, 3]
    r1, r2 = round_record(tmp_path, "r0001"), round_record(tmp_path, "r0002")
    assert (r1.parent_version, r1.bootstrap, r1.gate_slice) == (1, True, "gate-000")
    assert (r2.parent_version, r2.bootstrap, r2.gate_slice) == (2, False, "gate-001")
    # round 2 starts from round 1's champion: its verified, archived model
    assert r2.base_model == champs[1].descriptor["path"] != r1.base_model
    assert r2.eval_slice == "audit+gate-001"
    assert [r.outcomes[-1].outcome for r in history] == ["promoted", "promoted"]
    # the round's lineage is in its archive's manifest, and the archive verifies
    archive = Path(str(history[1].outcomes[-1].run_id))
    folder = tmp_path / "archive" / archive.name
    manifest = read_record(folder / "manifest.json", Manifest)
    assert manifest.round is not None and manifest.round["parent_version"] == 2
    assert verify_archive(folder) == []
    log = (tmp_path / "ledger" / "EXPERIMENT-LOG.md").read_text()
    assert "round `r0001` — **promoted**" in log and "round `r0002` — **promoted**" in log
    assert "bootstrap: a null baseline" in log and "Audit (" in log


def test_after_an_adapter_champion_the_next_round_trains_from_its_merged_model(
    tmp_path: Path,
) -> None:
    from ...serve.fake_vllm_env import make_fake_vllm_env

    config = flywheel_config(tmp_path)
    env = make_fake_vllm_env(tmp_path / "vllm-env")  # the fake phases serve nothing
    serve = f"serve:\n  backend: vllm\n  challenger: adapter\n  vllm: {{env: {env}}}\n"
    config.write_text(config.read_text() + serve)
    assert run_round(config) == 0
    champs, _ = ledger_rows(tmp_path)
    adapter_champion = champs[1].descriptor
    assert adapter_champion["path"] == str(tmp_path / "base")  # served on the base
    assert run_round(config) == 0
    # a round trains weights: round 2 starts from round 1's archived merged model
    assert round_record(tmp_path, "r0002").base_model == adapter_champion["merged"]["path"]


def test_a_weaker_challenger_is_rejected_and_the_champion_stays(tmp_path: Path) -> None:
    config = flywheel_config(tmp_path)
    assert run_round(config) == 0
    assert run_round(config, ["train.steps=1"]) == 1
    champs, history = ledger_rows(tmp_path)
    assert [c.version for c in champs] == [1, 2]
    assert history[-1].outcomes[-1].outcome == "rejected"
    assert "round `r0002` — **rejected**" in (tmp_path / "ledger" / "EXPERIMENT-LOG.md").read_text()


def test_no_fresh_gate_slice_is_refused_before_training(tmp_path: Path) -> None:
    config = flywheel_config(tmp_path, gate_size=90)  # 192 pool items: two gate slices
    assert run_round(config) == 0
    assert run_round(config, [f"train.steps={STRONG_STEPS}"]) == 0
    CALLS.clear()
    with pytest.raises(InputError, match="no fresh gate slice"):
        run_round(config)
    assert "train" not in CALLS and "eval_pre" not in CALLS
    _, history = ledger_rows(tmp_path)
    assert history[-1].round_id == "r0003"
    assert history[-1].outcomes[-1].outcome == "refused"
    log = (tmp_path / "ledger" / "EXPERIMENT-LOG.md").read_text()
    assert "round `r0003` — **refused**" in log and "no fresh gate slice" in log


def test_a_new_suite_revision_brings_no_consumed_item_back_to_a_rolling_slice(
    tmp_path: Path,
) -> None:
    """Issue 25: the rolling slices keep one look per item id and content, too."""
    config = flywheel_config(tmp_path, gate_size=90)  # 192 pool items: two gate slices
    assert run_round(config) == 0
    assert run_round(config) == 0
    suite = tmp_path / "suite.jsonl"
    rows = [json.loads(line) for line in suite.read_text().splitlines()]
    # a new revision, same content (a new tag order only moves nothing judged)
    suite.write_text("".join(json.dumps({**r, "tags": [*r["tags"], "v2"]}) + "\n" for r in rows))
    CALLS.clear()
    with pytest.raises(InputError, match="no fresh gate slice.*whatever the suite revision"):
        run_round(config)
    assert "train" not in CALLS and "eval_pre" not in CALLS


def test_a_round_killed_mid_training_resumes_once(tmp_path: Path) -> None:
    config = flywheel_config(tmp_path)
    path = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "TUNELOOP_KILL_AT": "train:end", "PYTHONPATH": path}
    cmd = [sys.executable, str(HERE / "fakeloop.py"), str(config), "--round", "next"]
    killed = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9, killed.stderr
    env.pop("TUNELOOP_KILL_AT")
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "work" / "rounds").iterdir()) == ["r0001"]
    state = json.loads((tmp_path / "work" / "rounds" / "r0001" / "state.json").read_text())
    assert state["phases"]["train"]["status"] == "done"
    _, history = ledger_rows(tmp_path)
    assert [o.outcome for o in history[0].outcomes] == ["promoted"]


def test_rounds_need_a_rolling_split(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    with pytest.raises(InputError, match="suite.rolling"):
        run_round(config)


def test_asking_again_for_an_ended_round_only_reports_it(tmp_path: Path) -> None:
    config = flywheel_config(tmp_path)
    assert run_round(config) == 0
    CALLS.clear()
    assert run_round(config, asked="r0001") == 0  # a watcher collecting the exit status
    assert CALLS == []
    _, history = ledger_rows(tmp_path)
    assert [o.outcome for o in history[0].outcomes] == ["promoted"]
    log = (tmp_path / "ledger" / "EXPERIMENT-LOG.md").read_text()
    assert log.count("round `r0001`") == 1


def test_an_unknown_round_id_is_refused_before_anything(tmp_path: Path) -> None:
    """Issue 25 item 10: `--round r0099` (no such round) ran a full round on a fresh gate
    slice; it is refused, naming the id and the known ones, and nothing is written."""
    config = flywheel_config(tmp_path)
    assert run_round(config) == 0
    files = sorted(tmp_path.rglob("*"))
    ran = tuneloop("run", config, "--round", "r0099", cwd=tmp_path)
    ran.assert_input_error("--round r0099", "known: r0001", "--round next", "r0002")
    assert sorted(tmp_path.rglob("*")) == files  # no folder, no ledger row, no log entry
    _, history = ledger_rows(tmp_path)
    assert [(r.round_id, len(r.outcomes)) for r in history] == [("r0001", 1)]


def test_round_ids_a_round_may_take(tmp_path: Path) -> None:
    """Besides a known round, `--round ID` takes the next id, or the one a watcher allocated
    (its trigger file names it: the watcher skips ids its own state or a hand-run took)."""
    cfg = load_config(flywheel_config(tmp_path))
    assert choose_round(cfg, "r0001") == "r0001"  # the next one
    assert choose_round(cfg, "r0007", {"round_id": "r0007"}) == "r0007"  # the watcher's
    with pytest.raises(InputError, match=r"--round r0007: no such round .*known: none yet"):
        choose_round(cfg, "r0007", {"round_id": "r0006"})
    with pytest.raises(InputError, match="expected `next` or an id like r0001"):
        choose_round(cfg, "7")


def test_a_planned_round_creates_nothing(tmp_path: Path) -> None:
    """Issue 25 item 12: `run --round next --plan` created the ledger (and the workdir when
    the ledger lives there); a plan is read-only, before the first round and after one."""
    config = flywheel_config(tmp_path)
    for _ in range(2):
        files = sorted(tmp_path.rglob("*"))
        ran = tuneloop("run", config, "--round", "next", "--plan", cwd=tmp_path)
        assert ran.code == 0, ran.output
        assert "eval_pre" in ran.stdout and "gate slice gate-00" in ran.stderr
        assert sorted(tmp_path.rglob("*")) == files
        assert run_round(config) == 0


def test_what_is_no_round_is_refused_with_nothing_written(tmp_path: Path) -> None:
    """`run --round next` on a config without suite.rolling recorded a refused round r0001
    (a new ledger and EXPERIMENT-LOG entry) for a config that has no rounds; `--trigger-file`
    without a round was silently ignored."""
    config = write_config(tmp_path, train={"data": str(tmp_path / "suite.jsonl")})
    files = sorted(tmp_path.rglob("*"))
    ran = tuneloop("run", config, "--round", "next", cwd=tmp_path)
    ran.assert_input_error("suite.rolling")
    assert sorted(tmp_path.rglob("*")) == files
    ran = tuneloop("run", config, "--trigger-file", config, "--plan", cwd=tmp_path)
    ran.assert_input_error("--trigger-file", "--round next")


def test_a_rounds_failed_mlflow_write_gives_no_false_retry_advice(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A round's failed MLflow write said "the next `tuneloop run` retries"; a round that
    has ended is only re-reported (`--round rNNNN`), so nothing retries it."""
    blocked = tmp_path / "blocked"
    blocked.write_text("a file, not a folder")
    config = flywheel_config(tmp_path)
    text = config.read_text() + f"tracking:\n  mlflow: sqlite:///{blocked}/mlflow.db\n"
    config.write_text(text)
    assert run_round(config) == 0
    out = capfd.readouterr().out
    assert "mlflow: not written (attempt 1;" in out
    assert "the next `tuneloop run` retries" not in out and "nothing retries it" in out
