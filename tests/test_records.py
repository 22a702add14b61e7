"""Records and I/O: schema checks, atomic writes, JSONL errors naming file and line."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import tuneloop.records as records
from tuneloop.errors import InputError
from tuneloop.records import (
    RECORDS,
    Record,
    append_jsonl,
    atomic_write_text,
    iter_jsonl,
    read_record,
    read_record_if_exists,
    record_classes,
    repair_jsonl_tail,
    sha256_tree,
    write_record,
)

SRC = Path(__file__).resolve().parents[1] / "src" / "tuneloop"


class Thing(Record):
    KIND = "thing"
    VERSION = 2
    x: int


def test_record_round_trip_and_schema(tmp_path: Path) -> None:
    p = tmp_path / "t.json"
    write_record(p, Thing(x=3))
    assert json.loads(p.read_text())["schema"] == "tuneloop.thing/2"
    assert read_record(p, Thing).x == 3


def test_newer_or_other_record_refused(tmp_path: Path) -> None:
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"schema": "tuneloop.thing/3", "x": 1}))
    with pytest.raises(InputError, match="newer than this tuneloop reads"):
        read_record(p, Thing)
    p.write_text(json.dumps({"schema": "tuneloop.other/1", "x": 1}))
    with pytest.raises(InputError, match="expected 'tuneloop.thing/2'"):
        read_record(p, Thing)
    p.write_text(json.dumps({"schema": "tuneloop.thing/1", "x": "no"}))
    with pytest.raises(InputError, match="field 'x'"):
        read_record(p, Thing)


def test_atomic_write_leaves_no_temp_on_failure(tmp_path: Path, monkeypatch) -> None:
    p = tmp_path / "a.txt"
    atomic_write_text(p, "old")

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr("tuneloop.records.disk.os.replace", boom)
    with pytest.raises(OSError):
        atomic_write_text(p, "new")
    assert p.read_text() == "old"
    assert [q.name for q in tmp_path.iterdir()] == ["a.txt"]


def test_jsonl_errors_name_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text('{"a": 1}\n\n[1]\n')
    with pytest.raises(InputError, match=r"x.jsonl:3: expected a JSON object"):
        list(iter_jsonl(p))
    p.write_text('{"a": 1}\n{"a": \n')
    with pytest.raises(InputError, match=r"x.jsonl:2: invalid JSON"):
        list(iter_jsonl(p))


def test_repair_torn_tail(tmp_path: Path) -> None:
    p = tmp_path / "log.jsonl"
    append_jsonl(p, [{"i": 1}, {"i": 2}])
    with p.open("a") as fh:
        fh.write('{"i": 3, "trunc')
    assert repair_jsonl_tail(p) > 0
    assert [o["i"] for _, o in iter_jsonl(p)] == [1, 2]
    assert repair_jsonl_tail(p) == 0


def test_tree_hash_sees_names_and_contents(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("1")
    h1 = sha256_tree(tmp_path)
    (tmp_path / "a").write_text("2")
    h2 = sha256_tree(tmp_path)
    (tmp_path / "a").rename(tmp_path / "b")
    assert len({h1, h2, sha256_tree(tmp_path)}) == 3


def test_missing_record_is_none_only_when_absent(tmp_path: Path) -> None:
    assert read_record_if_exists(tmp_path / "none.json", Thing) is None
    (tmp_path / "t.json").write_text(json.dumps({"schema": "tuneloop.other/1"}))
    with pytest.raises(InputError, match="expected 'tuneloop.thing/2'"):
        read_record_if_exists(tmp_path / "t.json", Thing)


def _record_classes_in_src() -> dict[str, str]:
    """Every `class X(Record)` in src/, as class name → module."""
    found = {}
    for path in SRC.rglob("*.py"):
        module = ".".join(("tuneloop", *path.relative_to(SRC).with_suffix("").parts))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(b, ast.Name) and b.id == "Record" for b in node.bases
            ):
                found[node.name] = module
    return found


def test_every_record_class_is_in_the_catalogue() -> None:
    """One place to find every schema: a new Record subclass must be listed in catalog.py."""
    in_src = _record_classes_in_src()
    listed = {name: module for name, (module, _) in RECORDS.items()}
    assert in_src == listed


def test_catalogued_records_load_with_distinct_schemas() -> None:
    classes = record_classes()
    assert len(classes) == len(RECORDS)  # no two records share a kind
    for schema, cls in classes.items():
        assert schema == f"tuneloop.{cls.KIND}/{cls.VERSION}"
        assert getattr(records, cls.__name__) is cls  # reachable as tuneloop.records.<Class>
    with pytest.raises(AttributeError):
        records.NoSuchRecord  # noqa: B018


def test_records_package_imports_no_phase() -> None:
    """Core: importing tuneloop.records loads no phase (they are catalogued by module path)."""
    code = (
        "import sys, tuneloop.records; "
        "print([m for m in sys.modules if m.startswith(('tuneloop.loop', 'tuneloop.gate', "
        "'tuneloop.report', 'tuneloop.train', 'tuneloop.data', 'tuneloop.evaluate', "
        "'tuneloop.archive', 'tuneloop.serve', 'tuneloop.stats'))])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
