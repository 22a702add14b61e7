"""`json`: the completion is (or contains) JSON that matches what the item asks for.

What is checked depends on the item's reference fields, in this order:
- `tool_call: {"name": …, "arguments": {…}}` — the completion's JSON is a call (OpenAI-style
  `{"name", "arguments"}`, `arguments` may itself be a JSON string, or wrapped as
  `{"function": {…}}`) with that name and exactly those arguments;
- `schema` — the JSON validates against this JSON Schema (the `jsonschema` package);
- `answer` — the JSON equals this value (a string answer is parsed as JSON first);
- none of these — any valid JSON scores 1.

The JSON is taken from a ``` fenced block if there is one, else from the first `{` or `[`
that starts a complete value, so a short preamble ("Here it is:") is tolerated.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

from tuneloop.plugins import Score, ScoreFn
from tuneloop.scorers.base import scorer

_FENCE = re.compile(r"```[a-zA-Z]*\s*\n(.*?)```", re.DOTALL)
_NOTHING = object()


def extract_json(completion: str) -> Any:
    """The first JSON value in the completion, or `_NOTHING`."""
    candidates = [m.group(1) for m in _FENCE.finditer(completion)] + [completion]
    decoder = json.JSONDecoder()
    for text in candidates:
        stripped = text.strip()
        try:
            return json.loads(stripped)
        except (json.JSONDecodeError, RecursionError):
            pass
        for i, ch in enumerate(stripped):
            if ch in "{[":
                try:
                    return decoder.raw_decode(stripped, i)[0]
                except (json.JSONDecodeError, RecursionError):
                    continue
    return _NOTHING


def _as_call(value: Any) -> tuple[Any, Any] | None:
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("function"), dict):
        value = value["function"]
    args = value.get("arguments", value.get("parameters"))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return None
    return value.get("name"), args


def _check_tool_call(value: Any, want: dict[str, Any]) -> Score:
    call = _as_call(value)
    if call is None:
        return Score(0.0, {"reason": "not a tool call"})
    name, args = call
    if name != want.get("name"):
        return Score(0.0, {"reason": f"called {name!r}, expected {want.get('name')!r}"})
    if "arguments" in want and args != want["arguments"]:
        return Score(0.0, {"reason": "arguments differ", "arguments": args})
    return Score(1.0, {"name": name})


def _check_schema(value: Any, schema: dict[str, Any]) -> Score:
    import jsonschema  # imported here: only JSON suites need it

    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as err:
        return Score(0.0, {"reason": f"schema: {err.message}"})
    except jsonschema.SchemaError as err:
        return Score(0.0, {"reason": f"item schema is invalid: {err.message}"})
    return Score(1.0, {})


@scorer("json", inline=True)
def json_scorer() -> ScoreFn:
    """Score JSON output against the item's `tool_call`, `schema` or `answer`."""

    def score(item: dict[str, Any], completion: str) -> Score:
        if not isinstance(completion, str):
            return Score(0.0, {"reason": "completion is not text"})
        value = extract_json(completion)
        if value is _NOTHING:
            return Score(0.0, {"reason": "no valid JSON in completion"})
        if isinstance(item.get("tool_call"), dict):
            return _check_tool_call(value, item["tool_call"])
        if isinstance(item.get("schema"), dict):
            return _check_schema(value, item["schema"])
        if "answer" in item:
            ref = item["answer"]
            if isinstance(ref, str):
                with contextlib.suppress(json.JSONDecodeError):
                    ref = json.loads(ref)
            ok = value == ref
            return Score(float(ok), {} if ok else {"reason": "value differs"})
        return Score(1.0, {})

    return score
