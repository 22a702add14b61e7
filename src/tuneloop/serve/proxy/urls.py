"""Upstream base URLs: `normalize_upstream` (what the proxy accepts as one) and `origin` (what an
upstream key belongs to). Shared by the forwarding (`forward.py`) and the mirror (`mirror.py`)."""

from __future__ import annotations

from urllib.parse import urlsplit

from tuneloop.errors import InputError

__all__ = ["normalize_upstream", "origin"]


def normalize_upstream(url: str) -> str:
    """`http(s)://host[:port][/prefix]` without a trailing `/` or `/v1`; InputError otherwise."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"upstream {url!r}: expected an http:// or https:// URL with a host")
    if parts.query or parts.fragment:
        raise InputError(f"upstream {url!r}: a base URL takes no query or fragment")
    path = parts.path.rstrip("/")
    path = path[: -len("/v1")] if path.endswith("/v1") else path
    return f"{parts.scheme}://{parts.netloc}{path}"


def origin(url: str) -> str:
    """`scheme://host:port` of a URL, the port spelled out (what a key belongs to)."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{parts.hostname}:{port}"
