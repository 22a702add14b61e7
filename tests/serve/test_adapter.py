"""`served_adapter`: a PEFT LoRA folder as a server serves it, or a one-line refusal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuneloop.errors import InputError
from tuneloop.records import sha256_path
from tuneloop.serve.adapter import VLLM_LORA_RANKS, served_adapter


def adapter_dir(tmp_path: Path, **config: object) -> Path:
    folder = tmp_path / "adapter"
    folder.mkdir(exist_ok=True)
    (folder / "adapter_config.json").write_text(
        json.dumps({"peft_type": "LORA", "r": 16, **config})
    )
    (folder / "adapter_model.safetensors").write_bytes(b"weights")
    return folder


def test_an_adapter_is_named_after_its_content_and_rounds_its_rank_up(tmp_path: Path) -> None:
    folder = adapter_dir(tmp_path, r=12)
    adapter = served_adapter(folder)
    digest = sha256_path(folder)
    assert (adapter.name, adapter.sha256, adapter.rank) == (f"adapter-{digest[:12]}", digest, 12)
    assert adapter.max_lora_rank == 16
    (folder / "adapter_model.safetensors").write_bytes(b"other weights")
    assert served_adapter(folder).name != adapter.name  # new weights, new name: no stale cache


@pytest.mark.parametrize("rank", VLLM_LORA_RANKS)
def test_a_rank_vllm_accepts_is_its_own_max_rank(tmp_path: Path, rank: int) -> None:
    assert served_adapter(adapter_dir(tmp_path, r=rank)).max_lora_rank == rank


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"peft_type": "IA3"}, "peft_type 'IA3'; only LORA"),
        ({"r": 0}, "r must be a positive integer, got 0"),
        ({"r": 1024}, "rank 1024 is above vLLM's largest (512)"),
        ({"modules_to_save": ["lm_head"]}, "modules_to_save ['lm_head'] are whole trained"),
    ],
)
def test_what_vllm_cannot_serve_is_refused_naming_the_file(
    tmp_path: Path, config: dict[str, object], says: str
) -> None:
    folder = adapter_dir(tmp_path, **config)
    with pytest.raises(InputError, match="adapter_config.json: ") as err:
        served_adapter(folder)
    assert says in str(err.value)


def test_a_folder_without_an_adapter_config_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="adapter_config.json: no such file"):
        served_adapter(tmp_path)
    (tmp_path / "adapter_config.json").write_text("[1, 2")
    with pytest.raises(InputError, match="unreadable"):
        served_adapter(tmp_path)
