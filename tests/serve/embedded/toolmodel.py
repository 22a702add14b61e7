"""A tiny model that answers every chat with one tool call, for the tool-calling tests.

`build_tool_model(folder)` takes the conftest's random tiny Qwen2 (char-level tokenizer, a
ChatML template without tool support, so the server renders tools through its Qwen-format
fallback) and overfits it in a few seconds to answer `REPLY` followed by `<|im_end|>` whatever
the user asked — the only way to see real `<tool_call>` output come back through the server
without downloading a real model. To make that learnable in seconds, the reply's pieces are
added to the vocabulary as whole tokens (`PIECES`): the model learns a five-token answer, and
the server still decodes, streams and parses it as text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuneloop.envs.render import prepare_messages

from ..conftest import build_tiny_model

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    }
]
PIECES = ["Let me add.", "<tool_call>", '\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n']
PIECES.append("</tool_call>")
REPLY = "".join(PIECES)
QUESTIONS = ["What is 2 + 3?", "Add 2 and 3.", "2 + 3 = ?", "Please sum 2 and 3"]


def build_tool_model(folder: Path, steps: int = 40) -> Path:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    build_tiny_model(folder, seed=1)
    tok = AutoTokenizer.from_pretrained(folder)
    tok.add_tokens(PIECES)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    model.resize_token_embeddings(len(tok), mean_resizing=False)
    examples = []
    for question in QUESTIONS:
        messages, _ = prepare_messages([{"role": "user", "content": question}], TOOLS, False)
        prompt = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = tok(prompt, add_special_tokens=False)["input_ids"]
        target = tok(REPLY + "<|im_end|>", add_special_tokens=False)["input_ids"]
        assert len(target) == len(PIECES) + 1, target
        examples.append((torch.tensor([ids + target]), len(ids)))
    return fit_and_save(model, tok, examples, steps, folder)


def fit_and_save(model: Any, tok: Any, examples: list[Any], steps: int, folder: Path) -> Path:
    """Train on (ids, first target position) examples in turn, loss on the targets only."""
    import torch

    torch.manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for step in range(steps):
        ids, start = examples[step % len(examples)]
        labels = ids.clone()
        labels[:, :start] = -100
        loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
