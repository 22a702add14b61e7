"""What decides how a checkpoint decodes besides its weights, and the one contract both arms share.

`read_decoding(model_dir)` reads a checkpoint's decoding metadata: the tokenizer (vocabulary,
special and added tokens), the chat template, its end-of-turn token, the tokenizer's eos and
the generation config. `stop_token_ids` of the *base* is the decoding contract of a round:
end-of-turn ∪ tokenizer eos ∪ generation-config eos. The loop serves pre and post under it, so a
base whose generation config names the wrong eos cannot run to max_tokens while the merged
checkpoint (whose config merge repaired) stops — a Δ made by decoding, not by training.

`compare_decoding(base, merged)` is the doctor's comparison of the two arms: a difference the
contract overrides for both (the generation config's eos ids) is reported as fixed; anything
else that changes what the model sees or how it is sampled (tokenizer, chat template, other
generation settings) is a problem, and the loop refuses to compare such arms.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuneloop.train.checkpoint.chat import end_of_turn_id, eos_ids

IGNORED_GENERATION_KEYS = frozenset({"eos_token_id", "transformers_version"})
"""Generation-config keys left out of the comparison: eos is replaced by the contract, the
version stamp says nothing about decoding."""


@dataclass(frozen=True)
class DecodingMetadata:
    """One checkpoint's decoding metadata (plain data, JSON-ready through `as_json`)."""

    tokenizer_sha256: str
    """sha256 over the vocabulary, special and added tokens and the bos/eos/pad ids."""
    chat_template: str | None
    """The chat template text; None when the tokenizer has none."""
    end_of_turn_id: int | None
    """The token that ends an assistant turn in the chat template."""
    tokenizer_eos_id: int | None
    """The tokenizer's eos token id."""
    generation_eos_ids: tuple[int, ...]
    """generation_config.json's eos_token_id(s)."""
    generation_config: dict[str, Any] = field(default_factory=dict)
    """generation_config.json without eos_token_id and transformers_version."""
    token_names: dict[int, str] = field(default_factory=dict)
    """Names of the stop tokens, for messages."""

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        """End-of-turn ∪ tokenizer eos ∪ generation-config eos, sorted."""
        ids = set(self.generation_eos_ids)
        ids.update(i for i in (self.end_of_turn_id, self.tokenizer_eos_id) if i is not None)
        return tuple(sorted(ids))

    def name(self, token_id: int | None) -> str:
        return "none" if token_id is None else f"{self.token_names.get(token_id, '?')} ({token_id})"

    def as_json(self) -> dict[str, Any]:
        return {
            "tokenizer_sha256": self.tokenizer_sha256,
            "chat_template_sha256": _sha(self.chat_template),
            "end_of_turn_id": self.end_of_turn_id,
            "tokenizer_eos_id": self.tokenizer_eos_id,
            "generation_eos_ids": list(self.generation_eos_ids),
            "generation_config": self.generation_config,
            "stop_token_ids": list(self.stop_token_ids),
        }


def _sha(value: Any) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def tokenizer_fingerprint(tok: Any) -> str:
    """sha256 of what the tokenizer maps text to; file bytes differ across save_pretrained
    round trips (key order, version stamps) while the mapping does not."""
    added = {int(i): str(t) for i, t in tok.added_tokens_decoder.items()}
    content = {
        "vocab": sorted(tok.get_vocab().items()),
        "added": sorted(added.items()),
        "special": sorted(str(t) for t in tok.all_special_tokens),
        "ids": [tok.bos_token_id, tok.eos_token_id, tok.pad_token_id],
    }
    sha = _sha(content)
    assert sha is not None
    return sha


def load_generation_config(model_dir: Path) -> Any:
    """The checkpoint's GenerationConfig; transformers' defaults when it has no
    generation_config.json."""
    from transformers import GenerationConfig

    try:
        return GenerationConfig.from_pretrained(str(model_dir))
    except OSError:
        return GenerationConfig()


def read_decoding(model_dir: Path, tok: Any = None) -> DecodingMetadata:
    """Read a checkpoint's decoding metadata (loads the tokenizer unless given, no weights)."""
    from transformers import AutoTokenizer

    model_dir = Path(model_dir)
    if tok is None:
        tok = AutoTokenizer.from_pretrained(str(model_dir))
    gen = load_generation_config(model_dir)
    settings = {k: v for k, v in gen.to_diff_dict().items() if k not in IGNORED_GENERATION_KEYS}
    eot = end_of_turn_id(tok)
    eos = tok.eos_token_id
    gen_eos = tuple(eos_ids(gen))
    named = {i for i in (*gen_eos, eot, eos) if i is not None}
    return DecodingMetadata(
        tokenizer_sha256=tokenizer_fingerprint(tok),
        chat_template=getattr(tok, "chat_template", None),
        end_of_turn_id=None if eot is None else int(eot),
        tokenizer_eos_id=None if eos is None else int(eos),
        generation_eos_ids=gen_eos,
        generation_config=settings,
        token_names={int(i): str(tok.convert_ids_to_tokens(int(i))) for i in named},
    )


@dataclass(frozen=True)
class DecodingComparison:
    """Base vs merged: the contract both are served under, what it fixes, what it cannot."""

    stop_token_ids: tuple[int, ...]
    """The contract: the base's stop set (the merged arm is served with it too)."""
    fixed: list[str]
    """Differences the contract makes identical for both arms."""
    problems: list[str]
    """Differences it cannot make identical: the arms must not be compared."""


def compare_decoding(base: DecodingMetadata, merged: DecodingMetadata) -> DecodingComparison:
    """Compare two checkpoints' decoding metadata (pure)."""
    contract = base.stop_token_ids
    problems: list[str] = []
    if base.tokenizer_sha256 != merged.tokenizer_sha256:
        problems.append("the tokenizers differ (vocabulary, special tokens or bos/eos/pad ids)")
    if base.chat_template != merged.chat_template:
        problems.append("the chat templates differ: the arms would see different prompts")
    if base.end_of_turn_id != merged.end_of_turn_id:
        problems.append(
            f"end-of-turn token: base {base.name(base.end_of_turn_id)}, merged "
            f"{merged.name(merged.end_of_turn_id)}"
        )
    if base.tokenizer_eos_id != merged.tokenizer_eos_id:
        problems.append(
            f"tokenizer eos: base {base.name(base.tokenizer_eos_id)}, merged "
            f"{merged.name(merged.tokenizer_eos_id)}"
        )
    keys = sorted(set(base.generation_config) | set(merged.generation_config))
    problems += [
        f"generation_config.json {k}: base {base.generation_config.get(k)!r}, merged "
        f"{merged.generation_config.get(k)!r}"
        for k in keys
        if base.generation_config.get(k) != merged.generation_config.get(k)
    ]
    fixed: list[str] = []
    if base.generation_eos_ids != merged.generation_eos_ids:
        fixed.append(
            f"generation_config.json eos_token_id: base {list(base.generation_eos_ids)}, merged "
            f"{list(merged.generation_eos_ids)}; both arms are served with stop ids "
            f"{list(contract)}"
        )
    elif base.end_of_turn_id is not None and base.end_of_turn_id not in base.generation_eos_ids:
        fixed.append(
            f"generation_config.json eos_token_id {list(base.generation_eos_ids)} lacks the "
            f"end-of-turn token {base.name(base.end_of_turn_id)} in both; both arms are served "
            f"with stop ids {list(contract)}"
        )
    return DecodingComparison(contract, fixed, problems)
