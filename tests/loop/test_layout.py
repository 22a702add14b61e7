"""`RunLayout` against the phase table: one folder per phase, each artifact a declared output."""

from __future__ import annotations

from pathlib import Path

from tuneloop.loop.layout import RunLayout
from tuneloop.loop.phases import PHASE_NAMES, PHASES

RUN = RunLayout(Path("work"))
PROPERTIES = sorted(name for name, v in vars(RunLayout).items() if isinstance(v, property))
NOT_OUTPUTS = {
    "sealed_bar": "written into eval_post/ by integrity.seal_round before the evaluation runs",
}
"""Artifacts in a phase folder that the phase does not declare (so the runner hashes none)."""


def _in_phase(name: str) -> tuple[str, Path] | None:
    """(phase, path inside its folder) of a property, or None for the run's own files."""
    parts = getattr(RUN, name).relative_to(RUN.workdir).parts
    if parts[0] not in PHASE_NAMES:
        return None
    return parts[0], Path(*parts[1:])


def test_every_phase_of_the_table_has_its_folder_and_nothing_else_is_one() -> None:
    folders = {n for n in PROPERTIES if getattr(RUN, n).parent == RUN.workdir}
    assert {n for n in folders if n in PHASE_NAMES} == set(PHASE_NAMES)
    for name in PHASE_NAMES:
        assert getattr(RUN, name) == RUN.phase(name) == RUN.workdir / name
    assert not {RUN.state.name, RUN.lock.name, RUN.quarantine.name, RUN.rounds.name} & set(
        PHASE_NAMES
    )


def test_each_artifact_in_a_phase_folder_is_an_output_the_phase_declares() -> None:
    outputs = {p.name: [Path(o) for o in p.outputs] for p in PHASES}
    checked = []
    for name in PROPERTIES:
        where = _in_phase(name)
        if where is None or where[1] == Path() or name in NOT_OUTPUTS:
            continue
        phase, rel = where
        assert any(rel == o or o in rel.parents for o in outputs[phase]), (name, phase, rel)
        checked.append(name)
    assert {"verdict", "delta", "capstone_html", "merged_model", "tracking"} <= set(checked)


def test_a_round_is_a_run_of_its_own_under_rounds() -> None:
    r = RUN.round("r0003")
    assert r.workdir == Path("work/rounds/r0003")
    assert r.verdict == Path("work/rounds/r0003/gate/verdict.json")
    assert r.round_file == Path("work/rounds/r0003/round.json")
