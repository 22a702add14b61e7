"""`memory/serving.py`: KV cache arithmetic and vLLM's refusal rule on Qwen2-0.5B's shape."""

from __future__ import annotations

from tuneloop.memory import (
    GIB,
    ServingPlan,
    kv_bytes,
    longest_context,
    max_model_len_fits,
    model_shape,
    serving_memory,
)

from .test_shape import QWEN2_05B


def test_the_kv_cache_is_two_tensors_per_layer_and_position() -> None:
    shape = model_shape(QWEN2_05B)
    assert shape is not None
    # 2 × 24 layers × 2 kv heads × 64 head_dim × 2 bytes (bfloat16) = 12 KiB a position
    assert kv_bytes(shape, rows=1, context=1, element=2) == 12 * 1024
    need = serving_memory(shape, ServingPlan(rows=32, context=544, prompt=512))
    assert need.kv_cache == 32 * 544 * 24 * 1024  # float32 in the embedded server
    assert need.weights == 4 * shape.parameters
    assert need.peak == need.weights + need.kv_cache + need.overhead + need.activations + max(
        need.logits, need.backward
    )


def test_a_preallocated_pool_is_what_vllm_holds_whatever_the_batch() -> None:
    shape = model_shape(QWEN2_05B)
    assert shape is not None
    pool = GIB
    one = ServingPlan(rows=1, context=32768, weight_bytes=2, kv_pool=pool, vllm=True)
    many = ServingPlan(rows=64, context=32768, weight_bytes=2, kv_pool=pool, vllm=True)
    assert serving_memory(shape, one).kv_cache == serving_memory(shape, many).kv_cache == pool
    # 32,768 positions × 12 KiB = 384 MiB: one sequence fits a 1 GiB pool, 87,381 positions do
    assert max_model_len_fits(shape, pool, 32768, element=2)
    assert longest_context(shape, pool, element=2) == GIB // (12 * 1024)
    assert not max_model_len_fits(shape, pool, 100_000, element=2)
