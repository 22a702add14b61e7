"""An answer's confidence from its token log-probabilities (`eval.logprobs`).

    mean_logprob = (1/n) Σ_t log p(token_t)                  over the answer's n tokens
    min_margin   = min_t (log p(top1_t) − log p(top2_t))      over positions with two alternatives

The two signals a cascade hands a request off on (mean token log-probability and the margin
between the two most likely tokens at the answer's tokens); both come from the pass that
generated the answer, as the server returned them (`client.completions.TokenLogprob`). An
empty answer is certain by definition (mean 0, no margin). A server that returns no
log-probabilities although asked is a harness error for the row, never a score.
"""

from __future__ import annotations

import math

from tuneloop.client.completions import Completion, MalformedResponse
from tuneloop.samplelog import Confidence

NO_LOGPROBS = (
    "the server returned no token logprobs although the request asked for them "
    "(eval.logprobs); serve the model where they are returned (the embedded server and vLLM "
    "do; vLLM needs --max-logprobs of at least 2)"
)


def answer_confidence(done: Completion) -> Confidence:
    """The answer's confidence (module docstring); MalformedResponse without logprobs."""
    if done.logprobs is None:
        raise MalformedResponse(NO_LOGPROBS)
    n = len(done.logprobs)
    if n == 0:
        return Confidence(mean_logprob=0.0, min_margin=None, tokens=0)
    margins = [t.top[0] - t.top[1] for t in done.logprobs if len(t.top) >= 2]
    return Confidence(
        mean_logprob=sum(t.logprob for t in done.logprobs) / n,
        min_margin=min(margins) if margins else None,
        tokens=n,
    )


def signal_value(confidence: Confidence, signal: str) -> float:
    """The value of a log-probability signal (`mean_logprob`, `min_margin`) of one answer, as
    a cascade compares it with a hand-off threshold; an answer with no margin to measure (no
    tokens, or one alternative) is as certain as can be: +inf."""
    value = getattr(confidence, signal)
    return math.inf if value is None else float(value)
