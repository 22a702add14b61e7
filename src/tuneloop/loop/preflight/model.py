"""The model check of a preflight: what the base is, and whether this round can use it.

Reads the base's config, tokenizer, chat template (or `model.chat_template`) and generation
config (`train/checkpoint/compat/`; no weights, no torch) and reports them as notes, the lines
`tuneloop check` prints. Errors, each under the key to change:

- the folder cannot be read as a causal LM: an architecture transformers does not know, a
  tokenizer without its files, an eos or end-of-turn token outside the vocabulary (`base_model`);
- no chat template while the suite has chat items or training renders conversations
  (`base_model`, naming the two fixes: `model.chat_template: FILE`, or a completion-mode
  suite of `prompt` items served through `/v1/completions`);
- a template that cannot render the suite's messages — Gemma's refuses a system turn — named
  by the first item of each shape of conversation that fails (`suite.path`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuneloop.config import LoopConfig
from tuneloop.errors import InputError
from tuneloop.loop.preflight.findings import Findings
from tuneloop.suite import Suite

if TYPE_CHECKING:
    from tuneloop.train.checkpoint.compat import TemplateTokens

CHAT_METHODS = frozenset({"sft", "grpo", "dpo", "composite"})
"""The built-in methods, which all render their rows through the chat template."""

FIXES = (
    "give it one with `model.chat_template: FILE` (a Jinja template; its sha256 joins the "
    "base's in every record), or use a completion-mode suite (`prompt` items, sent to "
    "/v1/completions)"
)


def check_model(cfg: LoopConfig, suite: Suite | None, found: Findings) -> TemplateTokens | None:
    """Report the base's facts and problems; return the template and tokenizer it read (None
    without a template, or when the base was not read), for the memory check to reuse."""
    from tuneloop.train.checkpoint.compat import read_facts, template_tokens

    base = cfg.base_model if isinstance(cfg.base_model, Path) else cfg.flywheel.bootstrap
    if base is None or not (base / "config.json").is_file():
        return None  # `champion` without a bootstrap, or a path _check_paths reported
    template = cfg.model.chat_template
    if template is not None and not template.is_file():
        found.error("model.chat_template", f"{template}: not found")
        return None
    try:
        facts = read_facts(base, template)
        tokens, _, _ = template_tokens(base, template)
    except InputError as err:
        key = "model.chat_template" if str(err).startswith("model.chat_template") else "base_model"
        found.error(key, str(err).removeprefix("model.chat_template: "))
        return None
    for line in facts.summary():
        found.note(line)
    for problem in facts.problems:
        by_template = template is not None and problem in facts.template_problems
        found.error("model.chat_template" if by_template else "base_model", problem)
    chats = [item for item in (suite.items if suite else ()) if item.messages]
    if tokens is None:
        if chats:
            found.error(
                "base_model",
                f"{base}: no chat template, and suite {cfg.suite.path.name} has {len(chats)} "
                f"chat item(s) (first: {chats[0].id}): {FIXES}",
            )
        elif cfg.train.method in CHAT_METHODS:
            found.error(
                "base_model",
                f"{base}: no chat template, and train.method {cfg.train.method} renders its "
                "rows through one: give it one with `model.chat_template: FILE` (a Jinja "
                "template; its sha256 joins the base's in every record)",
            )
        return None
    _check_renders(tokens, chats, cfg, found)
    return tokens


def _check_renders(tokens: Any, chats: list[Any], cfg: LoopConfig, found: Findings) -> None:
    """Render the first item of each shape of conversation (its sequence of roles)."""
    from tuneloop.train.checkpoint.compat import render_problem

    seen: set[tuple[str, ...]] = set()
    for item in chats:
        roles = tuple(str(m.get("role")) for m in item.messages)
        if roles in seen:
            continue
        seen.add(roles)
        problem = render_problem(tokens, item.messages)
        if problem is not None:
            found.error(
                "suite.path",
                f"{cfg.suite.path}: item {item.id} (roles {', '.join(roles)}): the chat "
                f"template cannot render it: {problem}",
            )
            return
