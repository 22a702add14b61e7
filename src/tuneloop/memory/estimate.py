"""The record every memory estimate returns: its parts in bytes, and the peak they make."""

from __future__ import annotations

from dataclasses import dataclass, fields

GIB = 2**30


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes by part. Not every part is alive at once: `peak` says which are."""

    weights: int = 0
    gradients: int = 0
    optimizer: int = 0
    """AdamW's two moments."""
    activations: int = 0
    """Saved for the backward pass (training) or a prefill's working set (serving)."""
    backward: int = 0
    """The backward pass through one layer: its gradient temporaries and, under gradient
    checkpointing, its activations rebuilt."""
    logits: int = 0
    """The LM head's working set: its tiles (training) or the last position's logits
    (serving), and a full fine-tune's head gradient."""
    kv_cache: int = 0
    overhead: int = 0
    """The process's fixed runtime (imported libraries, tokenizer, CUDA context)."""

    @property
    def peak(self) -> int:
        """Weights, optimizer, KV cache and runtime always; on top the largest of the
        backward pass at the LM head (activations + logits), at a layer (activations +
        backward), and after it (gradients)."""
        moment = self.activations + max(self.logits, self.backward)
        return (
            self.weights
            + self.optimizer
            + self.kv_cache
            + self.overhead
            + max(moment, self.gradients)
        )

    @property
    def dynamic(self) -> int:
        """What running adds to a process that has loaded the model: `peak` less the
        weights and the fixed runtime."""
        return self.peak - self.weights - self.overhead

    def parts(self) -> list[tuple[str, int]]:
        """(name, bytes) of every part that is not zero, in field order."""
        out = [(f.name, getattr(self, f.name)) for f in fields(self)]
        return [(name.replace("_", " "), value) for name, value in out if value]

    def line(self) -> str:
        """`~3.1 GiB at peak (weights 1.8, activations 0.4, …, runtime 0.6 GiB)`, the parts
        under 0.01 GiB left out."""
        named = ", ".join(
            f"{'runtime' if name == 'overhead' else name} {gib(value)}"
            for name, value in self.parts()
            if value >= GIB / 200
        )
        return f"~{gib(self.peak)} GiB at peak ({named} GiB)"


def gib(n: float) -> str:
    """Bytes in GiB: two decimals below 1, one below 100 (`23.5`: a 24 GiB machine's RAM
    must not read as 24)."""
    value = n / GIB
    return f"{value:.2f}" if value < 1 else f"{value:.1f}" if value < 100 else f"{value:.0f}"
