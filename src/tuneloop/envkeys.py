"""API keys: read from environment variables named in config or on the command line, and kept
out of everything tuneloop writes or prints.

The key itself is never written to a config, a log or an artifact; only the variable's name is.
Every key `read_api_key` returns is remembered for the life of the process (`known_keys`), so
that any writer can redact it by value — a server that echoes the key back in an error body
must not get it into a sample log. `SECRET_PATTERNS` are the credential formats redacted
even when their value is not known; `Redactor` applies both. They live here, in the core,
because every phase that writes text needs them (the data phase's `Scrubber` adds e-mails and
IPs on top) and a phase never imports another phase.

Patterns, each allowing ANY whitespace where a person or a tool may put some, including
whitespace escaped inside a JSON string (`\\t`, `\\n`, `\\u0009` — tool-call arguments and
reject excerpts are JSON text): `sk-ant-…` (Anthropic), `sk-…` / `sk-proj-…` (OpenAI),
`ghp_` / `gho_` / `ghu_` / `ghs_` / `ghr_` / `github_pat_` (GitHub), `AKIA…`-style AWS key ids,
AWS secret access keys after their usual labels or beside their key id, `AIza…` (Google),
`xox?-` / `xapp-` (Slack), `hf_…` (Hugging Face), JWTs, the credential after `Authorization:`
(any scheme) or after `Bearer`, `api_key=`-style labels (the value must look like a token),
`password=…`, PEM private-key blocks, and passwords or tokens in URLs (`user:pass@host`,
`?token=…`). A pattern may capture a `keep` group (the label before the value): only the rest
is replaced, so `Authorization: Bearer <SECRET>` still says what was there.
Deliberately not attempted: a bare 40-character AWS secret without label or key id (a git
SHA-1 looks the same), and a key glued to letters or digits in front of it (`xsk-…`; too many
false positives in ordinary words).
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from tuneloop.errors import InputError

_WS = r"(?:\s|\\+[tnrfb]|\\+u00[0-9a-fA-F]{2})"
"""Whitespace, raw or escaped in JSON text (one or more backslashes: JSON inside JSON)."""
_Q = r"""(?:\\*["'])?"""
"""An optional quote, possibly escaped."""
_SEP = rf"{_Q}(?:{_WS}*[:=]{_WS}*|{_WS}+){_Q}"
"""Between a label and its value: `: `, `=`, `": "`, or whitespace."""
_TOKEN = r"[A-Za-z0-9._~+/=-]"
_NOT_ALNUM = r"(?:(?<![A-Za-z0-9])|(?<=\\[tnrfb]))"
"""Not glued to a letter or digit (the letter of an escape like `\\n` does not count)."""

SECRET_PATTERNS: list[str] = [
    # PEM private keys; an unterminated block is cut to the end of the text.
    rf"-----BEGIN{_WS}+(?:[A-Z0-9]+{_WS}+)*PRIVATE{_WS}+KEY(?:{_WS}+BLOCK)?-----[\s\S]*?"
    rf"(?:-----END{_WS}+(?:[A-Z0-9]+{_WS}+)*PRIVATE{_WS}+KEY(?:{_WS}+BLOCK)?-----|\Z)",
    # An AWS key id with its secret beside it (credentials.csv, `id:secret`, `id secret`).
    rf"(?:AKIA|ASIA)[A-Z0-9]{{16}}(?:{_WS}|[,;:|=\"'\\]){{1,8}}[A-Za-z0-9/+]{{40,}}",
    r"(?:AKIA|ASIA|AROA|AIDA|AGPA|ANPA|ANVA|AIPA|ABIA|ACCA)[A-Z0-9]{16}",
    rf"(?P<keep>(?i:(?:aws[_-]?)?secret[_-]?access[_-]?key|aws[_-]?secret[_-]?key){_SEP})"
    r"[A-Za-z0-9/+=]{40,}",
    r"sk-ant-[A-Za-z0-9_-]{8,}",
    rf"{_NOT_ALNUM}sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{{16,}}",
    r"(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}",
    r"github_pat_[A-Za-z0-9_]{20,}",
    r"(?:xox[abposre]|xapp)-[A-Za-z0-9-]{10,}",
    r"AIza[0-9A-Za-z_-]{35}",
    rf"{_NOT_ALNUM}hf_[A-Za-z0-9]{{30,}}",
    rf"{_NOT_ALNUM}eyJ[A-Za-z0-9_-]{{8,}}\.eyJ[A-Za-z0-9_-]{{8,}}\.[A-Za-z0-9_-]*",
    # Whatever follows `Authorization:` is a credential, whatever its length or scheme.
    rf"(?P<keep>(?i:authorization){_Q}{_WS}*[:=]{_WS}*{_Q}"
    rf"(?:(?i:bearer|basic|token|bot|digest|apikey){_WS}+)?)"
    rf"(?!(?i:bearer|basic|token|bot|digest|apikey)(?!{_TOKEN})){_TOKEN}{{4,}}",
    rf"(?P<keep>{_NOT_ALNUM}(?i:bearer){_WS}+){_TOKEN}{{16,}}",
    # A labelled key: the value must look like a token (≥ 12 characters, a digit in it), so
    # that `api_key = read_api_key(...)` in code is left alone.
    rf"(?P<keep>(?i:x-api-key|api[_-]?key|access[_-]?token|auth[_-]?token|refresh[_-]?token"
    rf"|client[_-]?secret|secret[_-]?key|private[_-]?key){_Q}{_WS}*[:=]{_WS}*{_Q})"
    rf"(?=[A-Za-z._~+/=-]*[0-9]){_TOKEN}{{12,}}",
    rf"(?P<keep>{_NOT_ALNUM}(?i:password|passwd|pwd){_Q}{_WS}*[:=]{_WS}*{_Q})"
    r"(?>[^\s\"'\\,;&(){}\[\]<>]{4,})(?!\()",
    r"(?P<keep>[A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#@\"'<>]*:)[^\s/?#@\"'<>]+(?=@)",
    r"(?P<keep>[?&;](?i:password|passwd|pwd|pass|secret|token|access_token|api_key|apikey"
    r"|api-key|key|client_secret|auth|x-amz-signature|x-amz-credential|x-amz-security-token)=)"
    r"[^\s&#\"'<>]+",
]


@dataclass(frozen=True)
class Trigger:
    """A cheap test that a string may hold a match, run before the (slow) joined pattern.

    Substring tests run at C speed; a regex alternation of the same literals is ~10-40x
    slower in `re`, which tries every alternative at every position. True when any
    `literals` is in the text, any `folded` is in its lower-case form, any `folded_sep` is
    too and the text has a `:` or `=`, or `regex` matches (tried only when the text holds
    one of `regex_needs`).
    """

    literals: tuple[str, ...] = ()
    folded: tuple[str, ...] = ()
    folded_sep: tuple[str, ...] = ()
    regex: str | None = None
    regex_needs: tuple[str, ...] = ()

    def __add__(self, other: Trigger) -> Trigger:
        regex = "|".join(r for r in (self.regex, other.regex) if r) or None
        return Trigger(
            self.literals + other.literals,
            self.folded + other.folded,
            self.folded_sep + other.folded_sep,
            regex,
            self.regex_needs + other.regex_needs,
        )

    def compile(self) -> Callable[[str], bool]:
        literals, folded, folded_sep = self.literals, self.folded, self.folded_sep
        regex = re.compile(self.regex).search if self.regex else None
        needs = self.regex_needs

        def could_match(text: str) -> bool:
            for lit in literals:
                if lit in text:
                    return True
            if folded or folded_sep:
                low = text.lower()
                for lit in folded:
                    if lit in low:
                        return True
                if folded_sep and (":" in text or "=" in text):
                    for lit in folded_sep:
                        if lit in low:
                            return True
            if regex is not None:
                for c in needs:  # a plain loop: `any(genexpr)` costs more than the tests
                    if c in text:
                        return regex(text) is not None
            return False

        return could_match


SECRET_TRIGGER = Trigger(
    literals=(
        *("-----BEGIN", "AIza", "sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        *("AKIA", "ASIA", "AROA", "AIDA", "AGPA", "ANPA", "ANVA", "AIPA", "ABIA", "ACCA"),
        *("xox", "xapp-", "hf_", "eyJ", "://"),
    ),
    folded=("bearer", "secret_access", "secret-access", "secretaccess", "aws_secret", "aws-secret"),
    # labels whose pattern needs a `:` or `=` after them; `key=` etc. for URL queries
    folded_sep=(
        *("authorization", "passw", "pwd", "api_key", "api-key", "apikey", "token", "secret"),
        *("private_key", "private-key", "privatekey", "key=", "pass=", "auth=", "signature="),
        "credential=",
    ),
)
"""Holds wherever any of SECRET_PATTERNS could match."""

_known: set[str] = set()


def read_api_key(env_var: str | None, key_path: str) -> str | None:
    """The key from `$env_var` (None when no variable is named); an InputError naming
    `key_path` (the config key or CLI option) when the variable is unset or empty.
    The value is remembered (`known_keys`) so that writers redact it."""
    if not env_var:
        return None
    value = os.environ.get(env_var)
    if not value:
        raise InputError(f"{key_path}: environment variable {env_var} is not set or empty")
    _known.add(value)
    return value


def known_keys() -> tuple[str, ...]:
    """Every key value `read_api_key` has returned in this process."""
    return tuple(sorted(_known))


def key_variants(key: str) -> list[str]:
    """The spellings a key can take in text: as is, JSON-escaped, URL-encoded."""
    forms = {key, json.dumps(key)[1:-1], key.replace("/", "\\/"), quote(key, safe="")}
    # longest first: in an alternation the first that matches wins
    return sorted((f for f in forms if f), key=len, reverse=True)


def key_literals(keys: tuple[str | None, ...] = ()) -> list[str]:
    """Every spelling of `keys` and of the keys read so far, longest first."""
    values = {k for k in (*keys, *known_keys()) if k}
    return sorted({v for k in values for v in key_variants(k)}, key=len, reverse=True)


def secret_rules(keys: tuple[str | None, ...] = ()) -> tuple[list[tuple[str, str]], Trigger]:
    """("secret", regex) pairs in priority order — every spelling of `keys` and of the keys
    read so far, then `SECRET_PATTERNS` — and the trigger that holds wherever one could match.
    Shared by `Redactor` and the data phase's `Scrubber`."""
    literals = key_literals(keys)
    patterns = [("secret", rx) for rx in [*map(re.escape, literals), *SECRET_PATTERNS]]
    return patterns, Trigger(literals=tuple(literals)) + SECRET_TRIGGER


_CLEAN_CHARS, _CLEAN_MAX = 80, 1 << 16


class PatternSet:
    """Kinds of text to replace, as one compiled alternation scanned once per string.

    `patterns` are (kind, regex) pairs; at one position the earlier pattern wins, and the
    leftmost match wins across positions. A regex may capture a `keep` group, which stays.
    `trigger` is a cheap test that any pattern could match (None: always scan); the joined
    alternation is slow, and most strings contain nothing to replace.
    """

    def __init__(
        self,
        patterns: list[tuple[str, str]],
        trigger: Trigger | None,
        replacement: str = "<{kind}>",
    ) -> None:
        self.counts: Counter[str] = Counter()
        self._kinds: dict[str, str] = {}
        self._keep: dict[str, str] = {}
        parts = []
        for i, (kind, rx) in enumerate(patterns):
            name = f"k{i}"
            self._kinds[name] = kind
            if "(?P<keep>" in rx:
                rx = rx.replace("(?P<keep>", f"(?P<keep{i}>")
                self._keep[name] = f"keep{i}"
            parts.append(f"(?P<{name}>{rx})")
        self._pattern = re.compile("|".join(parts)) if parts else None
        self._trigger = trigger.compile() if trigger is not None else None
        self._replacement = replacement
        self._clean: set[str] = set()
        """Short strings known to hold nothing (roles, model and source names, file names
        repeat in every trace; only clean ones are kept, so the counts stay exact)."""

    def _replace(self, match: re.Match[str]) -> str:
        # lastgroup is the outer `k` group: it closes after any `keep` group inside it
        name = match.lastgroup or ""
        kind = self._kinds[name]
        self.counts[kind] += 1
        keep = match.group(self._keep[name]) if name in self._keep else ""
        return (keep or "") + self._replacement.format(kind=kind.upper())

    def text(self, text: str) -> str:
        """`text` with every match replaced; the same object when nothing matched."""
        short = len(text) <= _CLEAN_CHARS
        if self._pattern is None or (short and text in self._clean):
            return text
        if self._trigger is not None and not self._trigger(text):
            out = text
        else:
            out = self._pattern.sub(self._replace, text)
            if out == text:
                out = text
        if out is text and short and len(self._clean) < _CLEAN_MAX:
            self._clean.add(text)
        return out


class Redactor:
    """Known key values and `SECRET_PATTERNS` out of text and JSON-like values.

    `Redactor(keys)` redacts `keys` plus every key read with `read_api_key` so far.
    """

    def __init__(self, keys: tuple[str | None, ...] = (), replacement: str = "<{kind}>") -> None:
        self.patterns = PatternSet(*secret_rules(keys), replacement)

    def text(self, text: str) -> str:
        return self.patterns.text(text)

    def value(self, value: Any) -> Any:
        """Redact every string inside a JSON-like value, dict keys included."""
        return redact_value(value, self.patterns.text)


def redact_value(value: Any, text: Callable[[str], str]) -> Any:
    """Apply `text` to every string inside a JSON-like value, dict keys included.

    Returns `value` itself when nothing changed (callers test `is`, and nothing is copied).
    Two keys that redact to the same text are both kept: the later one gets a `#2`, `#3`…
    suffix, and a key that did not change keeps its name.
    """
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return _redact_dict(value, text)
    if isinstance(value, list):
        return _redact_list(value, text)
    return value


# Nearly every value holds nothing to redact, and the eval redacts every sample row as it is
# written (issue 35: this walk was a fifth of the eval client's CPU), so both walks below first
# test each entry in place, without building anything or calling redact_value on a string,
# and build a new container only from the first entry that changes. `text` is called exactly
# once per string either way: a PatternSet counts what it replaces.


def _redact_list(value: list[Any], text: Callable[[str], str]) -> list[Any]:
    for i, v in enumerate(value):
        if isinstance(v, str):
            new = text(v)
        elif isinstance(v, (dict, list)):
            new = redact_value(v, text)
        else:
            continue
        if new is not v:
            return [*value[:i], new, *(redact_value(w, text) for w in value[i + 1 :])]
    return value


def _redact_dict(value: dict[Any, Any], text: Callable[[str], str]) -> dict[Any, Any]:
    i = 0
    for k, v in value.items():
        nk = text(k) if isinstance(k, str) else k
        if isinstance(v, str):
            nv = text(v)
        elif isinstance(v, (dict, list)):
            nv = redact_value(v, text)
        else:
            nv = v
        if nk is not k or nv is not v:
            break
        i += 1
    else:
        return value
    entries = list(value.items())
    triples = [(k, k, v) for k, v in entries[:i]]
    triples.append((k, nk, nv))
    triples += [
        (k, text(k) if isinstance(k, str) else k, redact_value(v, text))
        for k, v in entries[i + 1 :]
    ]
    taken = {k for k, nk, _ in triples if k is nk}
    out: dict[Any, Any] = {}
    for k, nk, v in triples:
        if k is not nk:
            base, n = nk, 2
            while nk in taken or nk in out:
                nk, n = f"{base}#{n}", n + 1
        out[nk] = v
    return out
