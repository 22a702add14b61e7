"""Scrubbing: replace e-mail addresses, secrets and IP addresses with placeholders.

Pure functions over strings and traces; the corpus build and `tuneloop ingest` call them on
every string of a trace before anything is written — texts, tool-call ids and names,
`tool_call_id`, the model name, the source name, id and file, metadata and feedback values
AND their dict keys — and count replacements per kind for the report. A trace's fields are
walked generically (every string field of the record and of the models inside it), so a field
added to `Trace` later is scrubbed without anyone remembering to add it here.

Secrets: the patterns of `tuneloop.envkeys.SECRET_PATTERNS` (OpenAI, Anthropic, GitHub, AWS
key ids and secret keys, Google, Slack, Hugging Face, JWTs, `Authorization:` / `Bearer` with
any whitespace, labelled keys, passwords, PEM private keys, credentials in URLs), plus every
API key value this process read from the environment (`envkeys.known_keys`). IP addresses:
dotted-quad IPv4 with octets ≤ 255 and full or `::`-compressed IPv6.
Two dict keys that scrub to the same text are both kept (`<SECRET>`, `<SECRET>#2`).
Deliberately not attempted: names, phone numbers, postal addresses (too many false
positives for a default; add patterns through `extra_patterns`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from tuneloop.data.trace import Trace
from tuneloop.envkeys import (
    SECRET_PATTERNS,
    SECRET_TRIGGER,
    PatternSet,
    Trigger,
    key_literals,
)
from tuneloop.envkeys import redact_value as _redact_value

EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
IPV4 = re.compile(rf"(?<![\d.]){_OCTET}(?:\.{_OCTET}){{3}}(?![\d.]*\d)")
IPV6 = re.compile(
    r"(?<![\w:])(?:(?:[0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]{1,4}"
    r"|(?:[0-9A-Fa-f]{1,4}:){1,6}:(?:[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4}){0,5})?)(?![\w:])"
)


@dataclass(frozen=True)
class ScrubRules:
    """What to scrub and what to put in its place (`{kind}` is replaced by the kind)."""

    emails: bool = True
    secrets: bool = True
    ips: bool = True
    replacement: str = "<{kind}>"
    extra_patterns: dict[str, str] = field(default_factory=dict)
    """kind → regular expression, scrubbed after the built-ins."""

    known_keys: tuple[str, ...] = ()
    """Key values to redact wherever they appear (besides those read with `read_api_key`)."""

    def compiled(self) -> list[tuple[str, str]]:
        """(kind, regex) pairs in priority order."""
        out: list[tuple[str, str]] = []
        if self.secrets:  # first: a key can contain an '@' or digits that look like an IP
            literals = map(re.escape, key_literals(self.known_keys))
            out += [("secret", rx) for rx in [*literals, *SECRET_PATTERNS]]
        if self.emails:
            out.append(("email", EMAIL.pattern))
        if self.ips:
            out += [("ip", IPV4.pattern), ("ip", IPV6.pattern)]
        out += list(self.extra_patterns.items())
        return out


class Scrubber:
    """Applies `ScrubRules` to text and traces, counting replacements by kind.

    All patterns are joined into one alternation (`envkeys.PatternSet`), so each string is
    scanned once; at one position the earlier pattern wins (secrets before e-mails before IPs),
    and the leftmost match wins across positions.
    """

    def __init__(self, rules: ScrubRules | None = None) -> None:
        self.rules = rules or ScrubRules()
        self._set = PatternSet(self.rules.compiled(), _trigger(self.rules), self.rules.replacement)
        self.counts: Counter[str] = self._set.counts

    def text(self, text: str) -> str:
        """`text` scrubbed; the same object when nothing was replaced."""
        return self._set.text(text)

    def value(self, value: Any) -> Any:
        """Scrub every string inside a JSON-like value, dict keys included."""
        return _redact_value(value, self._set.text)

    def trace(self, trace: Trace) -> Trace:
        """Scrub every string of a trace in place and return it.

        In place on purpose: a deep copy of every trace cost more than the whole scrub.
        Fields are only reassigned when something changed.
        """
        self._model(trace)
        return trace

    def _model(self, model: BaseModel) -> None:
        for name in type(model).model_fields:
            old = getattr(model, name)
            if isinstance(old, BaseModel):
                self._model(old)
                continue
            if isinstance(old, list) and old and isinstance(old[0], BaseModel):
                for item in old:
                    self._model(item)
                continue
            if old is None or isinstance(old, (bool, int, float)):
                continue
            new = _redact_value(old, self._set.text)
            if new is not old:
                setattr(model, name, new)


def _trigger(rules: ScrubRules) -> Trigger | None:
    """A cheap test that any enabled pattern could match (None: always scan)."""
    if rules.extra_patterns:
        return None
    trigger = Trigger()
    if rules.secrets:
        trigger += Trigger(literals=tuple(key_literals(rules.known_keys))) + SECRET_TRIGGER
    if rules.emails:
        trigger += Trigger(literals=("@",))
    if rules.ips:
        # not `\d:\d` or one `\d.\d`: every timestamp has those
        ip = r"\d\.\d{1,3}\.\d{1,3}\.\d|::|(?:[0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]"
        trigger += Trigger(regex=ip, regex_needs=(".", ":"))
    return trigger


def scrub_json_rows(
    rows: list[dict[str, Any]], scrub: Callable[[Any], Any]
) -> list[dict[str, Any]]:
    """Scrub a list of JSON rows (rejects, report lines) with a scrubber's `value`."""
    return [scrub(r) for r in rows]
