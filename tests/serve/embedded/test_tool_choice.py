"""`tool_choice: "required"` and a named function, enforced, through the official openai client.

The model is the conftest's random tiny Qwen2, overfitted in seconds to answer plain text
("Five.") when free, and to finish a call when the server prefills the call's start (the
pieces it writes are whole tokens, as in `toolmodel.py`): so `auto` gets text back, and only
the enforcement can turn the same question into `tool_calls`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tuneloop.config import ServeConfig
from tuneloop.endpoint import Endpoint
from tuneloop.envs.render import prepare_messages
from tuneloop.serving import serving

from ..conftest import build_tiny_model
from .toolmodel import TOOLS, fit_and_save

QUESTION = [{"role": "user", "content": "What is 2 + 3?"}]
NAME_START = '<tool_call>\n{"name": "'  # the fallback's (Qwen 2.5's) call format
ARGS_START = 'add", "arguments": '
ARGS = '{"a": 2, "b": 3}}'
CLOSE = "\n</tool_call>"
PIECES = ["Five.", NAME_START, ARGS_START, ARGS, CLOSE]
TARGETS = [
    ("", "Five."),
    (NAME_START, ARGS_START + ARGS + CLOSE),
    (NAME_START + ARGS_START, ARGS + CLOSE),
]
"""(prefill, what the model learns to write after it)."""


def build_choice_model(folder: Path, steps: int = 60) -> Path:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    build_tiny_model(folder, seed=2)
    tok = AutoTokenizer.from_pretrained(folder)
    tok.add_tokens(PIECES)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    model.resize_token_embeddings(len(tok), mean_resizing=False)
    messages, _ = prepare_messages(QUESTION, TOOLS, False)
    prompt = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    examples = []
    for prefill, target in TARGETS:
        ids = tok(prompt + prefill, add_special_tokens=False)["input_ids"]
        out = tok(target + "<|im_end|>", add_special_tokens=False)["input_ids"]
        examples.append((torch.tensor([ids + out]), len(ids)))
    return fit_and_save(model, tok, examples, steps, folder)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    model = build_choice_model(tmp_path_factory.mktemp("choice-model"))
    with serving(model, ServeConfig(max_tokens_cap=64, startup_timeout_s=120)) as ep:
        yield ep


def _ask(ep: Endpoint, **kwargs: object) -> object:
    client = openai.OpenAI(base_url=ep.base_url, api_key="unused")
    return client.chat.completions.create(
        model=ep.model,
        messages=QUESTION,  # type: ignore[arg-type]
        tools=TOOLS,  # type: ignore[arg-type]
        temperature=0,
        max_tokens=16,
        **kwargs,  # type: ignore[arg-type]
    )


def test_auto_leaves_the_model_free_to_answer_in_text(server: Endpoint) -> None:
    choice = _ask(server, tool_choice="auto").choices[0]  # type: ignore[attr-defined]
    assert choice.message.content == "Five." and choice.message.tool_calls is None
    assert choice.finish_reason == "stop"


@pytest.mark.parametrize(
    "tool_choice", ["required", {"type": "function", "function": {"name": "add"}}]
)
def test_required_and_a_named_function_get_a_call(server: Endpoint, tool_choice: object) -> None:
    choice = _ask(server, tool_choice=tool_choice).choices[0]  # type: ignore[attr-defined]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls
    assert (call.function.name, json.loads(call.function.arguments)) == ("add", {"a": 2, "b": 3})


def test_a_streamed_named_call_arrives_whole(server: Endpoint) -> None:
    named = {"type": "function", "function": {"name": "add"}}
    chunks = list(_ask(server, tool_choice=named, stream=True))  # type: ignore[call-overload]
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    calls = [t for c in chunks if c.choices for t in c.choices[0].delta.tool_calls or []]
    assert content == ""
    assert [(t.function.name, json.loads(t.function.arguments)) for t in calls] == [
        ("add", {"a": 2, "b": 3})
    ]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_a_named_function_that_is_not_offered_is_a_400(server: Endpoint) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        _ask(server, tool_choice={"type": "function", "function": {"name": "nope"}})
    assert info.value.response.json()["error"]["param"] == "tool_choice"


def test_the_serving_doc_says_what_the_server_does() -> None:
    """Issue 25 defect 15: docs/serving.md said `required` and a named function were "accepted
    but not enforced" while the server prefills the start of the call (tested above)."""
    doc = (Path(__file__).resolve().parents[3] / "docs" / "serving.md").read_text()
    flat = " ".join(doc.split())
    assert "accepted but not enforced" not in flat
    assert "named function is enforced by prefill" in flat
    assert NAME_START.replace("\n", "\\n") in flat
