"""Built-in scorers; importing this package registers them in `tuneloop.registry.scorers`.

exact, regex, choice  (text.py)       numeric  (numeric.py)
json                  (jsonscore.py)  python_tests  (python_tests.py, runs sandbox.py)
"""

from tuneloop.scorers import jsonscore, numeric, python_tests, text  # noqa: F401
from tuneloop.scorers.base import Score, ScoreFn, ScorerFactory

__all__ = ["Score", "ScoreFn", "ScorerFactory"]
