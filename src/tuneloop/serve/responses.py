"""The OpenAI Responses API (`POST /v1/responses`) as the chat completion it amounts to.

    chat = chat_request(body)               # a Responses request → a chat completion request
    response = as_response(chat_answer, body, response_id)   # a chat.completion → a Response
    stream = ResponseStream(body, response_id); stream.events(chunk) ...  # chat chunks → events
    logged = as_chat_completion(response)   # a Response → a chat.completion (the traffic log)

Why a translation and not a second engine path: a Responses request without stored state
(`previous_response_id`, `store` — nothing is stored here) is a chat request in other words:
`instructions` is the system turn, `input` the conversation (text, `message` items,
`function_call` and `function_call_output` items), `tools` and `tool_choice` the same functions
spelled flat, `max_output_tokens` is `max_tokens`, `text.format` is `response_format`. The
embedded server (`embedded/routes.py`) validates the translated body exactly as a chat request,
so tools, forced calls, structured output and logprobs behave identically on both routes; the
traffic log (`traffic/middleware.py`) records a Responses exchange as the chat exchange it
amounts to, the shape the `openai_chat` ingester reads. This is the subset the OpenAI Agents
SDK, Inspect's `openai/` provider, LangChain's `use_responses_api` and litellm's `responses()`
send; anything else — an item or content type without a chat equivalent (`reasoning`,
`input_image`, `item_reference`), a hosted tool (`web_search`, `file_search`…), stored state —
is a 400 naming `param` (`input.3.type`, `tools.0.type`, `previous_response_id`). Pure: no
FastAPI, no torch.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from tuneloop.serve.api_error import ApiError

TEXT_PARTS = frozenset({"input_text", "output_text", "text"})
"""Content part types that are text (anything else has no chat equivalent here)."""
REFUSED = ("previous_response_id", "conversation", "prompt", "background")
"""Fields that need stored state or server-side features this server does not have."""


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def chat_request(body: dict[str, Any]) -> dict[str, Any]:
    """The chat completion body a Responses request amounts to; ApiError (400, naming the
    Responses `param`) for what has no chat equivalent."""
    for key in REFUSED:
        if body.get(key) not in (None, False, ""):
            raise ApiError(
                f"{key!r} is not supported: this server stores no responses or prompts",
                param=key,
            )
    reasoning = body.get("reasoning")
    if isinstance(reasoning, dict) and any(v is not None for v in reasoning.values()):
        raise ApiError("'reasoning' is not supported by this model's server", param="reasoning")
    messages: list[dict[str, Any]] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": _text(body["instructions"], "instructions")})
    messages += _messages(body.get("input"))
    chat: dict[str, Any] = {"model": body.get("model"), "messages": messages}
    for key in ("temperature", "top_p", "seed", "stream"):
        if body.get(key) is not None:
            chat[key] = body[key]
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    if body.get("tools"):
        chat["tools"] = [_tool(t, i) for i, t in enumerate(_list(body["tools"], "tools"))]
    if body.get("tool_choice") is not None:
        chat["tool_choice"] = _tool_choice(body["tool_choice"])
    text_format = (
        (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
    )
    if text_format is not None:
        chat["response_format"] = _response_format(text_format)
    if body.get("top_logprobs") is not None or _wants_logprobs(body):
        chat["logprobs"] = True
        chat["top_logprobs"] = body.get("top_logprobs") or 0
    if body.get("stream"):
        chat["stream_options"] = {"include_usage": True}
    return chat


def _format(body: dict[str, Any]) -> Any:
    """`text.format`, if given."""
    text = body.get("text")
    return text.get("format") if isinstance(text, dict) else None


def _wants_logprobs(body: dict[str, Any]) -> bool:
    include = body.get("include")
    return isinstance(include, list) and "message.output_text.logprobs" in include


def _list(value: Any, param: str) -> list[Any]:
    if not isinstance(value, list):
        raise ApiError(f"{param}: expected a list", param=param, code="invalid_value")
    return value


def _text(content: Any, param: str) -> str:
    """Text content, or a list of text parts joined; ApiError for any other part."""
    if isinstance(content, str):
        return content
    parts = _list(content, param)
    texts = []
    for k, part in enumerate(parts):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in TEXT_PARTS or not isinstance(part.get("text"), str):
            raise ApiError(
                f"{param}.{k}.type: content of type {kind!r} is not supported (text only)",
                param=f"{param}.{k}.type",
            )
        texts.append(part["text"])
    return "".join(texts)


def _messages(given: Any) -> list[dict[str, Any]]:
    """`input` as chat messages: consecutive `function_call` items (and the assistant text
    before them) become one assistant turn with `tool_calls`."""
    if given is None:
        raise ApiError("input: required", param="input", code="invalid_value")
    if isinstance(given, str):
        return [{"role": "user", "content": given}]
    out: list[dict[str, Any]] = []
    for i, item in enumerate(_list(given, "input")):
        param = f"input.{i}"
        if not isinstance(item, dict):
            raise ApiError(f"{param}: expected an object", param=param, code="invalid_value")
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "system", "developer", "assistant"):
                raise ApiError(f"{param}.role: {role!r} is not a role", param=f"{param}.role")
            out.append({"role": role, "content": _text(item.get("content"), f"{param}.content")})
        elif kind == "function_call":
            call = {
                "id": item.get("call_id") or item.get("id"),
                "type": "function",
                "function": {"name": item.get("name"), "arguments": item.get("arguments", "{}")},
            }
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant" and "tool_calls" in last:
                last["tool_calls"].append(call)
            elif last is not None and last["role"] == "assistant":
                last["tool_calls"] = [call]
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output", "")
            text = output if isinstance(output, str) else _text(output, f"{param}.output")
            out.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": text})
        else:
            raise ApiError(
                f"{param}.type: input items of type {kind!r} are not supported (message, "
                "function_call and function_call_output are)",
                param=f"{param}.type",
            )
    return out


def _tool(tool: Any, index: int) -> dict[str, Any]:
    kind = tool.get("type") if isinstance(tool, dict) else None
    if kind != "function":
        raise ApiError(
            f"tools.{index}.type: {kind!r} tools are not supported (function tools are)",
            param=f"tools.{index}.type",
        )
    function = {k: tool[k] for k in ("name", "description", "parameters", "strict") if k in tool}
    return {"type": "function", "function": function}


def _tool_choice(choice: Any) -> Any:
    if isinstance(choice, str):
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function":
        return {"type": "function", "function": {"name": choice.get("name")}}
    raise ApiError("tool_choice: expected auto, none, required or a function", param="tool_choice")


def _response_format(text_format: Any) -> dict[str, Any]:
    kind = text_format.get("type") if isinstance(text_format, dict) else None
    if kind == "json_schema":
        schema = {
            k: text_format[k]
            for k in ("name", "schema", "strict", "description")
            if k in text_format
        }
        return {"type": "json_schema", "json_schema": schema}
    if kind in ("text", "json_object"):
        return {"type": kind}
    raise ApiError(f"text.format.type: {kind!r} is not a format", param="text.format.type")


def _usage(chat_usage: dict[str, Any] | None) -> dict[str, Any] | None:
    if not chat_usage:
        return None
    return {
        "input_tokens": chat_usage["prompt_tokens"],
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": chat_usage["completion_tokens"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": chat_usage["total_tokens"],
    }


def _envelope(body: dict[str, Any], response_id: str, model: str) -> dict[str, Any]:
    """The fields every Response object carries, echoing the request's settings."""
    text_format = (
        (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
    )
    return {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": "in_progress",
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": model,
        "output": [],
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": None,
        "reasoning": None,
        "store": False,
        "temperature": body.get("temperature", 1.0),
        "text": {"format": text_format or {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "top_p": body.get("top_p", 1.0),
        "truncation": body.get("truncation", "disabled"),
        "usage": None,
        "user": body.get("user"),
        "metadata": body.get("metadata") or {},
    }


def _message_item(text: str, logprobs: list[dict[str, Any]] | None) -> dict[str, Any]:
    part = {"type": "output_text", "text": text, "annotations": [], "logprobs": logprobs or []}
    return {
        "type": "message",
        "id": new_id("msg"),
        "status": "completed",
        "role": "assistant",
        "content": [part],
    }


def _call_item(call: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": new_id("fc"),
        "call_id": call.get("id") or new_id("call"),
        "name": call["function"]["name"],
        "arguments": call["function"]["arguments"],
        "status": "completed",
    }


def _finished(envelope: dict[str, Any], reason: str | None) -> dict[str, Any]:
    if reason == "length":
        envelope["status"] = "incomplete"
        envelope["incomplete_details"] = {"reason": "max_output_tokens"}
    else:
        envelope["status"] = "completed"
    return envelope


def as_response(chat: dict[str, Any], body: dict[str, Any], response_id: str) -> dict[str, Any]:
    """A non-streamed chat.completion as the Response object for `body`."""
    choice = chat["choices"][0]
    message = choice["message"]
    envelope = _envelope(body, response_id, chat["model"])
    logprobs = (choice.get("logprobs") or {}).get("content")
    if message.get("content"):
        envelope["output"].append(_message_item(message["content"], logprobs))
    envelope["output"] += [_call_item(call) for call in message.get("tool_calls") or []]
    envelope["usage"] = _usage(chat.get("usage"))
    return _finished(envelope, choice.get("finish_reason"))


class ResponseStream:
    """A streamed chat completion's chunks as the Responses API's events (`event: TYPE` and
    `data: {...}` lines, numbered by `sequence_number`): `response.created`, then for text an
    `output_item.added` / `content_part.added` / `output_text.delta`… / `…done` run, for each
    whole tool call an `output_item.added` / `function_call_arguments.delta` / `…done` run, and
    last `response.completed` (or `response.incomplete`) with the whole Response."""

    def __init__(self, body: dict[str, Any], response_id: str, model: str) -> None:
        self.response = _envelope(body, response_id, model)
        self.sequence = 0
        self.text: str | None = None
        self.item: dict[str, Any] | None = None
        self.reason: str | None = None
        self.logprobs: list[dict[str, Any]] = []
        self.failed = False
        """The generation failed: `response.failed` was the last event."""

    def event(self, kind: str, **fields: Any) -> bytes:
        payload = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        data = json.dumps(payload, ensure_ascii=False)
        return f"event: {kind}\ndata: {data}\n\n".encode()

    def start(self) -> list[bytes]:
        return [
            self.event("response.created", response=self.response),
            self.event("response.in_progress", response=self.response),
        ]

    def chunk(self, chunk: dict[str, Any]) -> list[bytes]:
        """The events one chat chunk makes."""
        if chunk.get("error"):
            self.failed = True
            self.response["status"] = "failed"
            self.response["error"] = {"code": "server_error", "message": str(chunk["error"])}
            return [self.event("response.failed", response=self.response)]
        if chunk.get("usage"):
            self.response["usage"] = _usage(chunk["usage"])
        out: list[bytes] = []
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if (choice.get("logprobs") or {}).get("content"):
                self.logprobs += choice["logprobs"]["content"]
            if delta.get("content"):
                out += self._text(delta["content"])
            for call in delta.get("tool_calls") or []:
                out += self._close_text() + self._call(call)
            if choice.get("finish_reason"):
                self.reason = choice["finish_reason"]
        return out

    def finish(self) -> list[bytes]:
        if self.failed:
            return []
        out = self._close_text()
        _finished(self.response, self.reason)
        kind = (
            "response.incomplete"
            if self.response["status"] == "incomplete"
            else "response.completed"
        )
        return [*out, self.event(kind, response=self.response)]

    def _index(self) -> int:
        return len(self.response["output"])

    def _text(self, delta: str) -> list[bytes]:
        out = []
        if self.item is None:
            self.item = {**_message_item("", None), "status": "in_progress", "content": []}
            self.text = ""
            out.append(
                self.event("response.output_item.added", output_index=self._index(), item=self.item)
            )
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            out.append(self._part_event("response.content_part.added", part))
        self.text = (self.text or "") + delta
        out.append(
            self.event(
                "response.output_text.delta",
                item_id=self.item["id"],
                output_index=self._index(),
                content_index=0,
                delta=delta,
                logprobs=[],
            )
        )
        return out

    def _part_event(self, kind: str, part: dict[str, Any]) -> bytes:
        assert self.item is not None
        return self.event(
            kind, item_id=self.item["id"], output_index=self._index(), content_index=0, part=part
        )

    def _close_text(self) -> list[bytes]:
        if self.item is None:
            return []
        text = self.text or ""
        done = _message_item(text, self.logprobs)
        done["id"] = self.item["id"]
        part = done["content"][0]
        index = self._index()
        out = [
            self.event(
                "response.output_text.done",
                item_id=done["id"],
                output_index=index,
                content_index=0,
                text=text,
                logprobs=self.logprobs,
            ),
            self._part_event("response.content_part.done", part),
            self.event("response.output_item.done", output_index=index, item=done),
        ]
        self.response["output"].append(done)
        self.item, self.text = None, None
        return out

    def _call(self, call: dict[str, Any]) -> list[bytes]:
        item = _call_item(call)
        index = self._index()
        opened = {**item, "arguments": "", "status": "in_progress"}
        out = [
            self.event("response.output_item.added", output_index=index, item=opened),
            self.event(
                "response.function_call_arguments.delta",
                item_id=item["id"],
                output_index=index,
                delta=item["arguments"],
            ),
            self.event(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                arguments=item["arguments"],
            ),
            self.event("response.output_item.done", output_index=index, item=item),
        ]
        self.response["output"].append(item)
        return out


def completed(events: list[Any]) -> dict[str, Any] | None:
    """The whole Response a stream's events end with (`response.completed` or `incomplete`)."""
    for event in reversed(events):
        if isinstance(event, dict) and event.get("type") in (
            "response.completed",
            "response.incomplete",
        ):
            response = event.get("response")
            return response if isinstance(response, dict) else None
    return None


def as_chat_completion(response: dict[str, Any]) -> dict[str, Any]:
    """A Response as the chat.completion it amounts to (what the traffic log records)."""
    text, calls = [], []
    for item in response.get("output") or []:
        if item.get("type") == "message":
            text += [
                p.get("text", "")
                for p in item.get("content") or []
                if p.get("type") == "output_text"
            ]
        elif item.get("type") == "function_call":
            function = {"name": item.get("name"), "arguments": item.get("arguments", "{}")}
            calls.append({"id": item.get("call_id"), "type": "function", "function": function})
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
    if calls:
        message["tool_calls"] = calls
    incomplete = response.get("status") == "incomplete"
    reason = "tool_calls" if calls else "length" if incomplete else "stop"
    usage = response.get("usage") or {}
    return {
        "id": response.get("id"),
        "object": "chat.completion",
        "created": response.get("created_at"),
        "model": response.get("model"),
        "choices": [{"index": 0, "message": message, "finish_reason": reason}],
        "usage": {
            "prompt_tokens": usage.get("input_tokens", 0),
            "completion_tokens": usage.get("output_tokens", 0),
            "total_tokens": usage.get("total_tokens", 0),
        },
    }
