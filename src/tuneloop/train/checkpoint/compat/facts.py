"""`read_facts(MODEL_DIR)`: what a model folder is, from its files (no torch), and
`with_modules`, what needs its modules (on the meta device)."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tuneloop.errors import InputError
from tuneloop.memory import ModelShape, model_shape
from tuneloop.train.checkpoint.compat.template import (
    TemplateTokens,
    hf_json,
    render_problem,
    special_token,
    template_tokens,
)


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


def read_facts(model_dir: Path, chat_template: Path | None = None) -> ModelFacts:
    """Read `model_dir`'s config, tokenizer, template and generation config (no torch)."""
    model_dir = Path(model_dir)
    config = hf_json(model_dir / "config.json")
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
    stops = _stop_ids(hf_json(model_dir / "generation_config.json").get("eos_token_id"))
    eos = special_token(tok_config.get("eos_token"))
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
        bos=special_token(tok_config.get("bos_token")),
        eos=eos,
        pad=special_token(tok_config.get("pad_token")),
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
    eos = special_token(tok_config.get("eos_token"))
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
    return model_shape(hf_json(Path(model_dir) / "config.json"))


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
