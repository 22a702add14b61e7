"""Memory of a server holding the model: weights, KV cache, a prefill's working set, runtime.

    need = serving_memory(shape, ServingPlan(rows=32, context=544))

- **KV cache**: 2 (keys and values) × layers × kv_heads × head_dim × bytes per element for
  every cached position (Pope et al. 2022, "Efficiently Scaling Transformer Inference",
  §2.1; vLLM's block manager counts the same), sliding-window layers capped at their window.
  The embedded server grows its cache with the batch — `rows` sequences, each left-padded
  to the longest, so rows × context positions; vLLM preallocates a pool (`kv_pool`:
  `serve.vllm.kv_cache_gib`, 1 GiB on a CPU build) and refuses to start when one sequence
  of `max_model_len` positions does not fit in it (`max_model_len_fits`).
- **Weights**: parameters × 4 for the embedded server (float32), × 2 for vLLM (bfloat16).
- **Activations**: a prefill's working set, one layer at a time (nothing is kept for a
  backward pass): rows × prompt × (2i + 2h) elements, and the rows × prompt × context
  float32 mask of a left-padded batch (at most; a decoding step's is one row of it).
- **Logits**: the last position's logits and their float32 softmax, rows × vocab × 8 (the
  embedded server asks for one position: `logits_to_keep=1`).
- **Runtime**: `RUNTIME_EMBEDDED` (measured) or `RUNTIME_VLLM` (assumed: vLLM's API server
  and engine core are two processes, each with torch imported; no vLLM environment was at
  hand to measure it).
"""

from __future__ import annotations

from dataclasses import dataclass

from tuneloop.memory.estimate import MemoryEstimate
from tuneloop.memory.shape import ModelShape
from tuneloop.memory.training import TOKENIZER_BYTES

RUNTIME_EMBEDDED = 420 * 2**20
"""The embedded server's process with a tiny model loaded: FastAPI, uvicorn, torch and
transformers (measured: 272 MiB imported, 417 MiB with the family matrix's Llama)."""
RUNTIME_VLLM = 2 * 2**30
"""vLLM's two processes besides weights and KV cache (assumed, not measured)."""


@dataclass(frozen=True)
class ServingPlan:
    rows: int
    """Sequences decoding at once."""
    context: int
    """Positions each sequence holds (its prompt and completion)."""
    prompt: int | None = None
    """Positions prefilled at once per sequence (its prompt); None: all of `context`."""
    weight_bytes: int = 4
    """Per parameter and per cached element: 4 float32 (embedded), 2 bfloat16 (vLLM)."""
    kv_pool: int | None = None
    """A preallocated KV cache in bytes (vLLM); None: it grows to rows × context."""
    vllm: bool = False


def kv_bytes(shape: ModelShape, rows: int, context: int, element: int) -> int:
    return shape.kv_elements(rows, context) * element


def max_model_len_fits(shape: ModelShape, pool: int, max_model_len: int, element: int) -> bool:
    """Whether vLLM's pool holds one sequence of `max_model_len` positions (it refuses to
    start otherwise)."""
    return kv_bytes(shape, 1, max_model_len, element) <= pool


def longest_context(shape: ModelShape, pool: int, element: int) -> int:
    """The most positions one sequence can cache in `pool` bytes."""
    per = kv_bytes(shape, 1, 1, element)
    return pool // per if per else 0


def serving_memory(shape: ModelShape, plan: ServingPlan) -> MemoryEstimate:
    """The parts of one server's memory (module docstring)."""
    e = plan.weight_bytes
    kv = plan.kv_pool if plan.kv_pool is not None else kv_bytes(shape, plan.rows, plan.context, e)
    prompt = plan.context if plan.prompt is None else min(plan.prompt, plan.context)
    prefill = plan.rows * prompt * (2 * shape.intermediate + 2 * shape.hidden) * e
    mask = plan.rows * prompt * plan.context * 4 if plan.rows > 1 else 0
    runtime = RUNTIME_VLLM if plan.vllm else RUNTIME_EMBEDDED
    return MemoryEstimate(
        weights=shape.parameters * e,
        activations=prefill + mask,
        logits=plan.rows * shape.vocab * 8,
        kv_cache=kv,
        overhead=runtime + TOKENIZER_BYTES * shape.vocab,
    )
