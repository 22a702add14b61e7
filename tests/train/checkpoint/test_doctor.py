from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tuneloop.records import sha256_file
from tuneloop.train.checkpoint import doctor


def _check(report, name):  # type: ignore[no-untyped-def]
    return next(c for c in report.checks if c.name == name)


@pytest.fixture
def copy(tiny_model: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(tiny_model, tmp_path / "m"))


def test_nan_in_one_tensor_is_named(copy: Path) -> None:
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(copy / "model.safetensors"))
    name = "model.layers.1.mlp.down_proj.weight"
    tensors[name][3, 5] = float("nan")
    save_file(tensors, str(copy / "model.safetensors"), metadata={"format": "pt"})
    report = doctor(copy)
    assert not report.ok
    check = _check(report, "finite")
    assert not check.ok and name in check.detail and "1 non-finite" in check.detail
    assert _check(report, "generation").detail.startswith("not run")


def test_missing_shard_is_named(tiny_model: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    out = tmp_path / "sharded"
    shutil.copytree(tiny_model, out)
    (out / "model.safetensors").unlink()
    AutoModelForCausalLM.from_pretrained(tiny_model).save_pretrained(out, max_shard_size="20KB")
    index = json.loads((out / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) > 1
    assert _check(doctor(out), "shards").ok
    (out / shards[1]).unlink()
    report = doctor(out)
    check = _check(report, "shards")
    assert not report.ok and not check.ok
    assert f"shard {shards[1]} named in model.safetensors.index.json is missing" in check.detail


def test_shape_mismatch_with_config(copy: Path) -> None:
    cfg = json.loads((copy / "config.json").read_text())
    cfg["intermediate_size"] = 48
    (copy / "config.json").write_text(json.dumps(cfg))
    check = _check(doctor(copy), "shapes")
    assert (
        not check.ok
        and "mlp.up_proj.weight: shape (64, 32) but config implies (48, 32)" in check.detail
    )


def test_wrong_stop_token_is_reported_and_fixed(copy: Path) -> None:
    gen = json.loads((copy / "generation_config.json").read_text())
    gen["eos_token_id"] = 0
    (copy / "generation_config.json").write_text(json.dumps(gen))
    weights = sha256_file(copy / "model.safetensors")
    check = _check(doctor(copy), "stop_tokens")
    assert not check.ok and "lacks the end-of-turn token <|im_end|> (2)" in check.detail
    fixed = _check(doctor(copy, fix_stop_tokens=True), "stop_tokens")
    assert fixed.ok and fixed.detail.startswith("fixed")
    assert _check(doctor(copy), "stop_tokens").ok
    assert json.loads((copy / "generation_config.json").read_text())["eos_token_id"] == [0, 2]
    assert sha256_file(copy / "model.safetensors") == weights


def test_healthy_checkpoint_passes_every_check(tiny_model: Path) -> None:
    report = doctor(tiny_model)
    assert report.ok, report.checks
    assert _check(report, "generation").detail.startswith("stopped after")


def test_truncated_safetensors_is_a_failed_check_not_a_traceback(copy: Path) -> None:
    import subprocess
    import sys

    weights = copy / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    report = doctor(copy)
    check = _check(report, "shards")
    assert not report.ok and not check.ok and "truncated or corrupt" in check.detail
    for name in ("finite", "shapes", "generation"):
        assert _check(report, name).detail.startswith("not run"), name
    # what users run: the installed script exits 1 (a failed health check), no traceback
    script = Path(sys.executable).parent / "tuneloop"
    done = subprocess.run(
        [str(script), "doctor", str(copy)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert "FAIL" in done.stdout and "doctor: FAILED (shards" in done.stderr


def _wrong_eos(model: Path) -> None:
    gen = json.loads((model / "generation_config.json").read_text())
    gen["eos_token_id"] = 0  # <|endoftext|>, not the template's <|im_end|> (2)
    (model / "generation_config.json").write_text(json.dumps(gen))


def test_doctor_arms_serves_both_under_the_base_contract(copy: Path, tmp_path: Path) -> None:
    from tuneloop.train.checkpoint import merge
    from tuneloop.train.checkpoint.doctor import doctor_arms

    _wrong_eos(copy)
    merged = merge(copy, None, tmp_path / "merged")
    report = doctor_arms(copy, merged)
    assert report.ok, (report.decoding, report.base.failures(), report.merged.failures())
    assert report.comparison is not None and report.comparison.stop_token_ids == (0, 2)
    assert "base [0], merged [0, 2]; both arms are served with stop ids [0, 2]" in (
        report.decoding.detail
    )
    assert "(the decoding contract)" in _check(report.base, "stop_tokens").detail


def test_doctor_arms_refuses_a_decoding_mismatch(copy: Path, tmp_path: Path) -> None:
    from tuneloop.train.checkpoint import merge
    from tuneloop.train.checkpoint.doctor import doctor_arms

    merged = merge(copy, None, tmp_path / "merged")
    template_file = merged / "chat_template.jinja"  # where transformers 5 saves the template
    template = template_file.read_text()
    changed = template.replace("{{ m['content'] }}", "Answer briefly. {{ m['content'] }}")
    assert changed != template
    template_file.write_text(changed)
    gen = json.loads((merged / "generation_config.json").read_text())
    (merged / "generation_config.json").write_text(json.dumps({**gen, "temperature": 0.7}))
    report = doctor_arms(copy, merged)
    assert not report.ok and not report.decoding.ok
    detail = report.decoding.detail
    assert detail.startswith("the arms would decode differently")
    assert "chat templates differ" in detail
    assert "generation_config.json temperature: base None, merged 0.7" in detail
