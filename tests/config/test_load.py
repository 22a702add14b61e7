"""Loading a loop.yaml: where an error is placed, and a resolved config that loads again."""

from __future__ import annotations

from pathlib import Path

from tuneloop.config import LoopConfig, dump_config, load_config

from ..installed import tuneloop
from ..loop.preflight.test_checks import GOOD, line_of, project  # noqa: F401


def test_a_bad_override_names_the_override_not_the_files_line(project: Path) -> None:  # noqa: F811
    """The value came from the command line: `(override)`, never the line it replaced."""
    ran = tuneloop("check", project / "loop.yaml", "gate.margin=-1", "gate.marginn=1", cwd=project)
    ran.assert_input_error("gate.margin (override): must be >= 0", "gate.marginn (override)")
    assert f"(line {line_of(GOOD, '  margin:')})" not in ran.output
    ran = tuneloop("check", project / "loop.yaml", "gate=3", cwd=project)
    ran.assert_input_error("gate (override)")


def test_every_sections_defaults_round_trip(project: Path, tmp_path: Path) -> None:  # noqa: F811
    """The resolved config (what `tuneloop check` prints, what an archive's inputs/loop.yaml
    holds: every section with every default spelled out) loads to the same config, and
    `check` accepts it as it accepted the original (issue 25 item 5: `replay.teachers: null`
    with the replay defaults spelled out was refused)."""
    cfg = load_config(project / "loop.yaml")
    resolved = project / "resolved.yaml"
    resolved.write_text(dump_config(cfg))
    again = load_config(resolved)
    assert again == cfg
    for section in LoopConfig.model_fields:
        assert getattr(again, section) == getattr(cfg, section), section
    ran = tuneloop("check", resolved, cwd=project)
    assert ran.code == 0, ran.output
    assert ran.stdout == dump_config(cfg)


def test_a_fields_rule_names_the_field_and_hides_no_other_error(project: Path) -> None:  # noqa: F811
    """`suite.slices` summing over 1 was a rule of the whole `suite:` section: reported as
    `suite (line n)` for an override, and hiding every other error; a metric's key had no
    line (`eval.metrics[0] (default)`)."""
    text = GOOD.replace("eval:\n", "eval:\n  metrics: [turnz]\n")
    (project / "loop.yaml").write_text(text)
    ran = tuneloop(
        "check", project / "loop.yaml", "suite.slices={dev: 0.5, gate: 0.6}", "train.method=x"
    )
    ran.assert_input_error(
        "suite.slices (override): slice fractions must sum to ≤ 1",
        f"eval.metrics.0 (line {line_of(text, '  metrics:')}): unknown scorer 'turnz'",
        "train.method (override): unknown trainer 'x'",
    )
