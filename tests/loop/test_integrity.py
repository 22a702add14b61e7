"""A round's decision belongs to its evidence: the real report, gate, capstone, archive and
promote phases on fake model phases (tests/loop/fakeloop.py), a few seconds per run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tuneloop.archive import verify_archive
from tuneloop.errors import InputError
from tuneloop.gate import champion_history
from tuneloop.loop.state import load_state

from . import fakeloop
from .fakeloop import runner, write_config

HERE = Path(__file__).parent


@pytest.fixture(autouse=True)
def _calls() -> None:
    fakeloop.CALLS.clear()


def verdict(tmp: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((tmp / "work" / "gate" / "verdict.json").read_text())


def test_a_weaker_rerun_is_refused_before_training_and_nothing_changes(tmp_path: Path) -> None:
    """Defect 1: the old 'promote' stayed after a weaker re-run; the archive was overwritten."""
    config = write_config(tmp_path)
    state = runner(config).run()
    first = verdict(tmp_path)
    assert first["decision"] == "promote"
    (champ,) = champion_history(tmp_path / "ledger" / "ledger.db")
    archive = tmp_path / "archive" / state.run_id
    assert champ.descriptor["path"] == str(archive / "run" / "merge" / "model")
    fakeloop.CALLS.clear()
    refused = r"none of the (\d+) items of slice .gate.*0 fresh, \1 already looked at.*refused"
    with pytest.raises(InputError, match=refused):
        runner(config, ["train.steps=3"]).run()
    assert fakeloop.CALLS == []  # nothing ran: no training was wasted
    assert verdict(tmp_path) == first
    assert load_state(tmp_path / "work").run_id == state.run_id  # type: ignore[union-attr]
    assert verify_archive(archive) == []


def test_a_changed_round_with_reuse_allowed_is_a_new_round(tmp_path: Path) -> None:
    """Defects 1 and 2: --from train after a config change; nothing of the old round lost."""
    config = write_config(tmp_path)
    old = runner(config).run()
    fakeloop.CALLS.clear()
    new = runner(config, ["train.steps=3", "gate.allow_slice_reuse=true"], from_phase="train").run()
    assert fakeloop.CALLS == ["train", "merge", "doctor", "eval_post"]
    assert new.run_id != old.run_id and new.previous_runs[-1].run_id == old.run_id
    v = verdict(tmp_path)
    assert v["decision"] == "reject" and v["run_id"] == new.run_id  # never the old promote
    assert v["slice_reuse"]["previous_runs"] == [old.run_id]
    capstone = (tmp_path / "work" / "capstone" / "report.md").read_text()
    assert "**reject**" in capstone and new.run_id in capstone
    # both archives exist and verify; the champion is still the old round's
    assert verify_archive(tmp_path / "archive" / old.run_id) == []
    assert verify_archive(tmp_path / "archive" / new.run_id) == []
    history = champion_history(tmp_path / "ledger" / "ledger.db")
    assert [h.run_id for h in history] == [old.run_id]
    # the replaced outputs are kept, with why
    moved = sorted(p.name.split("-", 2)[-1] for p in (tmp_path / "work" / "quarantine").iterdir())
    assert moved == sorted(
        [
            "train",
            "merge",
            "doctor",
            "eval_post",
            "report",
            "gate",
            "capstone",
            "archive",
            "promote",
        ]
    )
    for folder in (tmp_path / "work" / "quarantine").iterdir():
        assert json.loads((folder / "why.json").read_text())["reason"]


def test_tampered_scores_are_quarantined_and_never_judged(tmp_path: Path) -> None:
    """Defect 10: a redo kept the edited rows and only filled missing keys."""
    config = write_config(tmp_path, gate={"enabled": False})
    runner(config).run()
    samples = tmp_path / "work" / "eval_post" / "samples.jsonl"
    rows = [json.loads(line) for line in samples.read_text().splitlines()]
    honest = sum(r["score"] for r in rows)
    samples.write_text("".join(json.dumps({**r, "score": 1.0}) + "\n" for r in rows))
    fakeloop.CALLS.clear()
    runner(config).run()
    assert "eval_post" in fakeloop.CALLS  # the fake asserts it started from an empty folder
    again = [json.loads(line) for line in samples.read_text().splitlines()]
    assert sum(r["score"] for r in again) == honest
    (kept,) = (tmp_path / "work" / "quarantine").glob("*-eval_post")
    assert all(
        json.loads(x)["score"] == 1.0 for x in (kept / "samples.jsonl").read_text().splitlines()
    )


def test_the_bar_is_sealed_before_the_post_evaluation(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    env = {**os.environ, "TUNELOOP_KILL_AT": "gate:start"}
    proc = subprocess.run([sys.executable, str(HERE / "fakeloop.py"), str(config)], env=env)
    assert proc.returncode == -9
    sealed = json.loads((tmp_path / "work" / "eval_post" / "sealed_bar.json").read_text())
    assert sealed["bar"]["margin"] == 0.05
    with pytest.raises(InputError, match="bar was sealed at .* restore the sealed"):
        runner(config, ["gate.margin=0.0"]).run()
    with pytest.raises(InputError, match="bar was sealed"):
        runner(config, ["gate.margin=0.0"]).plan()
    assert runner(config).run().phases["promote"].status == "done"


@pytest.mark.parametrize("archive", [True, False])
def test_kill_between_decision_and_archive_never_names_a_missing_champion(
    tmp_path: Path, archive: bool
) -> None:
    """Defect 3: the champion pointed into an archive that did not exist yet."""
    config = write_config(tmp_path, archive={"enabled": archive})
    db = tmp_path / "ledger" / "ledger.db"
    points = ["gate:end", "capstone:start", "capstone:end", "archive:start", "archive:end"]
    points += ["promote:start"]
    for point in points if archive else ["gate:end", "capstone:end", "promote:start"]:
        env = {**os.environ, "TUNELOOP_KILL_AT": point}
        proc = subprocess.run([sys.executable, str(HERE / "fakeloop.py"), str(config)], env=env)
        assert proc.returncode == -9, point
        assert champion_history(db) == [], point  # the old (no) champion is in charge
    state = runner(config).run()
    (champ,) = champion_history(db)
    path = Path(champ.descriptor["path"])
    assert path.is_dir()
    if archive:
        assert path == tmp_path / "archive" / state.run_id / "run" / "merge" / "model"
        assert verify_archive(tmp_path / "archive" / state.run_id) == []
    else:
        assert path == tmp_path / "work" / "merge" / "model"
        assert "archiving is off" in champ.descriptor["location"]
    promotion = json.loads((tmp_path / "work" / "promote" / "promotion.json").read_text())
    assert promotion["champion_version"] == 1
    assert runner(config).run().run_id == state.run_id  # nothing left to do, same round


def test_an_archive_is_never_overwritten(tmp_path: Path) -> None:
    config = write_config(tmp_path, gate={"enabled": False})
    env = {**os.environ, "TUNELOOP_KILL_AT": "archive:start"}
    proc = subprocess.run([sys.executable, str(HERE / "fakeloop.py"), str(config)], env=env)
    assert proc.returncode == -9
    run_id = load_state(tmp_path / "work").run_id  # type: ignore[union-attr]
    squatter = tmp_path / "archive" / run_id
    squatter.mkdir(parents=True)
    (squatter / "notes.txt").write_text("someone else's files")
    with pytest.raises(Exception, match="never overwritten"):
        runner(config).run()
    assert (squatter / "notes.txt").read_text() == "someone else's files"


def test_a_redone_archive_is_a_new_archive(tmp_path: Path) -> None:
    config = write_config(tmp_path, gate={"enabled": False})
    old = runner(config).run()
    (tmp_path / "work" / "archive" / "archived.json").unlink()  # outputs no longer verify
    new = runner(config).run()
    assert new.run_id != old.run_id
    assert verify_archive(tmp_path / "archive" / old.run_id) == []
    assert verify_archive(tmp_path / "archive" / new.run_id) == []


def test_an_adapter_challenger_is_judged_and_promoted_as_the_adapter_on_its_base(
    tmp_path: Path,
) -> None:
    """`serve.challenger: adapter`: the gate's evidence and the champion name the adapter that
    answered the post arm (the fake eval_post stands in for vLLM serving it on the base)."""
    from tuneloop.records import sha256_path

    config = write_config(tmp_path, serve={"challenger": "adapter"})
    state = runner(config).run()
    work, base = tmp_path / "work", tmp_path / "base"
    evidence = verdict(tmp_path)["evidence"]
    assert evidence["challenger_model"] == sha256_path(work / "train" / "adapter")
    assert evidence["champion_model"] == sha256_path(base)
    (champ,) = champion_history(tmp_path / "ledger" / "ledger.db")
    run = tmp_path / "archive" / state.run_id / "run"
    assert champ.descriptor["path"] == str(base)
    assert champ.descriptor["sha256"] == sha256_path(base)
    assert champ.descriptor["adapter"] == {
        "path": str(run / "train" / "adapter"),
        "sha256": evidence["challenger_model"],
    }
    assert champ.descriptor["merged"]["path"] == str(run / "merge" / "model")


def test_the_gate_refuses_a_log_answered_by_another_artifact(tmp_path: Path) -> None:
    from tuneloop.errors import PhaseFailed
    from tuneloop.loop.integrity import check_served
    from tuneloop.records import read_record, write_record
    from tuneloop.samplelog import EvalSummary, ServedArtifact, ServedAs

    config = write_config(tmp_path)
    runner(config).run()
    work = tmp_path / "work"
    path = work / "eval_post" / "summary.json"
    artifact = ServedArtifact(kind="model", path="/m", sha256="c" * 64, served_id="m")
    served = ServedAs(arm="post", backend="vllm", artifact=artifact)
    summary = read_record(path, EvalSummary).model_copy(update={"served_as": served})
    write_record(path, summary)
    check_served(work, ("a" * 64, "c" * 64))  # the pre log names none: nothing to compare
    with pytest.raises(
        PhaseFailed, match="post arm was answered by model /m .*redo from eval_post"
    ):
        check_served(work, ("a" * 64, "d" * 64))


def test_rounds_under_a_sequence_seal_their_alpha_k_and_a_spent_one_is_refused_before_training(
    tmp_path: Path,
) -> None:
    from tuneloop.config import load_config
    from tuneloop.gate.ledger import open_ledger
    from tuneloop.loop.integrity import preflight_gate

    from .rounds.test_driver import flywheel_config

    config = flywheel_config(tmp_path)
    uniform = "  sequence: {rule: alpha_spending, series: uniform, horizon: 2}\n"
    config.write_text(config.read_text().replace("gate:\n", "gate:\n" + uniform))
    assert fakeloop.run_round(config) == 0 and fakeloop.run_round(config) == 0
    with open_ledger(tmp_path / "ledger" / "ledger.db") as ledger:
        spent = ledger.alpha_spent()
        verdicts = ledger.verdicts()
    assert [(s.k, s.alpha) for s in spent] == [(1, 0.025), (2, 0.025)]
    assert [v.bar["alpha"] for v in verdicts] == [0.025, 0.025]
    assert [v.bar_sha256 for v in verdicts] == [s.bar_sha256 for s in spent]
    cfg = load_config(config)
    fakeloop.CALLS.clear()
    with pytest.raises(InputError, match="the sequence's α is spent: .* round 3 may spend nothing"):
        preflight_gate(cfg, cfg.workdir, False)  # what `tuneloop run` checks before any phase
    assert fakeloop.CALLS == []


def test_a_gate_redone_as_a_new_round_judges_the_bar_its_round_sealed(tmp_path: Path) -> None:
    from tuneloop.gate.ledger import open_ledger

    config = write_config(tmp_path, gate={"sequence": "alpha_spending"})
    first = runner(config).run()
    assert verdict(tmp_path)["bar"]["sequence"]["k"] == 1
    again = runner(config, ["gate.allow_slice_reuse=true", "gate.seed=1"], from_phase="gate").run()
    # a new run id, judged against the bar its round sealed: the same evidence, so the same
    # look (the stored verdict); judged against the next round's α it would be refused
    assert again.run_id != first.run_id
    v = verdict(tmp_path)
    assert v["run_id"] == first.run_id and v["bar"]["sequence"]["k"] == 1
    with open_ledger(tmp_path / "ledger" / "ledger.db") as ledger:
        assert [s.seal_id for s in ledger.alpha_spent()] == [first.run_id]  # spent once
