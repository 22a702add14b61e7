"""The runner on fake phases: resume, fingerprints, fail closed, lock, plan, --from/--only."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tuneloop.config import LoopConfig
from tuneloop.errors import InputError, PhaseFailed
from tuneloop.loop.context import PhaseContext
from tuneloop.loop.phases import Phase
from tuneloop.loop.runner import Runner, Selection
from tuneloop.loop.state import WorkdirLock, load_state

CALLS: list[str] = []


def _a(ctx: PhaseContext) -> None:
    CALLS.append("a")
    (ctx.folder / "a.txt").write_text(f"steps={ctx.cfg.train.steps}")


def _b(ctx: PhaseContext) -> None:
    CALLS.append("b")
    text = (ctx.upstream["a"] / "a.txt").read_text()
    (ctx.folder / "b.txt").write_text(text.upper() + f" lr={ctx.cfg.train.learning_rate}")


def _c(ctx: PhaseContext) -> None:
    CALLS.append("c")
    (ctx.folder / "c.txt").write_text((ctx.upstream["b"] / "b.txt").read_text()[::-1])


def _boom(ctx: PhaseContext) -> None:
    (ctx.folder / "phase.log").write_text("something broke\n")
    raise RuntimeError("disk on fire")


def _no_output(ctx: PhaseContext) -> None:
    pass


def phases(b_run=_b) -> tuple[Phase, ...]:
    return (
        Phase("a", _a, outputs=("a.txt",), config=lambda c: c.train.steps),
        Phase("b", b_run, outputs=("b.txt",), after=("a",), config=lambda c: c.train.learning_rate),
        Phase("c", _c, outputs=("c.txt",), after=("b",)),
    )


def cfg(tmp_path: Path, **train: object) -> LoopConfig:
    return LoopConfig.model_validate(
        {
            "base_model": str(tmp_path / "m"),
            "suite": {"path": str(tmp_path / "s.jsonl")},
            "workdir": str(tmp_path / "work"),
            "train": {"steps": 5, **train},
        }
    )


def runner(tmp_path: Path, sel: Selection | None = None, ph=None, **train: object) -> Runner:
    ph = ph or phases()
    sel = sel or Selection(names=tuple(p.name for p in ph))
    return Runner(cfg(tmp_path, **train), tmp_path / "loop.yaml", sel, ph)


@pytest.fixture(autouse=True)
def _clear() -> None:
    CALLS.clear()


def test_runs_in_order_then_resumes_without_redoing(tmp_path: Path) -> None:
    state = runner(tmp_path).run()
    assert CALLS == ["a", "b", "c"]
    assert {k: v.status for k, v in state.phases.items()} == {"a": "done", "b": "done", "c": "done"}
    before = {p: (tmp_path / "work" / p / "phase.json").read_bytes() for p in "abc"}
    runner(tmp_path).run()
    assert CALLS == ["a", "b", "c"]  # nothing redone
    after = {p: (tmp_path / "work" / p / "phase.json").read_bytes() for p in "abc"}
    assert before == after


def test_config_change_redoes_only_what_depends_on_it(tmp_path: Path) -> None:
    runner(tmp_path).run()
    CALLS.clear()
    runner(tmp_path, learning_rate=0.1).run()
    assert CALLS == ["b", "c"]  # b's config changed; c's input (b.txt) changed
    CALLS.clear()
    runner(tmp_path, learning_rate=0.1).run()
    assert CALLS == []


def test_tampered_output_is_redone(tmp_path: Path) -> None:
    runner(tmp_path).run()
    CALLS.clear()
    (tmp_path / "work" / "b" / "b.txt").write_text("tampered")
    runner(tmp_path).run()
    assert CALLS == ["b"]  # c's input hash is the same as before once b is rebuilt


def test_failure_stops_the_loop_and_is_recorded(tmp_path: Path) -> None:
    expected = r"phase 'b' failed: RuntimeError: disk on fire; read .*phase.log"
    with pytest.raises(PhaseFailed, match=expected):
        runner(tmp_path, ph=phases(_boom)).run()
    assert CALLS == ["a"]
    state = load_state(tmp_path / "work")
    assert state is not None
    assert state.phases["b"].status == "failed"
    assert "c" not in state.phases
    assert not (tmp_path / "work" / "c").exists()


def test_missing_declared_output_fails_closed(tmp_path: Path) -> None:
    with pytest.raises(PhaseFailed, match=r"phase 'b' did not produce .*b.txt"):
        runner(tmp_path, ph=phases(_no_output)).run()
    assert "c" not in CALLS


def test_plan_says_what_and_why(tmp_path: Path) -> None:
    lines = runner(tmp_path).plan()
    assert [(x.phase, x.action) for x in lines] == [("a", "run"), ("b", "run"), ("c", "run")]
    runner(tmp_path).run()
    lines = runner(tmp_path, learning_rate=0.2).plan()
    assert [(x.phase, x.action) for x in lines] == [("a", "skip"), ("b", "redo"), ("c", "run")]
    assert "fingerprint changed" in lines[1].reason


def test_from_and_only(tmp_path: Path) -> None:
    runner(tmp_path).run()
    CALLS.clear()
    names = ("a", "b", "c")
    runner(tmp_path, Selection(from_phase="b", names=names)).run()
    assert CALLS == ["b", "c"]
    CALLS.clear()
    runner(tmp_path, Selection(only="a", names=names)).run()
    assert CALLS == ["a"]
    with pytest.raises(InputError, match=r"unknown phase 'bb' \(did you mean 'b'\?\)"):
        runner(tmp_path, Selection(only="bb", names=names)).run()


def test_second_run_on_same_workdir_is_refused_naming_pid(tmp_path: Path) -> None:
    work = tmp_path / "work"
    with WorkdirLock(work), pytest.raises(InputError, match=rf"pid {os.getpid()}"):
        runner(tmp_path).run()


SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    sys.path.insert(0, {here!r})
    import test_runner as t
    from tuneloop.loop.runner import Runner, Selection

    def slow_b(ctx):
        t._b(ctx)
        Path({flag!r}).write_text("in b")
        time.sleep(60)

    ph = t.phases(slow_b if {slow} else t._b)
    Runner(t.cfg(Path({tmp!r})), Path("x"), Selection(names=("a", "b", "c")), ph).run()
    """
)


def test_sigkill_mid_phase_then_resume(tmp_path: Path) -> None:
    """A run killed inside phase b resumes: a is not redone, b and c complete."""
    here = str(Path(__file__).parent)
    flag = tmp_path / "flag"

    def script(slow: bool) -> str:
        return SCRIPT.format(here=here, flag=str(flag), slow=slow, tmp=str(tmp_path))

    proc = subprocess.Popen([sys.executable, "-c", script(True)])
    deadline = time.monotonic() + 60
    while not flag.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    a_record = (tmp_path / "work" / "a" / "phase.json").read_bytes()
    state = json.loads((tmp_path / "work" / "state.json").read_text())
    assert state["phases"]["b"]["status"] == "running"
    subprocess.run([sys.executable, "-c", script(False)], check=True)
    state = json.loads((tmp_path / "work" / "state.json").read_text())
    assert {k: v["status"] for k, v in state["phases"].items()} == {
        "a": "done",
        "b": "done",
        "c": "done",
    }
    assert (tmp_path / "work" / "a" / "phase.json").read_bytes() == a_record
