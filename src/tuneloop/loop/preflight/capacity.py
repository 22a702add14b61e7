"""The memory check of a preflight: whether training and serving the base fit this machine.

    check_memory(cfg, suite, found, tokens)   # notes; errors naming the settings that would fit

Reads the base's shape (`compat.read_shape`: config.json, no weights, no torch), the
sequence lengths (`row_tokens.py`) and the machine (`machine.py`), unpacks the config
(`training_fit.py`, `serving_fit.py`) and estimates with `tuneloop.memory`, whose
docstrings hold the formulas. A plan that fits is a note, printed by `tuneloop check` and
`run --plan` with the model's facts:

    memory: training (sft, LoRA r16, fp32 on CPU, 8 rows × 312 tokens, gradient
    checkpointing): ~3.1 GiB at peak (weights 1.8, …, runtime 0.7 GiB) of 23 GiB RAM

A plan that cannot fit is an error under the setting at fault, naming each setting that
would make it fit with its estimate (the first of them is the key); one that fits the
machine but not the RAM free right now is a warning. Training is checked on the device it
will run on (the GPU when one is visible, else RAM); the embedded server always serves
from RAM. Skipped: a base whose config.json lacks the numbers (hidden size, layers, heads,
vocabulary), training under `merge.zero_adapter` (it trains nothing), and an external
endpoint.
"""

from __future__ import annotations

from pathlib import Path

from tuneloop.config import LoopConfig
from tuneloop.errors import InputError
from tuneloop.loop.preflight.findings import Findings
from tuneloop.loop.preflight.machine import Machine, read_machine
from tuneloop.loop.preflight.row_tokens import longest, suite_conversations, training_conversations
from tuneloop.loop.preflight.serving_fit import check_embedded, check_vllm, embedded_plan
from tuneloop.loop.preflight.training_fit import describe, estimate, fixes, need, processes
from tuneloop.memory import ModelShape, gib
from tuneloop.suite import Suite
from tuneloop.train.checkpoint.compat import TemplateTokens, read_shape


def check_memory(
    cfg: LoopConfig, suite: Suite | None, found: Findings, tokens: TemplateTokens | None
) -> None:
    """Size training and serving against the machine; `tokens` is the template and tokenizer
    the model check read (None without a template: lengths fall back to the config's bounds)."""
    base = cfg.base_model if isinstance(cfg.base_model, Path) else cfg.flywheel.bootstrap
    if base is None or not (base / "config.json").is_file():
        return
    try:
        shape = read_shape(base)
    except InputError:
        return  # the model check reports an unreadable config.json
    if shape is None:
        return
    machine = read_machine()
    if not cfg.merge.zero_adapter:
        _check_training(cfg, shape, machine, found, tokens)
    if suite is not None:
        _check_serving(cfg, shape, machine, found, tokens, suite)


def _check_training(
    cfg: LoopConfig,
    shape: ModelShape,
    machine: Machine,
    found: Findings,
    tokens: TemplateTokens | None,
) -> None:
    train = cfg.train
    data = train.data
    rows = training_conversations(train.method, data) if data and data.is_file() else []
    row = longest(rows, tokens) if rows else None
    gpu = machine.gpu is not None
    capacity, where = machine.capacity(gpu)
    one = estimate(shape, train, gpu, row)
    needed = need(shape, train, gpu, row)
    what = describe(train, gpu, row)
    if needed <= capacity:
        found.note(f"memory: training ({what}): {one.line()} of {gib(capacity)} GiB {where}")
        if not gpu and needed > machine.ram_free:
            found.warn(
                "train",
                f"training needs ~{gib(needed)} GiB, more than the {gib(machine.ram_free)} "
                "GiB of RAM free now (other processes hold the rest)",
            )
        return
    fits = fixes(shape, train, gpu, row, capacity)
    if fits:
        fix = "it fits with " + ", or ".join(f.line() for f in fits)
    else:
        fix = "no setting of train: makes it fit; a smaller base, or a machine with more memory"
    count = processes(train, gpu)
    total = f" (~{gib(needed)} GiB for {count} processes)" if count > 1 else ""
    found.error(
        fits[0].key if fits else "base_model",
        f"training ({what}) needs {one.line()}{total}, more than this machine's "
        f"{gib(capacity)} GiB of {where}; {fix}",
    )


def _check_serving(
    cfg: LoopConfig,
    shape: ModelShape,
    machine: Machine,
    found: Findings,
    tokens: TemplateTokens | None,
    suite: Suite,
) -> None:
    backend = cfg.serve.backend
    if backend == "vllm":
        check_vllm(cfg, shape, machine, found)
    if backend != "embedded":
        return
    chats, prompts = suite_conversations(suite)
    agents = any(c.tools for c in chats)
    prompt = longest(chats, tokens, texts=prompts)
    plan = embedded_plan(cfg, shape, prompt, agents)
    if plan is not None:
        check_embedded(cfg, shape, machine, plan, found)
