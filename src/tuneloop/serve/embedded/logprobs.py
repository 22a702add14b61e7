"""Log-probabilities from the forward pass that generates, in OpenAI's two wire shapes.

    at_positions(logits, chosen, k)          # [N, V] logits, [N] tokens → N TokenLogprob
    chat_logprobs(entries, piece, k)         # {"content": [{token, logprob, bytes, top_logprobs}]}
    completion_logprobs(entries, piece, k)   # {tokens, token_logprobs, top_logprobs, text_offset}

What they are: the log-softmax of the model's raw logits at each position (temperature, top-p
and any constraint left out), the quantity lm-eval's loglikelihood tasks sum and vLLM returns
by default (`logprobs_mode: raw_logprobs`). `decode.py` computes them from the logits of the
step that picks the token — there is no second pass — and, for a prompt (`echo` with
`logprobs` on `/v1/completions`), from the prefill's logits at every prompt position. Checked
against a plain transformers forward over the same ids to 1e-4 (tests/serve/embedded).

A token's text is its own decoding (`piece`, special tokens kept), its `bytes` that text's
UTF-8 (a byte-fallback piece that is not whole UTF-8 decodes to U+FFFD, as in vLLM).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tuneloop.serve.embedded.row import TokenLogprob

if TYPE_CHECKING:
    import torch


def at_positions(logits: torch.Tensor, chosen: torch.Tensor, k: int) -> list[TokenLogprob]:
    """Each row of `logits` ([N, V]) as the log-probability of `chosen[i]` there and the `k`
    likeliest tokens."""
    import torch  # only the engine's worker calls this; the formatting below needs none

    logp = torch.log_softmax(logits.float(), dim=-1)
    picked = logp.gather(-1, chosen.long()[:, None]).squeeze(-1).tolist()
    if k:
        values, ids = logp.topk(min(k, logp.shape[-1]), dim=-1)
        tops = [
            tuple(zip(i, v, strict=True))
            for i, v in zip(ids.tolist(), values.tolist(), strict=True)
        ]
    else:
        tops = [()] * len(picked)
    return [
        TokenLogprob(int(t), float(p), top)
        for t, p, top in zip(chosen.tolist(), picked, tops, strict=True)
    ]


def chat_logprobs(
    entries: Sequence[TokenLogprob], piece: Callable[[int], str], top: int
) -> dict[str, Any]:
    """A chat choice's `logprobs` (`{"content": [...], "refusal": None}`)."""

    def one(token: int, logprob: float) -> dict[str, Any]:
        text = piece(token)
        return {"token": text, "logprob": logprob, "bytes": list(text.encode())}

    content = [
        {**one(e.token, e.logprob), "top_logprobs": [one(t, lp) for t, lp in e.top[:top]]}
        for e in entries
    ]
    return {"content": content, "refusal": None}


def completion_logprobs(
    entries: Sequence[TokenLogprob], piece: Callable[[int], str], top: int, first: int | None = None
) -> dict[str, Any]:
    """A text choice's legacy `logprobs` over `entries`, after `first` (an echoed prompt's first
    token, which has no log-probability: null, as in OpenAI and vLLM); offsets count from the
    start of the choice's text."""
    positions: list[tuple[int, float | None, dict[str, float] | None]] = []
    if first is not None:
        positions.append((first, None, None))
    for e in entries:
        positions.append((e.token, e.logprob, {piece(t): lp for t, lp in e.top[:top]}))
    tokens = [piece(token) for token, _, _ in positions]
    offsets, at = [], 0
    for text in tokens:
        offsets.append(at)
        at += len(text)
    return {
        "tokens": tokens,
        "token_logprobs": [logprob for _, logprob, _ in positions],
        "top_logprobs": [alternatives for _, _, alternatives in positions],
        "text_offset": offsets,
    }
