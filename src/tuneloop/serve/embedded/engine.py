"""The embedded server's batching engine: one worker thread steps a continuously refilled batch.

A request becomes rows (prompts × n samples, each with its own derived seed) that are queued
together. The worker keeps one running `decode.DecodeBatch`: at a step boundary it admits
waiting rows up to `max_batch_size` (prefilled as one group and merged into the running KV
cache), then decodes one token for every running row. A row that finishes leaves the batch at
once, so its slot is free for a waiting row and one long completion no longer holds a whole
batch; a request's future resolves as soon as its last row finishes.

When the engine is idle, the first arrival waits up to `batch_wait_ms` for company if the last
batch held more than one row (concurrent clients come back together); a lone client never
waits, so one request at a time costs no more than `model.generate`. While a batch runs,
waiting rows join at once when at least as many wait as run, else after `ADMIT_AFTER_STEPS`
steps: every admission is one extra forward, so rows arriving a few ms apart are gathered
rather than prefilled one by one (measured with `benchmarks/serve_peer.py`).

Models whose KV cache cannot be merged (sliding-window or other non-plain layers, see
`kvcache.py`) fall back to static batching: newcomers wait until the running batch is empty.

Deliberate deviation from "group by compatible settings": the decode loop applies temperature,
top-p, max_tokens, stop strings and seed per row, so every pending row is compatible with every
other and rows are admitted in arrival order. A request whose future is cancelled (its client
went away) has its rows dropped from the queue and the running batch at the next step.

Run it through the app (`python -m tuneloop.serve.app MODEL_DIR`); `load_engine` is the one
place that reads a model folder.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Hashable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from tuneloop.serve.embedded.constrain import Grammars
from tuneloop.serve.embedded.decode import DecodeBatch
from tuneloop.serve.embedded.row import Row, RowResult

ADMIT_AFTER_STEPS = 4
"""A waiting row joins a running batch at once when at least as many rows wait as run, else
after at most this many steps. Each admission costs one extra forward (the newcomers'
prefill), so rows arriving a few ms apart are gathered into one instead of paying one each."""


class RowListener(Protocol):
    """Progress of a request's rows, called on the engine's worker thread."""

    def token(self, index: int, token: int) -> None:
        """Row `index` produced `token` and goes on."""

    def done(self, index: int, result: RowResult) -> None:
        """Row `index` finished."""


@dataclass(eq=False)
class _Job:
    rows: list[Row]
    future: Future[list[RowResult]]
    listener: RowListener | None = None
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
        context: int | None = None,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.eos_ids = eos_ids
        self.max_batch_size = max_batch_size
        self.batch_wait_s = batch_wait_ms / 1000.0
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else min(eos_ids, default=0))
        built = getattr(getattr(model, "config", None), "max_position_embeddings", None)
        self.context: int | None = context or (int(built) if built else None)
        """Most positions (prompt + completion) a request may use: `context` when given
        (`serve.max_model_len`), else what the model was built for."""
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])
        """Token ids a prompt may use are below this (the output embedding's rows)."""
        self.grammars = Grammars(tokenizer, self.vocab_size, eos_ids)
        """Compiles `response_format` and forced-call grammars (`constrain.py`)."""
        self.batches_run = 0
        """How many groups of rows were admitted (one prefill each; tests read this)."""
        self.running = 0
        """Rows in the running batch now."""
        self.rows_cancelled = 0
        """Rows dropped because their request was cancelled (client gone)."""
        self._pending: deque[tuple[_Job, int, int]] = deque()
        self._steps = 0  # decode steps run, the clock rows wait on
        self._last_peak = 2  # most rows running at once since the engine was last idle
        self._cond = threading.Condition()
        # The fast tokenizer is not safe to use from two threads at once.
        self._tok_lock = threading.Lock()
        self._pieces: dict[int, str] = {}
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="tuneloop-engine", daemon=True)

    # ---- tokenizer, shared by the request handlers and the worker ---------------------------

    def chat_prompt(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        prefill: str = "",
    ) -> list[int]:
        """Render messages (and tools, if given) with the model's chat template, ready for
        the assistant's turn, which starts with `prefill` (a forced tool-call prefix)."""
        extra = {"tools": tools} if tools else {}
        with self._tok_lock:
            text = self.tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True, **extra
            )
            return self._encode(text + prefill, special=False)

    def render_chat(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        add_generation_prompt: bool,
    ) -> str:
        """The chat template's text for `messages` (and tools), untokenized."""
        extra = {"tools": tools} if tools else {}
        with self._tok_lock:
            return str(
                self.tokenizer.apply_chat_template(
                    messages, tokenize=False, add_generation_prompt=add_generation_prompt, **extra
                )
            )

    @property
    def chat_template(self) -> str:
        """The tokenizer's chat template source ("" when it has none)."""
        template = getattr(self.tokenizer, "chat_template", None)
        if isinstance(template, dict):  # older tokenizers: named templates
            template = template.get("tool_use") or template.get("default")
        return template if isinstance(template, str) else ""

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

    def piece(self, token: int) -> str:
        """One token's own text, special tokens kept (a logprob entry's `token`)."""
        text = self._pieces.get(token)
        if text is None:
            with self._tok_lock:
                text = str(self.tokenizer.decode([token], skip_special_tokens=False))
            self._pieces[token] = text
        return text

    # ---- queue --------------------------------------------------------------------------------

    @property
    def waiting(self) -> int:
        """Rows queued and not yet admitted."""
        return len(self._pending)

    def start(self) -> Engine:
        self._thread.start()
        return self

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=30)

    def submit(
        self, rows: list[Row], listener: RowListener | None = None
    ) -> Future[list[RowResult]]:
        """Queue `rows`; the future holds their results in order. Cancelling the future drops
        the rows that have not finished (from the queue, or the running batch)."""
        job = _Job(rows, Future(), listener, [None] * len(rows), len(rows))
        with self._cond:
            if self._closed:
                raise RuntimeError("engine is closed")
            self._pending.extend((job, i, self._steps) for i in range(len(rows)))
            self._cond.notify_all()
        return job.future

    def _take(self, running: int, can_join: bool) -> list[tuple[_Job, int]] | None:
        """Rows to admit now (waiting only when idle); None when closed and drained."""
        with self._cond:
            if not running:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if not self._pending:
                    return None  # closed and drained
                if self._last_peak > 1:
                    # Concurrent clients come back a few ms apart: wait a moment for company.
                    # A lone client (the last batch held one row) never waits.
                    self._cond.wait_for(
                        lambda: self._closed or len(self._pending) >= self.max_batch_size,
                        timeout=self.batch_wait_s,
                    )
                self._last_peak = 0
            room = self.max_batch_size - running if can_join else 0
            few = running and 0 < len(self._pending) < running
            if few and self._steps - self._pending[0][2] < ADMIT_AFTER_STEPS:
                room = 0  # gather a few more steps' arrivals into one prefill
            taken: list[tuple[_Job, int]] = []
            while self._pending and len(taken) < room:
                job, i, _ = self._pending.popleft()
                if job.future.cancelled():
                    self.rows_cancelled += 1
                else:
                    taken.append((job, i))
            return taken

    def _run(self) -> None:
        batch = self._new_batch()
        while True:
            taken = self._take(len(batch), batch.can_join())
            if taken is None:
                return
            self._drop_cancelled(batch)
            try:
                if taken:
                    self.batches_run += 1
                    batch.add([((job, i), job.rows[i]) for job, i in taken])
                batch.step()
                self._steps += 1
            except Exception as err:  # a failed step fails its requests, not the server
                jobs = {_row_of(key)[0] for key in batch.keys} | {job for job, _ in taken}
                for job in jobs:
                    _settle(job.future, error=err)
                batch = self._new_batch()
            self.running = len(batch)
            self._last_peak = max(self._last_peak, self.running)

    def _new_batch(self) -> DecodeBatch:
        return DecodeBatch(
            self.model,
            eos_ids=self.eos_ids,
            pad_id=self.pad_id,
            decode=self.decode,
            on_done=self._on_done,
            on_token=self._on_token,
        )

    def _drop_cancelled(self, batch: DecodeBatch) -> None:
        gone = {key for key in batch.keys if _row_of(key)[0].future.cancelled()}
        if gone:
            batch.drop(gone)
            self.rows_cancelled += len(gone)

    @staticmethod
    def _on_token(key: Hashable, token: int) -> None:
        job, i = _row_of(key)
        if job.listener is not None and not job.future.cancelled():
            job.listener.token(i, token)

    @staticmethod
    def _on_done(key: Hashable, result: RowResult) -> None:
        job, i = _row_of(key)
        job.results[i] = result
        job.remaining -= 1
        if job.listener is not None and not job.future.cancelled():
            job.listener.done(i, result)
        if job.remaining == 0:
            _settle(job.future, [r for r in job.results if r is not None])


def _row_of(key: Hashable) -> tuple[_Job, int]:
    """The (request, row index) a batch key names (the engine's keys are those pairs)."""
    return cast(tuple[_Job, int], key)


def _settle(
    future: Future[list[RowResult]],
    results: list[RowResult] | None = None,
    error: BaseException | None = None,
) -> None:
    """Resolve `future` unless it is already done (a client may cancel it at any moment)."""
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(results or [])
    except InvalidStateError:
        pass


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
    max_model_len: int | None = None,
) -> Engine:
    """Load a transformers causal LM and its tokenizer (CPU, float32) into an Engine.

    `stop_token_ids`, when given, replace the checkpoint's own stop set (a decoding contract
    shared by every arm of a comparison); ids outside the vocabulary are refused.
    `max_model_len`, when given, replaces the model's `max_position_embeddings` as the context.
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
        context=max_model_len,
    )
