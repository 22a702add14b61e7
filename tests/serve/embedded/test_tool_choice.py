"""`tool_choice` through the official openai client, on the conftest's random tiny Qwen2
overfitted in seconds to answer plain text ("Five.") when free and to finish a call after its
prefilled start: `auto` gets text back, a function not offered is a 400, and — its tokenizer
being character-level, which the grammar engine misreads — a forced call is refused rather
than left unguaranteed. Forced calls that are enforced: test_constrain.py, on the demo model.
"""

from __future__ import annotations

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
def test_a_vocabulary_the_grammar_engine_misreads_refuses_to_force(
    server: Endpoint, tool_choice: object
) -> None:
    """This model's character-level tokenizer has space and newline tokens that llguidance
    reads as unknown: a forced call is refused (400) rather than decoded under a grammar that
    lets through what its parser then rejects. Forced calls on a byte-level vocabulary, the
    demo model's, are test_constrain.py's."""
    with pytest.raises(openai.BadRequestError) as info:
        _ask(server, tool_choice=tool_choice)
    error = info.value.response.json()["error"]
    assert error["param"] == "tool_choice" and "cannot be constrained" in error["message"]


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
    assert "the rest is decoded under a grammar" in flat
