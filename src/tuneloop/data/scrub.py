"""Scrubbing: replace e-mail addresses, secrets and IP addresses with placeholders.

Pure functions over strings and traces; the corpus build and `tuneloop ingest` call them on
every text field (message content, reasoning, tool-call arguments, tool results, metadata,
source ids) before anything is written, and count replacements per kind for the report.

Secrets matched (common provider formats, see each provider's key documentation):
`sk-ant-…` (Anthropic), `sk-proj-…` / `sk-…` (OpenAI), `ghp_` / `gho_` / `ghu_` / `ghs_` /
`ghr_` / `github_pat_` (GitHub), `AKIA…` / `ASIA…` (AWS access key ids), `xox[baprs]-…`
(Slack), `AIza…` (Google), `Bearer <token>` headers, and PEM private-key blocks. IP addresses:
dotted-quad IPv4 with octets ≤ 255 and full or `::`-compressed IPv6.
Deliberately not attempted: names, phone numbers, postal addresses (too many false
positives for a default; add patterns through `extra_patterns`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tuneloop.data.trace import Trace

EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
SECRET_PATTERNS = [
    re.compile(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?"
        r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\Z)"
    ),
    re.compile(r"\bsk-ant-[A-Za-z0-9_-]{8,}"),
    re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{16,}"),
    re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}\b"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}\b"),
    re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),
    re.compile(r"\bxox[baprs]-[A-Za-z0-9-]{10,}"),
    re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"),
    re.compile(r"(?<=\b[Bb]earer )[A-Za-z0-9._~+/=-]{16,}|(?<=\bBEARER )[A-Za-z0-9._~+/=-]{16,}"),
]
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

    def compiled(self) -> list[tuple[str, re.Pattern[str]]]:
        out: list[tuple[str, re.Pattern[str]]] = []
        if self.secrets:  # first: a key can contain an '@' or digits that look like an IP
            out += [("secret", p) for p in SECRET_PATTERNS]
        if self.emails:
            out.append(("email", EMAIL))
        if self.ips:
            out += [("ip", IPV4), ("ip", IPV6)]
        out += [(kind, re.compile(rx)) for kind, rx in self.extra_patterns.items()]
        return out


class Scrubber:
    """Applies `ScrubRules` to text and traces, counting replacements by kind.

    All patterns are joined into one alternation with a named group per pattern, so each
    string is scanned once; at one position the earlier pattern wins (secrets before e-mails
    before IPs), and the leftmost match wins across positions.
    """

    def __init__(self, rules: ScrubRules | None = None) -> None:
        self.rules = rules or ScrubRules()
        compiled = self.rules.compiled()
        self._kinds = {f"k{i}": kind for i, (kind, _) in enumerate(compiled)}
        joined = "|".join(f"(?P<k{i}>{p.pattern})" for i, (_, p) in enumerate(compiled))
        self._pattern = re.compile(joined) if compiled else None
        self._trigger = _trigger(self.rules)
        self.counts: Counter[str] = Counter()

    def _replace(self, match: re.Match[str]) -> str:
        kind = self._kinds[match.lastgroup or ""]
        self.counts[kind] += 1
        return self.rules.replacement.format(kind=kind.upper())

    def text(self, text: str) -> str:
        # The joined pattern is slow (every alternative is tried at every position); a cheap
        # literal pre-check skips it for the common string that cannot contain a match.
        if self._pattern is None or (self._trigger is not None and not self._trigger.search(text)):
            return text
        return self._pattern.sub(self._replace, text)

    def value(self, value: Any) -> Any:
        """Scrub every string inside a JSON-like value."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        return value

    def trace(self, trace: Trace) -> Trace:
        """Scrub a trace in place (message texts, tool calls, metadata, ids) and return it.

        In place on purpose: a deep copy of every trace cost more than the whole scrub.
        Fields are only reassigned when something changed.
        """
        if (new := self.text(trace.source_id)) is not trace.source_id:
            trace.source_id = new
        for m in trace.messages:
            if m.content and (new := self.text(m.content)) is not m.content:
                m.content = new
            if m.reasoning and (new := self.text(m.reasoning)) is not m.reasoning:
                m.reasoning = new
            for call in m.tool_calls or []:
                call.arguments = self.text(call.arguments)
                call.name = self.text(call.name)
        if trace.metadata:
            trace.metadata = self.value(trace.metadata)
        if trace.feedback is not None and trace.feedback.raw is not None:
            trace.feedback.raw = self.value(trace.feedback.raw)
        return trace


def _trigger(rules: ScrubRules) -> re.Pattern[str] | None:
    """A fast regex that matches wherever any enabled pattern could start (None: always scan)."""
    if rules.extra_patterns:
        return None
    parts = []
    if rules.secrets:
        parts.append(
            r"sk-|gh[pousr]_|github_pat_|AKIA|ASIA|xox[baprs]-|AIza|[Bb]earer |BEARER |PRIVATE KEY"
        )
    if rules.emails:
        parts.append("@")
    if rules.ips:
        parts.append(r"\d\.\d|[0-9A-Fa-f]?::?[0-9A-Fa-f]")
    return re.compile("|".join(parts)) if parts else None


def scrub_json_rows(
    rows: list[dict[str, Any]], scrub: Callable[[Any], Any]
) -> list[dict[str, Any]]:
    """Scrub a list of JSON rows (rejects, report lines) with a scrubber's `value`."""
    return [scrub(r) for r in rows]
