from __future__ import annotations

import json

import pytest

from tuneloop.serve.embedded.protocol import (
    ApiError,
    Limits,
    decode_body,
    include_usage,
    parse_chat,
    parse_completion,
)

LIMITS = Limits(max_tokens_cap=64, max_body_bytes=2048, max_rows=16)
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def _tool(parameters: dict | None = None) -> dict:
    function = {"name": "f"} | ({"parameters": parameters} if parameters is not None else {})
    return {"type": "function", "function": function}


def raw(obj: object) -> bytes:
    return json.dumps(obj).encode()


def test_chat_keeps_its_settings_and_leaves_the_length_to_the_server() -> None:
    req = parse_chat({**CHAT, "n": 3, "seed": 7, "stop": "x"}, LIMITS)
    assert (req.n, req.seed, req.max_tokens, req.stop_list()) == (3, 7, None, ("x",))
    assert parse_chat({**CHAT, "max_tokens": 65}, LIMITS).max_tokens == 65  # clamped later


@pytest.mark.parametrize(
    ("prompt", "prompts"),
    [
        ("a", ["a"]),
        (["a", "b"], ["a", "b"]),
        ([5, 6], [[5, 6]]),
        ([[5], [6, 7]], [[5], [6, 7]]),
    ],
)
def test_a_completion_prompt_is_text_or_token_ids(prompt: object, prompts: list) -> None:
    assert parse_completion({"model": "m", "prompt": prompt}, LIMITS).prompts() == prompts


def test_max_completion_tokens_wins_over_max_tokens() -> None:
    req = parse_chat({**CHAT, "max_tokens": 10, "max_completion_tokens": 5}, LIMITS)
    assert req.max_tokens == 5


def test_text_content_parts_are_joined() -> None:
    parts = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    req = parse_chat({**CHAT, "messages": [{"role": "user", "content": parts}]}, LIMITS)
    assert req.messages[0].content == "ab"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({**CHAT, "max_tokens": 0}, "max_tokens"),
        ({**CHAT, "temperature": -1}, "temperature"),
        ({**CHAT, "top_p": 0}, "top_p"),
        ({**CHAT, "n": 0}, "n"),
        ({**CHAT, "messages": []}, "messages"),
        ({**CHAT, "messages": [{"role": "robot", "content": "x"}]}, "messages.0.role"),
        ({**CHAT, "stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"messages": CHAT["messages"]}, "model"),
        ({**CHAT, "tools": [_tool({"type": "objekt"})]}, "tools.0.function.parameters"),
        ({**CHAT, "tools": [_tool({"required": "a"})]}, "tools.0.function.parameters"),
        (
            {**CHAT, "tools": [{"type": "function", "function": {"name": "a b"}}]},
            "tools.0.function.name",
        ),
        ({**CHAT, "tool_choice": "auto"}, "tool_choice"),
        ({**CHAT, "tools": [_tool()], "tool_choice": "sometimes"}, "tool_choice"),
        (
            {
                **CHAT,
                "tools": [_tool()],
                "tool_choice": {"type": "function", "function": {"name": "g"}},
            },
            "tool_choice",
        ),
        ({**CHAT, "messages": [{"role": "tool", "content": None}]}, "messages.0"),
        ({**CHAT, "messages": [{"role": "user", "content": "x", "tool_calls": []}]}, "messages.0"),
    ],
)
def test_invalid_chat_parameters_name_the_param(body: dict, param: str) -> None:
    with pytest.raises(ApiError) as info:
        parse_chat(body, LIMITS)
    assert info.value.status == 400
    assert info.value.param == param
    assert set(info.value.body()["error"]) == {"message", "type", "param", "code"}


def test_text_completion_rows_are_capped() -> None:
    with pytest.raises(ApiError, match="rows"):
        parse_completion({"model": "m", "prompt": ["a"] * 4, "n": 5}, LIMITS)
    assert parse_completion({"model": "m", "prompt": "a"}, LIMITS).max_tokens == 16


@pytest.mark.parametrize(
    ("data", "status"),
    [
        (b"{not json", 400),
        (b"[1, 2]", 400),
        (b"\xff\xfe", 400),
        (raw({**CHAT, "logit_bias": {"1": 5}}), 400),
        (raw({**CHAT, "pad": "x" * 4096}), 413),
    ],
)
def test_bad_bodies_are_refused(data: bytes, status: int) -> None:
    with pytest.raises(ApiError) as info:
        decode_body(data, LIMITS)
    assert info.value.status == status


def test_unknown_fields_are_ignored() -> None:
    assert parse_chat(decode_body(raw({**CHAT, "user": "x"}), LIMITS), LIMITS).n == 1


def test_tool_conversations_and_streaming_options_are_accepted() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "2"},
    ]
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    req = parse_chat(
        {
            **CHAT,
            "messages": messages,
            "tools": [_tool(schema)],
            "tool_choice": {"type": "function", "function": {"name": "f"}},
            "stream": True,
            "stream_options": {"include_usage": True},
        },
        LIMITS,
    )
    assert req.stream and include_usage(req)
    assert req.tools_in_use() == [_tool(schema)]
    assert req.messages[1].template_dict() == {"role": "assistant", "tool_calls": [call]}
    assert (
        parse_chat({**CHAT, "tools": [_tool()], "tool_choice": "none"}, LIMITS).tools_in_use()
        is None
    )
