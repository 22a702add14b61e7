"""Lazy package faces (PEP 562): a face names its exports, their modules load on first use.

A package whose modules load numpy, scipy or torch still offers its public names at the top
(`from tuneloop.gate import adjudicate`) without making `tuneloop --help` or `tuneloop check`
pay for them:

    if TYPE_CHECKING:  # the arrows the import test and mypy see
        from tuneloop.gate.verdict import adjudicate
    __getattr__ = lazy_exports(__name__, {"adjudicate": "verdict"})

The names stay under TYPE_CHECKING in the face, so no arrow is hidden from the import rules.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package` that imports `package.<exports[name]>` the first
    time `name` is read and returns its `name`."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{exports[name]}"), name)

    return __getattr__
