"""Tools in a chat template: the messages and tool list to render, for any template.

Pure (no torch). Shared by the embedded server (`serve/embedded/tools.py`, which also parses
calls back out) and by training (`train/methods/sft.py` renders agent trajectories the way the
server renders requests, so a model is trained on the same text it is served with).

`prepare_messages(messages, tools, native)`: when the template handles tools itself (`native`,
`template_handles_tools`: its source mentions `tools`), messages and tools go through unchanged,
with each call's `arguments` JSON string parsed to an object as Hugging Face templates expect.
Otherwise — deliberately, so that any Qwen-style checkpoint with a tool-less ChatML template
can be given tools — they are rewritten into plain turns in
Qwen 2.5's own format (Qwen's and Hermes' convention, vLLM's `hermes` tool parser): the tool list
as a `# Tools` block in the system message, assistant calls as
`<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>` text, tool results as
`<tool_response>` blocks in one user turn. Rendered through a plain ChatML template this is the
same text Qwen 2.5's template produces (minus its default system line).
"""

from __future__ import annotations

import json
import re
from typing import Any

CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"

_TOOLS_HEADER = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
_TOOLS_FOOTER = (
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)


def template_handles_tools(template: str) -> bool:
    """Whether a chat template renders `tools` itself (it refers to the variable)."""
    return re.search(r"\btools\b", template) is not None


def tools_block(tools: list[dict[str, Any]]) -> str:
    """Qwen 2.5's system-prompt listing of `tools` (OpenAI tool dicts)."""
    lines = "".join("\n" + json.dumps(tool, ensure_ascii=False) for tool in tools)
    return _TOOLS_HEADER + lines + _TOOLS_FOOTER


def arguments_object(arguments: Any) -> Any:
    """A call's `arguments` as the object templates expect (OpenAI sends a JSON string)."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except json.JSONDecodeError:
            return arguments
    return arguments


def _native(message: dict[str, Any]) -> dict[str, Any]:
    calls = message.get("tool_calls")
    if not calls:
        return message
    fixed = []
    for call in calls:
        function = dict(call["function"])
        function["arguments"] = arguments_object(function.get("arguments"))
        fixed.append({**call, "function": function})
    return {**message, "content": message.get("content") or "", "tool_calls": fixed}


def _call_text(call: dict[str, Any]) -> str:
    function = call["function"]
    body = {"name": function["name"], "arguments": arguments_object(function.get("arguments"))}
    return f"{CALL_OPEN}\n{json.dumps(body, ensure_ascii=False)}\n{CALL_CLOSE}"


def _as_plain_turns(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Assistant calls and tool results rewritten as the text Qwen 2.5's template writes."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role, content = message["role"], message.get("content") or ""
        if role == "tool":
            block = f"<tool_response>\n{content}\n</tool_response>"
            if out and out[-1].get("_tool_results"):
                out[-1]["content"] += "\n" + block
            else:
                out.append({"role": "user", "content": block, "_tool_results": True})
        elif role == "assistant" and message.get("tool_calls"):
            parts = ([content] if content else []) + [_call_text(c) for c in message["tool_calls"]]
            out.append({"role": "assistant", "content": "\n".join(parts)})
        else:
            out.append({"role": role, "content": content})
    return [{k: v for k, v in m.items() if k != "_tool_results"} for m in out]


def prepare_messages(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, native: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """(messages, tools) to render: passed through for a template that handles tools, else
    rewritten into plain turns with the tool list in the system message (tools → None)."""
    if native:
        return [_native(m) for m in messages], tools
    plain = _as_plain_turns(messages)
    if tools:
        block = tools_block(tools)
        if plain and plain[0]["role"] == "system":
            plain[0] = {"role": "system", "content": f"{plain[0]['content']}\n\n{block}"}
        else:
            plain.insert(0, {"role": "system", "content": block})
    return plain, None
