"""A model folder's facts, read before compute: each family's own conventions, and bad folders."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tuneloop.errors import InputError
from tuneloop.train.checkpoint.compat import read_facts, with_modules

# family: (end-of-turn token, system role, tools, tied, LoRA targets all-linear finds)
EXPECTED = {
    "llama": ("<|eot_id|>", True, "native", False, 14),
    "qwen2": ("<|im_end|>", True, "native", True, 14),
    "qwen3": ("<|im_end|>", True, "native", True, 14),
    "mistral": ("</s>", True, "native", False, 14),
    "gemma3": ("<end_of_turn>", False, "hermes", True, 14),
    "phi3": ("<|end|>", True, "hermes", False, 8),
    "olmo2": ("<|endoftext|>", True, "hermes", False, 14),
    "qwen3_moe": ("<|im_end|>", True, "native", True, 8),
}


@pytest.mark.parametrize("family", sorted(EXPECTED))
def test_each_family_reads_as_its_own_convention(
    family: str, family_model: Callable[[str], Path]
) -> None:
    """The end of turn is found by rendering the family's template, not assumed ChatML; the
    same token id the transformers tokenizer gives (`chat.end_of_turn_id`)."""
    from transformers import AutoTokenizer

    from tuneloop.train.checkpoint.chat import end_of_turn_id

    model = family_model(family)
    facts = with_modules(read_facts(model))
    eot, system, tools, tied, targets = EXPECTED[family]
    assert facts.problems == []
    assert (facts.end_of_turn, facts.system_role, facts.tools) == (eot, system, tools)
    assert (facts.tied_embeddings, facts.lora_target_count) == (tied, targets)
    assert facts.end_of_turn_id == end_of_turn_id(AutoTokenizer.from_pretrained(model))
    assert facts.template_source == "chat_template.jinja"


def test_the_real_tekken_vocabulary_and_the_families_shapes(
    family_model: Callable[[str], Path],
) -> None:
    mistral = with_modules(read_facts(family_model("mistral")))
    assert (
        mistral.vocab_size == 131_072 and mistral.parameters == 8_409_248
    )  # two 131,072 × 32 embeddings: 8.39M
    phi3 = with_modules(read_facts(family_model("phi3")))
    assert "qkv_proj" in phi3.lora_targets and "q_proj" not in phi3.lora_targets
    moe = with_modules(read_facts(family_model("qwen3_moe")))
    assert moe.experts == 4 and moe.lora_targets == ("q_proj", "k_proj", "v_proj", "o_proj")
    gemma = read_facts(family_model("gemma3"))
    assert gemma.sliding_window == 16
    assert read_facts(family_model("qwen2")).sliding_window is None  # use_sliding_window: false
    gpt2 = with_modules(read_facts(family_model("gpt2")))
    assert gpt2.chat_template is None and gpt2.tools == "none"
    assert gpt2.lora_targets == ("c_attn", "c_proj", "c_fc")  # GPT-2's Conv1D layers


def _copy(family_model: Callable[[str], Path], tmp_path: Path, name: str = "qwen2") -> Path:
    return Path(shutil.copytree(family_model(name), tmp_path / name))


def _edit(path: Path, **changes: object) -> None:
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, **changes}))


def test_bad_folders_are_one_line_naming_the_file(
    family_model: Callable[[str], Path], tmp_path: Path
) -> None:
    unknown = _copy(family_model, tmp_path)
    _edit(unknown / "config.json", model_type="no_such_llm")
    with pytest.raises(InputError, match=r"config.json: model_type 'no_such_llm' is an arch"):
        read_facts(unknown)
    no_tok = _copy(family_model, tmp_path, "llama")
    (no_tok / "tokenizer.json").unlink()
    with pytest.raises(InputError, match=r"llama: no tokenizer files \(looked for tokenizer"):
        read_facts(no_tok)
    eos = _copy(family_model, tmp_path, "gemma3")
    _edit(eos / "tokenizer_config.json", eos_token="<|not-a-token|>")
    _edit(eos / "generation_config.json", eos_token_id=[1, 99_999])
    problems = read_facts(eos).problems
    assert any("eos_token '<|not-a-token|>' is not in the tokenizer" in p for p in problems)
    assert any("eos_token_id 99999 is outside the model's vocabulary of 353" in p for p in problems)


def test_doctor_compat_prints_the_table_for_a_users_model(
    family_model: Callable[[str], Path],
) -> None:
    """The installed script: facts, LoRA targets and one row per step; exit 1 when a step
    cannot run (GPT-2 has no chat template)."""
    tuneloop = str(Path(sys.executable).with_name("tuneloop"))
    done = subprocess.run(
        [tuneloop, "doctor", "--compat", str(family_model("phi3"))],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "LoRA all-linear: o_proj, qkv_proj, gate_up_proj, down_proj (8 modules" in done.stdout
    for step in ("preflight", "sft", "grpo", "dpo", "full", "merge", "embedded", "vllm"):
        assert f"│ {step}" in done.stdout
    gpt2 = subprocess.run(
        [tuneloop, "doctor", "--compat", str(family_model("gpt2"))], capture_output=True, text=True
    )
    assert gpt2.returncode == 1
    assert (
        "no chat template: set model.chat_template, or use a completion-mode suite" in gpt2.stdout
    )
