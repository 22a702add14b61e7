"""The preflight's memory check (`loop/preflight/capacity.py`): notes, and refusals that fit.

The bases are real config.json shapes (Qwen2-0.5B and -1.5B, and a 70B-shaped one) over a
tiny tokenizer (`tests/modelfiles.py`: no weights, so no test allocates what it checks).
The machine is given (`read_machine` replaced), so the verdicts do not depend on where the
tests run — except the installed `tuneloop check` case, whose 70B full fine-tune fits no
machine.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.modelfiles import write_model_files
from tuneloop.config import load_config
from tuneloop.errors import InputError
from tuneloop.loop.preflight import capacity, check_before_compute, preflight
from tuneloop.loop.preflight.machine import Machine, gpu_memory
from tuneloop.memory import GIB
from tuneloop.vllm_env import VllmEnv

from ...installed import tuneloop
from ...memory.test_shape import QWEN2_05B
from ...memory.test_training import QWEN2_15B

LLAMA_70B = {
    **QWEN2_05B,
    "hidden_size": 8192,
    "num_hidden_layers": 80,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "intermediate_size": 28672,
    "vocab_size": 128256,
}

CONFIG = """\
workdir: work
base_model: model
serve:
  backend: embedded
suite:
  path: suite.jsonl
  default_scorer: numeric
  slices: {{dev: 0.5, gate: 0.5}}
train:
  method: sft
  data: train.jsonl
{train}gate:
  min_items: 10
  margin: 0.5
archive:
  root: archive
"""


def project(tmp_path: Path, shape: dict, train: str = "", reply: str = "2") -> Path:
    """A loop.yaml on a weightless base of `shape`, a 40-item chat suite, SFT rows."""
    write_model_files(tmp_path / "model", **shape)
    items = [
        {"id": f"q{i}", "messages": [{"role": "user", "content": f"{i} plus one"}], "answer": "a"}
        for i in range(40)
    ]
    (tmp_path / "suite.jsonl").write_text("".join(json.dumps(x) + "\n" for x in items))
    row = {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": reply}]}
    (tmp_path / "train.jsonl").write_text(json.dumps(row) + "\n")
    (tmp_path / "loop.yaml").write_text(CONFIG.format(train=train))
    return tmp_path / "loop.yaml"


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch):
    """`machine(ram_gib)`: the check sees a CPU machine with that much RAM, all of it free."""

    def set_ram(ram_gib: float) -> None:
        ram = int(ram_gib * GIB)
        monkeypatch.setattr(capacity, "read_machine", lambda: Machine(ram=ram, ram_free=ram))

    return set_ram


def test_a_plan_that_fits_is_a_note_with_its_parts(tmp_path: Path, machine) -> None:
    machine(24)
    found = preflight(load_config(project(tmp_path, QWEN2_05B)))
    assert not found.errors, found.errors
    train = next(n for n in found.notes if n.startswith("memory: training"))
    # the one SFT row, rendered through ChatML and counted by the base's tokenizer
    assert "(sft, LoRA r16, fp32 on CPU, 8 rows × 8 tokens, gradient checkpointing): ~" in train
    assert train.endswith(" GiB) of 24.0 GiB RAM"), train
    for part in ("weights 1.8", "runtime"):
        assert part in train, train
    serve = next(n for n in found.notes if n.startswith("memory: serving"))
    assert serve.startswith("memory: serving (embedded, 32 rows × "), serve


def test_a_full_fine_tune_that_cannot_fit_names_lora(tmp_path: Path, machine) -> None:
    machine(23.5)  # a 24 GiB machine's RAM
    config = project(tmp_path, QWEN2_15B, train="  adapter: none\n")
    with pytest.raises(InputError) as err:
        check_before_compute(load_config(config), config)
    message = str(err.value)
    assert "train.adapter (line 12): training (sft, full fine-tune, fp32 on CPU" in message
    assert "more than this machine's 23.5 GiB of RAM; it fits with train.adapter lora (~" in message
    assert "train.batch_size" not in message  # no batch makes AdamW's moments smaller


def test_every_setting_that_would_fit_is_named_with_its_estimate(tmp_path: Path, machine) -> None:
    machine(4)
    # 8 rows of 512 tokens through a 151,936-entry head: its tiles outweigh the model
    config = project(tmp_path, QWEN2_05B, reply="a " * 2000)
    with pytest.raises(InputError) as err:
        check_before_compute(load_config(config), config)
    message = str(err.value)
    assert (
        "train.batch_size (default): training (sft, LoRA r16, fp32 on CPU, 8 rows × 512" in message
    )
    fixes = re.findall(r"(train\.\w+ \d+)(?: \([^)]*\))? \(~([\d.]+) GiB\)", message)
    assert [f.split()[0] for f, _ in fixes] == ["train.batch_size", "train.max_length"], message
    assert all(float(gib) <= 4 for _, gib in fixes), fixes


def test_a_vllm_pool_too_small_for_max_model_len_is_refused(
    tmp_path: Path, machine, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine(24)
    cpu = VllmEnv(Path("/usr/bin/python3"), "0.11", cpu=True, source="test")
    monkeypatch.setattr("tuneloop.loop.preflight.checks.find_vllm", lambda _: cpu)
    monkeypatch.setattr("tuneloop.loop.preflight.serving_fit.find_vllm", lambda _: cpu)
    train = "  adapter: lora\n"
    config = project(tmp_path, QWEN2_15B, train=train)
    text = config.read_text().replace(
        "backend: embedded", "backend: vllm\n  vllm:\n    kv_cache_gib: 0.25"
    )
    config.write_text(text)
    found = preflight(load_config(config))
    errors = {e.key: e.message for e in found.errors}
    # bf16: 2 × 28 layers × 2 kv heads × 128 × 2 bytes = 28 KiB a position, 32,768 positions
    assert errors["serve.vllm.max_model_len"] == (
        "vLLM would refuse to start: one sequence of 32768 positions needs 0.88 GiB of KV "
        "cache, more than its pool of 0.25 GiB (serve.vllm.kv_cache_gib); set "
        "serve.vllm.max_model_len 9362 or less, or serve.vllm.kv_cache_gib 0.9"
    )


def test_an_embedded_batch_too_large_for_ram_names_a_smaller_one(tmp_path: Path, machine) -> None:
    machine(6)
    config = project(tmp_path, QWEN2_05B)
    text = config.read_text().replace(
        "\ngate:", "\neval:\n  max_tokens: 4096\n  concurrency: 64\ngate:"
    )
    config.write_text(
        text.replace("  backend: embedded", "  backend: embedded\n  max_batch_size: 64")
    )
    found = preflight(load_config(config))
    errors = {e.key: e.message for e in found.errors}
    assert set(errors) == {"serve.max_batch_size"}, errors
    assert "serving (embedded, 64 rows × " in errors["serve.max_batch_size"]
    assert "it fits with serve.max_batch_size 32 (~" in errors["serve.max_batch_size"]


def test_check_and_run_plan_refuse_what_no_machine_holds(tmp_path: Path) -> None:
    config = project(tmp_path, LLAMA_70B, train="  adapter: none\n")
    for args in (("check", config), ("run", config, "--plan")):
        ran = tuneloop(*args, cwd=tmp_path)
        ran.assert_input_error("base_model (line 2): training (sft, full fine-tune", "GiB of ")
        assert "no setting of train: makes it fit; a smaller base" in ran.stderr
    assert not (tmp_path / "work").exists() and not (tmp_path / "archive").exists()


def test_a_hidden_or_absent_gpu_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert gpu_memory() is None
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setattr("shutil.which", lambda _: None)
    assert gpu_memory() is None
