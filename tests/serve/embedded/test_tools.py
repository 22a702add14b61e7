"""Tool rendering (fallback = Qwen 2.5's own text) and tool-call parsing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tuneloop.envs.render import prepare_messages, template_handles_tools
from tuneloop.serve.embedded.tools import parse_tool_calls, visible_prefix

from ..conftest import CHAT_TEMPLATE

# Qwen 2.5's chat template, with its default system line ("You are Qwen, …") left out.
QWEN_TOOLS_TEMPLATE = (
    "{%- if tools %}{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] + '\\n\\n' }}{%- endif %}"
    '{{- "# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n'
    'You are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}'
    '{%- for tool in tools %}{{- "\\n" }}{{- tool | tojson }}{%- endfor %}'
    '{{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and '
    "arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n"
    '{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call>'
    '<|im_end|>\\n" }}'
    "{%- elif messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}"
    "{%- if (message.role == 'user') or (message.role == 'system' and not loop.first) or "
    "(message.role == 'assistant' and not message.tool_calls) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- elif message.role == 'assistant' %}{{- '<|im_start|>' + message.role }}"
    "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}"
    "{%- for tool_call in message.tool_calls %}"
    "{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}"
    '{{- \'\\n<tool_call>\\n{"name": "\' }}{{- tool_call.name }}{{- \'", "arguments": \' }}'
    "{{- tool_call.arguments | tojson }}{{- '}\\n</tool_call>' }}{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != 'tool') %}"
    "{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' }}{{- message.content }}{{- '\\n</tool_response>' }}"
    "{%- if loop.last or (messages[loop.index0 + 1].role != 'tool') %}{{- '<|im_end|>\\n' }}"
    "{%- endif %}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}},
        },
    },
    {"type": "function", "function": {"name": "now"}},
]
CALL = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
CONVERSATIONS = [
    [{"role": "user", "content": "1 + 2?"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "1 + 2?"}],
    [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "1 + 2? And the time?"},
        {"role": "assistant", "content": "Calling.", "tool_calls": [CALL, CALL]},
        {"role": "tool", "tool_call_id": "c1", "content": "3"},
        {"role": "tool", "tool_call_id": "c1", "content": "noon"},
        {"role": "assistant", "content": "3, at noon."},
        {"role": "user", "content": "Again?"},
        {"role": "assistant", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "c1", "content": "3"},
    ],
]


def _tokenizer(model: Path, template: str) -> Any:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model)
    tok.chat_template = template
    return tok


@pytest.mark.parametrize("messages", CONVERSATIONS)
def test_the_fallback_renders_what_qwens_own_template_renders(
    tiny_model: Path, messages: list[dict[str, Any]]
) -> None:
    assert template_handles_tools(QWEN_TOOLS_TEMPLATE) and not template_handles_tools(CHAT_TEMPLATE)
    qwen, plain = _tokenizer(tiny_model, QWEN_TOOLS_TEMPLATE), _tokenizer(tiny_model, CHAT_TEMPLATE)

    def render(tok: Any, native: bool) -> str:
        msgs, tools = prepare_messages(messages, TOOLS, native)
        return str(
            tok.apply_chat_template(msgs, tools=tools, tokenize=False, add_generation_prompt=True)
        )

    native = render(qwen, True)
    assert "# Tools" in native
    if any("tool_calls" in m for m in messages):
        assert '\n<tool_call>\n{"name": "add", "arguments": {"a": 1}}\n</tool_call>' in native
    assert render(plain, False) == native


def test_without_tools_the_fallback_only_rewrites_tool_turns() -> None:
    plain = [{"role": "user", "content": "hi"}]
    assert prepare_messages(plain, None, False) == (plain, None)
    assert prepare_messages(plain, TOOLS, True) == (plain, TOOLS)


def test_a_clean_set_of_calls_is_parsed_with_content_before_it() -> None:
    text = 'Sure.\n<tool_call>\n{"name": "add", "arguments": {"a": 1}}\n</tool_call>\n'
    text += '<tool_call>{"name": "now", "parameters": {}}'  # last block may lack its close
    content, calls = parse_tool_calls(text) or (None, [])
    assert content == "Sure.\n"
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("add", {"a": 1}), ("now", {})]
    entry = calls[0].openai()
    assert entry["type"] == "function" and entry["id"].startswith("call_")
    assert entry["function"] == {"name": "add", "arguments": '{"a": 1}'}


@pytest.mark.parametrize(
    "text",
    [
        "just text",
        "<tool_call>\n{not json}\n</tool_call>",
        '<tool_call>\n{"arguments": {}}\n</tool_call>',
        '<tool_call>\n{"name": "add", "arguments": [1]}\n</tool_call>',
        '<tool_call>\n{"name": "add", "arguments": {}}\n</tool_call> and then prose',
        '<tool_call>\n{"name": "a"}\n</tool_call> prose <tool_call>{"name": "b"}</tool_call>',
    ],
)
def test_anything_but_clean_calls_is_left_as_text(text: str) -> None:
    assert parse_tool_calls(text) is None


NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True)
JSONS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.tuples(NAMES, st.dictionaries(st.text(max_size=6), JSONS, max_size=3)), min_size=1),
    st.text(max_size=20).filter(lambda t: "<tool_call>" not in t),
)
def test_calls_written_in_qwens_format_parse_back(
    calls: list[tuple[str, dict[str, Any]]], content: str
) -> None:
    blocks = [
        f"<tool_call>\n{json.dumps({'name': n, 'arguments': a}, ensure_ascii=False)}\n</tool_call>"
        for n, a in calls
    ]
    parsed = parse_tool_calls(content + "\n".join(blocks))
    assert parsed is not None
    assert parsed[0] == (content if content.strip() else None)
    assert [(c.name, json.loads(c.arguments)) for c in parsed[1]] == calls


@pytest.mark.parametrize(
    ("text", "shown"),
    [("Hello", "Hello"), ("Hello <tool", "Hello "), ("Hi<tool_call>\n{", "Hi"), ("a<", "a")],
)
def test_a_streamed_prefix_holds_back_a_possible_call(text: str, shown: str) -> None:
    assert visible_prefix(text) == shown


def _render(tok: Any) -> Any:
    def render(messages: list[dict[str, Any]], tools: Any, gen: bool) -> str:
        return str(
            tok.apply_chat_template(
                messages, tools=tools, tokenize=False, add_generation_prompt=gen
            )
        )

    return render


ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
    },
}
"""A tool taking two integers and nothing else (test_constrain.py's forced calls use it too)."""


def test_a_forced_call_follows_each_templates_own_call_format(tiny_model: Path) -> None:
    from tuneloop.serve.embedded.tools import forced_call

    qwen, plain = _tokenizer(tiny_model, QWEN_TOOLS_TEMPLATE), _tokenizer(tiny_model, CHAT_TEMPLATE)
    for tok, native in ((qwen, True), (plain, False)):
        any_call = forced_call(_render(tok), native, None, [ADD])
        assert any_call is not None and any_call.prefill == '<tool_call>\n{"name": "'
        assert 'call_0: "add\\", \\"arguments\\": " %json {' in any_call.grammar
        assert any_call.grammar.rstrip().endswith('"}\\n</tool_call>"')
        named = forced_call(_render(tok), native, "add", [ADD])
        assert named is not None
        assert named.prefill == '<tool_call>\n{"name": "add", "arguments": '
        assert named.grammar.startswith('start: %json {"type": "object"')
    arith = Path(__file__).resolve().parents[3] / "examples" / "arith" / "model"
    if (arith / "chat_template.jinja").is_file():  # the demo model's compact template
        compact = _tokenizer(tiny_model, (arith / "chat_template.jinja").read_text())
        f = {"type": "function", "function": {"name": "f"}}
        any_call = forced_call(_render(compact), True, None, [f])
        assert any_call is not None and any_call.prefill == '<tool_call>\n{"name":"'
        named = forced_call(_render(compact), True, "f", [f])
        assert named is not None and named.prefill == '<tool_call>\n{"name":"f","arguments":'
    # A template that writes calls in another format has nothing to prefill.
    other = (
        "{%- for m in messages %}{{- m['role'] + ': ' }}{%- if m.tool_calls %}"
        "{{- '[CALLS] ' + (m.tool_calls | tojson) }}{%- else %}{{- m['content'] }}{%- endif %}"
        "{{- '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- 'assistant: ' }}{%- endif %}"
        "{#- tools -#}"
    )
    assert forced_call(_render(_tokenizer(tiny_model, other)), True, None, [ADD]) is None
