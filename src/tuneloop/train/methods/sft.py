"""Supervised fine-tuning with LoRA on TRL's `SFTTrainer`, loss on assistant turns only.

Run: `tuneloop train --method sft --base MODEL --data chat.jsonl --out DIR`.
TRL's `assistant_only_loss=True` needs `{% generation %}` markers in the chat template, which
most templates (and our tiny model's) lack. Instead of editing the template we compute the
mask ourselves: render the conversation, find each assistant turn's character span by
rendering the prefix before it (with the generation prompt) and the prefix through it, and
keep the loss on tokens whose characters fall in those spans (the reply and its end-of-turn
token, not the template's trailing newline). The rows go to TRL already
tokenized (`input_ids` + `assistant_masks`), from which TRL builds labels (-100 elsewhere).
Prompt rows with an `answer` become one-turn conversations ("SFT on references").

Agent trajectories (a row with `tools`, assistant `tool_calls` and `tool` results) render with
the tools, the way the embedded server renders them (`envs/render.py`): through the template
when it handles tools, else in Qwen 2.5's text format (`<tool_call>` in the assistant turn,
`<tool_response>` in a user turn). The spans are taken over the messages as rendered, so the
loss covers each assistant turn — its text and its tool calls — and never a tool result,
which the model reads but does not write.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuneloop.envs.render import prepare_messages, template_handles_tools
from tuneloop.errors import InputError
from tuneloop.train.common import (
    common_args,
    load_model,
    load_tokenizer,
    lora_config,
    per_device,
    without_printer,
)
from tuneloop.train.data import Row, sft_rows
from tuneloop.train.health import fit
from tuneloop.train.metrics import MetricsCallback
from tuneloop.train.settings import TrainSettings


def _render(
    tokenizer: Any, messages: list[dict[str, Any]], tools: list | None, gen_prompt: bool
) -> str:
    text = tokenizer.apply_chat_template(
        messages, tools=tools, tokenize=False, add_generation_prompt=gen_prompt
    )
    return str(text)


def assistant_spans(
    tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
) -> tuple[str, list]:
    """The rendered conversation and the (start, end) character span of each assistant turn."""
    native = template_handles_tools(str(getattr(tokenizer, "chat_template", None) or ""))
    messages, tools = prepare_messages(messages, tools or None, native)
    full = _render(tokenizer, messages, tools, False)
    spans = []
    for i, msg in enumerate(messages):
        if msg.get("role") != "assistant":
            continue
        start = len(_render(tokenizer, messages[:i], tools, True)) if i else 0
        end = len(_render(tokenizer, messages[: i + 1], tools, False))
        # Not the whitespace the template writes after the end-of-turn token: generation
        # stops at that token, so the model never needs to predict what follows it.
        end = start + len(full[start:end].rstrip())
        spans.append((start, end))
    return full, spans


def tokenize_with_mask(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    max_length: int,
    tools: list[dict[str, Any]] | None = None,
) -> dict:
    """`input_ids` and `assistant_masks` (1 on assistant-turn tokens) for one conversation."""
    full, spans = assistant_spans(tokenizer, messages, tools)
    enc = tokenizer(
        full,
        add_special_tokens=False,
        return_offsets_mapping=True,
        truncation=True,
        max_length=max_length,
    )
    mask = [int(any(a <= lo < b for a, b in spans)) for lo, _hi in enc["offset_mapping"]]
    return {"input_ids": list(enc["input_ids"]), "assistant_masks": mask}


def tokenized_rows(tokenizer: Any, rows: list[dict[str, Any]], max_length: int) -> list[dict]:
    out = [tokenize_with_mask(tokenizer, r["messages"], max_length, r.get("tools")) for r in rows]
    if not any(1 in r["assistant_masks"] for r in out):
        raise InputError("SFT data: no assistant tokens within max_length; nothing to train on")
    return out


def build_sft_trainer(
    model: Any, tokenizer: Any, rows: list[dict[str, Any]], s: TrainSettings, **kw: Any
) -> Any:
    """A configured SFTTrainer (kw: out_dir, nproc, steps, stage, callbacks)."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    args = SFTConfig(
        **common_args(s, kw["out_dir"], kw.get("steps", s.steps), kw.get("stage", "sft")),
        per_device_train_batch_size=per_device(s.batch_size, kw["nproc"], "batch_size"),
        max_length=s.max_length,
        packing=False,
    )
    return without_printer(
        SFTTrainer(
            model=model,
            args=args,
            train_dataset=Dataset.from_list(tokenized_rows(tokenizer, rows, s.max_length)),
            processing_class=tokenizer,
            peft_config=lora_config(s),
            callbacks=kw.get("callbacks") or [],
        )
    )


def train_sft(base: Path, rows: list[Row], out_dir: Path, s: TrainSettings, **kw: Any) -> Any:
    """Train a LoRA adapter by SFT on assistant turns; return the trainer."""
    tokenizer = load_tokenizer(base)
    metrics = MetricsCallback(
        Path(out_dir) / "metrics.jsonl", phase="sft", progress=kw.get("progress", True)
    )
    trainer = build_sft_trainer(
        load_model(base, s),
        tokenizer,
        sft_rows(rows),
        s,
        out_dir=out_dir,
        nproc=kw.get("nproc", 1),
        callbacks=[metrics],
    )
    return fit(trainer, s, "sft")
