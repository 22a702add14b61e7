"""The per-step table `tuneloop doctor --compat` prints, read from a model's facts (static;
the README's family matrix is what was measured), and the architectures vLLM serves."""

from __future__ import annotations

import json
from pathlib import Path

from tuneloop.train.checkpoint.compat.facts import ModelFacts


def vllm_architectures(python: Path) -> frozenset[str] | None:
    """The architectures vLLM's model registry serves, asked of the vLLM environment's own
    interpreter (its import takes seconds); None when it cannot say."""
    import subprocess

    code = (
        "import json; from vllm.model_executor.models import ModelRegistry; "
        "print(json.dumps(sorted(ModelRegistry.get_supported_archs())))"
    )
    try:
        done = subprocess.run(
            [str(python), "-c", code], capture_output=True, text=True, timeout=180, check=True
        )
        return frozenset(json.loads(done.stdout.strip().splitlines()[-1]))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def compat_rows(facts: ModelFacts, vllm: frozenset[str] | None) -> list[tuple[str, bool, str]]:
    """(step of a round, expected to work, why) for `doctor --compat`, read from the facts."""
    chat = facts.chat_template is not None
    lora = bool(facts.lora_target_count)
    no_template = "no chat template: set model.chat_template, or use a completion-mode suite"
    targets = (
        f"LoRA on {facts.lora_target_count} modules ({', '.join(facts.lora_targets)})"
        if lora
        else "all-linear finds no linear module: set train.lora.target_modules"
    )
    if facts.experts:
        targets += f"; the {facts.experts} experts are fused tensors, not LoRA targets"
    rows = [
        ("preflight", not facts.problems, "; ".join(facts.problems) or "reads cleanly"),
        (
            "chat",
            chat,
            f"{facts.template_source}, end of turn {facts.end_of_turn}" if chat else no_template,
        ),
    ]
    rows += [(m, lora and chat, targets if chat else no_template) for m in ("sft", "grpo", "dpo")]
    rows.append(("full", chat, "train.adapter: none" if chat else no_template))
    tie = "tied embeddings stay tied" if facts.tied_embeddings else "untied embeddings"
    rows.append(("merge", lora, f"PEFT merge_and_unload; {tie}"))
    batching = (
        "static batching (sliding-window layers cannot share a merged KV cache)"
        if facts.sliding_window
        else "continuous batching"
    )
    rows.append(("embedded", True, batching))
    if vllm is None:
        rows.append(("vllm", False, "no vLLM environment found (scripts/setup --vllm)"))
    else:
        known = facts.architecture in vllm
        verdict = "is" if known else "is not"
        rows.append(("vllm", known, f"{facts.architecture} {verdict} in vLLM's model registry"))
    return rows
