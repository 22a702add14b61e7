"""`SafeName`: a name that becomes a path component is refused at load when it could leave
its folder (issue 25 item 8: `name: "../../evil"` passed check and was archived outside
`archive.root`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuneloop.config.base import check_path_component, path_component_problem
from tuneloop.errors import InputError

from ..installed import tuneloop
from ..loop.preflight.test_checks import GOOD, edit, line_of, project  # noqa: F401


@pytest.mark.parametrize("name", ["../../evil", "..", ".", "a/b", "a\\b", "", " x", "a\nb"])
def test_names_that_are_not_one_path_component_are_refused(name: str) -> None:
    assert path_component_problem(name) is not None
    with pytest.raises(InputError, match="run id"):
        check_path_component(name, "run id")


@pytest.mark.parametrize("name", ["loop", "arith-r0003", "my run", "v1.2_x", "ünïcode"])
def test_plain_names_pass(name: str) -> None:
    assert path_component_problem(name) is None


def test_check_refuses_a_run_name_that_climbs_out(project: Path) -> None:  # noqa: F811
    text = edit(GOOD, "name:", 'name: "../../evil"')
    (project / "loop.yaml").write_text(text)
    ran = tuneloop("check", project / "loop.yaml", cwd=project)
    ran.assert_input_error(f"name (line {line_of(text, 'name:')})", "one path component")
    assert ran.output.count("\n") <= 2  # one error line under the file's
    ran = tuneloop("check", project / "loop.yaml", "name=a/b", cwd=project)
    ran.assert_input_error("name (override)")
    ran = tuneloop("run", project / "loop.yaml", "--plan", cwd=project)
    ran.assert_input_error("name (line")
    assert not (project / "work").exists() and not (project.parent / "evil").exists()
