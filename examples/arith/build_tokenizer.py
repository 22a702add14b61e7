"""The tiny model's tokenizer: byte-level BPE with single-digit tokens and a ChatML template.

Used by `build_model.py` (run that; this module has no command line of its own). The result is
a `transformers.PreTrainedTokenizerFast` saved as `tokenizer.json` + `tokenizer_config.json`
(+ `chat_template.jinja`), loadable with `AutoTokenizer.from_pretrained`.

Why byte-level: every string has an encoding, so there is no `unk` token and no way for a
reloaded tokenizer to map an unseen character to one (the trap of a character vocabulary built
from the training text). Digits are split into single tokens before BPE (Qwen2's own pre-tokenizer),
because a shared per-digit vocabulary is what lets a small model learn column arithmetic. The
BPE merges are learned from the chat-rendered pretraining text only so that the template and
the words of the question become a few tokens each, which keeps sequences short on CPU.

Deviation from Qwen's template: no default system message (it would triple the prompt length
of a model that never sees one).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

PAD = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIALS = [PAD, IM_START, IM_END]
VOCAB_SIZE = 384

# Qwen2's pre-tokenizer (`transformers.models.qwen2.tokenization_qwen2`), copied rather than
# imported: transformers 5 rebuilds a folder whose config says `qwen2` with exactly this
# pipeline, so the tokenizer we train must already be this one or its ids would change on load.
# `\p{N}` alone is what makes every digit its own token.
QWEN2_PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

_TOOL_LIST = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- for tool in tools %}"
    "{%- set f = tool['function'] if tool['function'] is defined else tool %}"
    "{%- set props = f['parameters']['properties'] if f['parameters'] is defined"
    " and f['parameters']['properties'] is defined else {} %}"
    "{{- ('' if loop.first else '\\n') + f['name'] + '(' + (props | list | join(', ')) + ')' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endif %}"
)
_CALLS_TURN = (
    "{{- '<|im_start|>' + message['role'] + '\\n' + (message['content'] or '') }}"
    "{%- for call in message['tool_calls'] %}"
    "{%- set fn = call['function'] if call['function'] is defined else call %}"
    "{{- ('\\n' if (message['content'] or not loop.first) else '') + '<tool_call>\\n'"
    " + ({'name': fn['name'], 'arguments': fn['arguments']} | tojson(separators=(',', ':')))"
    " + '\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>' + '\\n' }}"
)
CHAT_TEMPLATE = (
    _TOOL_LIST
    + "{%- for message in messages %}"
    + "{%- if message['tool_calls'] is defined and message['tool_calls'] %}"
    + _CALLS_TURN
    + "{%- else %}"
    + "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
"""ChatML: every turn ends with `<|im_end|>\\n`; the generation prompt is
`<|im_start|>assistant\\n`. Without `tools` (and without tool calls) it renders exactly what the
tool-less template of the pretrained model did (`test_arith_tokenizer` checks it byte for byte).

With tools it renders them natively, compactly, because the model's context is short (an agent
trajectory in Qwen 2.5's own `# Tools` format is ~830 tokens; this one ~155): the tool list as
one system line of signatures (`calculator(expression)`), a call as Hermes' `<tool_call>` block
with compact JSON (`{"name":"calculator","arguments":{"expression":"347 + 589"}}`; the
embedded server's and vLLM's `hermes` parsers read it into OpenAI `tool_calls`), and a tool
result as a plain `tool` turn (Qwen wraps it in `<tool_response>` inside a user turn)."""


def render_chat(user: str, answer: str | None = None) -> str:
    """The template's output for one user turn (and optionally the assistant's answer).

    Matches `CHAT_TEMPLATE` exactly (a test checks it); used to build the BPE training text
    without a tokenizer in hand.
    """
    text = f"{IM_START}user\n{user}{IM_END}\n{IM_START}assistant\n"
    return text if answer is None else f"{text}{answer}{IM_END}\n"


def train_tokenizer(texts: Iterable[str], vocab_size: int = VOCAB_SIZE) -> Tokenizer:
    """Byte-level BPE over `texts`; the 256 byte symbols are always in the vocabulary."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE_REGEX), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def wrap(tok: Tokenizer) -> Any:
    """The `transformers` face of the tokenizer: special tokens, chat template, left padding.

    `unk_token` is Qwen2's (`<|endoftext|>`, the pad) so that every loading class agrees; the
    byte-level BPE itself has no unknown token and never produces that id from text.
    """
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=IM_END,
        pad_token=PAD,
        unk_token=PAD,
        chat_template=CHAT_TEMPLATE,
        padding_side="left",
        clean_up_tokenization_spaces=False,
        model_max_length=128,  # = max_position_embeddings
    )


def round_trip_failures(tok: Any, texts: Iterable[str]) -> list[str]:
    """Texts that do not survive encode → decode, or that encode to the `unk` id.

    Catches the character-vocabulary trap: a tokenizer that maps a character it never saw to
    `unk` silently changes the prompt. `build_model.py` refuses to save such a tokenizer.
    """
    bad = []
    for text in texts:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        unk = tok.unk_token_id is not None and tok.unk_token_id in ids
        if unk or tok.decode(ids, skip_special_tokens=False) != text:
            bad.append(text)
    return bad
