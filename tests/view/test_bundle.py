"""`tuneloop view --bundle`: the static site, written whole, never over someone else's folder."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tuneloop.errors import InputError
from tuneloop.view.bundle import MARKER, write_bundle
from tuneloop.view.history import gather
from tuneloop.view.sources import resolve


def test_index_and_every_linked_report(world: Path, tmp_path: Path) -> None:
    d = gather(resolve(world, None))
    out = tmp_path / "site"
    copied = write_bundle(d, out)
    assert len(copied) == 3
    index = (out / "index.html").read_text()
    links = re.findall(r'href="(runs/[^"]+)"', index)
    assert len(links) == 3
    for link, r in zip(links, [r for r in d.rounds if r.report], strict=True):
        assert (out / link).read_bytes() == r.report.path.read_bytes()  # type: ignore[union-attr]
    assert sorted(p.name for p in out.iterdir()) == sorted([MARKER, "index.html", "runs"])
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".site")]  # no staging left
    assert oct((out / "index.html").stat().st_mode & 0o777) == "0o644"


def test_an_earlier_bundle_is_replaced_whole(world: Path, tmp_path: Path) -> None:
    d = gather(resolve(world, None))
    out = tmp_path / "site"
    write_bundle(d, out)
    (out / "runs" / "stale").mkdir()
    write_bundle(d, out)
    assert not (out / "runs" / "stale").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]


def test_a_folder_of_other_files_or_a_file_is_refused(world: Path, tmp_path: Path) -> None:
    d = gather(resolve(world, None))
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(InputError, match="holds other files"):
        write_bundle(d, mine)
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    with pytest.raises(InputError, match="is a file"):
        write_bundle(d, mine / "notes.txt")
    empty = tmp_path / "empty"
    empty.mkdir()
    write_bundle(d, empty)
    assert (empty / "index.html").is_file()
