"""The lazy package faces: a name loads its module on first use, an unknown name is refused."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tuneloop.lazy import lazy_exports


def test_a_name_loads_its_module_and_an_unknown_name_is_refused() -> None:
    getattr_ = lazy_exports("tuneloop.gate", {"decide": "rule"})
    from tuneloop.gate.rule import decide

    assert getattr_("decide") is decide
    with pytest.raises(AttributeError, match="'tuneloop.gate' has no attribute 'nope'"):
        getattr_("nope")


def test_importing_the_faces_loads_none_of_their_heavy_modules() -> None:
    code = (
        "import sys, tuneloop.gate, tuneloop.report, tuneloop.train.methods, "
        "tuneloop.train.distributed\n"
        "print(sorted(m for m in ('numpy', 'scipy', 'torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
