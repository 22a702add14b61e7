"""loop.yaml validation: every error at once, with YAML paths; overrides; path resolution."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuneloop.config import apply_override, load_config
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
