"""The chat template's end-of-turn token, and making a generation config stop on it.

A merged checkpoint must stop where its chat template ends an assistant turn (`<|im_end|>`
for ChatML templates), or a server generates past the answer until `max_tokens`. We find the
token by rendering a one-exchange conversation with a sentinel reply and tokenizing what the
template writes right after the reply; the first special token there is the end of turn.
"""

from __future__ import annotations

from typing import Any

SENTINEL = "SENTINEL-REPLY-4711"


def end_of_turn_id(tokenizer: Any) -> int | None:
    """The token id that ends an assistant turn in the chat template (None if undetectable)."""
    if not getattr(tokenizer, "chat_template", None):
        return tokenizer.eos_token_id  # type: ignore[no-any-return]
    msgs = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": SENTINEL},
    ]
    text = str(tokenizer.apply_chat_template(msgs, tokenize=False))
    after = text[text.rindex(SENTINEL) + len(SENTINEL) :]
    ids = tokenizer(after, add_special_tokens=False)["input_ids"]
    special = set(tokenizer.all_special_ids) | {
        i for i, t in tokenizer.added_tokens_decoder.items() if t.special
    }
    for tid in ids:
        if tid in special:
            return int(tid)
    return tokenizer.eos_token_id  # type: ignore[no-any-return]


def eos_ids(generation_config: Any) -> list[int]:
    eos = getattr(generation_config, "eos_token_id", None)
    if eos is None:
        return []
    return [int(eos)] if isinstance(eos, int) else [int(e) for e in eos]


def with_stop_token(generation_config: Any, token_id: int) -> bool:
    """Add `token_id` to the config's eos ids in place; True if it changed anything."""
    ids = eos_ids(generation_config)
    if token_id in ids:
        return False
    ids.append(token_id)
    generation_config.eos_token_id = ids[0] if len(ids) == 1 else ids
    return True
