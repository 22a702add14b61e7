"""Phase `evaluate`: run a suite against an OpenAI-compatible endpoint into a sample log.

    from tuneloop.evaluate import EvalSettings, evaluate

See `runner.py` (the runner, resume), `agent.py` (the agent loop of items with tools),
`scoring.py` (the item's scorer and `eval.metrics` on one sample), `tuneloop.client` (HTTP and
retries), `plan.py` (seeds, payloads, resume checks), `redact.py` (the API key out of what is
stored or raised) and `command.py` (`tuneloop eval`).
"""

from tuneloop.evaluate.runner import EvalSettings, evaluate

__all__ = ["EvalSettings", "evaluate"]
