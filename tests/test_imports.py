"""Import direction (docs/design.md, §3 "Layering"): cli → view → flywheel → loop → phases →
shared libraries (scorers, stats, client, envs, scrub, serving) → core (config, records,
registry, plugins, suite, …).

Every import in src/tuneloop counts: module level, inside functions, under TYPE_CHECKING.
A phase never imports another phase (two phases that need the same code move it down into a
shared library); `stats` imports nothing of ours; nothing imports `cli`; core and the shared
libraries import no phase and not the loop; core imports no shared library; among the
orchestration packages view imports flywheel and loop, flywheel imports loop, never back. And
no file reaches itself through imports: a cycle between files is fixed by moving the shared
type down.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = SRC / "tuneloop"

PHASES = {
    "serve",
    "evaluate",
    "train",
    "data",
    "replay",
    "report",
    "gate",
    "archive",
    "tracking",
    "selection",
    "cascade",
    "shadow",
}
SHARED = {"scorers", "stats", "client", "envs", "scrub", "serving", "memory"}
CORE = {
    "config",
    "records",
    "registry",
    "plugins",
    "lazy",
    "endpoint",
    "errors",
    "entry",
    "provenance",
    "suite",
    "samplelog",
    "envkeys",
    "pidlock",
    "tiers",
    "cascade_spec",
    "axes",
}
ORCHESTRATION = {"loop", "flywheel", "view"}
ORCHESTRATION_ORDER = ("view", "flywheel", "loop")
"""Above to below: the dashboard reads rounds over time, which run rounds; never upwards."""
ENTRY_POINTS = {
    # `python -m tuneloop` and `python -m tuneloop.serve.app` (what `serving()` spawns) are
    # console scripts (both run `entry.run_app`); nothing may import them.
    "tuneloop.__main__",
    "tuneloop.serve.app",
    "tuneloop.serve.cascade.app",
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
    """The imported module of ours, e.g. `tuneloop.serve.embedded.server`."""

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
    # `from tuneloop import stats` imports the module tuneloop.stats, after the package's face
    # (its __init__.py) has run; a name that is not a module is imported from the face,
    # wherever it is defined
    out = [base]
    out += [sub for alias in node.names if _is_module(sub := f"{base}.{alias.name}")]
    return out


def imports_in(source: str, module: str, path: str, *, is_package: bool = False) -> list[Import]:
    """Every import of ours in one file's source, at any level."""
    found = []
    for node in ast.walk(ast.parse(source, path)):
        for target in _targets(node, module, is_package):
            if target == "tuneloop" or target.startswith("tuneloop."):
                found.append(Import(f"{path}:{getattr(node, 'lineno', 0)}", module, target))
    return found


def our_imports() -> Iterator[Import]:
    for path in sorted(ROOT.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        where = str(path.relative_to(SRC.parent))
        yield from imports_in(text, _module_name(path), where, is_package=path.stem == "__init__")


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
    if src in CORE and dst in SHARED:
        return "core imports no shared library"
    if src in PHASES and dst in ORCHESTRATION:
        return "a phase does not import the loop that runs it"
    upward = src in ORCHESTRATION and dst in ORCHESTRATION and _below(src, dst)
    if upward:
        return "orchestration imports only downwards: view → flywheel → loop"
    return None


def _below(src: str, dst: str) -> bool:
    return ORCHESTRATION_ORDER.index(src) > ORCHESTRATION_ORDER.index(dst)


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
    source = (
        "from typing import TYPE_CHECKING\n"
        "import tuneloop.config.load\n"  # module level
        "from tuneloop import stats\n"  # a module imported from a package
        "if TYPE_CHECKING:\n"
        "    from tuneloop.records import Record\n"  # a name from a package's face
        "def f():\n"
        "    from tuneloop.suite.slices import slice_ids\n"  # inside a function
        "    from . import errors\n"  # relative
    )
    found = {i.target for i in imports_in(source, "tuneloop.x", "x.py")}
    assert found == {
        "tuneloop",
        "tuneloop.config.load",
        "tuneloop.stats",
        "tuneloop.records",
        "tuneloop.suite.slices",
        "tuneloop.errors",
    }
    assert any(i.source == "tuneloop.gate.rule" for i in our_imports())  # the real tree


def file_graph() -> dict[str, dict[str, str]]:
    """module → {imported module of ours → where the first such import is}.

    What Python runs counts: `from tuneloop.pkg import x` is an arrow to pkg/__init__.py (and
    to pkg/x.py when x is a module), and an import from outside a package is also an arrow to
    each enclosing package's __init__.py, which runs first. From inside a package its
    __init__.py is already running, so a module's own packages are no arrows."""
    graph: dict[str, dict[str, str]] = {}
    for imp in our_imports():
        parts = imp.target.split(".")
        enclosing = [".".join(parts[:i]) for i in range(2, len(parts))]
        outside = [p for p in enclosing if not f"{imp.source}.".startswith(f"{p}.")]
        for target in [imp.target, *outside]:
            if target != imp.source:
                graph.setdefault(imp.source, {}).setdefault(target, imp.where)
    return graph


def file_components(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one file (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(components)


def file_cycles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """One cycle through the first module of each component, a concrete path to cut."""
    return [_cycle_through(c[0], set(c), graph) for c in file_components(graph)]


def _cycle_through(start: str, members: set[str], graph: dict[str, dict[str, str]]) -> list[str]:
    """A shortest path start → … → start inside one component (breadth first)."""
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt_frontier = []
        for node in frontier:
            for nxt in sorted(graph.get(node, {})):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if nxt in members and nxt not in came_from:
                    came_from[nxt] = node
                    nxt_frontier.append(nxt)
        frontier = nxt_frontier
    raise AssertionError(f"{start} is in no cycle")


def _describe(cycle: list[str], graph: dict[str, dict[str, str]]) -> str:
    arrows = [f"{a} → {b} ({graph[a][b]})" for a, b in zip(cycle, cycle[1:], strict=False)]
    return "\n    ".join(arrows)


def test_no_file_level_import_cycle() -> None:
    graph = file_graph()
    components = file_components(graph)
    report = [
        f"{len(c)} files in a cycle ({', '.join(c)}), e.g.:\n    "
        + _describe(_cycle_through(c[0], set(c), graph), graph)
        for c in components
    ]
    assert not components, f"{len(components)} import cycle(s) between files:\n" + "\n".join(report)


def test_the_cycle_scan_finds_a_cycle() -> None:
    graph = {"a": {"b": "a.py:1"}, "b": {"c": "b.py:1"}, "c": {"a": "c.py:1"}, "d": {"a": "d"}}
    assert file_cycles(graph) == [["a", "b", "c", "a"]]
    assert file_cycles({"a": {"b": "a.py:1"}}) == []


def test_every_listed_package_exists_or_is_planned() -> None:
    for name in PHASES | SHARED | CORE | ORCHESTRATION:
        assert _is_module(f"tuneloop.{name}"), name


def test_each_rule_fires_on_an_arrow_against_it() -> None:
    def rule(source: str, target: str) -> str | None:
        return broken_rule(Import("x.py:1", source, target))

    assert rule("tuneloop.loop.runner", "tuneloop.cli") == "nothing imports cli"
    assert rule("tuneloop.stats.paired", "tuneloop.errors") == "stats imports nothing of ours"
    assert rule("tuneloop.gate.verdict", "tuneloop.report.delta") is not None
    assert rule("tuneloop.suite.reader", "tuneloop.envs.items") == "core imports no shared library"
    assert rule("tuneloop.scorers.numeric", "tuneloop.serve.backends") is not None
    assert rule("tuneloop.train.run", "tuneloop.loop.layout") is not None
    assert rule("tuneloop.loop.runner", "tuneloop.flywheel.watch") is not None
    assert rule("tuneloop.flywheel.status", "tuneloop.view.page") is not None
    assert rule("tuneloop.view.page", "tuneloop.flywheel.status") is None
    assert rule("tuneloop.flywheel.status", "tuneloop.loop.layout") is None
