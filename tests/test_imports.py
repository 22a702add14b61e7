"""Import direction (docs/DESIGN.md, "Layout"): cli → flywheel → loop → phases → shared
libraries (scorers, stats, client, envs, suite, scrub) → core (config, records, registry, …).

Every import in src/tuneloop counts: module level, inside functions, under TYPE_CHECKING.
A phase never imports another phase (two phases that need the same code move it down into a
shared library); `stats` imports nothing of ours; nothing imports `cli`; core and the shared
libraries import no phase and not the loop.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = SRC / "tuneloop"

PHASES = {"serve", "evaluate", "train", "data", "replay", "report", "gate", "archive", "tracking"}
SHARED = {"scorers", "stats", "client", "envs", "suite", "scrub"}
CORE = {
    "config",
    "records",
    "registry",
    "errors",
    "entry",
    "provenance",
    "suite",
    "suite_rolling",
    "samplelog",
    "envkeys",
    "pidlock",
}
ORCHESTRATION = {"loop", "flywheel", "view"}
ENTRY_POINTS = {
    # `python -m tuneloop` and `python -m tuneloop.serve.app` (what `serving()` spawns) are
    # console scripts (both run `entry.run_app`); nothing may import them.
    "tuneloop.__main__",
    "tuneloop.serve.app",
}
ALLOWED: set[tuple[str, str]] = set()
"""(importing module, imported module) pairs that break a rule today; each is a debt."""


@dataclass(frozen=True)
class Import:
    where: str
    """path:line of the import statement."""
    source: str
    """The importing module, e.g. `tuneloop.serve.command`."""
    target: str
    """The imported module of ours, e.g. `tuneloop.serve.server`."""

    @property
    def source_top(self) -> str:
        return _top(self.source)

    @property
    def target_top(self) -> str:
        return _top(self.target)


def _top(module: str) -> str:
    """`tuneloop.serve.app` → `serve`; the root package itself → ``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    path = SRC.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _targets(node: ast.AST, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:  # relative: resolve against the importing module's package
        package = module.split(".") if is_package else module.split(".")[:-1]
        package = package[: len(package) - node.level + 1]
        base = ".".join(package + ([node.module] if node.module else []))
    # `from tuneloop import stats` imports the module tuneloop.stats
    subs = [f"{base}.{alias.name}" for alias in node.names]
    return [s if _is_module(s) else base for s in subs]


def our_imports() -> Iterator[Import]:
    for path in sorted(ROOT.rglob("*.py")):
        module = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            for target in _targets(node, module, path.name == "__init__.py"):
                if target == "tuneloop" or target.startswith("tuneloop."):
                    where = f"{path.relative_to(SRC.parent)}:{getattr(node, 'lineno', 0)}"
                    yield Import(where, module, target)


def broken_rule(imp: Import) -> str | None:
    """The rule `imp` breaks, or None."""
    src, dst = imp.source_top, imp.target_top
    if src == dst:
        return None  # inside one package
    if dst == "cli" and imp.source not in ENTRY_POINTS:
        return "nothing imports cli"
    if imp.target in ENTRY_POINTS:
        return "nothing imports an entry point"
    if src == "stats":
        return "stats imports nothing of ours"
    if src in PHASES and dst in PHASES:
        return "a phase never imports another phase"
    if src in CORE | SHARED and dst in PHASES | ORCHESTRATION:
        return "core and shared libraries import no phase and not the loop"
    if src in PHASES and dst in ORCHESTRATION:
        return "a phase does not import the loop that runs it"
    return None


def violations() -> list[str]:
    return [
        f"{imp.where}: {imp.source} imports {imp.target} ({rule})"
        for imp in our_imports()
        if (rule := broken_rule(imp)) and (imp.source, imp.target) not in ALLOWED
    ]


def test_imports_follow_the_dependency_direction() -> None:
    found = violations()
    assert not found, "imports against the dependency direction:\n" + "\n".join(found)


def test_the_scan_sees_imports_at_every_level() -> None:
    found = {(i.source, i.target) for i in our_imports()}
    assert ("tuneloop.serve.command", "tuneloop.serve.server") in found  # inside a function
    assert ("tuneloop.gate.rule", "tuneloop.stats") in found  # `from tuneloop import stats`
    assert ("tuneloop.serve.engine", "tuneloop.serve.rows") in found  # module level


def test_serve_modules_import_no_cycle() -> None:
    graph: dict[str, set[str]] = {}
    for imp in our_imports():
        if imp.source_top == imp.target_top == "serve" and imp.source != imp.target:
            graph.setdefault(imp.source, set()).add(imp.target)

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph.get(start, set()) - seen:
            if nxt == goal or reaches(nxt, goal, seen | {nxt}):
                return True
        return False

    cyclic = sorted(m for m in graph if reaches(m, m, set()))
    assert not cyclic, f"serve modules in an import cycle: {cyclic}"


def test_every_listed_package_exists_or_is_planned() -> None:
    for name in PHASES | SHARED | CORE | ORCHESTRATION:
        assert _is_module(f"tuneloop.{name}"), name
