"""Memory planning before compute: what training and serving a model will take, in bytes.

    shape = model_shape(config)                                   # a config.json's numbers
    training_memory(shape, TrainingPlan(rows=8, tokens=512, full=False)).peak
    serving_memory(shape, ServingPlan(rows=32, context=544)).line()

Pure arithmetic over plain numbers (a shared library: it imports nothing of ours but
itself, and no torch), so that `tuneloop check` can say in a second whether a plan fits the
machine (`tuneloop.loop.preflight.capacity` unpacks the config and reads the machine). The
formulas and their sources are in each module's docstring: `shape.py` (parameter and KV
counts), `training.py` (weights, gradients, AdamW, activations, the fused LM head's tiles),
`serving.py` (KV cache, prefill); `estimate.py` holds the record they return.
"""

from tuneloop.memory.estimate import GIB, MemoryEstimate, gib
from tuneloop.memory.serving import (
    RUNTIME_EMBEDDED,
    RUNTIME_VLLM,
    ServingPlan,
    kv_bytes,
    longest_context,
    max_model_len_fits,
    serving_memory,
)
from tuneloop.memory.shape import ModelShape, model_shape
from tuneloop.memory.training import (
    RUNTIME_CPU,
    RUNTIME_GPU,
    Precision,
    TrainingPlan,
    training_memory,
)

__all__ = [
    "GIB",
    "RUNTIME_CPU",
    "RUNTIME_EMBEDDED",
    "RUNTIME_GPU",
    "RUNTIME_VLLM",
    "MemoryEstimate",
    "ModelShape",
    "Precision",
    "ServingPlan",
    "TrainingPlan",
    "gib",
    "kv_bytes",
    "longest_context",
    "max_model_len_fits",
    "model_shape",
    "serving_memory",
    "training_memory",
]
