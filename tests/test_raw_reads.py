"""tuneloop reads its own artifacts typed: no raw JSON reads in src/ outside the records package.

A raw read (`read_json(path)[key]`, `json.loads(path.read_text())`, `json.load(open(path))`)
of a file tuneloop wrote skips the schema check: a renamed field fails with a KeyError after a
full run instead of an error naming the file, and a newer record is not refused. Read an
artifact with `tuneloop.records.read_record(path, SomeRecord)`; a new artifact gets a `Record`
subclass (listed in `tuneloop/records/catalog.py`).

A file that is *not* a tuneloop artifact may be read raw; it goes in `NOT_ARTIFACTS` below,
keyed by file and function, with the reason.

The gate ledger's JSON columns (`record`, `descriptor`, …) are artifacts too: a
`json.loads(row["record"])` anywhere but in the ledger's row decoder (`LEDGER_READER`) skips
the typed row. Read the ledger through `tuneloop.gate.ledger.open_ledger`; its methods
return typed rows.
"""

from __future__ import annotations

import ast
import sqlite3
from pathlib import Path

from tuneloop.gate.ledger.store import SCHEMA

SRC = Path(__file__).resolve().parents[1] / "src" / "tuneloop"

TYPED_READER = "records/"
"""The records package: `read_record` itself sits on `read_json`."""
LEDGER_READER = "gate/ledger/rows.py"
"""The ledger's typed rows: the one place its JSON columns are decoded."""


def _ledger_columns() -> frozenset[str]:
    """Every column name of the ledger's tables (its schema, created in memory)."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(SCHEMA)
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return frozenset(c[1] for t in tables for c in conn.execute(f"PRAGMA table_info({t})"))
    finally:
        conn.close()


LEDGER_COLUMNS = _ledger_columns()
NOT_LEDGER_ROWS: dict[tuple[str, str], str] = {}
"""(file, enclosing function) allowed a `json.loads(x["<ledger column>"])` outside the
ledger's reader, with the reason. Empty: every such read is a typed row of `gate.ledger`."""

NOT_ARTIFACTS: dict[tuple[str, str], str] = {
    # (file under src/tuneloop, enclosing function): what it reads, and why it is raw
    ("cascade_spec.py", "load_cascade"): (
        "a cascade descriptor (a user's file, or compose's), typed by read_cascade: a champion "
        "descriptor is a free-form mapping the ledger stores as is"
    ),
    ("cascade_spec.py", "is_cascade_file"): "sniffs `kind` of a JSON file given as a model",
    ("loop/cascade.py", "cascade_champion"): (
        "the composed descriptor, copied into the ledger as the champion's (a mapping)"
    ),
    ("serve/cascade/app.py", "read_plan"): (
        "the serving plan its parent wrote a moment ago for this process; the descriptor in it "
        "is typed by read_cascade"
    ),
    (
        "loop/base_overlay.py",
        "build_overlay",
    ): "a Hugging Face tokenizer_config.json (written by transformers), its template dropped",
    (
        "train/checkpoint/compat/template.py",
        "hf_json",
    ): "a Hugging Face checkpoint's config, tokenizer and generation JSON (not ours)",
    (
        "serve/backends.py",
        "_position_limit",
    ): "a Hugging Face checkpoint's config.json (its max_position_embeddings), not ours",
    (
        "serve/adapter.py",
        "served_adapter",
    ): "a PEFT adapter's adapter_config.json (written by peft, its rank and type)",
    (
        "serve/embedded/server.py",
        "preflight",
    ): "a Hugging Face model's config.json (written by transformers)",
    (
        "train/checkpoint/merge.py",
        "base_dtype",
    ): "a Hugging Face model's config.json (its weight dtype)",
    (
        "train/checkpoint/doctor.py",
        "weight_files",
    ): "a safetensors shard index (model.safetensors.index.json)",
    (
        "train/distributed/worker.py",
        "main",
    ): "the worker spec the train phase hands its own subprocess",
    (
        "train/distributed/diloco_replica.py",
        "main",
    ): "the spec `run_diloco` hands its replica processes",
    ("train/distributed/plain_ddp.py", "main"): "the spec `run_ddp` hands its torchrun ranks",
    ("gate/command.py", "_read_descriptor"): "a champion descriptor the user writes "
    "(`tuneloop gate --challenger-descriptor FILE`), validated by gate.champion",
}


def _is_read_json(call: ast.Call) -> bool:
    f = call.func
    return (isinstance(f, ast.Name) and f.id == "read_json") or (
        isinstance(f, ast.Attribute) and f.attr == "read_json"
    )


def _is_json(call: ast.Call, name: str) -> bool:
    f = call.func
    return (
        isinstance(f, ast.Attribute)
        and f.attr == name
        and isinstance(f.value, ast.Name)
        and f.value.id == "json"
    )


def _reads_a_file(node: ast.expr) -> bool:
    """`x.read_text(...)`, `x.read_bytes()`, `open(...)`, or `.read()` of an opened file."""
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    if isinstance(f, ast.Attribute) and f.attr in ("read_text", "read_bytes", "open"):
        return True
    if isinstance(f, ast.Attribute) and f.attr == "read":
        return _reads_a_file(f.value)
    return isinstance(f, ast.Name) and f.id == "open"


def raw_reads(source: str) -> list[tuple[int, str]]:
    """(line, enclosing function) of every raw JSON read of a file in `source`."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, func: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            func = node.name
        if isinstance(node, ast.Call) and (
            _is_read_json(node)
            or _is_json(node, "load")  # json.load(fh) reads a file, whatever fh is
            or (_is_json(node, "loads") and bool(node.args) and _reads_a_file(node.args[0]))
        ):
            found.append((node.lineno, func))
        for child in ast.iter_child_nodes(node):
            visit(child, func)

    visit(ast.parse(source), "<module>")
    return found


def _names_a_ledger_column(node: ast.expr) -> bool:
    """`x["record"]` (any `x`) where "record" is a column of the ledger."""
    return (
        isinstance(node, ast.Subscript)
        and isinstance(node.slice, ast.Constant)
        and node.slice.value in LEDGER_COLUMNS
    )


def raw_ledger_reads(source: str) -> list[tuple[int, str]]:
    """(line, enclosing function) of every `json.loads(<a ledger row's column>)` in `source`."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, func: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            func = node.name
        if (
            isinstance(node, ast.Call)
            and _is_json(node, "loads")
            and bool(node.args)
            and _names_a_ledger_column(node.args[0])
        ):
            found.append((node.lineno, func))
        for child in ast.iter_child_nodes(node):
            visit(child, func)

    visit(ast.parse(source), "<module>")
    return found


def test_the_detector_sees_each_form() -> None:
    source = (
        "import json\n"
        "from tuneloop import records\n"
        "def a(p):\n    return read_json(p)['item_ids']\n"
        "def b(p):\n    return json.loads(p.read_text())\n"
        "def c(p):\n    return json.load(open(p))\n"
        "def d(p):\n    return records.read_json(p)\n"
        "def e(p):\n    return json.loads((p / 'x.json').read_text(encoding='utf-8'))\n"
        "def f(p):\n    return json.loads(open(p).read())\n"
        "def ok(line):\n    return json.loads(line)\n"
    )
    assert [f for _, f in raw_reads(source)] == ["a", "b", "c", "d", "e", "f"]


def test_no_raw_reads_of_tuneloop_artifacts() -> None:
    bad, used = [], set()
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(TYPED_READER):
            continue
        for line, func in raw_reads(path.read_text(encoding="utf-8")):
            if (rel, func) in NOT_ARTIFACTS:
                used.add((rel, func))
            else:
                bad.append(f"src/tuneloop/{rel}:{line} in {func}()")
    assert not bad, (
        "raw reads of JSON files; read a tuneloop artifact with records.read_record(path, "
        "Record) — or, for a file tuneloop does not write, add it to NOT_ARTIFACTS with the "
        "reason:\n  " + "\n  ".join(bad)
    )
    assert used == set(NOT_ARTIFACTS), f"stale allow-list entries: {set(NOT_ARTIFACTS) - used}"


def test_the_ledger_detector_sees_a_json_column() -> None:
    assert {"record", "descriptor", "round_id"} <= LEDGER_COLUMNS
    source = (
        "import json\n"
        "def a(r):\n    return json.loads(r['record'])\n"
        "def b(conn):\n    return json.loads(conn.execute(q).fetchone()['descriptor'])\n"
        "def ok(msg):\n    return json.loads(msg['body']), json.loads(line)\n"
    )
    assert [f for _, f in raw_ledger_reads(source)] == ["a", "b"]


def test_no_raw_reads_of_ledger_rows() -> None:
    bad, used = [], set()
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(TYPED_READER) or rel == LEDGER_READER:
            continue
        for line, func in raw_ledger_reads(path.read_text(encoding="utf-8")):
            if (rel, func) in NOT_LEDGER_ROWS:
                used.add((rel, func))
            else:
                bad.append(f"src/tuneloop/{rel}:{line} in {func}()")
    assert not bad, (
        "raw reads of the ledger's JSON columns; open it with gate.ledger.open_ledger and use "
        "its typed rows:\n  " + "\n  ".join(bad)
    )
    assert used == set(NOT_LEDGER_ROWS), f"stale allow-list entries: {set(NOT_LEDGER_ROWS) - used}"
