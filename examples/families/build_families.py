"""The family matrix: tiny checkpoints of the architectures users run, built here.

`python examples/families/build_families.py OUT [FAMILY ...]` writes `OUT/<family>/` for each
family (all by default): a Hugging Face folder with random weights, its tokenizer, its chat
template (`templates/<template>.jinja`, each family's own turn markers and stop tokens) and a
generation config that stops where the family's turns end. Nothing is downloaded: the shapes
come from transformers' own config classes, the Mistral tokenizer is the real 131,072-token
Tekken vocabulary that the `mistral-common` package ships (`tekken_240911.json`, converted
with transformers' own `convert_tekken_tokenizer`), and every other tokenizer is a byte-level
BPE trained here on a fixed text with the family's special tokens.

Deterministic on one machine: the tokenizers are trained single-threaded, the weights seeded
and warmed up (`warm_up`) on one thread. Small on purpose (hidden 64, 2 layers, head_dim 32:
under 1 MB; the Mistral one 49 MB for its 131k vocabulary, tokenizer.json included), so every
cell of the matrix runs on a 2-core CPU in seconds. The shapes differ where the families do:
tied or untied embeddings, fused projections (Phi-3), q/k norms (Qwen 3, OLMo 2), sliding-window
layers (Gemma 3), experts (Qwen3-MoE), learned positions and no chat template at all (GPT-2).
"Random weights" with a warm-up: a few hundred steps on chat-rendered arithmetic, so that each
checkpoint answers in its own template and ends its turn — a checkpoint that never stops fails
`tuneloop doctor`, as it should, and no round could run on it.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
BPE_VOCAB = 640
WARM_STEPS = 150


@dataclass(frozen=True)
class Family:
    name: str
    model_type: str
    """transformers' `model_type` (its config class)."""
    template: str | None
    """`templates/<template>.jinja`, or None: a base model without a chat template."""
    specials: tuple[str, ...] = ()
    """Special tokens of a tokenizer trained here (the first is bos, as the family has it)."""
    bos: str | None = None
    eos: str = ""
    """The tokenizer's eos token: what ends a sequence."""
    pad: str | None = None
    stops: tuple[str, ...] = ()
    """generation_config.eos_token_id, as the family's checkpoints list them."""
    tied: bool = True
    shape: dict[str, Any] = field(default_factory=dict)
    """Config fields beyond the common small shape."""
    tekken: bool = False
    """The real Tekken tokenizer (mistral-common's package data) instead of one trained here."""


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "llama",
            "llama",
            "llama3",
            specials=(
                "<|begin_of_text|>",
                "<|end_of_text|>",
                "<|start_header_id|>",
                "<|end_header_id|>",
                "<|eot_id|>",
                "<|eom_id|>",
                "<|python_tag|>",
            ),
            bos="<|begin_of_text|>",
            eos="<|eot_id|>",
            pad="<|end_of_text|>",
            stops=("<|end_of_text|>", "<|eom_id|>", "<|eot_id|>"),
            tied=False,
        ),
        Family(
            "qwen2",
            "qwen2",
            "chatml",
            specials=("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"),
            eos="<|im_end|>",
            pad="<|endoftext|>",
            stops=("<|im_end|>", "<|endoftext|>"),
        ),
        Family(
            "qwen3",
            "qwen3",
            "qwen3",
            specials=(
                "<|endoftext|>",
                "<|im_start|>",
                "<|im_end|>",
                "<tool_call>",
                "</tool_call>",
                "<think>",
                "</think>",
            ),
            eos="<|im_end|>",
            pad="<|endoftext|>",
            stops=("<|im_end|>", "<|endoftext|>"),
            shape={"head_dim": 32},
        ),
        Family(
            "mistral",
            "mistral",
            "mistral",
            tekken=True,
            bos="<s>",
            eos="</s>",
            pad="<pad>",
            stops=("</s>",),
            tied=False,
            # Mistral Nemo's shape of attention: full, no sliding window
            shape={
                "hidden_size": 32,
                "intermediate_size": 64,
                "num_attention_heads": 1,
                "head_dim": 32,
                "sliding_window": None,
            },
        ),
        Family(
            "gemma3",
            "gemma3_text",
            "gemma",
            specials=("<bos>", "<eos>", "<pad>", "<start_of_turn>", "<end_of_turn>"),
            bos="<bos>",
            eos="<eos>",
            pad="<pad>",
            stops=("<eos>", "<end_of_turn>"),
            shape={"head_dim": 32, "sliding_window": 16, "query_pre_attn_scalar": 32},
        ),
        Family(
            "phi3",
            "phi3",
            "phi3",
            specials=(
                "<s>",
                "<|endoftext|>",
                "<|system|>",
                "<|user|>",
                "<|assistant|>",
                "<|end|>",
            ),
            bos="<s>",
            eos="<|endoftext|>",
            pad="<|endoftext|>",
            stops=("<|endoftext|>", "<|end|>"),
            tied=False,
            shape={"pad_token_id": None},
        ),
        Family(
            "olmo2",
            "olmo2",
            "olmo2",
            specials=("<|endoftext|>", "<|pad|>", "<|system|>", "<|user|>", "<|assistant|>"),
            bos="<|endoftext|>",
            eos="<|endoftext|>",
            pad="<|pad|>",
            stops=("<|endoftext|>",),
            tied=False,
        ),
        Family(
            "qwen3_moe",
            "qwen3_moe",
            "qwen3",
            specials=(
                "<|endoftext|>",
                "<|im_start|>",
                "<|im_end|>",
                "<tool_call>",
                "</tool_call>",
                "<think>",
                "</think>",
            ),
            eos="<|im_end|>",
            pad="<|endoftext|>",
            stops=("<|im_end|>", "<|endoftext|>"),
            shape={
                "head_dim": 32,
                "num_experts": 4,
                "num_experts_per_tok": 2,
                "moe_intermediate_size": 64,
                "decoder_sparse_step": 1,
            },
        ),
        Family(
            "gpt2",
            "gpt2",
            None,
            specials=("<|endoftext|>",),
            bos="<|endoftext|>",
            eos="<|endoftext|>",
            stops=("<|endoftext|>",),
        ),
    )
}


def training_text() -> list[str]:
    """The fixed text the BPE tokenizers learn merges from: the demo's kind of questions and
    answers, in words and symbols, plus the role names the templates write."""
    words = ("zero", "one", "two", "three", "four", "five")
    words += ("six", "seven", "eight", "nine", "ten")
    lines = []
    for a in range(12):
        for b in range(12):
            lines.append(f"What is {a} + {b}? The answer is {a + b}.")
            lines.append(f"What is {words[a % 11]} plus {words[b % 11]}? {a + b}")
    lines += ["system user assistant model tool ipython", "You are a helpful assistant."]
    return lines


def bpe_tokenizer(family: Family) -> Any:
    """A byte-level BPE (every string encodes; digits split one per token) with the family's
    special tokens first, trained single-threaded so its merges are the same every time."""
    import os

    os.environ["RAYON_NUM_THREADS"] = "1"
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r"\p{N}"), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=BPE_VOCAB,
        special_tokens=list(family.specials),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(training_text(), trainer=trainer)
    return tok


def tekken_tokenizer() -> Any:
    """Mistral's real Tekken vocabulary (131,072 tokens) from the `mistral-common` package."""
    try:
        import mistral_common
    except ImportError:
        sys.exit("the Mistral family needs the mistral-common package (`pip install -e .[dev]`)")
    from transformers.integrations.mistral import convert_tekken_tokenizer

    path = Path(mistral_common.__file__).parent / "data" / "tekken_240911.json"
    return convert_tekken_tokenizer(str(path), chat_template=template_text("mistral"))


def template_text(name: str) -> str:
    return (TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8")


def tokenizer_for(family: Family) -> Any:
    from transformers import PreTrainedTokenizerFast

    if family.tekken:
        return tekken_tokenizer()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=bpe_tokenizer(family),
        bos_token=family.bos,
        eos_token=family.eos,
        pad_token=family.pad,
        model_max_length=512,
    )
    if family.template is not None:
        fast.chat_template = template_text(family.template)
    return fast


def model_config(family: Family, tok: Any) -> Any:
    from transformers import AutoConfig

    ids = {t: tok.convert_tokens_to_ids(t) for t in {family.bos, family.eos, family.pad} if t}
    shape: dict[str, Any] = {
        "vocab_size": len(tok),
        # head_dim 32: the smallest vLLM's CPU attention takes
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "max_position_embeddings": 512,
        "tie_word_embeddings": family.tied,
        # Large init: with the usual 0.02 the logits are nearly flat and stay so under LoRA.
        "initializer_range": 0.2,
        "bos_token_id": ids.get(family.bos) if family.bos else None,
        "eos_token_id": ids[family.eos],
        "pad_token_id": ids.get(family.pad) if family.pad else None,
    }
    if family.model_type == "gpt2":
        shape = {
            "vocab_size": len(tok),
            "n_embd": 64,
            "n_layer": 2,
            "n_head": 2,
            "n_positions": 512,
            "initializer_range": 0.2,
            "bos_token_id": shape["bos_token_id"],
            "eos_token_id": shape["eos_token_id"],
            "tie_word_embeddings": True,
        }
    shape.update(family.shape)
    return AutoConfig.for_model(family.model_type, **shape)


def conversations(tok: Any) -> list[str]:
    """The warm-up text: one-exchange arithmetic chats through the family's own template (a
    base without one gets `question answer<eos>` lines)."""
    texts = []
    for a in range(10):
        for b in range(10):
            question, answer = f"What is {a} + {b}?", str(a + b)
            if tok.chat_template:
                msgs = [
                    {"role": "user", "content": question},
                    {"role": "assistant", "content": answer},
                ]
                texts.append(str(tok.apply_chat_template(msgs, tokenize=False)))
            else:
                texts.append(f"{question} {answer}{tok.eos_token}")
    return texts


def warm_up(model: Any, tok: Any, steps: int, batch: int) -> None:
    """A few hundred full-parameter steps on `conversations`, so the checkpoint answers in its
    template's shape and ends its turn (random weights never stop, and a checkpoint that never
    stops fails `tuneloop doctor`, as it should). Deterministic on one machine: seeded order,
    one thread."""
    import torch

    texts = conversations(tok)
    enc = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    width = max(len(e) for e in enc)
    ids = torch.tensor([e + [pad] * (width - len(e)) for e in enc])
    mask = torch.tensor([[1] * len(e) + [0] * (width - len(e)) for e in enc])
    labels = ids.masked_fill(mask == 0, -100)
    order = torch.Generator().manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        pick = torch.randint(len(texts), (batch,), generator=order)
        loss = model(input_ids=ids[pick], attention_mask=mask[pick], labels=labels[pick]).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    model.eval()


def build_family(name: str, out: Path, *, seed: int = 0, warm_steps: int = WARM_STEPS) -> Path:
    """Write the family `name`'s checkpoint to `out` (created) and return it."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, GenerationConfig

    transformers.utils.logging.disable_progress_bar()
    family = FAMILIES[name]
    tok = tokenizer_for(family)
    config = model_config(family, tok)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    torch.set_num_threads(1)
    warm_up(model, tok, warm_steps, 4 if family.tekken else 16)
    stops = [tok.convert_tokens_to_ids(t) for t in family.stops]
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id,
        eos_token_id=stops[0] if len(stops) == 1 else stops,
        pad_token_id=config.pad_token_id,
    )
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder to write <family>/ checkpoints under")
    parser.add_argument("families", nargs="*", choices=[[], *FAMILIES], default=[])
    args = parser.parse_args(argv)
    for name in args.families or FAMILIES:
        print(f"{name}: {build_family(name, args.out / name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
