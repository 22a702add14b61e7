"""A model folder's chat template and the tokens around it, read without torch.

The template is found where transformers 5 looks (`folder_template`) or given by
`model.chat_template` (`read_template`); `template_tokens` pairs it with the tokenizer's special
tokens and the `tokenizers` library's reading of tokenizer.json, and `TemplateTokens` renders
conversations with transformers' own Jinja renderer — around a sentinel reply to find the
token that ends an assistant turn (`end_of_turn`), or a suite item's messages to find what it
cannot render (`render_problem`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuneloop.errors import InputError

TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tiktoken.model")
SENTINEL = "SENTINEL-REPLY-4711"


def hf_json(path: Path) -> dict[str, Any]:
    """A Hugging Face JSON file of the folder as an object ({} when absent); InputError
    naming the file when it is not one."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"{path}: cannot read as JSON ({err})") from err
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object")
    return data


def read_template(path: Path) -> str:
    """A chat template file (Jinja text, or a JSON `{"chat_template": …}`), refused if empty."""
    try:
        text: Any = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"model.chat_template: {path}: cannot read ({err})") from err
    if path.suffix == ".json":
        try:
            text = json.loads(text)["chat_template"]
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise InputError(
                f"model.chat_template: {path}: a .json template must be an object with a "
                "`chat_template` string"
            ) from err
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"model.chat_template: {path}: empty")
    return text


def folder_template(model_dir: Path, tok_config: dict[str, Any]) -> tuple[str | None, str | None]:
    """(template, the file it came from) as transformers 5 finds it: chat_template.jinja,
    then chat_template.json, then tokenizer_config.json (its default if it names several)."""
    jinja = model_dir / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8"), jinja.name
    as_json = hf_json(model_dir / "chat_template.json").get("chat_template")
    found, source = (as_json, "chat_template.json") if as_json else (None, None)
    if found is None:
        found, source = tok_config.get("chat_template"), "tokenizer_config.json"
    if isinstance(found, list):  # [{"name": "default", "template": …}, …]
        named = {t.get("name"): t.get("template") for t in found if isinstance(t, dict)}
        found = named.get("default")
    return (found, source) if isinstance(found, str) and found.strip() else (None, None)


def special_token(value: Any) -> str | None:
    """A tokenizer_config.json token: a string, or `{"content": …}` in older files."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class TemplateTokens:
    """What rendering needs: the template, the special tokens it is given, the tokenizer."""

    template: str
    specials: dict[str, str]
    tokenizer: Any
    """A `tokenizers.Tokenizer` (from tokenizer.json), or None: then nothing is tokenized."""

    def render(self, messages: list[dict[str, Any]], generation_prompt: bool = True) -> str:
        from transformers.utils.chat_template_utils import render_jinja_template

        specials: dict[str, Any] = dict(self.specials)
        # Annotated `-> str`, but it returns (rendered conversations, generation indices).
        result: Any = render_jinja_template(
            conversations=[messages],
            chat_template=self.template,
            add_generation_prompt=generation_prompt,
            **specials,
        )
        return str(result[0][0])

    def after_reply(self) -> str | None:
        """What the template writes after an assistant reply (None: the reply is not in it)."""
        msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": SENTINEL}]
        text = self.render(msgs, generation_prompt=False)
        return text[text.rindex(SENTINEL) + len(SENTINEL) :] if SENTINEL in text else None

    def end_of_turn(self) -> int | None:
        """The first special token the template writes after an assistant reply."""
        after = self.after_reply()
        if self.tokenizer is None or after is None:
            return None
        special = {i for i, t in self.tokenizer.get_added_tokens_decoder().items() if t.special}
        for tid in self.tokenizer.encode(after, add_special_tokens=False).ids:
            if tid in special:
                return int(tid)
        return None


def render_problem(tokens: TemplateTokens, messages: list[dict[str, Any]]) -> str | None:
    """Why the chat template cannot render `messages` (a suite item's), or None."""
    try:
        text = tokens.render(messages)
    except Exception as err:  # noqa: BLE001 - jinja's raise_exception, a missing key, …
        return f"{type(err).__name__}: {err}"
    for m in messages:
        content = m.get("content")
        if isinstance(content, str) and content.strip() and content.strip() not in text:
            return f"the rendered prompt leaves out the {m.get('role')} message's text"
    return None


def template_tokens(
    model_dir: Path, chat_template: Path | None = None
) -> tuple[TemplateTokens | None, str | None, dict[str, Any]]:
    """(what rendering needs or None without a template, the template's source, the
    tokenizer config); InputError when the folder has no tokenizer files."""
    model_dir = Path(model_dir)
    if not any((model_dir / name).is_file() for name in TOKENIZER_FILES):
        raise InputError(
            f"{model_dir}: no tokenizer files (looked for {', '.join(TOKENIZER_FILES)})"
        )
    tok_config = hf_json(model_dir / "tokenizer_config.json")
    template: str | None
    source: str | None
    if chat_template is not None:
        template, source = read_template(chat_template), f"model.chat_template {chat_template}"
    else:
        template, source = folder_template(model_dir, tok_config)
    tokenizer = None
    if (model_dir / "tokenizer.json").is_file():
        from tokenizers import Tokenizer

        try:
            tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        except Exception as err:  # noqa: BLE001 - the Rust library's own parse errors
            raise InputError(f"{model_dir / 'tokenizer.json'}: cannot load ({err})") from err
    keys = ("bos_token", "eos_token", "pad_token", "unk_token")
    specials = {k: t for k in keys if (t := special_token(tok_config.get(k))) is not None}
    tokens = TemplateTokens(template, specials, tokenizer) if template else None
    return tokens, source, tok_config
