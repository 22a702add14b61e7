"""A LoRA adapter as a server serves it on its base: its folder, its served name, its rank.

`served_adapter(path)` reads the PEFT `adapter_config.json` that `tuneloop train` writes and
names the adapter after its content (`adapter-<sha256 prefix>`), so a new adapter always gets
a new name: vLLM keys its prefix cache by the LoRA name, and a name reloaded with other
weights would answer from the old ones' cache. What vLLM cannot serve is refused here, before
a server starts, saying what to do instead (serve the merged model; for the rank, lower
`train.lora.r`): a non-LoRA PEFT type, a rank above vLLM's largest, and `modules_to_save`
(fully trained copies of whole modules, which vLLM's LoRA loader rejects).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tuneloop.errors import InputError
from tuneloop.records import sha256_path

ADAPTER_CONFIG = "adapter_config.json"
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
"""The values vLLM's `--max-lora-rank` accepts (vllm/config/lora.py, `MaxLoRARanks`)."""


@dataclass(frozen=True)
class ServedAdapter:
    path: Path
    name: str
    """The model name the server answers it under: `adapter-` and its sha256's first 12."""
    sha256: str
    """sha256 of the adapter folder (`tuneloop.records.sha256_path`)."""
    rank: int
    """The LoRA rank `r` of its config."""

    @property
    def max_lora_rank(self) -> int:
        """The smallest `--max-lora-rank` vLLM accepts that holds this adapter."""
        return next(r for r in VLLM_LORA_RANKS if r >= self.rank)


def served_adapter(path: Path) -> ServedAdapter:
    """The adapter folder `path` as a server would serve it; `InputError` naming the file and
    its offending key when it is not a LoRA adapter a server can load without merging."""
    config_file = Path(path) / ADAPTER_CONFIG
    try:
        config = json.loads(config_file.read_text())
    except FileNotFoundError:
        raise InputError(f"{config_file}: no such file; not a PEFT adapter folder") from None
    except (OSError, json.JSONDecodeError) as err:
        raise InputError(f"{config_file}: unreadable ({err})") from None
    if not isinstance(config, dict):
        raise InputError(f"{config_file}: expected a JSON object")
    if config.get("peft_type") != "LORA":
        raise InputError(
            f"{config_file}: peft_type {config.get('peft_type')!r}; only LORA adapters can be "
            "served on their base (serve the merged model instead)"
        )
    rank = config.get("r")
    if not isinstance(rank, int) or rank <= 0:
        raise InputError(f"{config_file}: r must be a positive integer, got {rank!r}")
    if rank > VLLM_LORA_RANKS[-1]:
        raise InputError(
            f"{config_file}: rank {rank} is above vLLM's largest ({VLLM_LORA_RANKS[-1]}); "
            "lower train.lora.r or serve the merged model"
        )
    if config.get("modules_to_save"):
        raise InputError(
            f"{config_file}: modules_to_save {config['modules_to_save']} are whole trained "
            "modules, which vLLM cannot serve as a LoRA adapter; serve the merged model"
        )
    digest = sha256_path(Path(path))
    return ServedAdapter(Path(path), f"adapter-{digest[:12]}", digest, rank)
