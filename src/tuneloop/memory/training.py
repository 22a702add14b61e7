"""Peak memory of one training process, from the model's shape and the plan's plain numbers.

    need = training_memory(shape, TrainingPlan(rows=8, tokens=512, full=False))
    need.peak, need.parts()           # bytes; the parts as (name, bytes) for a note

The accounting (bytes; P parameters, t trainable parameters, N = rows × tokens positions):

- **Weights**: P × 4 in float32 (CPU, and `bf16: false`), P × 2 in bfloat16 (a GPU loads the
  base in bfloat16), and for QLoRA the blocks' linear weights at 0.5625 bytes (NF4, 4 bits,
  plus one float32 absmax per block of 64) while everything else is float32
  (`prepare_model_for_kbit_training` upcasts it). A full fine-tune with a reference model
  (DPO; GRPO with beta > 0) holds a second, frozen copy.
- **Gradients and optimizer**: the textbook figure is 16 bytes per parameter for
  mixed-precision AdamW — 2 (bf16 weights) + 2 (bf16 gradients) + 12 (fp32 master copy,
  first and second moment): Rajbhandari et al. 2020 (ZeRO, §3.1) and EleutherAI's
  "Transformer Math 101" (2023). This trainer keeps no fp32 master copy: AdamW's two moments
  take each parameter's own dtype, so a float32 full fine-tune costs 4 + 4 + 8 = 16 bytes
  per parameter and a bfloat16 one 2 + 2 + 4 = 8; LoRA's adapter is float32 in every case
  (PEFT upcasts it), 16 bytes per adapter parameter, and the frozen base has no gradient.
  transformers' default optimizer is torch's fused AdamW, whose step allocates nothing of a
  parameter's size. ZeRO/FSDP divide the optimizer state (stage 1), the gradients (2) and
  the weights (3; FSDP's full shard) by the number of processes.
- **Activations**: per layer and position, after Korthikanti et al. 2022 ("Reducing
  Activation Recomputation in Large Transformer Models", §4.1: sbh(34 + 5as/h) bytes for a
  GPT block in fp16), re-derived for the blocks trained here — RMSNorm, grouped-query
  attention through PyTorch's fused SDPA (which keeps no s² score matrix), a gated MLP, no
  dropout: 6h (each norm's input, normalised input and output) + 2q + 2kv (q, k, v and the
  attention output; with a padding mask transformers repeats k and v to every query head,
  so 4q) + 4i (gate, its activation, up, their product; GPT-2's MLP 2i; a mixture of
  experts k·(4i_e + h) + experts) + rank for each LoRA-adapted linear layer, each element
  of the compute dtype's size (4 in float32, 2 in bfloat16), plus 4h outside the blocks
  (embedding output, final norm, the head's input). A padded batch adds two float32
  rows × T × T attention masks (measured: transformers builds them when any row is padded).
  Gradient checkpointing (Chen et al. 2016) keeps only each layer's input (h per position)
  and rebuilds one layer at a time in the backward pass (`backward`: that layer's
  activations again, and its gradient temporaries h + 2i, which a pass without
  checkpointing has too). TRL turns it on by default (`SFTConfig`, `GRPOConfig`,
  `DPOConfig`: `gradient_checkpointing=True`), so the plan has it unless `train.extra`
  turns it off. Bfloat16 autocast over float32 weights (the CPU's `bf16: true`) also keeps
  a bf16 copy of the block weights for the backward pass: every block's, or with
  checkpointing the rebuilt block's only.
- **Logits** — deliberately not the textbook B × T × V: TRL 1.16's trainers (SFT, DPO, GRPO)
  compute per-token log-probabilities through a fused LM head that never holds the full
  logits; it projects tiles of at most 4,096 positions × 32,768 vocabulary entries. On a GPU
  the Triton kernel holds one tile (in the compute dtype) plus its float32 accumulators; on
  CPU the torch fallback holds about nine float32 tiles at once in the backward pass
  (measured: 8.3–9.8 tiles on the family matrix's Llama and Mistral shapes). So for a large
  vocabulary this term is min(N, 4096) × min(V, 32768) × 36 bytes on CPU — it still dwarfs
  the activations of a small model (a 131k vocabulary at N = 256: ~300 MiB) — and a full
  fine-tune adds the head's float32 gradient (V × h × 4), allocated as the backward starts.
- **Peak**: weights + optimizer + runtime + the largest of activations + logits (the head's
  backward, every activation alive), activations + backward (a layer's backward) and
  gradients (after the backward pass, the activations freed). The head's tiles and a
  layer's backward never coincide: with checkpointing on, the tiles are what peaks for
  any vocabulary above a few thousand entries.
- **Runtime**: the process's fixed memory: `RUNTIME_CPU` plus the tokenizer
  (`TOKENIZER_BYTES` per vocabulary entry), or on a GPU the CUDA context (`RUNTIME_GPU`).

What it leaves out, each small beside the parts above or outside tuneloop's built-in
trainers: biases and norms' own buffers, GRPO's generation (its KV cache for rows ×
completion tokens, freed before the backward pass), DPO's reference forward (no gradient,
transient), a mixture of experts' routing buffers (the tiny Qwen3-MoE measured 1.29× its
estimate). And deliberately the allocator: the estimate is of what is alive. On CPU glibc
by default raises its mmap threshold after each large free (up to 32 MiB), so a model
whose per-layer tensors are megabytes keeps freed heap: on the Qwen2-0.5B and -1.5B shapes
a training process held 1.1–2.6× what the estimate says training adds (1.02–1.49× of the
whole peak), against 0.89–1.10× with the threshold fixed (`MALLOC_MMAP_THRESHOLD_=65536`).
Calibration: `tests/memory/test_training.py` (the family matrix against a training
subprocess: 0.92–1.00 of what training adds) and `benchmarks/memory_plan.py` (the Qwen2
shapes, both allocators).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tuneloop.memory.estimate import MemoryEstimate
from tuneloop.memory.shape import ModelShape

Precision = Literal["fp32", "bf16", "autocast", "nf4"]
"""`fp32`; `bf16` (weights and compute); `autocast` (fp32 weights, bf16 compute: the CPU's
`bf16: true`); `nf4` (QLoRA: 4-bit base, bf16 compute)."""

RUNTIME_CPU = 544 * 2**20
"""torch, transformers, TRL, PEFT and datasets imported and a trainer built, no weights:
508 MiB measured for the imports and 36 MiB for the trainer (the family matrix's Llama with
its 640-token tokenizer, transformers 5.24, TRL 1.16, torch 2.13 CPU)."""
TOKENIZER_BYTES = 1200
"""A fast tokenizer's memory per vocabulary entry (measured: Mistral's 131,072-token Tekken
takes ~150 MiB)."""
RUNTIME_GPU = 512 * 2**20
"""The CUDA context and the caching allocator's first blocks on the GPU (not measured here:
PyTorch's documented 300–800 MiB for a context)."""
NF4_BYTES = 0.5625
"""bitsandbytes NF4: 4 bits a weight plus a float32 absmax per block of 64."""
TILE_TOKENS = 4096
TILE_VOCAB = 32768
"""TRL 1.16's fused LM head: positions × vocabulary entries of one tile."""
CPU_TILES = 9
"""Float32 tiles the fused head's torch fallback holds at once (CPU, measured)."""
GPU_TILES = 2
"""Tiles of the Triton kernel: its projection buffer and float32 working values."""
ALL_LINEAR_LAYERS = 7
"""Linear layers LoRA adapts in a block under `all-linear` (q, k, v, o, gate, up, down)."""


@dataclass(frozen=True)
class TrainingPlan:
    rows: int
    """Sequences in one forward and backward pass of one process."""
    tokens: int
    """Positions per sequence (the longest row: the batch is padded to it)."""
    full: bool
    """Every weight trains (`train.adapter: none`); False: a LoRA adapter on a frozen base."""
    lora_rank: int = 16
    lora_targets: tuple[str, ...] = ()
    """`train.lora.target_modules`; empty for `all-linear`."""
    precision: Precision = "fp32"
    checkpointing: bool = True
    padded: bool = True
    """Rows of different lengths, padded to the longest: attention takes explicit masks."""
    reference: bool = False
    """A frozen second copy of the weights (a full fine-tune's DPO or GRPO-with-KL reference)."""
    shards: int = 1
    zero_stage: int = 0
    """What is divided over `shards` processes: 1 optimizer state, 2 + gradients, 3 +
    weights (FSDP's full shard is 3; DDP is 0)."""
    gpu: bool = False


def _weight_bytes(shape: ModelShape, plan: TrainingPlan) -> float:
    if plan.precision == "nf4":
        return shape.layer_parameters * NF4_BYTES + (shape.parameters - shape.layer_parameters) * 4
    per = 2 if plan.precision == "bf16" else 4
    return shape.parameters * per * (2 if plan.reference and plan.full else 1)


def _layer_elements(shape: ModelShape, plan: TrainingPlan) -> int:
    """Elements one block keeps for its backward pass, per position."""
    h, i = shape.hidden, shape.intermediate
    if shape.moe_layers:
        k = max(shape.experts_per_token, 1)
        mlp = k * (4 * shape.expert_intermediate + h) + shape.experts
        mlp += 4 * shape.shared_expert_intermediate
    else:
        mlp = (4 if shape.gated else 2) * i
    lora = 0 if plan.full else plan.lora_rank * (len(plan.lora_targets) or ALL_LINEAR_LAYERS)
    # transformers repeats k and v to every query head when a mask is given (`repeat_kv`)
    kv = shape.q_dim if plan.padded else shape.kv_dim
    return 6 * h + 2 * shape.q_dim + 2 * kv + mlp + lora


def training_memory(shape: ModelShape, plan: TrainingPlan) -> MemoryEstimate:
    """The parts of one training process's memory and its peak (module docstring)."""
    act = 2 if plan.precision in ("bf16", "autocast", "nf4") else 4
    trainable = (
        shape.parameters if plan.full else shape.lora_parameters(plan.lora_rank, plan.lora_targets)
    )
    per_trainable = 2 if plan.full and plan.precision == "bf16" else 4
    n = plan.rows * plan.tokens
    layer = _layer_elements(shape, plan)
    kept = shape.layers * (shape.hidden if plan.checkpointing else layer)
    activations = n * (kept + 4 * shape.hidden) * act
    if plan.padded:
        activations += plan.rows * plan.tokens**2 * 8
    if plan.precision == "autocast":  # bf16 copies of the weights a backward pass needs
        activations += shape.layer_parameters * 2 // (shape.layers if plan.checkpointing else 1)
    rebuilt = layer if plan.checkpointing else 0
    backward = n * (rebuilt + shape.hidden + 2 * shape.intermediate) * act
    scored = plan.rows * max(plan.tokens - 1, 1)
    tile = min(scored, TILE_TOKENS) * min(shape.vocab, TILE_VOCAB)
    logits = tile * (GPU_TILES * act if plan.gpu else CPU_TILES * 4)
    if plan.full:
        logits += shape.vocab * shape.hidden * (4 + (act if act < 4 else 0))
    shards = max(plan.shards, 1)
    runtime = RUNTIME_GPU if plan.gpu else RUNTIME_CPU + TOKENIZER_BYTES * shape.vocab
    return MemoryEstimate(
        weights=int(_weight_bytes(shape, plan) / (shards if plan.zero_stage >= 3 else 1)),
        gradients=trainable * per_trainable // (shards if plan.zero_stage >= 2 else 1),
        optimizer=2 * trainable * per_trainable // (shards if plan.zero_stage >= 1 else 1),
        activations=activations,
        backward=backward,
        logits=logits,
        overhead=runtime,
    )
