"""API keys come from environment variables named in config or on the command line.

The key itself is never written to a config, a log or an artifact; only the variable's name is.
"""

from __future__ import annotations

import os

from tuneloop.errors import InputError


def read_api_key(env_var: str | None, key_path: str) -> str | None:
    """The key from `$env_var` (None when no variable is named); an InputError naming
    `key_path` (the config key or CLI option) when the variable is unset or empty."""
    if not env_var:
        return None
    value = os.environ.get(env_var)
    if not value:
        raise InputError(f"{key_path}: environment variable {env_var} is not set or empty")
    return value
