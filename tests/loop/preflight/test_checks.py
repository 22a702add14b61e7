"""Preflight through the CLI: `check` and the start of `run` refuse, with every problem at once.

Each defect below used to pass `tuneloop check` and fail only when its phase ran. Most cases
run the real command function in-process (`tuneloop.cli.main`, exit status and stderr as a
user sees them); the all-at-once and `run` cases run the installed script in a subprocess.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.modelfiles import write_model_files
from tuneloop.cli import main
from tuneloop.records import append_jsonl, write_record
from tuneloop.samplelog import EvalSummary, SampleRow, SamplingParams

from ...installed import tuneloop

ROOT = Path(__file__).resolve().parents[3]
TUNELOOP = Path(sys.executable).parent / "tuneloop"

# One setting per line, so that a test can replace a line and know its number.
GOOD = """\
name: t
workdir: work
base_model: model
serve:
  backend: embedded
suite:
  path: suite.jsonl
  default_scorer: numeric
  slices: {dev: 0.5, gate: 0.5}
eval:
  n_samples: 1
train:
  method: sft
  data: train.jsonl
  grpo:
    scorer: null
gate:
  slice: gate
  metric: mean
  k: 1
  alpha: 0.05
  margin: 0.3
  min_items: 10
archive:
  root: archive
"""


def line_of(text: str, start: str) -> int:
    """1-based number of the line that starts with `start` (indentation included)."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.startswith(start))


def edit(text: str, start: str, new: str) -> str:
    """Replace the line starting with `start` by `new` (same line number)."""
    lines = text.splitlines()
    lines[line_of(text, start) - 1] = new
    return "\n".join(lines) + "\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder with a valid loop.yaml (GOOD), a model folder, a 200-item suite, train data."""
    (tmp_path / "model").mkdir()
    write_model_files(tmp_path / "model")
    items = [{"id": f"q{i}", "prompt": f"{i}+1=", "answer": str(i + 1)} for i in range(200)]
    (tmp_path / "suite.jsonl").write_text("".join(json.dumps(x) + "\n" for x in items))
    (tmp_path / "train.jsonl").write_text('{"prompt": "1+1=", "answer": "2"}\n')
    (tmp_path / "loop.yaml").write_text(GOOD)
    return tmp_path


def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *args: str):
    """Run `tuneloop ARGS` in-process: (exit status, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["tuneloop", *args])
    with pytest.raises(SystemExit) as done:
        main()
    out = capsys.readouterr()
    return done.value.code, out.out, out.err


def assert_nothing_written(project: Path) -> None:
    assert not (project / "work").exists()
    assert not (project / "archive").exists()


# ---- one defect at a time --------------------------------------------------------------------

# (line to replace, replacement, key reported, words in the message)
DEFECTS = {
    "serve.backend": (
        "  backend:",
        "  backend: embeded",
        "serve.backend",
        "did you mean 'embedded'",
    ),
    "train.method": ("  method: sft", "  method: sfft", "train.method", "unknown trainer 'sfft'"),
    "suite.default_scorer": (
        "  default_scorer:",
        "  default_scorer: numerc",
        "suite.default_scorer",
        "did you mean 'numeric'",
    ),
    "train.grpo.scorer": (
        "    scorer:",
        "    scorer: exactt",
        "train.grpo.scorer",
        "did you mean 'exact'",
    ),
    "gate.slice": ("  slice: gate", "  slice: held", "gate.slice", "unknown slice 'held'"),
    "gate.alpha": ("  alpha:", "  alpha: 0.5", "gate.alpha", "must be < 0.5"),
    "gate.k": ("  k:", "  k: 5", "gate.k", "pass@5 needs at least 5"),
    "base_model": ("base_model:", "base_model: no_model", "base_model", "not found"),
    "suite.path": ("  path:", "  path: no_suite.jsonl", "suite.path", "not found"),
    "train.data": ("  data:", "  data: no_train.jsonl", "train.data", "not found"),
}


@pytest.mark.parametrize("name", sorted(DEFECTS))
def test_check_refuses_each_defect_with_key_and_line(
    project: Path, name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    start, new, key, words = DEFECTS[name]
    text = edit(GOOD, start, new)
    if name == "gate.k":  # k > n_samples matters for pass@k only
        text = edit(text, "  metric:", "  metric: pass_at_k")
    (project / "loop.yaml").write_text(text)
    rc, out, err = cli(capsys, monkeypatch, "check", str(project / "loop.yaml"))
    assert rc == 2, err
    assert f"{key} (line {line_of(text, new)}):" in err, err
    assert words in err, err
    assert "Traceback" not in err and out == ""
    assert_nothing_written(project)


def test_a_warmup_file_nothing_reads_is_refused(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    warm = "  data: train.jsonl\n  sft_warmup_data: w.jsonl\n"
    text = GOOD.replace("  data: train.jsonl\n", warm)
    (project / "loop.yaml").write_text(text)
    rc, _, err = cli(capsys, monkeypatch, "check", str(project / "loop.yaml"))
    assert rc == 2
    line = line_of(text, "  sft_warmup_data:")
    assert f"train.sft_warmup_data (line {line}): {project / 'w.jsonl'}" in err, err  # missing
    assert "set train.sft_warmup_steps > 0" in err  # and method sft never reads it
    assert_nothing_written(project)


def test_unknown_scorer_named_by_suite_items_is_refused_with_every_item_line(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = (project / "suite.jsonl").read_text().splitlines()
    for n in (3, 7):  # two items, both reported (load_suite alone stops at the first)
        lines[n - 1] = lines[n - 1][:-1] + ', "scorer": "exactt"}'
    (project / "suite.jsonl").write_text("\n".join(lines) + "\n")
    rc, _, err = cli(capsys, monkeypatch, "check", str(project / "loop.yaml"))
    assert rc == 2
    assert f"suite.path (line {line_of(GOOD, '  path:')}):" in err
    for n in (3, 7):
        assert f"suite.jsonl:{n}: unknown scorer 'exactt' (did you mean 'exact'?)" in err
    assert_nothing_written(project)


def test_unknown_metric_and_judging_scorers_are_refused_all_at_once(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = edit(GOOD, "  n_samples:", "  n_samples: 1\n  metrics: [tool_call_valid, turnz]")
    (project / "loop.yaml").write_text(text)
    overrides = ["report.scorer=tool_cal_valid", "gate.scorer=exactt"]
    rc, _, err = cli(capsys, monkeypatch, "check", str(project / "loop.yaml"), *overrides)
    assert rc == 2
    assert "eval.metrics.1 (line" in err and "unknown scorer 'turnz' (did you mean 'turns'?)" in err
    assert "report.scorer" in err and "did you mean 'tool_call_valid'?" in err
    assert "gate.scorer" in err and "unknown scorer 'exactt'" in err
    assert_nothing_written(project)


def test_eval_slice_that_leaves_the_gate_slice_unevaluated_is_refused(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = edit(GOOD, "  n_samples:", "  n_samples: 1\n  slice: dev")
    (project / "loop.yaml").write_text(text)
    rc, _, err = cli(capsys, monkeypatch, "check", str(project / "loop.yaml"))
    assert rc == 2
    assert f"eval.slice (line {line_of(text, '  slice: dev')}): evaluates only slice 'dev'" in err
    assert_nothing_written(project)


def test_unknown_eval_slice_is_refused(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = edit(GOOD, "  n_samples:", "  n_samples: 1\n  slice: deev")
    (project / "loop.yaml").write_text(text)
    rc, _, err = cli(capsys, monkeypatch, "check", str(project / "loop.yaml"))
    assert rc == 2
    line = line_of(text, "  slice: deev")
    assert f"eval.slice (line {line}): unknown slice 'deev' (did you mean 'dev'?)" in err


def test_unreadable_or_unparsable_corpus_config_is_refused(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / "corpus.yaml").write_text("sources:\n  - {path: traces.jsonl, fromat: x}\n")
    text = edit(GOOD, "  data:", "  data: null") + "data:\n  corpus: corpus.yaml\n"
    (project / "loop.yaml").write_text(text)
    rc, _, err = cli(capsys, monkeypatch, "check", str(project / "loop.yaml"))
    assert rc == 2
    assert f"data.corpus (line {line_of(text, '  corpus:')}):" in err
    assert "sources.0.fromat (line 2): unknown key (did you mean 'format'?)" in err
    (project / "corpus.yaml").unlink()
    rc, _, err = cli(capsys, monkeypatch, "check", str(project / "loop.yaml"))
    assert rc == 2 and "corpus.yaml: not found" in err
    assert_nothing_written(project)


def test_cross_section_rules(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The gate slice is all that is evaluated (nothing left for the report), it is smaller
    # than min_items, and training has no data source.
    text = edit(GOOD, "  n_samples:", "  n_samples: 1\n  slice: gate")
    text = edit(text, "  min_items:", "  min_items: 1000")
    text = edit(text, "  data:", "  data: null")
    (project / "loop.yaml").write_text(text)
    rc, _, err = cli(capsys, monkeypatch, "check", str(project / "loop.yaml"))
    assert rc == 2
    assert "3 error(s)" in err
    gate_slice = line_of(GOOD, "  slice: gate") + 1  # one line was added above it
    assert f"gate.slice (line {gate_slice}): the report uses" in err
    assert f"gate.min_items (line {line_of(text, '  min_items:')}): the gate slice" in err
    assert f"train.data (line {line_of(text, '  data:')}): training has no data" in err


def test_external_endpoint_settings_are_checked_before_compute(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    text = edit(
        GOOD,
        "  backend:",
        "  backend: external\n"
        "  external:\n"
        "    base_url: localhost:11434/v1\n"
        "    api_key_env: NO_SUCH_KEY_VAR\n"
        "    pre: {model: champion}\n"
        "    post: {model: challenger}",
    )
    (project / "loop.yaml").write_text(text)
    rc, _, err = cli(capsys, monkeypatch, "check", str(project / "loop.yaml"))
    assert rc == 2, err
    url_line, key_line = line_of(text, "    base_url:"), line_of(text, "    api_key_env:")
    assert f"serve.external.base_url (line {url_line}): expected an http(s) URL" in err
    assert err.count("serve.external.base_url") == 1
    assert f"serve.external.api_key_env (line {key_line}): environment variable" in err


@pytest.mark.parametrize(
    ("overrides", "key", "words"),
    [
        ([], "serve.challenger", "serve.backend 'embedded' serves merged models only"),
        (["serve.backend=vllm", "merge.zero_adapter=true"], "serve.challenger", "trains no"),
        (["serve.backend=vllm", "train.adapter=none"], "serve.challenger", "trains every"),
        (["serve.backend=vllm", "train.lora.r=1024"], "train.lora.r", "largest LoRA rank"),
    ],
)
def test_an_adapter_challenger_that_cannot_be_served_is_refused_before_compute(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    overrides: list[str],
    key: str,
    words: str,
) -> None:
    monkeypatch.setattr("tuneloop.loop.preflight.checks.find_vllm", lambda env: None)
    args = ["check", str(project / "loop.yaml"), "serve.challenger=adapter", *overrides]
    rc, _, err = cli(capsys, monkeypatch, *args)
    assert rc == 2 and f"{key} (" in err and words in err, err
    assert_nothing_written(project)


def test_an_external_endpoint_cannot_serve_an_adapter_challenger(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ext = ["serve.external.base_url=http://h/v1", "serve.external.pre.model=a"]
    ext += ["serve.external.post.model=b"]
    args = ["check", str(project / "loop.yaml"), "serve.backend=external", *ext]
    rc, _, err = cli(capsys, monkeypatch, *args, "serve.challenger=adapter")
    assert rc == 2 and "an external endpoint serves what its owner deployed" in err, err


def test_override_is_named_as_such(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rc, _, err = cli(capsys, monkeypatch, "check", str(project / "loop.yaml"), "train.method=x")
    assert rc == 2 and "train.method (override): unknown trainer 'x'" in err


# ---- every problem in one run, and `run` refuses the same way -------------------------------

MANY = [
    ("  backend:", "  backend: embeded", "serve.backend"),
    ("  method: sft", "  method: sfft", "train.method"),
    ("  default_scorer:", "  default_scorer: numerc", "suite.default_scorer"),
    ("    scorer:", "    scorer: exactt", "train.grpo.scorer"),
    ("  slice: gate", "  slice: held", "gate.slice"),
    ("  metric:", "  metric: pass_at_k", None),
    ("  k:", "  k: 5", "gate.k"),
    ("base_model:", "base_model: no_model", "base_model"),
    ("  data:", "  data: no_train.jsonl", "train.data"),
]


def broken(project: Path) -> str:
    text = GOOD
    for start, new, _ in MANY:
        text = edit(text, start, new)
    (project / "loop.yaml").write_text(text)
    return text


def keys_and_lines(text: str) -> list[str]:
    return [f"{key} (line {line_of(text, new)}):" for _, new, key in MANY if key]


def test_check_reports_every_problem_in_one_run(project: Path) -> None:
    text = broken(project)
    done = subprocess.run(
        [str(TUNELOOP), "check", str(project / "loop.yaml")], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert f"{len(keys_and_lines(text))} error(s)" in done.stderr
    for where in keys_and_lines(text):
        assert where in done.stderr, where
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert_nothing_written(project)


@pytest.mark.parametrize("plan", [False, True])
def test_run_refuses_before_any_phase(project: Path, plan: bool) -> None:
    text = broken(project)
    args = [str(TUNELOOP), "run", str(project / "loop.yaml"), *(["--plan"] if plan else [])]
    done = subprocess.run(args, capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    for where in keys_and_lines(text):
        assert where in done.stderr, where
    assert_nothing_written(project)


# ---- the gate's power ------------------------------------------------------------------------


def test_power_warning_for_a_tiny_gate_slice_with_margin_zero(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = edit(GOOD, "  slices:", "  slices: {dev: 0.9, gate: 0.1}")
    text = edit(text, "  margin:", "  margin: 0")
    (project / "loop.yaml").write_text(text)
    rc, out, err = cli(capsys, monkeypatch, "check", str(project / "loop.yaml"))
    assert rc == 0, err
    assert out.startswith("name: t")
    m = re.search(
        r"warning: gate\.margin \(line (\d+)\): the gate slice 'gate' has (\d+) items", err
    )
    assert m and int(m.group(1)) == line_of(text, "  margin:")
    assert int(m.group(2)) < 30
    assert "above the margin 0;" in err and "assumed: two independent Bernoulli(0.5)" in err
    assert_nothing_written(project)


def test_no_power_warning_when_the_margin_exceeds_the_mde(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # ~100 gate items: MDE = (1.645 + 0.842) · 0.707 / √100 ≈ 0.18 < margin 0.3
    rc, _, err = cli(capsys, monkeypatch, "check", str(project / "loop.yaml"))
    assert rc == 0 and "warning" not in err, err


def test_power_uses_the_eval_pre_log_as_pilot_when_it_exists(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pilot = project / "work" / "eval_pre"
    pilot.mkdir(parents=True)
    scores = {f"q{i}": float(i % 10 == 0) for i in range(200)}  # sd of item scores ≈ 0.30
    rows = [
        SampleRow(
            suite_revision="a" * 64,
            item_id=item,
            sample_index=0,
            model="m0",
            seed=0,
            completion="x",
            score=v,
            status="ok",
        ).to_json()
        for item, v in scores.items()
    ]
    append_jsonl(pilot / "samples.jsonl", rows)
    write_record(
        pilot / "summary.json",
        EvalSummary(
            suite_path="suite.jsonl",
            suite_revision="a" * 64,
            item_ids=list(scores),
            model="m0",
            endpoint="http://127.0.0.1:1/v1",
            sampling=SamplingParams(n_samples=1, temperature=0.0, max_tokens=8),
        ),
    )
    text = edit(GOOD, "  margin:", "  margin: 0.05")
    (project / "loop.yaml").write_text(text)
    before = sorted(p.relative_to(project) for p in project.rglob("*"))
    rc, _, err = cli(capsys, monkeypatch, "check", str(project / "loop.yaml"))
    assert rc == 0
    assert "sd of item differences 0.30" in err and f"pilot {pilot} (200 items)" in err
    assert sorted(p.relative_to(project) for p in project.rglob("*")) == before


def test_demo_config_passes_fast_and_states_its_power(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The demo's gate slice has 164 of 320 items; with no pilot the MDE is
    # (1.645 + 0.842) · 0.707 / √164 ≈ 0.137, above its margin 0.02: the warning is right
    # (the demo's measured effect, +26.6 points, is far above the MDE, so it still promotes).
    demo = ROOT / "examples" / "arith" / "loop.yaml"
    monkeypatch.chdir(ROOT)
    rc, out, err = cli(capsys, monkeypatch, "check", str(demo))
    assert rc == 0, err
    assert out.startswith("name: arith")
    if (ROOT / "runs" / "arith" / "eval_pre" / "summary.json").exists():
        pytest.skip("a demo run left an eval_pre pilot; the numbers below assume none")
    assert "gate slice 'gate' has 164 items" in err
    assert "Δ = 0.137, above the margin 0.02" in err
    assert "needs 7729 gate items" in err
    assert err.count("warning:") == 1 and "error" not in err
    # serve.backend auto: the choice `run` would make, said before it
    assert "serve.backend auto: embedded (" in err and "MiB of weights" in err


def test_check_on_the_demo_config_loads_no_torch() -> None:
    code = (
        "import sys; from tuneloop.cli import main; sys.argv = ['tuneloop', 'check', "
        f"{str(ROOT / 'examples/arith/loop.yaml')!r}]\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
        "assert 'torch' not in sys.modules"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_training_settings_this_machine_cannot_run_are_refused_before_compute(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tuneloop.train.strategy import installed

    if installed("deepspeed"):
        pytest.skip("deepspeed is installed here")
    args = ("check", str(project / "loop.yaml"), "train.distributed.strategy=deepspeed")
    rc, _, err = cli(capsys, monkeypatch, *args)
    assert rc == 2, err
    assert "train.distributed.strategy (override): deepspeed needs the `deepspeed` package" in err
    assert_nothing_written(project)


# ---- issue 25 item 11: what failed only after eval_pre ----------------------------------------

SFT_ROW = json.dumps(
    {"messages": [{"role": "user", "content": "1+1"}, {"role": "assistant", "content": "2"}]}
)


def test_check_refuses_what_training_would_refuse_after_eval_pre(project: Path) -> None:
    """DiLoCo steps not a multiple of inner_steps, DiLoCo with grpo, a lighthouse that is no
    URL, a train.data line that is no JSON: all at once, each with its key, before compute."""
    (project / "train.jsonl").write_text(f"{SFT_ROW}\n{{broken\n")
    text = GOOD.replace(
        "  data: train.jsonl\n",
        "  data: train.jsonl\n  steps: 15\n"
        "  diloco: {replicas: 2, inner_steps: 10, lighthouse: 'localhost:29510'}\n",
    )
    (project / "loop.yaml").write_text(text)
    ran = tuneloop("check", project / "loop.yaml", "train.method=grpo", cwd=project)
    ran.assert_input_error(
        "train.method (override): train.diloco trains `method: sft` only",
        f"train.steps (line {line_of(text, '  steps:')}): 15 is not a multiple",
        f"train.diloco.lighthouse (line {line_of(text, '  diloco:')})",
        f"train.data (line {line_of(text, '  data:')}): {project / 'train.jsonl'}:2: invalid JSON",
    )
    ran = tuneloop("run", project / "loop.yaml", cwd=project)
    ran.assert_input_error("train.steps", "train.diloco.lighthouse", "train.data")
    assert_nothing_written(project)


def test_a_train_data_row_the_method_cannot_read_is_refused_before_compute(project: Path) -> None:
    (project / "train.jsonl").write_text('{"prompt": "1+1=", "answer": "2"}\n')
    ran = tuneloop("check", project / "loop.yaml", "train.method=dpo", cwd=project)
    ran.assert_input_error("train.data (line 14)", "train.jsonl:1: DPO row lacks")


def test_an_archive_root_inside_the_workdir_is_refused(project: Path) -> None:
    """`archive.root: work` put each archive inside the run it archives (exit 0): the next
    run's archive copied it, and `rm -rf work` deleted it. A ledger there is warned about."""
    text = edit(GOOD, "  root:", "  root: work/archive")
    (project / "loop.yaml").write_text(text)
    ran = tuneloop("check", project / "loop.yaml", "gate.ledger=work/ledger.db", cwd=project)
    ran.assert_input_error(
        f"archive.root (line {line_of(text, '  root:')}): {project / 'work' / 'archive'} is "
        "inside workdir",
        "warning: gate.ledger (override): ",
    )
    assert_nothing_written(project)


def test_a_vllm_backend_without_a_vllm_environment_is_refused_before_compute(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = edit(GOOD, "  backend:", f"  backend: vllm\n  vllm:\n    env: {project / 'no-env'}")
    (project / "loop.yaml").write_text(text)
    rc, _, err = cli(capsys, monkeypatch, "check", str(project / "loop.yaml"))
    assert rc == 2, err
    line = next(x for x in err.splitlines() if "serve.vllm.env" in x)
    assert f"serve.vllm.env (line {line_of(text, '    env:')}): {project / 'no-env'} " in line
    assert "does not exist" in line and "`scripts/setup --vllm`" in line


def test_checkpoints_a_walk_back_could_not_use_are_warned_about(project: Path) -> None:
    """An abort on collapse with no checkpoint kept has nothing to walk back to (exit 0: the
    run is still valid, it would fail as before); a bad `on_unhealthy` is refused by name."""
    text = GOOD.replace(
        "  data: train.jsonl\n", "  data: train.jsonl\n  health: {on_collapse: abort}\n"
    )
    (project / "loop.yaml").write_text(text)
    ran = tuneloop("check", project / "loop.yaml", cwd=project)
    assert ran.code == 0, ran.output
    assert (
        "warning: train.checkpoint.every (default): 0 keeps no checkpoint, so an unhealthy end "
        "(train.health.on_collapse: abort) has nothing to walk back to" in ran.stderr
    )
    ran = tuneloop("check", project / "loop.yaml", "train.checkpoint.every=5", cwd=project)
    assert (
        ran.code == 0
        and "warning: train.checkpoint.keep (default): 2 checkpoint(s) every 5" in ran.stderr
    )
    ran = tuneloop("check", project / "loop.yaml", "train.health.on_unhealthy=retry", cwd=project)
    ran.assert_input_error("train.health.on_unhealthy", "walk_back", "fail")
