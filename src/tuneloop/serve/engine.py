"""The embedded server's batching engine: one worker thread drains a queue of pending rows.

A request becomes rows (prompts × n samples, each with its own derived seed) that are queued
together. The worker takes the first pending row, waits up to `batch_wait_ms` for more to
arrive (or until `max_batch_size` rows are waiting), and decodes them in one batch with
`decode.generate_batch`. A request's future resolves as soon as its last row finishes, not when
the whole batch does.

Deliberate deviation from "group by compatible settings": the decode loop applies temperature,
top-p, max_tokens, stop strings and seed per row, so every pending row is compatible with every
other and rows are batched in arrival order. There is no continuous batching: rows that arrive
while a batch runs wait for the next batch.

Run it through the app (`python -m tuneloop.serve.app MODEL_DIR`); `load_engine` is the one
place that reads a model folder.
"""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuneloop.serve.decode import generate_batch
from tuneloop.serve.rows import Row, RowResult


@dataclass
class _Job:
    rows: list[Row]
    future: Future[list[RowResult]]
    results: list[RowResult | None] = field(default_factory=list)
    remaining: int = 0


class Engine:
    """Owns the model and tokenizer; `submit` rows from any thread, results come as futures."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        eos_ids: frozenset[int],
        *,
        max_batch_size: int = 64,
        batch_wait_ms: float = 5.0,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.eos_ids = eos_ids
        self.max_batch_size = max_batch_size
        self.batch_wait_s = batch_wait_ms / 1000.0
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else min(eos_ids, default=0))
        context = getattr(getattr(model, "config", None), "max_position_embeddings", None)
        self.context: int | None = int(context) if context else None
        """Most positions (prompt + completion) the model was built for."""
        self.batches_run = 0
        """How many decode batches ran (tests read this to see that batching happened)."""
        self._pending: deque[tuple[_Job, int]] = deque()
        self._cond = threading.Condition()
        # The fast tokenizer is not safe to use from two threads at once.
        self._tok_lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="tuneloop-engine", daemon=True)

    # ---- tokenizer, shared by the request handlers and the worker ---------------------------

    def chat_prompt(self, messages: list[dict[str, str]]) -> list[int]:
        """Render messages with the model's chat template, ready for the assistant's turn."""
        with self._tok_lock:
            text = self.tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True
            )
            return self._encode(text, special=False)

    def text_prompt(self, prompt: str) -> list[int]:
        with self._tok_lock:
            return self._encode(prompt, special=True)

    def _encode(self, text: str, special: bool) -> list[int]:
        # The Rust tokenizer directly: `tokenizer(text)` goes through encode_batch and its
        # thread pool, which costs milliseconds per short prompt on a busy CPU.
        fast = getattr(self.tokenizer, "backend_tokenizer", None)
        if fast is not None:
            return list(fast.encode(text, add_special_tokens=special).ids)
        return list(self.tokenizer(text, add_special_tokens=special)["input_ids"])

    def decode(self, ids: list[int]) -> str:
        with self._tok_lock:
            return str(self.tokenizer.decode(ids, skip_special_tokens=True))

    # ---- queue --------------------------------------------------------------------------------

    def start(self) -> Engine:
        self._thread.start()
        return self

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=30)

    def submit(self, rows: list[Row]) -> Future[list[RowResult]]:
        job = _Job(rows, Future(), [None] * len(rows), len(rows))
        with self._cond:
            if self._closed:
                raise RuntimeError("engine is closed")
            self._pending.extend((job, i) for i in range(len(rows)))
            self._cond.notify_all()
        return job.future

    def _take(self) -> list[tuple[_Job, int]]:
        with self._cond:
            while not self._pending and not self._closed:
                self._cond.wait()
            # Wait a moment for company: concurrent clients arrive a few ms apart.
            self._cond.wait_for(
                lambda: self._closed or len(self._pending) >= self.max_batch_size,
                timeout=self.batch_wait_s,
            )
            n = min(len(self._pending), self.max_batch_size)
            return [self._pending.popleft() for _ in range(n)]

    def _run(self) -> None:
        while True:
            batch = self._take()
            if not batch:
                return  # closed and drained
            self._decode(batch)

    def _decode(self, batch: list[tuple[_Job, int]]) -> None:
        def on_done(k: int, result: RowResult) -> None:
            job, i = batch[k]
            job.results[i] = result
            job.remaining -= 1
            if job.remaining == 0 and not job.future.done():
                job.future.set_result([r for r in job.results if r is not None])

        try:
            generate_batch(
                self.model,
                [job.rows[i] for job, i in batch],
                eos_ids=self.eos_ids,
                pad_id=self.pad_id,
                decode=self.decode,
                on_done=on_done,
            )
        except Exception as err:  # a failed batch fails its requests, not the server
            for job, _ in batch:
                if not job.future.done():
                    job.future.set_exception(err)
        finally:
            self.batches_run += 1


def _eos_ids(model: Any, tokenizer: Any) -> frozenset[int]:
    """End-of-turn ids from generation_config (the chat template's stop token), else the
    tokenizer's eos."""
    ids: set[int] = set()
    config_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if isinstance(config_eos, int):
        ids.add(config_eos)
    elif config_eos:
        ids.update(int(i) for i in config_eos)
    if not ids and tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    return frozenset(ids)


def load_engine(
    model_dir: str | Path,
    *,
    max_batch_size: int,
    batch_wait_ms: float,
    stop_token_ids: tuple[int, ...] | None = None,
) -> Engine:
    """Load a transformers causal LM and its tokenizer (CPU, float32) into an Engine.

    `stop_token_ids`, when given, replace the checkpoint's own stop set (a decoding contract
    shared by every arm of a comparison); ids outside the vocabulary are refused.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    # float32 on CPU: bfloat16 matmuls are slower there, and the default model is tiny.
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.eval()
    if stop_token_ids is not None:
        vocab = int(model.get_output_embeddings().weight.shape[0])
        bad = [i for i in stop_token_ids if not 0 <= i < vocab]
        if bad or not stop_token_ids:
            raise ValueError(f"--stop-token-ids {list(stop_token_ids)}: need ids in [0, {vocab})")
    return Engine(
        model,
        tokenizer,
        frozenset(stop_token_ids) if stop_token_ids is not None else _eos_ids(model, tokenizer),
        max_batch_size=max_batch_size,
        batch_wait_ms=batch_wait_ms,
    )
