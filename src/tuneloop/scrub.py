"""Scrubbing: replace e-mail addresses, secrets and IP addresses with placeholders.

A shared library (below the phases): the data phase scrubs traces with it, the serve phase's
traffic log scrubs every exchange with it before the line reaches disk, so what production
writes and what the corpus build keeps are scrubbed by one set of rules.

Pure functions over strings and records; the corpus build and `tuneloop ingest` call them on
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

import functools
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from tuneloop.envkeys import PatternSet, Trigger, secret_rules
from tuneloop.envkeys import redact_value as _redact_value

EMAIL = re.compile(
    r"(?:(?<=\\[ntrbf])|(?<![\w.+\\-]))[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"
)
"""An address not glued to a word; after a JSON escape (`\\n`) it starts after the escape, so
code in a JSON string (`\\n@app.get(`) is not read as the address `n@app.get`."""
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
IPV4 = re.compile(rf"(?<![\d.]){_OCTET}(?:\.{_OCTET}){{3}}(?![\d.]*\d)")
IPV6 = re.compile(
    r"(?<![\w:])(?:(?:[0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]{1,4}"
    r"|(?:[0-9A-Fa-f]{1,4}:){1,6}:(?:[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4}){0,5})?)(?![\w:])"
)

M = TypeVar("M", bound=BaseModel)


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


class Scrubber:
    """Applies `ScrubRules` to text and traces, counting replacements by kind.

    All patterns are joined into one alternation (`envkeys.PatternSet`), so each string is
    scanned once; at one position the earlier pattern wins (secrets before e-mails before IPs),
    and the leftmost match wins across positions.
    """

    def __init__(self, rules: ScrubRules | None = None) -> None:
        self.rules = rules or ScrubRules()
        self._set = _pattern_set(self.rules)
        self.counts: Counter[str] = self._set.counts

    def text(self, text: str) -> str:
        """`text` scrubbed; the same object when nothing was replaced."""
        return self._set.text(text)

    def value(self, value: Any) -> Any:
        """Scrub every string inside a JSON-like value, dict keys included."""
        return _redact_value(value, self._set.text)

    def trace(self, trace: M) -> M:
        """Scrub every string of a trace (any pydantic record) in place and return it.

        In place on purpose: a deep copy of every trace cost more than the whole scrub.
        Fields are only reassigned when something changed.
        """
        self._model(trace)
        return trace

    def _model(self, model: BaseModel) -> None:
        # The hot path of the corpus build (every field of every trace): strings, the common
        # case, are tested first and go straight to the pattern set.
        text = self._set.text
        for name in _field_names(type(model)):
            old = getattr(model, name)
            if isinstance(old, str):
                new = text(old)
            elif old is None or isinstance(old, (bool, int, float)):
                continue
            elif isinstance(old, BaseModel):
                self._model(old)
                continue
            elif isinstance(old, list) and old and isinstance(old[0], BaseModel):
                for item in old:
                    self._model(item)
                continue
            else:
                new = _redact_value(old, text)
            if new is not old:
                setattr(model, name, new)


@functools.cache
def _field_names(cls: type[BaseModel]) -> tuple[str, ...]:
    """A model class's field names (`model_fields` is a property that costs a call each time)."""
    return tuple(cls.model_fields)


def _pattern_set(rules: ScrubRules) -> PatternSet:
    """The enabled patterns in priority order, each kind with its cheap trigger."""
    patterns: list[tuple[str, str]] = []
    trigger = Trigger()
    if rules.secrets:  # first: a key can contain an '@' or digits that look like an IP
        secret_patterns, secret_trigger = secret_rules(rules.known_keys)
        patterns += secret_patterns
        trigger += secret_trigger
    if rules.emails:
        patterns.append(("email", EMAIL.pattern))
        trigger += Trigger(literals=("@",))
    if rules.ips:
        patterns += [("ip", IPV4.pattern), ("ip", IPV6.pattern)]
        # not `\d:\d` or one `\d.\d`: every timestamp has those
        ip = r"\d\.\d{1,3}\.\d{1,3}\.\d|::|(?:[0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]"
        trigger += Trigger(regex=ip, regex_needs=(".", ":"))
    patterns += list(rules.extra_patterns.items())
    # an extra pattern may match anything the trigger does not know of: scan every string
    return PatternSet(patterns, None if rules.extra_patterns else trigger, rules.replacement)
