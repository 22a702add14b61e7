"""The tiny model's tokenizer: save/reload round trip, no `unk` trap, single-digit tokens."""

from __future__ import annotations

import json

import pytest

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tok(arith_dir):
    return transformers.AutoTokenizer.from_pretrained(arith_dir / "model")


def suite_texts(tok, suite_items) -> list[str]:
    """Every suite prompt as the model sees it, the full answered chat, and every answer."""
    texts = []
    for it in suite_items:
        texts.append(
            tok.apply_chat_template(it["messages"], add_generation_prompt=True, tokenize=False)
        )
        answered = [*it["messages"], {"role": "assistant", "content": it["answer"]}]
        texts.append(tok.apply_chat_template(answered, tokenize=False))
        texts.append(it["answer"])
    return texts


def test_saved_and_reloaded_tokenizer_gives_identical_ids(tok, suite_items, tmp_path):
    tok.save_pretrained(tmp_path)
    again = transformers.AutoTokenizer.from_pretrained(tmp_path)
    texts = suite_texts(tok, suite_items)
    before = tok(texts, add_special_tokens=False)["input_ids"]
    after = again(texts, add_special_tokens=False)["input_ids"]
    assert before == after
    assert again.chat_template == tok.chat_template
    assert len(again) == len(tok)


def test_no_unk_and_decode_inverts_encode(tok, suite_items, build_tokenizer, arith_dir):
    texts = [*suite_texts(tok, suite_items), "héllo wörld ✓ 世界\t~`{}", "-12 + 3.5e2"]
    assert build_tokenizer.round_trip_failures(tok, texts) == []
    # Byte-level BPE: the model itself has no unknown token to fall back to.
    raw = json.loads((arith_dir / "model" / "tokenizer.json").read_text())
    assert raw["model"]["type"] == "BPE" and raw["model"]["unk_token"] is None
    assert raw["pre_tokenizer"]["pretokenizers"][-1]["type"] == "ByteLevel"


def test_transformers_class_and_raw_tokenizer_json_agree(tok, suite_items, arith_dir):
    # transformers 5 rebuilds a `qwen2` folder's pipeline in Qwen2Tokenizer; ours must be it.
    from tokenizers import Tokenizer

    raw = Tokenizer.from_file(str(arith_dir / "model" / "tokenizer.json"))
    for text in suite_texts(tok, suite_items[:40]):
        assert tok(text, add_special_tokens=False)["input_ids"] == raw.encode(text).ids


def test_round_trip_check_catches_the_char_vocab_trap(suite_items, build_tokenizer):
    # A character vocabulary learned from digits and operators only: what the check must catch.
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, **{c: i + 1 for i, c in enumerate("0123456789+- ?")}}
    char = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    char.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    broken = transformers.PreTrainedTokenizerFast(tokenizer_object=char, unk_token="[UNK]")
    prompts = [it["messages"][0]["content"] for it in suite_items[:5]]
    assert build_tokenizer.round_trip_failures(broken, prompts) == prompts


def test_digits_are_single_tokens_and_specials_are_atomic(tok):
    ids = tok("What is 123 - 45?<|im_end|>", add_special_tokens=False)["input_ids"]
    pieces = tok.convert_ids_to_tokens(ids)
    assert [p for p in pieces if any(c.isdigit() for c in p)] == list("12345")
    assert pieces[-1] == "<|im_end|>"
    assert tok.pad_token == "<|endoftext|>"
    for special in ("<|endoftext|>", "<|im_start|>", "<|im_end|>"):
        assert tok.convert_tokens_to_ids(special) in tok.all_special_ids or special in str(
            tok.added_tokens_decoder
        )


def test_chat_template_matches_the_build_helper(tok, build_tokenizer):
    rendered = tok.apply_chat_template(
        [{"role": "user", "content": "What is 1 + 2?"}], add_generation_prompt=True, tokenize=False
    )
    assert rendered == build_tokenizer.render_chat("What is 1 + 2?")


# The template the model was pretrained with, frozen here: the tool branch added since must
# leave every tool-less rendering (the main demo's) byte-identical.
PRETRAINED_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def test_tool_less_chats_render_exactly_as_with_the_pretrained_template(
    tok, suite_items, train_items, arith_dir
):
    assert (arith_dir / "model" / "chat_template.jinja").read_text() == tok.chat_template
    chats = [it["messages"] for it in suite_items + train_items[::10]]
    chats.append(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is 1 + 2?"},
            {"role": "assistant", "content": "3"},
            {"role": "tool", "content": "ok"},
            {"role": "user", "content": ""},
        ]
    )
    for chat in chats:
        for gen in (False, True):
            new = tok.apply_chat_template(chat, add_generation_prompt=gen, tokenize=False)
            old = tok.apply_chat_template(
                chat, chat_template=PRETRAINED_TEMPLATE, add_generation_prompt=gen, tokenize=False
            )
            assert new == old


def test_tools_render_compactly_and_calls_as_hermes_blocks(tok, build_tokenizer):
    from tuneloop.envs.base import tool_schema
    from tuneloop.envs.render import prepare_messages, template_handles_tools
    from tuneloop.serve.embedded import parse_tool_calls

    assert tok.chat_template == build_tokenizer.CHAT_TEMPLATE
    assert template_handles_tools(tok.chat_template)
    call = {"name": "calculator", "arguments": '{"expression": "347 + 589"}'}
    chat = [
        {"role": "user", "content": "What is 347 + 589?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "function": call}]},
        {"role": "tool", "tool_call_id": "c", "content": "936"},
        {"role": "assistant", "content": "936"},
    ]
    messages, tools = prepare_messages(chat, [tool_schema("calculator")], native=True)
    text = tok.apply_chat_template(messages, tools=tools, tokenize=False)
    body = '{"name":"calculator","arguments":{"expression":"347 + 589"}}'
    assert text == (
        "<|im_start|>system\ncalculator(expression)<|im_end|>\n"
        "<|im_start|>user\nWhat is 347 + 589?<|im_end|>\n"
        f"<|im_start|>assistant\n<tool_call>\n{body}\n</tool_call><|im_end|>\n"
        "<|im_start|>tool\n936<|im_end|>\n"
        "<|im_start|>assistant\n936<|im_end|>\n"
    )
    assert len(tok(text, add_special_tokens=False)["input_ids"]) < 192
    reply = text.split("<|im_start|>assistant\n")[1].removesuffix("<|im_end|>\n<|im_start|>tool\n")
    content, (parsed,) = parse_tool_calls(reply.split("<|im_end|>")[0])
    assert content is None and (parsed.name, parsed.arguments) == (
        "calculator",
        '{"expression": "347 + 589"}',
    )
    # Two calls, after some text: one block each, on their own lines.
    two = {**chat[1], "content": "Let me see.", "tool_calls": [chat[1]["tool_calls"][0]] * 2}
    messages, tools = prepare_messages([chat[0], two], None, native=True)
    text = tok.apply_chat_template(messages, tokenize=False)
    assert f"Let me see.\n<tool_call>\n{body}\n</tool_call>\n<tool_call>\n" in text
