"""`tuneloop judge calibrate` with the demo judge (`examples/arith/judge/`, errors known per
input): a hand-made audit set with a hand-computed table, a 400-row audit set at a known error
rate, a traffic-log folder, refusals, unparsable judgements, and bad input (exit 2, nothing
written)."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import httpx
import pytest
from sklearn.metrics import cohen_kappa_score

from tuneloop.errors import InputError
from tuneloop.evaluate.audit import read_audit
from tuneloop.evaluate.calibrate import calibrate, summary_lines
from tuneloop.records import read_record
from tuneloop.records.judge import JudgeCalibration
from tuneloop.stats.proportions import wilson_interval

from ..installed import script

ARITH = Path(__file__).resolve().parents[2] / "examples" / "arith"
JUDGE_DIR = ARITH / "judge"


def _verdicts() -> ModuleType:
    spec = importlib.util.spec_from_file_location("arith_judge_verdicts", JUDGE_DIR / "verdicts.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


V = _verdicts()


@pytest.fixture(scope="module")
def judge_url() -> Iterator[Callable[..., str]]:
    """`judge_url("--error-rate", "0.1")`: the base URL of a demo judge started with those
    options (one process per option list, stopped at the end of the module)."""
    started: dict[tuple[str, ...], tuple[subprocess.Popen, str]] = {}

    def get(*args: str, env: dict[str, str] | None = None) -> str:
        if args not in started:
            proc = subprocess.Popen(
                [sys.executable, str(JUDGE_DIR / "server.py"), "--port", "0", *args],
                stderr=subprocess.PIPE,
                text=True,
                env={**os.environ, **(env or {})},
            )
            assert proc.stderr is not None
            found = re.search(r"on (http://[\d.]+:\d+)", proc.stderr.readline())
            assert found is not None, "the demo judge did not start"
            httpx.get(f"{found.group(1)}/health", timeout=5).raise_for_status()
            started[args] = (proc, found.group(1))
        return started[args][1]

    yield get
    for proc, _ in started.values():
        proc.terminate()
        proc.wait(timeout=10)


def write_judge(folder: Path, url: str, **extra: object) -> Path:
    """The demo judge file and its rubric in `folder`, asking `url`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "rubric.j2").write_bytes((JUDGE_DIR / "rubric.j2").read_bytes())
    lines = [
        f"endpoint: {url}",
        "model: arith-judge",
        "rubric: rubric.j2",
        "mode: grade",
        "backoff_s: 0",
        "max_retries: 1",
        "price: {input_per_1m: 1.0, output_per_1m: 2.0}",
        "calibration: calibration.json",
    ] + [f"{k}: {json.dumps(v)}" for k, v in extra.items()]
    path = folder / "judge.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def write_audit(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """`tuneloop judge ARGS` as a user runs it; until the group is registered in the CLI, the
    same entry point (`entry.run_app`) over the group itself."""
    from tuneloop.cli import GROUPS

    if "judge" in GROUPS:
        argv = [script(), "judge", *map(str, args)]
    else:
        run = (
            "import typer; from tuneloop.entry import run_app; "
            "from tuneloop.evaluate.judge_command import judge_app; "
            "app = typer.Typer(); app.add_typer(judge_app, name='judge'); run_app(app)"
        )
        argv = [sys.executable, "-c", run, "judge", *map(str, args)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


# ---- a hand-made audit set ------------------------------------------------------------------

# (question, response, human verdict): the judge (error rate 0) passes exactly the right
# answers, so each row's cell is known: 4 tp, 1 fp, 3 tn, 2 fn, and one row unlabelled.
HAND = [
    ("What is 2 + 3?", "2 + 3 = 5", True),  # tp
    ("Add 4 and 4.", "The answer is 8.", "pass"),  # tp
    ("What is 9 - 4?", "5", 1),  # tp
    ("What is the sum of 6 and 7?", "13", True),  # tp
    ("What is 7 minus 2?", "It is 5, barely explained.", "fail"),  # fp: the person is stricter
    ("What is 8 + 8?", "15", False),  # tn
    ("Subtract 3 from 10.", "13", 0),  # tn
    ("What is 1 + 1?", "3", "FAIL"),  # tn
    ("What is 5 + 5?", "11", True),  # fn: the person missed the mistake
    ("What is 6 - 1?", "4", "pass"),  # fn
    ("What is 3 + 3?", "6", None),  # unlabelled: left out
]


def _hand_rows() -> list[dict]:
    rows = []
    for i, (q, r, human) in enumerate(HAND):
        row: dict = {"id": f"h{i}", "response": r, "human": human}
        if i % 2:
            row["prompt"] = q
        else:
            row["messages"] = [{"role": "user", "content": q}]
        rows.append(row)
    return rows


def test_hand_made_audit_set(judge_url, tmp_path: Path) -> None:
    judge = write_judge(tmp_path / "j", judge_url("--error-rate", "0"))
    audit = write_audit(tmp_path / "audit.jsonl", _hand_rows())
    record = calibrate(judge, audit, progress=False)
    # 4 tp, 1 fp, 3 tn, 2 fn: agreement 7/10; judge passes 5, people pass 6
    # p_e = (5·6 + 5·4)/100 = 0.5 → κ = (0.7 − 0.5)/(1 − 0.5) = 0.4
    # FPR = 1/(1 + 3) = 0.25, FNR = 2/(2 + 4) = 1/3, J = 1 − 0.25 − 1/3 = 5/12
    assert (record.n, record.tp, record.fp, record.tn, record.fn) == (10, 4, 1, 3, 2)
    assert record.unlabelled == 1 and record.audit_format == "jsonl"
    assert record.agreement == pytest.approx(0.7)
    assert record.kappa == pytest.approx(0.4)
    assert record.fpr == pytest.approx(0.25) and record.fnr == pytest.approx(1 / 3)
    assert record.youden_j == pytest.approx(5 / 12)
    assert record.fpr_ci is not None
    assert (record.fpr_ci.low, record.fpr_ci.high) == pytest.approx(wilson_interval(1, 4))
    assert sorted(record.disagreements) == ["h4", "h8", "h9"]
    # 0.7 < the default min_agreement 0.8: refused, and the record says why
    assert not record.passed and "below min_agreement 0.8" in (record.refusal or "")
    # written where the judge file says, read back typed
    again = read_record(tmp_path / "j" / "calibration.json", JudgeCalibration)
    assert again == record
    assert record.judge.model == "arith-judge" and len(record.judge.rubric_sha256) == 64
    assert record.judge_cost_usd is not None and record.judge_cost_usd > 0


def test_the_cli_prints_the_figures_and_exits_by_the_decision(judge_url, tmp_path: Path) -> None:
    judge = write_judge(tmp_path / "j", judge_url("--error-rate", "0"), min_agreement=0.6)
    audit = write_audit(tmp_path / "audit.jsonl", _hand_rows())
    out = tmp_path / "cal" / "calibration.json"
    ran = cli("calibrate", "--judge", judge, "--audit", audit, "--out", out)
    assert ran.returncode == 0, ran.stderr
    assert "agreement  0.700" in ran.stdout and "kappa      0.400" in ran.stdout
    assert "FPR        0.250" in ran.stdout and "FNR        0.333" in ran.stdout
    assert "PASS" in ran.stdout and "10/10 rows graded" in ran.stderr
    assert read_record(out, JudgeCalibration).passed
    strict = write_judge(tmp_path / "k", judge_url("--error-rate", "0"), min_agreement=0.9)
    refused = cli("calibrate", "--judge", strict, "--audit", audit, "--no-progress")
    assert refused.returncode == 1, refused.stderr
    assert "REFUSED for gating: agreement 0.700 is below min_agreement 0.9" in refused.stdout
    assert refused.stderr == ""


# ---- a known error rate ---------------------------------------------------------------------


def _known_rows(n: int) -> list[dict]:
    """n rows, half the answers right, each labelled with its true verdict."""
    rows = []
    for i in range(n):
        a, b = 10 + i % 47, 2 + i // 47
        response = f"{a} + {b} = {a + b + i % 2}."
        question = f"What is {a} + {b}?"
        rows.append(
            {
                "id": f"k{i}",
                "prompt": question,
                "response": response,
                "human": V.true_verdict(question, response),
            }
        )
    return rows


def test_a_known_error_rate_is_measured_exactly(judge_url, tmp_path: Path) -> None:
    rate = 0.1
    judge = write_judge(tmp_path / "j", judge_url("--error-rate", str(rate), "--seed", "3"))
    rows = _known_rows(400)
    audit = write_audit(tmp_path / "audit.jsonl", rows)
    record = calibrate(judge, audit, progress=False)
    # what the judge says of each row is known: the true verdict, flipped where it errs
    said = [
        V.judge_verdict(r["prompt"], r["response"], None, seed=3, error_rate=rate) for r in rows
    ]
    human = [r["human"] for r in rows]
    errs = sum(s != h for s, h in zip(said, human, strict=True))
    assert record.n == 400 and record.unparsable == []
    assert record.agreement == pytest.approx(1 - errs / 400)
    assert record.kappa == pytest.approx(cohen_kappa_score(said, human), abs=1e-12)
    assert record.fp == sum(s and not h for s, h in zip(said, human, strict=True))
    # the measured error is the configured one, within the binomial band (3 sd)
    sd = math.sqrt(rate * (1 - rate) / 400)
    assert abs((1 - record.agreement) - rate) <= 3 * sd
    assert record.fpr is not None and abs(record.fpr - rate) <= 3 * math.sqrt(rate * 0.9 / 200)
    assert record.fnr is not None and abs(record.fnr - rate) <= 3 * math.sqrt(rate * 0.9 / 200)
    assert record.passed and record.youden_j is not None and record.youden_j > 0.6


def test_a_traffic_log_folder_is_an_audit_set(judge_url, tmp_path: Path) -> None:
    folder = tmp_path / "traffic"
    subprocess.run(
        [
            sys.executable,
            str(ARITH / "simulate_traffic.py"),
            "--dry-run",
            "--out",
            str(folder / "traffic.jsonl"),
            "-n",
            "120",
            "--seed",
            "7",
            "--feedback-rate",
            "0.5",
        ],
        check=True,
        capture_output=True,
    )
    read = read_audit(folder)
    assert read.format == "traffic" and len(read.rows) > 30 and read.unlabelled > 30
    judge = write_judge(tmp_path / "j", judge_url("--error-rate", "0"))
    record = calibrate(judge, folder, tmp_path / "out.json", progress=False)
    # the people's thumbs are the numeric check of each answer; an error-free judge that
    # works the question out agrees with every one of them
    assert record.audit_format == "traffic" and record.n == len(read.rows)
    assert record.agreement == 1.0 and record.disagreements == []
    assert record.tp > 0 and record.tn > 0 and record.kappa == 1.0


def test_traffic_feedback_joins_its_exchange_and_the_last_label_wins(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    folder.mkdir()

    def exchange(cid: str, q: str, a: str) -> dict:
        return {
            "timestamp": "2026-01-01T00:00:00Z",
            "request": {"messages": [{"role": "user", "content": q}]},
            "response": {"id": cid, "choices": [{"index": 0, "message": {"content": a}}]},
        }

    streamed = {
        "timestamp": 1.0,
        "request": {"messages": [{"role": "user", "content": "q3"}]},
        "response": [
            {"id": "c3", "choices": [{"index": 0, "delta": {"content": "4"}}]},
            {"id": "c3", "choices": [{"index": 0, "delta": {"content": "2"}}]},
        ],
    }
    (folder / "traffic-1.jsonl").write_text(json.dumps(exchange("c1", "q1", "a1")) + "\n")
    lines = [
        exchange("c2", "q2", "a2"),
        streamed,
        {"type": "feedback", "completion_id": "c1", "verdict": "up"},  # across rotation
        {"type": "feedback", "completion_id": "c2#0", "verdict": "up"},
        {"type": "feedback", "completion_id": "c2", "verdict": "down"},  # the last wins
        {"type": "feedback", "completion_id": "c3", "correction": "41"},  # a correction: fail
        {"type": "feedback", "completion_id": "nope", "verdict": "up"},  # orphan
    ]
    text = "".join(json.dumps(x) + "\n" for x in lines) + '{"torn": \n'
    (folder / "traffic.jsonl").write_text(text)
    read = read_audit(folder)
    got = {r.id: (r.response, r.human) for r in read.rows}
    assert got == {"c1": ("a1", True), "c2": ("a2", False), "c3": ("42", False)}
    assert read.skipped_lines == 1


# ---- refusals and judgements that do not parse ----------------------------------------------


def test_an_audit_set_without_human_fails_is_refused(judge_url, tmp_path: Path) -> None:
    judge = write_judge(tmp_path / "j", judge_url("--error-rate", "0"), min_agreement=0.5)
    rows = [{"prompt": "What is 2 + 2?", "response": "4", "human": True}] * 1
    rows += [
        {"prompt": f"What is {i} + 1?", "response": str(i + 1), "human": True} for i in range(5)
    ]
    for i, row in enumerate(rows):
        row["id"] = f"r{i}"
    record = calibrate(judge, write_audit(tmp_path / "a.jsonl", rows), progress=False)
    assert record.agreement == 1.0 and record.fpr is None and record.kappa is None
    assert not record.passed and "no human fail" in (record.refusal or "")
    lines = summary_lines(record)
    assert any("kappa      undefined" in line for line in lines)
    assert any("FPR        undefined" in line for line in lines)


def test_unparsable_rows_are_left_out_and_listed(judge_url, tmp_path: Path) -> None:
    url = judge_url("--error-rate", "0", "--prose-rate", "0.5")
    judge = write_judge(tmp_path / "j", url, parse_retries=0)
    rows = _known_rows(40)
    record = calibrate(judge, write_audit(tmp_path / "a.jsonl", rows), progress=False)
    assert 5 <= len(record.unparsable) <= 35 and record.n == 40 - len(record.unparsable)
    assert record.agreement == 1.0
    assert any("unparsable" in line for line in summary_lines(record))


def test_a_judge_that_never_parses_writes_nothing(judge_url, tmp_path: Path) -> None:
    judge = write_judge(tmp_path / "j", judge_url("--prose-rate", "1"), parse_retries=0)
    audit = write_audit(tmp_path / "a.jsonl", _known_rows(4))
    with pytest.raises(InputError, match="no parsable judgement.*SCORE"):
        calibrate(judge, audit, progress=False)
    assert not (tmp_path / "j" / "calibration.json").exists()


def test_a_refused_judge_is_an_input_error(judge_url, tmp_path: Path) -> None:
    url = judge_url("--api-key-env", "DEMO_JUDGE_KEY", env={"DEMO_JUDGE_KEY": "right"})
    judge = write_judge(tmp_path / "j", url, api_key_env="CAL_TEST_KEY")
    audit = write_audit(tmp_path / "a.jsonl", _known_rows(20))
    os.environ["CAL_TEST_KEY"] = "wrong"
    try:
        with pytest.raises(InputError, match="401"):
            calibrate(judge, audit, progress=False)
    finally:
        del os.environ["CAL_TEST_KEY"]
    assert not (tmp_path / "j" / "calibration.json").exists()


# ---- bad input: one line, exit 2, nothing written -------------------------------------------


def _bad_inputs(tmp_path: Path, judge: Path) -> dict[str, tuple[tuple[Path, Path], str]]:
    """name → ((judge file, audit set), what the message must name)."""
    good = write_audit(tmp_path / "good.jsonl", _known_rows(3))
    bad_line = tmp_path / "bad.jsonl"
    bad_line.write_text(json.dumps(_known_rows(1)[0]) + "\n{not json\n")
    bad_label = write_audit(
        tmp_path / "label.jsonl", [{"prompt": "q", "response": "r", "human": "maybe"}]
    )
    no_response = write_audit(tmp_path / "resp.jsonl", [{"prompt": "q", "human": True}])
    unlabelled = write_audit(tmp_path / "none.jsonl", [{"prompt": "q", "response": "r"}])
    return {
        "missing audit": ((judge, tmp_path / "missing.jsonl"), "missing.jsonl: audit set not"),
        "malformed line": ((judge, bad_line), f"{bad_line}:2: invalid JSON"),
        "bad label": ((judge, bad_label), f"{bad_label}:1: 'human' must be"),
        "no response": ((judge, no_response), f"{no_response}:1: 'response'"),
        "no labels": ((judge, unlabelled), "no labelled rows"),
        "missing judge": ((tmp_path / "nope.yaml", good), "nope.yaml: judge file not found"),
        "empty folder": ((judge, tmp_path / "j"), "no traffic.jsonl"),
    }


def test_bad_input_is_one_line_exit_2_and_writes_nothing(judge_url, tmp_path: Path) -> None:
    judge = write_judge(tmp_path / "j", judge_url("--error-rate", "0"))
    out = tmp_path / "out.json"
    cases = _bad_inputs(tmp_path, judge)
    for name, ((judge_file, audit), needle) in cases.items():
        with pytest.raises(InputError) as err:
            calibrate(judge_file, audit, out, progress=False)
        assert needle in str(err.value), (name, str(err.value))
        assert not out.exists()
    good = tmp_path / "good.jsonl"
    with pytest.raises(InputError, match="is the input"):
        calibrate(judge, good, good, progress=False)
    assert json.loads(good.read_text().splitlines()[0])["id"] == "k0"  # not overwritten
    # as a user runs it: one line on stderr, exit 2, no traceback
    for name in ("malformed line", "missing judge"):
        (judge_file, audit), needle = cases[name]
        ran = cli("calibrate", "--judge", judge_file, "--audit", audit, "--out", out)
        assert ran.returncode == 2 and "Traceback" not in ran.stderr, ran.stderr
        assert needle in ran.stderr and len(ran.stderr.strip().splitlines()) == 1, ran.stderr
        assert not out.exists()


def test_a_pairwise_judge_is_not_calibrated_here(judge_url, tmp_path: Path) -> None:
    judge = write_judge(tmp_path / "j", judge_url("--error-rate", "0"))
    (tmp_path / "j" / "rubric.j2").write_bytes((JUDGE_DIR / "pairwise.j2").read_bytes())
    judge.write_text(judge.read_text().replace("mode: grade", "mode: pairwise"))
    with pytest.raises(InputError, match="only a grade judge"):
        calibrate(judge, write_audit(tmp_path / "a.jsonl", _known_rows(2)), progress=False)
