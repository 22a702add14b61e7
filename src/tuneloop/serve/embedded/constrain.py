"""Constrained decoding: `response_format` and forced tool calls, enforced token by token.

    grammars = Grammars(tokenizer, vocab_size, eos_ids)     # one per engine, built on first use
    factory = grammars.json_schema(schema, param="response_format.json_schema.schema")
    row = Row(..., constraint=factory)                      # each row gets a fresh Constraint
    # decode.py, every step: constraint.allow(logits_row); ...sample...; constraint.accept(tok)

A grammar is compiled once per request (`ApiError` 400 naming `param` when it cannot be: a
malformed schema, a construct the library does not support); every row (each of `n`) gets its
own matcher. Before each token is sampled, the tokens the grammar does not allow at that point
get `-inf`; once the grammar is complete only an end-of-turn token is allowed, so the row
ends there. A constrained row that reaches `max_tokens` first ends with `finish_reason:
"length"` and incomplete output, as OpenAI's and vLLM's do. Log-probabilities stay those of
the raw logits (`logprobs.py`).

The library is llguidance (the Rust core of Guidance, one of vLLM's two structured-output
backends), chosen over xgrammar (the other) by `benchmarks/constrained.py`, one thread, a
three-field JSON schema: on a 131,072-token vocabulary (Mistral's tekken) llguidance masks a
token in 0.41 ms against xgrammar's 0.77, and takes a new schema from compile to its last
token in 2.3 ms against 20 ms (xgrammar's first compile: 870 ms) — a server sees a new schema
per client. On the demo's 330 tokens xgrammar is faster (0.010 against 0.064 ms a token), but
real vocabularies are 32k–150k. llguidance also installs alone, where xgrammar pulls in
triton and a TVM runtime. Its one cost: the process's first constrained answer takes 2.5–3.5 s
more (tables built lazily, once; later schemas ~3 ms). It is left on that first request rather
than paid at every start: most servers, the loop's own included, never constrain.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tuneloop.serve.api_error import ApiError

if TYPE_CHECKING:
    import torch

SAMPLE = 2000
"""Tokens compared to check llguidance's reading of a vocabulary (`Grammars._faithful`)."""
ConstraintFactory = Callable[[], "Constraint"]
"""A fresh matcher for one row."""

ANY_OBJECT: dict[str, Any] = {"type": "object"}
"""`response_format: {"type": "json_object"}`: any JSON object."""
LAYOUT: Any = {"whitespace_flexible": False}
"""How constrained JSON is laid out: compact (`,` and `:`, no whitespace between tokens).
llguidance's default allows any whitespace anywhere, and a small model then fills its tokens
with newlines (measured on the demo model: 40 tokens of `\n` inside the first object).
Separators with a space (`", "`, `": "`) were tried and dropped: with a character-level
vocabulary llguidance's mask then allowed a digit right after `:` and its parser refused it
(the row stopped mid-object)."""


class Constraint:
    """One row's grammar state: which tokens it allows next, and the tokens it has taken."""

    def __init__(self, matcher: Any, vocab_size: int) -> None:
        import llguidance.torch as llt

        self._llt = llt
        self.matcher = matcher
        self.bitmask = llt.allocate_token_bitmask(1, vocab_size)

    def allow(self, logits: torch.Tensor) -> None:
        """Set what the grammar forbids next to -inf in `logits` ([1, V], in place)."""
        self._llt.fill_next_token_bitmask(self.matcher, self.bitmask, 0)
        self._llt.apply_token_bitmask_inplace(logits, self.bitmask)

    def accept(self, token: int) -> bool:
        """Advance past `token`; False when the grammar could not take it (the row ends)."""
        return bool(self.matcher.consume_token(token))


class Grammars:
    """Compiles request grammars for one engine's tokenizer (built on first use: most
    servers never see a constrained request)."""

    def __init__(self, tokenizer: Any, vocab_size: int, eos_ids: frozenset[int]) -> None:
        """`eos_ids` are what a complete answer may end with (the engine's end-of-turn ids)."""
        self._tokenizer = tokenizer
        self.vocab_size = vocab_size
        self._eos = sorted(eos_ids)
        self._built: Any = None
        self._lock = threading.Lock()

    def _lltokenizer(self, param: str) -> Any:
        """llguidance's reading of the vocabulary (byte-level BPE or SentencePiece), checked
        against the tokenizer's own decoding: a vocabulary it misreads (a character-level one
        reads its space and newline tokens as unknown) is refused, since a grammar over a
        misread vocabulary lets through tokens its parser then rejects."""
        with self._lock:
            if self._built is None:
                try:
                    import llguidance.hf

                    built = llguidance.hf.from_tokenizer(
                        self._tokenizer, n_vocab=self.vocab_size, eos_token=self._eos
                    )
                except Exception as err:  # a slow tokenizer, a vocabulary it cannot map
                    self._built = f"{type(err).__name__}: {err}"
                else:
                    self._built = self._misread(built) or built
            if isinstance(self._built, str):
                raise ApiError(
                    f"{param}: this model's tokenizer cannot be constrained ({self._built})",
                    param=param,
                )
            return self._built

    def _misread(self, built: Any) -> str | None:
        """The first token `built` reads otherwise than the tokenizer decodes it, if any."""
        special = set(self._tokenizer.all_special_ids)
        step = max(1, len(self._tokenizer) // SAMPLE)
        for token in range(0, len(self._tokenizer), step):
            text = self._tokenizer.decode([token])
            if token in special or "\ufffd" in text:
                continue  # a special token, or a byte of a character: no text to compare
            read = built.decode_bytes([token])
            if read != text.encode():
                return f"llguidance reads token {token} as {read!r}, the tokenizer as {text!r}"
        return None

    def json_schema(self, schema: dict[str, Any], param: str) -> ConstraintFactory:
        """Output that is one JSON value valid against `schema`."""
        import llguidance

        grammar = llguidance.LLMatcher.grammar_from_json_schema(json.dumps(schema), LAYOUT)
        return self._compile(grammar, param)

    def lark(self, grammar: str, param: str) -> ConstraintFactory:
        """Output in a Lark grammar (with `%json{...}` schemas inside, their layout in their
        `x-guidance`: `tools.forced_call`)."""
        import llguidance

        return self._compile(llguidance.LLMatcher.grammar_from_lark(grammar), param)

    def _compile(self, grammar: str, param: str) -> ConstraintFactory:
        import llguidance

        tokenizer = self._lltokenizer(param)
        failed, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar, tokenizer)
        if failed:
            raise ApiError(f"{param}: {'; '.join(messages)}", param=param, code="invalid_value")
        size = self.vocab_size
        return lambda: Constraint(llguidance.LLMatcher(tokenizer, grammar), size)


def literal(text: str) -> str:
    """`text` as a Lark string literal."""
    return json.dumps(text, ensure_ascii=False)
