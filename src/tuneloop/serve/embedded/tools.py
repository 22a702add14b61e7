"""Tool calling for the embedded server: render tools into the prompt, read calls back out.

Pure (no torch, no FastAPI). The convention is Qwen's (and Hermes'): the model answers a call as
`<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`, one block per call, and reads
results back as `<tool_response>` blocks in a user turn — vLLM's `hermes` tool parser.

- `prepare_messages(messages, tools, native)`: the messages (and tools) to hand to the chat
  template, natively or through the Qwen 2.5-format fallback for templates without tool
  support. It lives in `envs/render.py` (re-exported here) because training renders agent
  trajectories the same way.
- `parse_tool_calls(text)`: the calls in a completion, or None when it is not a well-formed set
  of calls. The server then returns the raw text with the ordinary finish reason: whether the
  model should have called a tool is the scorer's question, not the server's. Only the syntax
  is checked; a call to a function that was not offered is still returned as a call.
- `forced_call(render, native, name, tools)`: how `tool_choice: "required"` and a named
  function are enforced. The assistant turn is prefilled with the start of a call in the
  template's own format — `<tool_call>\n{"name": "` for `required`, up to the arguments object
  for a named function — and the rest is decoded under a grammar (`constrain.py`): one of the
  offered names, arguments valid against that tool's `parameters`, the closing
  `</tool_call>`, then the end of the turn. The format is found by rendering a sentinel call
  through the same template, so it follows whatever spacing the template writes. The reply is
  therefore always a call that parses and validates, as OpenAI's and vLLM's are, unless
  `max_tokens` cuts it short (`finish_reason: "length"`, the raw text).
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tuneloop.envs.render import CALL_CLOSE, CALL_OPEN, arguments_object, prepare_messages

__all__ = ["ForcedCall", "ToolCall", "forced_call", "parse_tool_calls", "visible_prefix"]

_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)


@dataclass(frozen=True)
class ToolCall:
    """One parsed call: the function's name and its arguments as a JSON object string."""

    name: str
    arguments: str

    def openai(self) -> dict[str, Any]:
        """The call as an OpenAI `tool_calls` entry, with a fresh id."""
        return {
            "id": f"call_{secrets.token_hex(12)}",
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


def _one_call(body: str) -> ToolCall | None:
    try:
        obj = json.loads(body)
    except json.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    args = arguments_object(args)
    if not isinstance(args, dict):
        return None
    return ToolCall(obj["name"], json.dumps(args, ensure_ascii=False))


def parse_tool_calls(text: str) -> tuple[str | None, list[ToolCall]] | None:
    """(content before the first call or None, calls) when `text` holds one or more
    well-formed `<tool_call>` blocks and nothing but whitespace after them; else None.

    A last block may lack its closing tag (the model ended its turn right after the JSON).
    """
    start = text.find(CALL_OPEN)
    if start < 0:
        return None
    calls: list[ToolCall] = []
    end = start
    for match in _BLOCK.finditer(text, start):
        if text[end : match.start()].strip():
            return None  # prose between calls: not a clean set of calls
        call = _one_call(match.group(1).strip())
        if call is None:
            return None
        calls.append(call)
        end = match.end()
    if text[end:].strip():
        return None
    content = text[:start]
    return (content if content.strip() else None), calls


def visible_prefix(text: str) -> str:
    """The part of a streamed text that is surely content: everything before a `<tool_call>`,
    holding back a tail that could be the start of one."""
    start = text.find(CALL_OPEN)
    if start >= 0:
        return text[:start]
    for keep in range(min(len(CALL_OPEN) - 1, len(text)), 0, -1):
        if CALL_OPEN.startswith(text[-keep:]):
            return text[:-keep]
    return text


_SENTINEL_NAME = "tuneloop_sentinel_function"
_SENTINEL_ARG = "tuneloop_sentinel_argument"
Render = Callable[[list[dict[str, Any]], list[dict[str, Any]] | None, bool], str]
"""`render(messages, tools, add_generation_prompt)`: the chat template's text."""


@dataclass(frozen=True)
class ForcedCall:
    """How a forced call is written: the prefilled start of the turn, and the Lark grammar
    (`constrain.py`) the rest must follow: the call's remaining JSON, its arguments valid
    against the tool's `parameters`, and the template's closing `</tool_call>`."""

    prefill: str
    grammar: str


def forced_call(
    render: Render, native: bool, name: str | None, tools: list[dict[str, Any]]
) -> ForcedCall | None:
    """A call `tools` offer (to `name`, or to any of them when None) in the template's own
    call format; None when the template writes no `<tool_call>` block.

    The format comes from rendering a sentinel call through the template: the turn reads
    `P NAME M ARGS S…`, so `required` prefills `P` and constrains `NAME_i M %json{params_i} S`
    over the tools, and a named function prefills `P NAME M` and constrains
    `%json{params} S`."""
    parts = _call_format(render, native)
    if parts is None:
        return None
    before, middle, close = parts
    from tuneloop.serve.embedded.constrain import LAYOUT, literal

    def arguments(tool: dict[str, Any]) -> str:
        schema = tool["function"].get("parameters") or {"type": "object"}
        laid_out = {**schema, "x-guidance": LAYOUT}
        return f"%json {json.dumps(laid_out, ensure_ascii=False)} {literal(close)}"

    named = {t["function"]["name"]: t for t in tools}
    if name is not None:
        prefill = before + json.dumps(name)[1:-1] + middle
        return ForcedCall(prefill, f"start: {arguments(named[name])}\n")
    rules = [
        f"call_{k}: {literal(json.dumps(n)[1:-1] + middle)} {arguments(tool)}"
        for k, (n, tool) in enumerate(named.items())
    ]
    choice = " | ".join(f"call_{k}" for k in range(len(rules)))
    return ForcedCall(before, "\n".join([f"start: {choice}", *rules]) + "\n")


def _call_format(render: Render, native: bool) -> tuple[str, str, str] | None:
    """(P, M, S) of the template's call format: what comes before the function's name,
    between it and the arguments object, and after the arguments up to `</tool_call>`."""
    tool = {
        "type": "function",
        "function": {
            "name": _SENTINEL_NAME,
            "parameters": {"type": "object", "properties": {_SENTINEL_ARG: {"type": "integer"}}},
        },
    }
    function = {"name": _SENTINEL_NAME, "arguments": json.dumps({_SENTINEL_ARG: 0})}
    call = {"id": "call_0", "type": "function", "function": function}
    user = {"role": "user", "content": "?"}
    messages, tools = prepare_messages([user], [tool], native)
    opened = render(messages, tools, True)
    reply = {"role": "assistant", "content": None, "tool_calls": [call]}
    messages, tools = prepare_messages([user, reply], [tool], native)
    closed = render(messages, tools, False)
    if not closed.startswith(opened):
        return None
    turn = closed[len(opened) :]
    at = turn.find(_SENTINEL_NAME)
    if at < 0 or CALL_OPEN not in turn[:at]:
        return None
    after = at + len(_SENTINEL_NAME)
    argument = turn.find(f'"{_SENTINEL_ARG}"', after)
    brace = turn.rfind("{", after, argument)
    end = turn.find("}", argument)
    close = turn.find(CALL_CLOSE, end)
    if min(argument, brace, end, close) < 0:
        return None
    return turn[:at], turn[after:brace], turn[end + 1 : close + len(CALL_CLOSE)]
