"""The teachers file: every problem at once (unknown field, missing key variable, duplicate
name, endpoint and embedded), through the loader, `tuneloop replay` and `tuneloop check`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.modelfiles import write_model_files
from tuneloop.errors import InputError
from tuneloop.replay.teachers import load_teachers

from ..installed import script

ARITH = Path(__file__).resolve().parents[2] / "examples" / "arith"

BAD = """\
teachers:
  - name: big
    endpoint: https://api.example.com/v1
    model: big-1
    api_key_env: TUNELOOP_TEST_UNSET_KEY
    pricee: {input_per_1m: 3}
  - name: big
    endpoint: http://127.0.0.1:9/v1
    model: small-1
  - name: local
    embedded: model
    endpoint: http://127.0.0.1:9/v1
"""

PROBLEMS = [
    "teachers.0.pricee (line 6): unknown key (did you mean 'price'?)",
    "teachers.0.api_key_env (line 5): environment variable TUNELOOP_TEST_UNSET_KEY is not set",
    "teachers.1.name (line 7): duplicate teacher name 'big' (first as teachers.0.name)",
    "teachers.2 (line 10): give exactly one of `endpoint` (a URL) and `embedded` (a folder)",
    # beyond the schema, found beside its errors: the run's embedded server would fail on it
    "teachers.2.embedded (line 11): ",
]


@pytest.fixture
def bad_file(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.delenv("TUNELOOP_TEST_UNSET_KEY", raising=False)
    path = tmp_path / "teachers.yaml"
    path.write_text(BAD)
    return path


def test_every_problem_at_once(bad_file: Path) -> None:
    with pytest.raises(InputError) as err:
        load_teachers(bad_file)
    msg = str(err.value)
    assert "5 error(s)" in msg
    for problem in PROBLEMS:
        assert problem in msg


def test_a_good_file_resolves_embedded_paths(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("T_KEY", "secret-value")
    path = tmp_path / "t.yaml"
    path.write_text(
        "teachers:\n  - {name: a, endpoint: 'http://x/v1', model: m, api_key_env: T_KEY}\n"
        "  - {name: b, embedded: model, sampling: {max_tokens: 4}}\n"
    )
    (tmp_path / "model").mkdir()
    write_model_files(tmp_path / "model")
    cfg = load_teachers(path)
    assert cfg.teachers[1].requested_model() == str(tmp_path / "model")
    assert cfg.teachers[0].requested_model() == "m" and cfg.teachers[1].sampling.max_tokens == 4


def test_replay_command_exits_2_with_every_problem(bad_file: Path, tmp_path: Path) -> None:
    traces = tmp_path / "traces.jsonl"
    traces.write_text("")
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            script(),
            "replay",
            "--traces",
            str(traces),
            "--teachers",
            str(bad_file),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    for problem in PROBLEMS:
        assert problem in proc.stderr
    assert not out.exists()  # nothing written


def test_check_reports_the_teachers_file(bad_file: Path) -> None:
    proc = subprocess.run(
        [
            script(),
            "check",
            str(ARITH / "loop.yaml"),
            f"replay.teachers={bad_file}",
            "replay.judge=exactt",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "replay.teachers (override):" in proc.stderr
    for problem in PROBLEMS:
        assert problem in proc.stderr
    assert "replay.judge (override): unknown scorer 'exactt' (did you mean 'exact'?)" in proc.stderr
