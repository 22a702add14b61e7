"""The model call a span records, read from whichever attribute dialect carries it.

    kind = span_role(attrs)              # "llm", "tool" or "other"
    call = read_call(attrs)              # Call(dialect, inputs, output, model, extras) | None

Dialects, tried in this order (the first one present wins):
- `gen_ai` — the GenAI semantic conventions since 1.37: `gen_ai.input.messages`,
  `gen_ai.output.messages` and `gen_ai.system_instructions` as JSON strings (or structured
  values) of `{role, parts: [{type: text|tool_call|tool_call_response|reasoning, ...}]}`;
  messages in OpenAI chat shape (`content`, `tool_calls`) are read too (LiteLLM, older SDKs).
- `openllmetry` — the indexed attributes OpenLLMetry (traceloop) wrote before it moved to the
  conventions: `gen_ai.prompt.N.role/content/tool_calls.M.id|name|arguments/tool_call_id`,
  `gen_ai.completion.N.*`; `content` holding a JSON list of parts is read as parts.
- `openinference` — Arize OpenInference (Phoenix): `llm.input_messages.N.message.role/content`,
  `…message.contents.K.message_content.text`, `…message.tool_calls.M.tool_call.id|function.
  name|function.arguments`, `…message.tool_call_id`; `llm.output_messages.N.…`.
- `vercel` — the Vercel AI SDK: `ai.prompt.messages` (JSON, its own part types `tool-call`,
  `tool-result`, `reasoning`), `ai.response.text`, `ai.response.toolCalls` (`args` in SDK 4,
  `input` in SDK 5), `ai.response.reasoning`; the outer `ai.generateText` span's `ai.prompt`
  (`{system, prompt | messages}`).
- `mlflow` — MLflow tracing: `mlflow.chat.messages` (JSON, OpenAI chat shape, the answer last)
  on spans whose `mlflow.spanType` is `CHAT_MODEL` or `LLM`; the model from `mlflow.spanOutputs`.
Model: `gen_ai.response.model`, else `gen_ai.request.model`, `llm.model_name`,
`ai.response.model`, `ai.model.id`. The first output choice is the answer (`extras.choices`
counts them when there were more). Tool results that a format logs without the id of the call
(old OpenLLMetry) are paired with the calls of the assistant message before them by order.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from tuneloop.data.ingest.chat import BadMessage, content_text, to_messages
from tuneloop.data.ingest.otel.extras import call_extras
from tuneloop.data.ingest.otel.values import (
    as_answer,
    as_list,
    indexed,
    json_attr,
    message_of,
    pair_by_order,
    part_id,
    parts_text,
    role_of,
    text_of,
    tool_call,
)
from tuneloop.records.trace import Message, ToolCall

Role = Literal["llm", "tool", "other"]
CHAT_OPERATIONS = {"chat", "text_completion", "generate_content", "completion", "acompletion"}
CONTENT_KEYS = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.prompt.",
    "gen_ai.completion.",
    "llm.input_messages.",
    "llm.output_messages.",
    "ai.prompt",
    "mlflow.chat.messages",
)
MODEL_KEYS = (
    "gen_ai.response.model",
    "gen_ai.request.model",
    "llm.model_name",
    "ai.response.model",
    "ai.model.id",
)
"""Where a span names its model, first found wins (before a dialect's own place)."""


@dataclass
class Call:
    """One model call: what it was sent, what it answered, with which model."""

    dialect: str
    inputs: list[Message]
    output: Message | None
    model: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)


def span_role(attrs: dict[str, Any]) -> Role:
    """Whether a span is a model call, a tool execution, or something else."""
    kind = str(attrs.get("openinference.span.kind") or _mlflow_type(attrs)).upper()
    operation = str(attrs.get("gen_ai.operation.name", "")).lower()
    vercel = str(attrs.get("ai.operationId", ""))
    if kind == "TOOL" or operation == "execute_tool" or vercel == "ai.toolCall":
        return "tool"
    if kind in ("EMBEDDING", "RETRIEVER", "RERANKER") or operation == "embeddings":
        return "other"
    if (
        kind in ("LLM", "CHAT_MODEL")
        or operation in CHAT_OPERATIONS
        or str(attrs.get("llm.request.type", "")).lower() in ("chat", "completion")
        or vercel.endswith((".doGenerate", ".doStream"))
        or any(key.startswith(CONTENT_KEYS) for key in attrs)
    ):
        return "llm"
    return "other"


def read_call(attrs: dict[str, Any]) -> Call | None:
    """The call a model span records; None when it carries no message content (content
    capture off); BadMessage naming the attribute when its content cannot be read."""
    keys = list(attrs)
    if any(k in attrs for k in CONTENT_KEYS[:3]):
        call = _gen_ai(attrs)
    elif any(k.startswith(("gen_ai.prompt.", "gen_ai.completion.")) for k in keys):
        call = _openllmetry(attrs)
    elif any(k.startswith(("llm.input_messages.", "llm.output_messages.")) for k in keys):
        call = _openinference(attrs)
    elif any(k in attrs for k in ("ai.prompt.messages", "ai.prompt")):
        call = _vercel(attrs)
    elif "mlflow.chat.messages" in attrs:
        call = _mlflow(attrs)
    else:
        return None
    call.inputs = pair_by_order(call.inputs)
    models = [attrs.get(k) for k in MODEL_KEYS] + [call.model]
    call.model = next((m for m in models if isinstance(m, str) and m), None)
    call.extras.update(call_extras(attrs))
    return call


# ---- gen_ai (semantic conventions) ------------------------------------------------------------


def _gen_ai(attrs: dict[str, Any]) -> Call:
    inputs: list[Message] = []
    system = json_attr(attrs, "gen_ai.system_instructions")
    if system:
        text = system if isinstance(system, str) else parts_text(as_list(system, "instructions"))
        inputs.append(Message(role="system", content=text))
    for i, msg in enumerate(as_list(json_attr(attrs, "gen_ai.input.messages") or [], "input")):
        inputs += _semconv_message(msg, f"gen_ai.input.messages[{i}]")
    outputs = as_list(json_attr(attrs, "gen_ai.output.messages") or [], "output")
    output = _semconv_message(outputs[0], "gen_ai.output.messages[0]") if outputs else []
    call = Call("gen_ai", inputs, as_answer(output))
    if len(outputs) > 1:
        call.extras["choices"] = len(outputs)
    return call


def _semconv_message(msg: Any, where: str) -> list[Message]:
    if not isinstance(msg, dict):
        raise BadMessage(f"{where} is not an object")
    if "parts" not in msg:
        try:
            return to_messages([msg])
        except BadMessage as err:
            raise BadMessage(f"{where}: {str(err).removeprefix('messages[0]: ')}") from None
    role = role_of(msg.get("role"), where)
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    results: list[Message] = []
    for part in as_list(msg["parts"], f"{where}.parts"):
        kind = part.get("type") if isinstance(part, dict) else None
        if not isinstance(part, dict):
            text.append(str(part))
        elif kind == "text":
            text.append(text_of(part.get("content")))
        elif kind in ("reasoning", "thinking"):
            reasoning.append(text_of(part.get("content")))
        elif kind == "tool_call":
            calls.append(
                tool_call(part.get("id"), part.get("name"), part.get("arguments"), len(calls))
            )
        elif kind == "tool_call_response":
            answer = part.get("response", part.get("result"))
            results.append(
                Message(role="tool", content=text_of(answer), tool_call_id=part_id(part))
            )
        else:
            text.append(f"[{part.get('modality') or kind}]")
    return message_of(role, text, reasoning, calls, results)


# ---- OpenLLMetry (indexed gen_ai.prompt / gen_ai.completion) ----------------------------------


def _openllmetry(attrs: dict[str, Any]) -> Call:
    inputs = [_indexed_message(f, "user") for _, f in indexed(attrs, "gen_ai.prompt")]
    choices = indexed(attrs, "gen_ai.completion")
    output = [_indexed_message(choices[0][1], "assistant")] if choices else []
    call = Call("openllmetry", inputs, as_answer(output))
    if len(choices) > 1:
        call.extras["choices"] = len(choices)
    return call


def _indexed_message(fields: dict[str, Any], default: str) -> Message:
    role = role_of(fields.get("role") or default, "gen_ai.prompt")
    content = fields.get("content")
    if isinstance(content, str) and content.startswith("[{"):
        # OpenLLMetry writes a list of content parts as its JSON text
        with contextlib.suppress(json.JSONDecodeError, BadMessage):
            content = content_text(json.loads(content))
    calls = [
        tool_call(c.get("id"), c.get("name"), c.get("arguments"), i)
        for i, c in indexed(fields, "tool_calls")
    ]
    message = Message(role=role, content=text_of(content) if content is not None else None)
    if role == "assistant":
        message.tool_calls = calls or None
        message.reasoning = (
            fields.get("reasoning") if isinstance(fields.get("reasoning"), str) else None
        )
    if role == "tool" and fields.get("tool_call_id") is not None:
        message.tool_call_id = str(fields["tool_call_id"])
    return message


# ---- OpenInference ----------------------------------------------------------------------------


def _openinference(attrs: dict[str, Any]) -> Call:
    inputs = [_oi_message(f, "user") for _, f in indexed(attrs, "llm.input_messages")]
    choices = indexed(attrs, "llm.output_messages")
    output = [_oi_message(choices[0][1], "assistant")] if choices else []
    call = Call("openinference", inputs, as_answer(output))
    if len(choices) > 1:
        call.extras["choices"] = len(choices)
    return call


def _oi_message(fields: dict[str, Any], default: str) -> Message:
    f = {k.removeprefix("message."): v for k, v in fields.items()}
    parts = [p for _, p in indexed(f, "contents")]
    texts = [
        text_of(p.get("message_content.text")) if "message_content.text" in p else "[image]"
        for p in parts
    ]
    content = f.get("content")
    flat = {
        "role": f.get("role") or default,
        "content": "\n".join(texts) if content is None and texts else content,
        "tool_call_id": f.get("tool_call_id"),
        "reasoning": f.get("reasoning") or f.get("reasoning_content"),
    }
    message = _indexed_message(flat, default)
    calls = [
        tool_call(c.get("tool_call.id"), c.get("tool_call.function.name"),
              c.get("tool_call.function.arguments"), i)
        for i, c in indexed(f, "tool_calls")
    ]  # fmt: skip
    if message.role == "assistant" and calls:
        message.tool_calls = calls
    return message


# ---- Vercel AI SDK ----------------------------------------------------------------------------


def _vercel(attrs: dict[str, Any]) -> Call:
    inputs: list[Message] = []
    if "ai.prompt.messages" in attrs:
        raw = as_list(json_attr(attrs, "ai.prompt.messages"), "ai.prompt.messages")
    else:  # the outer ai.generateText span: {system, prompt} or {system, messages}
        prompt = json_attr(attrs, "ai.prompt")
        prompt = prompt if isinstance(prompt, dict) else {"prompt": prompt}
        if isinstance(prompt.get("system"), str):
            inputs.append(Message(role="system", content=prompt["system"]))
        raw = prompt.get("messages") or [{"role": "user", "content": prompt.get("prompt") or ""}]
    for i, msg in enumerate(as_list(raw, "ai.prompt.messages")):
        inputs += _vercel_message(msg, f"ai.prompt.messages[{i}]")
    return Call("vercel", inputs, _vercel_output(attrs))


def _vercel_message(msg: Any, where: str) -> list[Message]:
    if not isinstance(msg, dict):
        raise BadMessage(f"{where} is not an object")
    role = role_of(msg.get("role"), where)
    content = msg.get("content")
    if not isinstance(content, list):
        return [Message(role=role, content=text_of(content))]
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    results: list[Message] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if not isinstance(part, dict):
            text.append(str(part))
        elif kind == "text":
            text.append(text_of(part.get("text")))
        elif kind == "reasoning":
            reasoning.append(text_of(part.get("text")))
        elif kind == "tool-call":
            args = part.get("input", part.get("args"))
            calls.append(tool_call(part.get("toolCallId"), part.get("toolName"), args, len(calls)))
        elif kind == "tool-result":
            out = part.get("output", part.get("result"))
            if isinstance(out, dict) and "value" in out and out.get("type") in ("text", "json"):
                out = out["value"]  # SDK 5 wraps a result as {type, value}
            cid = part.get("toolCallId")
            results.append(
                Message(role="tool", content=text_of(out), tool_call_id=part_id({"id": cid}))
            )
        else:
            text.append(f"[{kind}]")
    return message_of(role, text, reasoning, calls, results)


def _vercel_output(attrs: dict[str, Any]) -> Message | None:
    keys = ("ai.response.text", "ai.response.toolCalls", "ai.response.object")
    if not any(k in attrs for k in keys):
        return None
    calls = [
        tool_call(c.get("toolCallId"), c.get("toolName"), c.get("input", c.get("args")), i)
        for i, c in enumerate(as_list(json_attr(attrs, "ai.response.toolCalls") or [], "toolCalls"))
        if isinstance(c, dict)
    ]
    text = attrs.get("ai.response.text") or attrs.get("ai.response.object")
    reasoning = attrs.get("ai.response.reasoning") or attrs.get("ai.response.reasoningText")
    return Message(
        role="assistant",
        content=text_of(text) if text else None,
        tool_calls=calls or None,
        reasoning=reasoning if isinstance(reasoning, str) and reasoning else None,
    )


# ---- MLflow tracing ---------------------------------------------------------------------------


def _mlflow_type(attrs: dict[str, Any]) -> str:
    """MLflow's `mlflow.spanType`, whose every attribute value is JSON (`"\\"CHAT_MODEL\\""`)."""
    value = attrs.get("mlflow.spanType")
    return value.strip('"') if isinstance(value, str) else ""


def _mlflow(attrs: dict[str, Any]) -> Call:
    """`mlflow.chat.messages`: the input messages and the answer last, in OpenAI chat shape."""
    raw = as_list(json_attr(attrs, "mlflow.chat.messages"), "mlflow.chat.messages")
    try:
        messages = to_messages(raw)
    except BadMessage as err:
        raise BadMessage(f"mlflow.chat.messages: {err}") from None
    last = messages[-1] if messages and messages[-1].role == "assistant" else None
    call = Call("mlflow", messages[:-1] if last else messages, last)
    with contextlib.suppress(BadMessage):  # the model is a nicety; its absence rejects nothing
        outputs = json_attr(attrs, "mlflow.spanOutputs")
        if isinstance(outputs, dict) and isinstance(outputs.get("model"), str):
            call.model = outputs["model"]
    return call
