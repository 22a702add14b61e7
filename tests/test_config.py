"""loop.yaml validation: every error at once, with YAML paths; overrides; path resolution."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.modelfiles import write_model_files
from tuneloop.config import LoopConfig, apply_override, load_config, parse_slice_fractions
from tuneloop.errors import InputError

GOOD = """\
name: t
base_model: model
suite:
  path: suite.jsonl
train:
  steps: 10
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "loop.yaml"
    p.write_text(text)
    return p


def test_three_independent_mistakes_reported_together(tmp_path: Path) -> None:
    cfg = write(
        tmp_path,
        GOOD + "  lora:\n    r: -1\n  stesp: 5\neval:\n  temperature: -0.5\n",
    )
    before = sorted(tmp_path.iterdir())
    with pytest.raises(InputError) as err:
        load_config(cfg)
    msg = str(err.value)
    assert "3 error(s)" in msg
    assert "train.lora.r (line 8): must be > 0 (got -1)" in msg
    assert "train.stesp (line 9): unknown key (did you mean 'steps'?)" in msg
    assert "eval.temperature (line 11): must be >= 0 (got -0.5)" in msg
    assert sorted(tmp_path.iterdir()) == before  # nothing written


def test_missing_required_and_bad_type(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        load_config(write(tmp_path, "serve:\n  port: lots\n"))
    msg = str(err.value)
    assert "base_model: required key is missing" in msg
    assert "suite: required key is missing" in msg
    assert "serve.port (line 2)" in msg


def test_relative_paths_resolve_against_yaml_folder(tmp_path: Path) -> None:
    sub = tmp_path / "cfg"
    sub.mkdir()
    cfg = load_config(write(sub, GOOD))
    assert cfg.base_model == (sub / "model").resolve()
    assert cfg.suite.path == (sub / "suite.jsonl").resolve()
    assert cfg.workdir == (sub / "runs/loop").resolve()


def test_dotted_overrides(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, GOOD), ["train.steps=50", "train.lora.r=4", "eval.slice=dev"])
    assert cfg.train.steps == 50
    assert cfg.train.lora.r == 4
    assert cfg.eval.slice == "dev"


def test_bad_override_is_reported(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="override 'train.steps'"):
        load_config(write(tmp_path, GOOD), ["train.steps"])


def test_apply_override_refuses_scalar_parent() -> None:
    data = {"train": 5}
    with pytest.raises(ValueError, match="not a section"):
        apply_override(data, "train.steps=1")


def test_slice_fractions_must_sum_to_at_most_one(tmp_path: Path) -> None:
    text = GOOD + "  method: sft\n"
    text = text.replace(
        "suite:\n  path: suite.jsonl\n", "suite:\n  path: s\n  slices: {a: 0.7, b: 0.6}\n"
    )
    with pytest.raises(InputError, match="sum to"):
        load_config(write(tmp_path, text))


def test_invalid_yaml_names_line(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"loop.yaml:\d+: invalid YAML"):
        load_config(write(tmp_path, "a: [1,\nb: 2\n"))


def test_duplicate_keys_are_refused_with_both_lines(tmp_path: Path) -> None:
    # PyYAML alone would keep the second `train:` and drop the first without a word.
    text = GOOD + "  method: sft\ntrain:\n  method: sft\n  steps: 5\n  steps: 6\n"
    first = GOOD.splitlines().index("train:") + 1
    second = first + 3
    with pytest.raises(InputError) as err:
        load_config(write(tmp_path, text))
    assert f"loop.yaml:{second}: duplicate key 'train' (first at line {first})" in str(err.value)
    assert f"loop.yaml:{second + 3}: duplicate key 'steps' (first at line {second + 2})" in str(
        err.value
    )


def test_docs_config_reference_is_current() -> None:
    from tuneloop.config import config_reference

    doc = Path(__file__).resolve().parents[1] / "docs" / "config.md"
    assert doc.read_text() == config_reference() + "\n", (
        "docs/config.md is stale: python -c 'from tuneloop.config import config_reference; "
        "print(config_reference())' > docs/config.md"
    )


def test_a_folder_given_as_the_config_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is a folder, expected a config file"):
        load_config(tmp_path)


def test_a_non_utf8_byte_names_its_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "loop.yaml"
    path.write_bytes(GOOD.encode() + b"# caf\xe9\n")
    line = GOOD.count("\n") + 1
    with pytest.raises(
        InputError, match=rf"loop.yaml:{line}: not UTF-8 text \(byte 0xe9 at column 6\)"
    ):
        load_config(path)


def test_an_override_that_is_not_yaml_is_reported_with_the_rest(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"override 'train.steps=\[': the value is not valid YAML"):
        load_config(write(tmp_path, GOOD), ["train.steps=["])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("dev=x", "expected NAME=FRACTION"),
        ("dev", "expected NAME=FRACTION"),
        ("=0.5", "expected NAME=FRACTION"),
        ("dev=nan", r"the fraction of slice 'dev' must lie in \(0, 1\]"),
        ("dev=0", r"the fraction of slice 'dev' must lie in \(0, 1\]"),
        ("dev=1.5", r"the fraction of slice 'dev' must lie in \(0, 1\]"),
        ("dev=0.2,dev=0.3", "slice 'dev' is given twice"),
    ],
)
def test_slice_fractions_from_the_command_line(text: str, message: str) -> None:
    assert parse_slice_fractions(" dev = 0.5, gate=0.5 ") == {"dev": 0.5, "gate": 0.5}
    with pytest.raises(InputError, match=f"--slices: {message}"):
        parse_slice_fractions(text)


# ---- schema and semantic errors in one report ------------------------------------------------

BROKEN = """\
base_model: model
serve:
  backend: embeded
suite:
  path: suite.jsonl
train:
  stesp: 5
  lora:
    r: -1
"""


def _unknown_backend(cfg: LoopConfig) -> list[tuple[str, str]]:
    """A stand-in semantic check: the backend name, and one about a value that failed."""
    found = []
    if cfg.serve.backend != "embedded":
        found.append(("serve.backend", f"unknown serve backend {cfg.serve.backend!r}"))
    found.append(("train.lora.r", f"rank {cfg.train.lora.r} is the default's, not the file's"))
    found.append(("eval.n_samples", "names train.lora.r, which failed"))
    return found


def test_semantic_errors_come_with_the_schema_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        load_config(write(tmp_path, BROKEN), semantic=_unknown_backend)
    msg = str(err.value)
    assert "3 error(s)" in msg
    assert "train.stesp (line 7): unknown key (did you mean 'steps'?)" in msg
    assert "train.lora.r (line 9): must be > 0 (got -1)" in msg
    assert "serve.backend (line 3): unknown serve backend 'embeded'" in msg
    # judgements of a stand-in default for a failed value are left out
    assert "default's" not in msg and "which failed" not in msg


def test_semantic_checks_need_a_config_that_can_stand(tmp_path: Path) -> None:
    """A required key missing: nothing for the semantic checks to run on."""
    with pytest.raises(InputError) as err:
        load_config(write(tmp_path, "serve: {backend: embeded}\n"), semantic=_unknown_backend)
    msg = str(err.value)
    assert "2 error(s)" in msg and "serve.backend" not in msg


def test_a_valid_config_is_returned_without_semantic_checks(tmp_path: Path) -> None:
    """The caller runs its own checks on a config that validates (`tuneloop check`)."""
    cfg = load_config(write(tmp_path, GOOD + "serve: {backend: embeded}\n"), semantic=_boom)
    assert cfg.serve.backend == "embeded"


def _boom(cfg: LoopConfig) -> list[tuple[str, str]]:
    raise AssertionError("not called when the schema holds")


def test_the_preflight_runs_on_what_validated(tmp_path: Path) -> None:
    """The real semantic checks (`tuneloop check`'s preflight) beside schema errors."""
    from tuneloop.loop.preflight import preflight

    (tmp_path / "model").mkdir()
    write_model_files(tmp_path / "model")
    (tmp_path / "suite.jsonl").write_text('{"id": "q", "prompt": "1+1=", "answer": "2"}\n')
    (tmp_path / "train.jsonl").write_text('{"prompt": "1+1=", "answer": "2"}\n')
    text = BROKEN + "  data: train.jsonl\n  method: sfft\n"
    with pytest.raises(InputError) as err:
        load_config(
            write(tmp_path, text),
            semantic=lambda cfg: [(e.key, e.message) for e in preflight(cfg).errors],
        )
    msg = str(err.value)
    assert "train.lora.r (line 9): must be > 0 (got -1)" in msg
    assert "serve.backend (line 3): unknown serve backend 'embeded'" in msg
    assert "train.method (line 11): unknown trainer 'sfft' (did you mean 'sft'?)" in msg
