"""Whether serving fits: the plan `serve:` and `eval:` make, and the settings that fit.

The embedded server (CPU, float32) holds min(`eval.concurrency`, `serve.max_batch_size`)
rows, each as long as the longest suite prompt (`row_tokens.py`) plus `eval.max_tokens`,
capped at its context (`serve.max_model_len`, else the model's `max_position_embeddings`);
a suite with agent items (tools) is sized at `eval.token_budget`, else at the context, since
a trajectory grows with its turns. vLLM (bfloat16 unless `serve.vllm.dtype` says float32)
preallocates its KV pool: `serve.vllm.kv_cache_gib`, 1 GiB on a CPU build, on a GPU what
`gpu_memory_utilization` leaves after the weights and the CUDA context. It refuses to start
when one sequence of its `max_model_len` does not fit the pool, which is checked here with
the same arithmetic. An external endpoint's memory is not ours to check.
"""

from __future__ import annotations

import math
from dataclasses import replace

from tuneloop.config import LoopConfig
from tuneloop.loop.preflight.findings import Findings
from tuneloop.loop.preflight.machine import Machine
from tuneloop.memory import (
    GIB,
    RUNTIME_GPU,
    ModelShape,
    ServingPlan,
    gib,
    kv_bytes,
    longest_context,
    serving_memory,
)
from tuneloop.serve.backends import CPU_KV_CACHE_GIB
from tuneloop.vllm_env import VllmEnvError, find_vllm

FLOAT32 = frozenset({"float32", "float"})


def embedded_plan(
    cfg: LoopConfig, shape: ModelShape, prompt: int | None, agents: bool
) -> ServingPlan | None:
    """The embedded server's rows and context (module docstring); None when neither the
    suite nor the model says how long a sequence gets."""
    serve, ev = cfg.serve, cfg.eval
    limit = serve.max_model_len or shape.positions or None
    if agents:
        context = ev.token_budget or limit
    elif prompt is not None:
        wanted = prompt + ev.max_tokens
        context = min(wanted, limit) if limit else wanted
    else:
        context = limit
    if context is None:
        return None
    rows = min(ev.concurrency, serve.max_batch_size)
    return ServingPlan(rows=rows, context=context, prompt=None if agents else prompt)


def check_embedded(
    cfg: LoopConfig, shape: ModelShape, machine: Machine, plan: ServingPlan, found: Findings
) -> None:
    need = serving_memory(shape, plan)
    what = f"embedded, {plan.rows} rows × {plan.context} tokens, float32 on CPU"
    if need.peak <= machine.ram:
        found.note(f"memory: serving ({what}): {need.line()} of {gib(machine.ram)} GiB RAM")
        return
    fits = []
    batch = cfg.serve.max_batch_size
    while batch > 1:
        batch //= 2
        smaller = serving_memory(shape, replace(plan, rows=min(plan.rows, batch)))
        if smaller.peak <= machine.ram:
            fits.append(f"serve.max_batch_size {batch} (~{gib(smaller.peak)} GiB)")
            break
    fix = f"; it fits with {fits[0]}" if fits else "; no batch size fits: serve a smaller model"
    found.error(
        "serve.max_batch_size",
        f"serving ({what}) needs {need.line()}, more than this machine's "
        f"{gib(machine.ram)} GiB of RAM{fix}",
    )


def check_vllm(cfg: LoopConfig, shape: ModelShape, machine: Machine, found: Findings) -> None:
    """vLLM's pool against one `max_model_len` sequence, and weights + pool against memory."""
    vllm = cfg.serve.vllm
    try:
        cpu = find_vllm(vllm.env).cpu
    except VllmEnvError:
        return  # reported under serve.vllm.env
    element = 4 if vllm.dtype in FLOAT32 else 2
    weights = shape.parameters * element
    if vllm.kv_cache_gib is not None or cpu:
        pool = int((vllm.kv_cache_gib or CPU_KV_CACHE_GIB) * GIB)
        source = "serve.vllm.kv_cache_gib" if vllm.kv_cache_gib else "a CPU build's default 1 GiB"
    elif machine.gpu is not None:
        pool = int(vllm.gpu_memory_utilization * machine.gpu) - weights - RUNTIME_GPU
        source = "what serve.vllm.gpu_memory_utilization leaves after the weights"
    else:
        return
    context = vllm.max_model_len or cfg.serve.max_model_len or shape.positions
    one = kv_bytes(shape, 1, context, element) if context else 0
    if pool <= 0 or one > pool:
        longest = longest_context(shape, max(pool, 0), element)
        wanted = math.ceil(one / GIB * 10) / 10
        found.error(
            "serve.vllm.max_model_len",
            f"vLLM would refuse to start: one sequence of {context} positions needs "
            f"{gib(one)} GiB of KV cache, more than its pool of {gib(max(pool, 0))} GiB "
            f"({source}); set serve.vllm.max_model_len {longest} or less, or "
            f"serve.vllm.kv_cache_gib {wanted}",
        )
        return
    need = serving_memory(
        shape, ServingPlan(rows=1, context=context, weight_bytes=element, kv_pool=pool, vllm=True)
    )
    capacity, where = machine.capacity(not cpu)
    what = f"vLLM, {context}-position context, KV pool {gib(pool)} GiB"
    if cpu and need.peak > capacity:  # on a GPU vLLM sizes its pool to what is there
        found.error(
            "serve.vllm.kv_cache_gib",
            f"serving ({what}) needs {need.line()}, more than this machine's "
            f"{gib(capacity)} GiB of RAM",
        )
        return
    found.note(f"memory: serving ({what}): {need.line()} of {gib(capacity)} GiB {where}")
