"""`python_tests`: run the completion's code followed by the item's `tests` in the sandbox.

    score = scorers.get("python_tests")(wall_s=5)
    score({"tests": "assert add(2, 3) == 5", "entry_point": "add"},
          "```python\ndef add(a, b):\n    return a + b\n```")           # Score(1.0, …)

The code is the first ```python (or unlabelled) fenced block — preferring one that defines
`entry_point` — else the whole completion. HumanEval-style items work as written: when
`entry_point` is given and the code does not define it, the item's `prompt` (the signature and
docstring) is prepended, since such completions continue the prompt; when the tests define
`check(candidate)` and never call it, `check(<entry_point>)` is appended. The program passes
when it exits 0 within the limits (see `sandbox/`); anything else scores 0 with the reason
and the tail of stderr. Limits come from the factory keywords, overridden per item by
`scorer_args` (`wall_s`, `cpu_s`, `memory_mb`). `detail["isolation"]` names the sandbox layers in
force, and `detail["isolation_warning"]` says so when runs were not isolated from each other.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from tuneloop.plugins import Score, ScoreFn
from tuneloop.scorers.base import scorer
from tuneloop.scorers.sandbox import Limits, run_python

_FENCE = re.compile(r"```([a-zA-Z0-9_+-]*)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


def extract_code(completion: str, entry_point: str | None = None) -> str:
    """The code block to run: a python/unlabelled fence (one defining entry_point first)."""
    blocks = [
        body for lang, body in _FENCE.findall(completion) if lang.lower() in ("", "python", "py")
    ]
    if not blocks:
        return completion
    if entry_point:
        for body in blocks:
            if re.search(rf"def\s+{re.escape(entry_point)}\s*\(", body):
                return body
    return blocks[0]


def build_program(item: dict[str, Any], completion: str) -> str:
    """Code + tests (+ the HumanEval prompt and `check(entry_point)` call when needed)."""
    entry = item.get("entry_point") if isinstance(item.get("entry_point"), str) else None
    code = extract_code(completion, entry)
    prompt = item.get("prompt")
    if entry and isinstance(prompt, str) and not re.search(rf"def\s+{re.escape(entry)}\b", code):
        code = prompt + code
    tests = str(item.get("tests", ""))
    if entry and re.search(r"def\s+check\s*\(", tests) and not re.search(r"^check\(", tests, re.M):
        tests += f"\n\ncheck({entry})\n"
    return f"{code}\n\n{tests}\n"


def _limits(base: Limits, item: dict[str, Any]) -> Limits:
    args = item.get("scorer_args")
    if not isinstance(args, dict):
        return base
    names = {f.name for f in dataclasses.fields(Limits)}
    return dataclasses.replace(base, **{k: v for k, v in args.items() if k in names})


@scorer("python_tests")
def python_tests(wall_s: float = 10.0, cpu_s: int = 5, memory_mb: int = 512) -> ScoreFn:
    """1 when the completion's code passes the item's `tests` program in the sandbox."""
    base = Limits(wall_s=wall_s, cpu_s=cpu_s, memory_mb=memory_mb)

    def score(item: dict[str, Any], completion: str) -> Score:
        if not isinstance(completion, str):
            return Score(0.0, {"reason": "completion is not text"})
        if not item.get("tests"):
            return Score(0.0, {"reason": "item has no tests"})
        result = run_python(build_program(item, completion), _limits(base, item))
        detail: dict[str, Any] = {"isolation": list(result.isolation)}
        if result.warning:
            detail["isolation_warning"] = result.warning
        if result.reason is None:
            return Score(1.0, detail)
        detail["reason"] = result.reason
        detail["stderr_tail"] = result.stderr[-500:]
        return Score(0.0, detail)

    return score
