"""The rubric: a Jinja2 template rendered into the judge's one user message.

    rubric = load_rubric(Path("rubric.j2"), mode="grade")
    text = rubric.grade(prompt_text(messages), response, reference)

Grade templates see `prompt` (the conversation as text), `response` and `reference` (the
item's answer, "" when it has none); pairwise templates see `prompt`, `response_a` and
`response_b`. Undefined names are errors (StrictUndefined), found at load by rendering the
template once with every variable, so a typo in a rubric stops `tuneloop check`, not the eval.
The template runs in Jinja2's sandbox: a rubric file is configuration, not code. The sha256
of its bytes is in every judgement's provenance.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import StrictUndefined, TemplateError
from jinja2.sandbox import SandboxedEnvironment

from tuneloop.errors import InputError

_VARIABLES = {
    "grade": ("prompt", "response", "reference"),
    "pairwise": ("prompt", "response_a", "response_b"),
}
_ENV = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)


@dataclass(frozen=True)
class Rubric:
    path: Path
    mode: str
    sha256: str
    """sha256 of the template file's bytes."""
    source: str

    def render(self, **values: str) -> str:
        return _ENV.from_string(self.source).render(**values)

    def grade(self, prompt: str, response: str, reference: str) -> str:
        return self.render(prompt=prompt, response=response, reference=reference)

    def pairwise(self, prompt: str, response_a: str, response_b: str) -> str:
        return self.render(prompt=prompt, response_a=response_a, response_b=response_b)


def load_rubric(path: Path, mode: str) -> Rubric:
    """Read and check a rubric template; InputError naming the file (and line) when it
    cannot render with the mode's variables."""
    path = Path(path)
    try:
        data = path.read_bytes()
        source = data.decode("utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: rubric file not found") from None
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: cannot read the rubric: {err}") from None
    rubric = Rubric(path, mode, hashlib.sha256(data).hexdigest(), source)
    try:
        rendered = rubric.render(**{name: f"<{name}>" for name in _VARIABLES[mode]})
    except TemplateError as err:
        line = getattr(err, "lineno", None)
        where = f"{path}:{line}" if line else str(path)
        known = ", ".join(_VARIABLES[mode])
        raise InputError(
            f"{where}: rubric template error: {err} ({mode} rubrics see: {known})"
        ) from None
    if not rendered.strip():
        raise InputError(f"{path}: the rubric renders to nothing")
    return rubric


def prompt_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """A conversation as plain text for a rubric: one `role: content` block per message
    (list contents keep their text parts; tool calls are named)."""
    blocks = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            content = "\n".join(
                str(part.get("text", "")) for part in content if isinstance(part, Mapping)
            )
        text = str(content or "")
        for call in message.get("tool_calls") or []:
            fn = call.get("function", {}) if isinstance(call, Mapping) else {}
            text += f"\n[tool call {fn.get('name')}({fn.get('arguments', '')})]"
        blocks.append(f"{message.get('role', 'user')}: {text}".rstrip())
    return "\n\n".join(blocks)


def answer_text(message: Mapping[str, Any]) -> str:
    """What a judge reads of one assistant answer: its text and its tool calls, named with
    their arguments as `prompt_text` shows them (an agent's step is often only a tool call)."""
    return prompt_text([{**message, "role": ""}]).removeprefix(":").strip()
