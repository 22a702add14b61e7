"""`tuneloop select`: the installed script on sample logs on disk — the table, the decision
record, and every refusal (exit 2, one message naming the log folder, nothing written)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import typer
from scipy.stats import binomtest
from typer.testing import CliRunner

from tuneloop.errors import InputError
from tuneloop.records import read_record
from tuneloop.records.selection import SelectionDecision
from tuneloop.selection.command import select

from ..installed import Ran, tuneloop
from .conftest import MakeArm

ITEMS = [f"q{i:02d}" for i in range(16)]


def _scores(right: int) -> dict[str, list[float | None]]:
    return {item: [1.0 if i < right else 0.0] for i, item in enumerate(ITEMS)}


def test_select_prints_the_table_and_writes_the_decision(make_arm: MakeArm, tmp_path: Path) -> None:
    a = make_arm("greedy", _scores(6), tokens=30, temperature=0.0)
    b = make_arm("hot", _scores(14), tokens=80, temperature=0.8)
    out = tmp_path / "decision.json"
    ran = tuneloop("select", a, b, "--default", "greedy", "--sign-p", "0.05", "--out", out)
    assert ran.code == 0, ran.output
    assert "Traceback" not in ran.output
    for needle in ("greedy (default)", "hot ✓", "+0.5000", "8/0/8", "0.00781", "yes"):
        assert needle in ran.stdout, ran.stdout
    assert "chosen: hot — 'hot' replaces default 'greedy'" in ran.stdout
    d = read_record(out, SelectionDecision)
    assert d.chosen == "hot" and d.default == "greedy"
    assert d.rule == {
        "rule": "default_stays",
        "slice": "validation",
        "sign_p": 0.05,
        "non_inferiority_epsilon": 0.05,
    }
    (pair,) = d.pairs
    assert pair.sign_p == pytest.approx(binomtest(8, 8, 0.5).pvalue, rel=1e-12)
    assert {arm.name: arm.cost for arm in d.arms} == {"greedy": 30.0, "hot": 80.0}


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("select")(select)
    app.command("unused")(lambda: None)  # two commands: typer keeps the sub-command name
    return app


def test_named_arms_best_mean_and_a_folder_as_out(make_arm: MakeArm, tmp_path: Path) -> None:
    a = make_arm("x/log", _scores(6), tokens=30)
    b = make_arm("y/log", _scores(6), tokens=10)
    res = CliRunner().invoke(
        _app(),
        ["select", f"first={a}", f"second={b}", "--rule", "best_mean", "--out", str(tmp_path)],
    )
    assert res.exit_code == 0, res.output
    d = read_record(tmp_path / "decision.json", SelectionDecision)
    assert d.chosen == "second" and d.default is None  # a tie on the mean: the cheaper
    assert "chosen: second — 'second' has the highest mean (0.3750), tied" in res.output
    # no --out: the table only; no default: the cheapest arm is the default
    res = CliRunner().invoke(_app(), ["select", f"first={a}", f"second={b}"])
    assert res.exit_code == 0, res.output
    assert "second (default) ✓" in res.output
    assert "no default given: 'second' is the cheapest arm, cost 10" in res.output
    # the default named by its log's path
    res = CliRunner().invoke(_app(), ["select", str(a), f"other={b}", "--default", str(a)])
    assert res.exit_code == 0, res.output
    assert "log (default) ✓" in res.output


def test_a_bad_rule_option_is_an_input_error(make_arm: MakeArm) -> None:
    a, b = make_arm("a", _scores(1)), make_arm("b", _scores(2))
    res = CliRunner().invoke(_app(), ["select", str(a), str(b), "--sign-p", "1.5"])
    assert isinstance(res.exception, InputError)
    assert "--sign-p: must be < 1" in str(res.exception)


def test_refusals_exit_2_name_the_log_folder_and_write_nothing(
    make_arm: MakeArm, tmp_path: Path
) -> None:
    a = make_arm("a", _scores(4))
    same_name = make_arm("other/a", _scores(5))
    model = make_arm("model", _scores(5), model="another-model")
    items = make_arm("items", {"q00": [1.0], "zz": [0.0]})
    revision = make_arm("revision", _scores(5), revision="d" * 64)
    b = make_arm("b", _scores(5))
    out = tmp_path / "out" / "decision.json"
    cases = {
        "one log": ((a,), ["at least 2 sample logs, got 1", str(a)]),
        "a name twice": ((a, same_name), [f"{same_name}: arm name 'a' is also", str(a)]),
        "another model": ((a, model), [f"{model}: model 'another-model' differs from {a}'s"]),
        "other items": ((a, items), [f"{items}: evaluated other items than {a}"]),
        "another revision": ((a, revision), [f"{revision}: suite revision dddddddddddd"]),
        "not a log": ((a, tmp_path / "nope"), [f"{tmp_path / 'nope'}: not a sample log"]),
        "unknown default": ((a, b, "--default", "c"), ["the default 'c' is not one of the arms"]),
        "default with best_mean": (
            (a, b, "--default", "a", "--rule", "best_mean"),
            ["--default applies to --rule default_stays only"],
        ),
        "out is an input": (
            (a, b, "--out", a / "summary.json"),
            [f"--out {a / 'summary.json'}: is the input"],
        ),
    }

    def run(args: tuple[str | Path, ...]) -> Ran:
        return tuneloop("select", *args, *(() if "--out" in args else ("--out", out)))

    with ThreadPoolExecutor(max_workers=2) as pool:
        ran = dict(zip(cases, pool.map(run, [args for args, _ in cases.values()]), strict=True))
    for name, (_, needles) in cases.items():
        ran[name].assert_input_error(*needles)
        assert ran[name].stdout == "", name
    assert not out.exists() and not (tmp_path / "out").exists()
