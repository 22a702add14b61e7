"""Feedback normalization for the ingesters: a source's feedback value → the trace record's
`Feedback` (`tuneloop.records.trace`, where the `tuneloop.trace/1` record is defined).

Feedback arrives in many shapes (thumbs, ratings, verdict strings, booleans, scores);
`normalize_feedback` maps each to `Feedback(verdict, score)` with `score` in [0, 1] so that
one threshold filters them all.
"""

from __future__ import annotations

from typing import Any, Literal

from tuneloop.records.trace import Feedback

_UP = {
    "up",
    "thumbs_up",
    "thumbsup",
    "👍",
    "good",
    "pass",
    "passed",
    "accept",
    "accepted",
    "positive",
    "correct",
    "yes",
    "like",
    "liked",
    "approve",
    "approved",
    "+1",
}
_DOWN = {
    "down",
    "thumbs_down",
    "thumbsdown",
    "👎",
    "bad",
    "fail",
    "failed",
    "reject",
    "rejected",
    "negative",
    "incorrect",
    "wrong",
    "no",
    "dislike",
    "disliked",
    "-1",
}


def normalize_feedback(raw: Any) -> Feedback | None:
    """Map a source's feedback value to `Feedback`; None when it carries no judgement.

    Accepted: a verdict string (up/down and common synonyms), a bool, a number in [0, 1]
    (a score), a number in (1, 5] (a 1..5 rating), -1 / 1 (thumbs), or a dict holding one
    of `verdict`, `thumbs`, `rating`, `score`, `value`, `label`.
    """
    if raw is None:
        return None
    if isinstance(raw, dict):
        for key in ("verdict", "thumbs", "rating", "score", "value", "label"):
            if key in raw:
                value = raw[key]
                # A "rating" is on a 1..5 scale even when it is 1 (the worst), not a score.
                is_rating = key == "rating" and isinstance(value, (int, float))
                inner = (
                    _rating_feedback(float(value), raw)
                    if is_rating and not isinstance(value, bool)
                    else normalize_feedback(value)
                )
                return inner.model_copy(update={"raw": raw}) if inner else None
        return None
    if isinstance(raw, bool):
        return Feedback(verdict="up" if raw else "down", score=float(raw), raw=raw)
    if isinstance(raw, (int, float)):
        return _numeric_feedback(float(raw), raw)
    if isinstance(raw, str):
        word = raw.strip().lower().replace("-", "_").replace(" ", "_")
        if word in _UP or raw.strip() == "+1":
            return Feedback(verdict="up", score=1.0, raw=raw)
        if word in _DOWN or raw.strip() == "-1":
            return Feedback(verdict="down", score=0.0, raw=raw)
        try:
            return _numeric_feedback(float(raw), raw)
        except ValueError:
            return None
    return None


def _numeric_feedback(x: float, raw: Any) -> Feedback | None:
    if x == -1:
        return Feedback(verdict="down", score=0.0, raw=raw)
    if 0.0 <= x <= 1.0:
        verdict: Literal["up", "down"] | None = "up" if x == 1 else "down" if x == 0 else None
        return Feedback(verdict=verdict, score=x, raw=raw)
    return _rating_feedback(x, raw) if 1.0 < x <= 5.0 else None


def _rating_feedback(x: float, raw: Any) -> Feedback | None:
    if not 1.0 <= x <= 5.0:
        return None
    return Feedback(verdict=None, score=(x - 1.0) / 4.0, raw=raw)
