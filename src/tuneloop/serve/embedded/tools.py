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
- `forced_prefix(render, native, name)`: how `tool_choice: "required"` and a named function are
  enforced. vLLM constrains decoding to its JSON schema of a call (structured outputs); the
  embedded server does not run a grammar, so it prefills the assistant turn with the start of
  a call in the template's own format — `<tool_call>\n{"name": "` for `required`, up to the
  arguments object for a named function — and the model writes the rest. The prefix is found
  by rendering a sentinel call through the same template, so it follows whatever spacing the
  template writes. The completion is read back with the prefix in front; should the model
  still not finish a well-formed call, the reply is the raw text (200), as with `auto`.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tuneloop.envs.render import CALL_OPEN, arguments_object, prepare_messages

__all__ = ["ToolCall", "forced_prefix", "parse_tool_calls", "visible_prefix"]

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


def forced_prefix(render: Render, native: bool, name: str | None) -> str | None:
    """The start of an assistant turn that must call `name` (None: any tool), in the
    template's call format: up to the function's name, or for a named function up to its
    arguments object. None when the template writes no `<tool_call>` block to prefill."""
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
    if name is None:
        return turn[:at]
    after = at + len(_SENTINEL_NAME)
    brace = turn.rfind("{", after, turn.find(f'"{_SENTINEL_ARG}"', after))
    if brace < 0:
        return None
    return turn[:at] + json.dumps(name)[1:-1] + turn[after:brace]
