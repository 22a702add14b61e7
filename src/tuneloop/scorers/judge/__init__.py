"""LLM judges: scoring answers that have no verifiable reference.

    from tuneloop.scorers.judge import load_judge
    judge = load_judge(Path("judge.yaml"))
    judge.grade(messages, response)                      # Judgement: value in [0, 1]
    judge.compare(messages, baseline=a, candidate=b)     # Preference, both orders

`spec.py` the judge file (endpoint, model, key variable, price, rubric, mode, calibration);
`rubric.py` the Jinja2 rubric; `parse.py` strict reading of a judgement; `cache.py` the
judgements by request hash (SQLite); `judge.py` asking (retries, re-asks, both orders);
`scorer.py` the registered `judge` scorer; `gating.py` whether a judge's calibration lets it
decide a gate. How well a judge agrees with people is measured by
`tuneloop judge calibrate` (`stats/rater.py`), and the gate carries that error into its power.
"""

from tuneloop.scorers.judge.gating import gating_refusal, read_calibration
from tuneloop.scorers.judge.judge import (
    Judge,
    JudgeError,
    Judgement,
    JudgeRefused,
    JudgeUnavailable,
    JudgeUnparsable,
    Preference,
    load_judge,
    preference,
)
from tuneloop.scorers.judge.parse import Unparsable, parse_grade, parse_verdict
from tuneloop.scorers.judge.rubric import Rubric, answer_text, load_rubric, prompt_text
from tuneloop.scorers.judge.scorer import (
    item_messages,
    judge_configured,
    judge_cost,
    judge_for,
    judge_unanswered,
)
from tuneloop.scorers.judge.spec import JudgeSpec, default_cache, load_judge_spec

__all__ = [
    "Judge",
    "JudgeError",
    "JudgeRefused",
    "JudgeSpec",
    "JudgeUnavailable",
    "JudgeUnparsable",
    "Judgement",
    "Preference",
    "Rubric",
    "Unparsable",
    "answer_text",
    "default_cache",
    "gating_refusal",
    "item_messages",
    "judge_configured",
    "judge_cost",
    "judge_for",
    "judge_unanswered",
    "load_judge",
    "load_judge_spec",
    "load_rubric",
    "parse_grade",
    "parse_verdict",
    "preference",
    "prompt_text",
    "read_calibration",
]
