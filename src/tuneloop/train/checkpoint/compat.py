"""What a model folder is, read before any compute: `read_facts(MODEL_DIR)` and its table.

The preflight of every loop (`tuneloop check`, `run`) and `tuneloop doctor --compat MODEL_DIR`
read the same facts from the folder's files, without torch (so `check` stays a one-second
command): the architecture and its family (`model_type`, checked against the architectures
this transformers knows), the vocabulary, tied or untied embeddings, experts and
sliding-window layers, the tokenizer's bos/eos/pad, the chat template (where it came from and
its sha256), the token that ends an assistant turn (the template is rendered with transformers'
own Jinja renderer around a sentinel reply, and the text after it tokenized with the
`tokenizers` library), the generation config's stop ids, and whether the template renders a
system role and tools. `with_modules(facts)` adds what needs the model's modules, built on the
meta device (nothing allocated): the parameter count and the modules LoRA's `all-linear`
resolves to (PEFT's rule: every linear layer but the output head), grouped by name, so a user
sees `q_proj, k_proj, …` or Phi-3's fused `qkv_proj`. `read_shape(MODEL_DIR)` reads the
numbers memory planning needs (`tuneloop.memory.model_shape`) from the same config.json.

A folder that cannot be read this way is an `InputError` naming the file: a config.json that
is not JSON or names an architecture transformers does not know, a tokenizer without its
files. What would break a round is listed in `problems` (the preflight's errors): an eos or
end-of-turn token outside the vocabulary, a template that cannot render one exchange.
`compat_rows` is the per-step table `doctor --compat` prints (static; the README's family
matrix is what was measured).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tuneloop.errors import InputError
from tuneloop.memory import ModelShape, model_shape

TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tiktoken.model")
SENTINEL = "SENTINEL-REPLY-4711"


@dataclass(frozen=True)
class ModelFacts:
    model_dir: Path
    architecture: str
    model_type: str
    vocab_size: int | None
    tied_embeddings: bool
    experts: int | None
    sliding_window: int | None
    chat_template: str | None
    template_source: str | None
    """Which file (or `model.chat_template`) the template came from; None without one."""
    end_of_turn: str | None
    end_of_turn_id: int | None
    bos: str | None
    eos: str | None
    pad: str | None
    generation_stops: tuple[int, ...]
    system_role: bool
    tools: str
    """`native` (the template renders `tools`), `hermes` (tuneloop's fallback format), `none`."""
    problems: list[str] = field(default_factory=list)
    """What would break a round, said before compute (the preflight's errors)."""
    template_problems: tuple[str, ...] = ()
    """Those of `problems` that the chat template causes (it cannot render an exchange, its
    end of turn is outside the vocabulary); the rest are the folder's own files'."""
    parameters: int | None = None
    """`with_modules` only."""
    lora_targets: tuple[str, ...] = ()
    lora_target_count: int | None = None
    """`with_modules` only; None until then."""

    @property
    def template_sha256(self) -> str | None:
        if self.chat_template is None:
            return None
        return hashlib.sha256(self.chat_template.encode()).hexdigest()

    def summary(self) -> list[str]:
        """The facts as `check` prints them: a few lines, the most telling first."""
        size = f", {_count(self.parameters)} parameters" if self.parameters else ""
        vocab = f", vocabulary {self.vocab_size:,}" if self.vocab_size else ""
        head = (
            f"model: {self.architecture} ({self.model_type}){size}{vocab}, "
            f"{'tied' if self.tied_embeddings else 'untied'} embeddings"
            + (f", {self.experts} experts" if self.experts else "")
            + (f", sliding window {self.sliding_window}" if self.sliding_window else "")
        )
        if self.chat_template is None:
            chat = "chat template: none (completion-mode suites only)"
        else:
            eot = f"{self.end_of_turn} ({self.end_of_turn_id})" if self.end_of_turn else "unknown"
            digest = (self.template_sha256 or "")[:12]
            chat = (
                f"chat template: {self.template_source} (sha256 {digest}…); "
                f"end of turn {eot}; system role {'yes' if self.system_role else 'no'}; "
                f"tools {self.tools}"
            )
        stops = ", ".join(str(i) for i in self.generation_stops) or "none"
        lines = [
            head,
            "  " + chat,
            f"  tokens: bos {self.bos}, eos {self.eos}, pad {self.pad}; generation stops {stops}",
        ]
        if self.lora_target_count is not None:
            lines.append(
                f"  LoRA all-linear: {', '.join(self.lora_targets) or 'nothing'} "
                f"({self.lora_target_count} modules; train.lora.target_modules overrides)"
            )
        return lines


def _count(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def _json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"{path}: cannot read as JSON ({err})") from err
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object")
    return data


def known_model_types() -> frozenset[str] | None:
    """The `model_type`s this transformers has a config class for (no torch imported)."""
    try:
        from transformers.models.auto.auto_mappings import CONFIG_MAPPING_NAMES
    except ImportError:
        try:
            from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
        except ImportError:
            return None
    return frozenset(CONFIG_MAPPING_NAMES)


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
    as_json = _json(model_dir / "chat_template.json").get("chat_template")
    found, source = (as_json, "chat_template.json") if as_json else (None, None)
    if found is None:
        found, source = tok_config.get("chat_template"), "tokenizer_config.json"
    if isinstance(found, list):  # [{"name": "default", "template": …}, …]
        named = {t.get("name"): t.get("template") for t in found if isinstance(t, dict)}
        found = named.get("default")
    return (found, source) if isinstance(found, str) and found.strip() else (None, None)


def _token(value: Any) -> str | None:
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
    tok_config = _json(model_dir / "tokenizer_config.json")
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
    specials = {k: t for k in keys if (t := _token(tok_config.get(k))) is not None}
    tokens = TemplateTokens(template, specials, tokenizer) if template else None
    return tokens, source, tok_config


def read_facts(model_dir: Path, chat_template: Path | None = None) -> ModelFacts:
    """Read `model_dir`'s config, tokenizer, template and generation config (no torch)."""
    model_dir = Path(model_dir)
    config = _json(model_dir / "config.json")
    model_type = config.get("model_type")
    known = known_model_types()
    if not isinstance(model_type, str):
        raise InputError(f"{model_dir / 'config.json'}: names no model_type")
    if known is not None and model_type not in known:
        raise InputError(
            f"{model_dir / 'config.json'}: model_type {model_type!r} is an architecture this "
            "transformers does not know (upgrade transformers, or check the folder)"
        )
    nested = config.get("text_config")
    text: dict[str, Any] = nested if isinstance(nested, dict) else config
    tokens, source, tok_config = template_tokens(model_dir, chat_template)
    template_problems: list[str] = []
    vocab = text.get("vocab_size") if isinstance(text.get("vocab_size"), int) else None
    eot = None
    system = False
    if tokens is not None:
        try:
            eot = tokens.end_of_turn()
        except Exception as err:  # noqa: BLE001 - a template that cannot render one exchange
            template_problems.append(
                f"the chat template cannot render a user/assistant exchange: "
                f"{type(err).__name__}: {err}"
            )
        system = render_problem(tokens, [{"role": "system", "content": "s"}]) is None
        if eot is None and tokens.tokenizer is not None and not template_problems:
            template_problems += _unknown_end_of_turn(model_dir, tokens, tok_config)
        if eot is not None and vocab is not None and eot >= vocab:
            template_problems.append(
                f"{model_dir}: the chat template's end-of-turn token (id {eot}) is outside "
                f"the model's vocabulary of {vocab}"
            )
    stops = _stop_ids(_json(model_dir / "generation_config.json").get("eos_token_id"))
    eos = _token(tok_config.get("eos_token"))
    problems = template_problems + _vocabulary_problems(model_dir, vocab, stops, eos, tokens)
    if eos is None and not stops:
        problems.append(
            f"{model_dir}: neither tokenizer_config.json nor generation_config.json names an "
            "eos token, so generation could never stop"
        )
    from tuneloop.envs.render import template_handles_tools

    tok = tokens.tokenizer if tokens else None
    return ModelFacts(
        model_dir=model_dir,
        architecture=str((config.get("architectures") or [model_type])[0]),
        model_type=model_type,
        vocab_size=vocab,
        tied_embeddings=bool(config.get("tie_word_embeddings", text.get("tie_word_embeddings"))),
        experts=_experts(text),
        sliding_window=_sliding(text),
        chat_template=tokens.template if tokens else None,
        template_source=source if tokens else None,
        end_of_turn=tok.id_to_token(eot) if tok is not None and eot is not None else None,
        end_of_turn_id=eot,
        bos=_token(tok_config.get("bos_token")),
        eos=eos,
        pad=_token(tok_config.get("pad_token")),
        generation_stops=tuple(stops),
        system_role=system,
        tools=("native" if template_handles_tools(tokens.template) else "hermes")
        if tokens
        else "none",
        problems=problems,
        template_problems=tuple(template_problems),
    )


def _unknown_end_of_turn(
    model_dir: Path, tokens: TemplateTokens, tok_config: dict[str, Any]
) -> list[str]:
    """A template that ends a turn with text the tokenizer has no special token for: the
    model could never produce a stop token there (ChatML's `<|im_end|>` on GPT-2's vocabulary
    is five ordinary tokens)."""
    after = (tokens.after_reply() or "").strip()
    if not after:
        return []  # nothing after the reply: the turn ends with the eos of generation_config
    eos = _token(tok_config.get("eos_token"))
    fix = f", such as its eos token {eos!r}" if eos else ""
    return [
        f"the chat template ends an assistant turn with {after[:40]!r}, which is no special "
        f"token of {model_dir / 'tokenizer.json'}: generation could never stop at the end of a "
        f"turn (use a template that ends turns with a token the tokenizer has{fix})"
    ]


def _stop_ids(value: Any) -> list[int]:
    if isinstance(value, int):
        return [value]
    return [v for v in value if isinstance(v, int)] if isinstance(value, list) else []


def _vocabulary_problems(
    model_dir: Path,
    vocab: int | None,
    stops: list[int],
    eos: str | None,
    tokens: TemplateTokens | None,
) -> list[str]:
    """Stop tokens the model cannot produce: ids outside its vocabulary, an eos the
    tokenizer does not have."""
    problems = []
    if vocab is not None:
        problems += [
            f"{model_dir}/generation_config.json: eos_token_id {tid} is outside the model's "
            f"vocabulary of {vocab}"
            for tid in stops
            if not 0 <= tid < vocab
        ]
    tok = tokens.tokenizer if tokens else None
    if tok is not None and eos is not None:
        tid = tok.token_to_id(eos)
        if tid is None:
            problems.append(
                f"{model_dir}/tokenizer_config.json: eos_token {eos!r} is not in the "
                "tokenizer's vocabulary"
            )
        elif vocab is not None and tid >= vocab:
            problems.append(
                f"{model_dir}/tokenizer_config.json: eos_token {eos!r} (id {tid}) is outside "
                f"the model's vocabulary of {vocab}"
            )
    return problems


def _experts(config: dict[str, Any]) -> int | None:
    for key in ("num_experts", "num_local_experts", "n_routed_experts"):
        value = config.get(key)
        if isinstance(value, int) and value > 1:
            return value
    return None


def _sliding(config: dict[str, Any]) -> int | None:
    if config.get("use_sliding_window") is False:
        return None  # Qwen2 and Qwen3 name a window they do not use
    window = config.get("sliding_window")
    types = config.get("layer_types") or []
    if isinstance(window, int) and window > 0 and (not types or "sliding_attention" in types):
        return window
    return None


def read_shape(model_dir: Path) -> ModelShape | None:
    """The numbers of `model_dir`'s config.json that memory estimates need
    (`tuneloop.memory.model_shape`); None when it lacks them."""
    return model_shape(_json(Path(model_dir) / "config.json"))


def with_modules(facts: ModelFacts) -> ModelFacts:
    """`facts` with the parameter count and LoRA's `all-linear` targets, from a meta-device
    instance of the config (torch and transformers; no weights read, nothing allocated)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(str(facts.model_dir))
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    head = model.get_output_embeddings()
    names: Counter[str] = Counter()
    for name, module in model.named_modules():
        linear = isinstance(module, torch.nn.Linear) or type(module).__name__ == "Conv1D"
        if linear and module is not head:
            names[name.rsplit(".", 1)[-1]] += 1
    params = int(sum(p.numel() for p in model.parameters()))
    return replace(
        facts,
        parameters=params,
        lora_targets=tuple(names),
        lora_target_count=sum(names.values()),
    )


def vllm_architectures(python: Path) -> frozenset[str] | None:
    """The architectures vLLM's model registry serves, asked of the vLLM environment's own
    interpreter (its import takes seconds); None when it cannot say."""
    import subprocess

    code = (
        "import json; from vllm.model_executor.models import ModelRegistry; "
        "print(json.dumps(sorted(ModelRegistry.get_supported_archs())))"
    )
    try:
        done = subprocess.run(
            [str(python), "-c", code], capture_output=True, text=True, timeout=180, check=True
        )
        return frozenset(json.loads(done.stdout.strip().splitlines()[-1]))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def compat_rows(facts: ModelFacts, vllm: frozenset[str] | None) -> list[tuple[str, bool, str]]:
    """(step of a round, expected to work, why) for `doctor --compat`, read from the facts."""
    chat = facts.chat_template is not None
    lora = bool(facts.lora_target_count)
    no_template = "no chat template: set model.chat_template, or use a completion-mode suite"
    targets = (
        f"LoRA on {facts.lora_target_count} modules ({', '.join(facts.lora_targets)})"
        if lora
        else "all-linear finds no linear module: set train.lora.target_modules"
    )
    if facts.experts:
        targets += f"; the {facts.experts} experts are fused tensors, not LoRA targets"
    rows = [
        ("preflight", not facts.problems, "; ".join(facts.problems) or "reads cleanly"),
        (
            "chat",
            chat,
            f"{facts.template_source}, end of turn {facts.end_of_turn}" if chat else no_template,
        ),
    ]
    rows += [(m, lora and chat, targets if chat else no_template) for m in ("sft", "grpo", "dpo")]
    rows.append(("full", chat, "train.adapter: none" if chat else no_template))
    tie = "tied embeddings stay tied" if facts.tied_embeddings else "untied embeddings"
    rows.append(("merge", lora, f"PEFT merge_and_unload; {tie}"))
    batching = (
        "static batching (sliding-window layers cannot share a merged KV cache)"
        if facts.sliding_window
        else "continuous batching"
    )
    rows.append(("embedded", True, batching))
    if vllm is None:
        rows.append(("vllm", False, "no vLLM environment found (scripts/setup --vllm)"))
    else:
        known = facts.architecture in vllm
        verdict = "is" if known else "is not"
        rows.append(("vllm", known, f"{facts.architecture} {verdict} in vLLM's model registry"))
    return rows
