"""What a model folder is, read before any compute: `model_facts(MODEL_DIR)` and its table.

The preflight of every loop (`tuneloop check`, `run`) and `tuneloop doctor --compat MODEL_DIR`
read the same facts: the architecture and its family (`model_type`), the parameter count and
vocabulary (the model is built on the meta device, so nothing is allocated), tied or untied
embeddings, experts and sliding-window layers, the tokenizer and its bos/eos/pad, the chat
template (where it came from and its sha256), the token that ends an assistant turn, the
generation config's stop ids, whether the template renders a system role and tools, and the
modules LoRA's `all-linear` resolves to (PEFT's own rule: every `nn.Linear` but the output
head), grouped by name so a user sees `q_proj, k_proj, …` or Phi-3's fused `qkv_proj`.

A folder that cannot be read this way is an `InputError` naming the file: a config.json
transformers cannot parse or whose `model_type` it does not know, a tokenizer without its
files, an end-of-turn or eos token outside the vocabulary. `compat_rows` is the per-capability
table `doctor --compat` prints: what the facts say each loop phase will do with this model,
statically (the README's family matrix is what was measured).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuneloop.errors import InputError
from tuneloop.train.checkpoint.chat import end_of_turn_id, eos_ids

TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json", "tokenizer_config.json")


@dataclass(frozen=True)
class ModelFacts:
    model_dir: Path
    architecture: str
    model_type: str
    parameters: int
    vocab_size: int
    """The embedding's rows (config.json); the tokenizer may use fewer."""
    tokenizer_tokens: int
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
    generation_stops: tuple[tuple[int, str], ...]
    system_role: bool
    tools: str
    """`native` (the template renders `tools`), `hermes` (tuneloop's fallback format), `none`."""
    lora_targets: tuple[str, ...]
    lora_target_count: int
    problems: list[str] = field(default_factory=list)
    """What would break a round, said before compute (the preflight's errors)."""

    @property
    def template_sha256(self) -> str | None:
        if self.chat_template is None:
            return None
        return hashlib.sha256(self.chat_template.encode()).hexdigest()

    def summary(self) -> list[str]:
        """The facts as `check` prints them: a few lines, the most telling first."""
        used = self.tokenizer_tokens
        head = (
            f"model: {self.architecture} ({self.model_type}), {_count(self.parameters)} "
            f"parameters, vocabulary {self.vocab_size:,}"
            + ("" if used == self.vocab_size else f" ({used:,} in the tokenizer)")
            + f", {'tied' if self.tied_embeddings else 'untied'} embeddings"
            + (f", {self.experts} experts" if self.experts else "")
            + (f", sliding window {self.sliding_window}" if self.sliding_window else "")
        )
        if self.chat_template is None:
            chat = "chat template: none (completion-mode suites only)"
        else:
            chat = (
                f"chat template: {self.template_source} (sha256 {self.template_sha256[:12]}…); "
                f"end of turn {self.end_of_turn} ({self.end_of_turn_id}); system role "
                f"{'yes' if self.system_role else 'no'}; tools {self.tools}"
            )
        stops = ", ".join(f"{n} ({i})" for i, n in self.generation_stops) or "none"
        tokens = f"tokens: bos {self.bos}, eos {self.eos}, pad {self.pad}; generation stops {stops}"
        lora = (
            f"LoRA all-linear: {', '.join(self.lora_targets)} ({self.lora_target_count} modules;"
            " train.lora.target_modules overrides)"
        )
        return [head, "  " + chat, "  " + tokens, "  " + lora]


def _count(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def read_config(model_dir: Path) -> Any:
    """transformers' config for `model_dir`, or an InputError naming config.json."""
    from transformers import AutoConfig

    path = model_dir / "config.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"{path}: cannot read ({err})") from err
    try:
        return AutoConfig.from_pretrained(str(model_dir))
    except (ValueError, KeyError) as err:
        kind = raw.get("model_type") if isinstance(raw, dict) else None
        raise InputError(
            f"{path}: model_type {kind!r} is an architecture this transformers does not know"
            " (upgrade transformers, or check the folder is a causal LM)"
        ) from err


def read_tokenizer(model_dir: Path, chat_template: Path | None = None) -> Any:
    """The folder's tokenizer (with `chat_template` replacing its own template when given),
    or an InputError naming the files looked for."""
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(model_dir))
    except (OSError, ValueError, TypeError, KeyError) as err:
        raise InputError(
            f"{model_dir}: no usable tokenizer (tokenizer.json, tokenizer.model or vocab files "
            f"with tokenizer_config.json): {str(err).splitlines()[0]}"
        ) from err
    if chat_template is not None:
        tok.chat_template = read_template(chat_template)
    return tok


def read_template(path: Path) -> str:
    """A chat template file (Jinja text, or a JSON `{"chat_template": …}`), refused if empty."""
    try:
        text = path.read_text(encoding="utf-8")
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
    if not str(text).strip():
        raise InputError(f"model.chat_template: {path}: empty")
    return str(text)


def template_source(model_dir: Path, chat_template: Path | None) -> str | None:
    if chat_template is not None:
        return f"model.chat_template {chat_template}"
    for name in TEMPLATE_FILES:
        path = model_dir / name
        if name != "tokenizer_config.json" and path.is_file():
            return name
    return "tokenizer_config.json"


def lora_targets(config: Any) -> tuple[tuple[str, ...], int, int]:
    """(module names `all-linear` picks, grouped; how many modules; parameter count) from a
    meta-device instance: PEFT's rule, every `nn.Linear` (and GPT-2's `Conv1D`) except the
    output embedding."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    head = model.get_output_embeddings()
    names: Counter[str] = Counter()
    for name, module in model.named_modules():
        linear = isinstance(module, torch.nn.Linear) or type(module).__name__ == "Conv1D"
        if linear and module is not head:
            names[name.rsplit(".", 1)[-1]] += 1
    params = sum(p.numel() for p in model.parameters())
    return tuple(names), sum(names.values()), int(params)


def _renders_system(tok: Any) -> bool:
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    try:
        tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    except Exception:  # noqa: BLE001 - a template raising on `system` is the answer
        return False
    return True


def _token(tok: Any, token_id: int | None) -> str | None:
    return None if token_id is None else str(tok.convert_ids_to_tokens(int(token_id)))


def model_facts(model_dir: Path, chat_template: Path | None = None) -> ModelFacts:
    """Read `model_dir` (config, tokenizer, template, generation config; no weights)."""
    from tuneloop.envs.render import template_handles_tools
    from tuneloop.train.checkpoint.decoding import load_generation_config
    from tuneloop.train.common import quiet

    quiet()
    model_dir = Path(model_dir)
    config = read_config(model_dir)
    tok = read_tokenizer(model_dir, chat_template)
    targets, n_targets, params = lora_targets(config)
    vocab = int(getattr(config, "vocab_size", 0) or len(tok))
    problems: list[str] = []
    template = getattr(tok, "chat_template", None)
    if isinstance(template, dict):  # several named templates: the loop renders the default
        template = template.get("default")
    eot: int | None = None
    if template:
        try:
            eot = end_of_turn_id(tok)
        except Exception as err:  # noqa: BLE001 - a template that cannot render one exchange
            problems.append(
                f"the chat template cannot render a user/assistant exchange: "
                f"{type(err).__name__}: {err}"
            )
    gen = load_generation_config(model_dir)
    stops = eos_ids(gen)
    problems += [
        f"{model_dir}/generation_config.json: eos_token_id {tid} is outside the vocabulary of "
        f"{vocab}"
        for tid in stops
        if not 0 <= tid < vocab
    ]
    if tok.eos_token_id is None and not stops:
        problems.append(
            f"{model_dir}: neither the tokenizer nor generation_config.json names an eos "
            "token, so generation could never stop"
        )
    elif tok.eos_token_id is not None and tok.eos_token_id >= vocab:
        problems.append(
            f"{model_dir}/tokenizer_config.json: eos token {tok.eos_token!r} (id "
            f"{tok.eos_token_id}) is outside the model's vocabulary of {vocab}"
        )
    names = {i: _token(tok, i) or "?" for i in stops if 0 <= i < len(tok)}
    text_config = getattr(config, "text_config", None) or config
    return ModelFacts(
        model_dir=model_dir,
        architecture=(getattr(config, "architectures", None) or [type(config).__name__])[0],
        model_type=str(config.model_type),
        parameters=params,
        vocab_size=vocab,
        tokenizer_tokens=len(tok),
        tied_embeddings=bool(getattr(text_config, "tie_word_embeddings", False)),
        experts=_experts(text_config),
        sliding_window=_sliding(text_config),
        chat_template=template or None,
        template_source=template_source(model_dir, chat_template) if template else None,
        end_of_turn=_token(tok, eot),
        end_of_turn_id=eot,
        bos=tok.bos_token,
        eos=tok.eos_token,
        pad=tok.pad_token,
        generation_stops=tuple((i, names.get(i, "?")) for i in stops),
        system_role=bool(template) and _renders_system(tok),
        tools=("native" if template_handles_tools(template) else "hermes") if template else "none",
        lora_targets=targets,
        lora_target_count=n_targets,
        problems=problems,
    )


def _experts(config: Any) -> int | None:
    for key in ("num_experts", "num_local_experts", "n_routed_experts"):
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 1:
            return value
    return None


def _sliding(config: Any) -> int | None:
    window = getattr(config, "sliding_window", None)
    types = getattr(config, "layer_types", None) or []
    if isinstance(window, int) and window > 0 and (not types or "sliding_attention" in types):
        return window
    return None


def render_problem(tok: Any, messages: list[dict[str, Any]]) -> str | None:
    """Why the chat template cannot render `messages` (a suite item's), or None."""
    try:
        text = str(tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
    except Exception as err:  # noqa: BLE001 - jinja's raise_exception, a missing key, …
        return f"{type(err).__name__}: {err}"
    missing = [
        m["role"]
        for m in messages
        if isinstance(m.get("content"), str) and m["content"] and m["content"] not in text
    ]
    if missing:
        return f"the rendered prompt leaves out the {missing[0]} message's text"
    return None
