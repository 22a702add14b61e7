"""Archive: a copy with a manifest; verify detects a single flipped byte anywhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tuneloop.archive import archive_run, verify_archive
from tuneloop.config import LoopConfig


@pytest.fixture()
def archived(tmp_path: Path) -> Path:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text('{"a": 1}')
    (tmp_path / "suite.jsonl").write_text('{"id": "x"}\n')
    work = tmp_path / "work"
    (work / "report").mkdir(parents=True)
    (work / "report" / "delta.json").write_text('{"delta": 0.25}')
    (work / "eval_pre").mkdir()
    (work / "eval_pre" / "samples.jsonl").write_text('{"score": 1}\n' * 50)
    state = {
        "schema": "tuneloop.run_state/1",
        "run_id": "r1",
        "phases": {"report": {"status": "done", "inputs": {"x": "1"}, "outputs": {"o": "2"}}},
    }
    (work / "state.json").write_text(json.dumps(state))
    cfg = LoopConfig.model_validate(
        {
            "base_model": str(tmp_path / "model"),
            "suite": {"path": str(tmp_path / "suite.jsonl")},
            "workdir": str(work),
        }
    )
    target = tmp_path / "archive" / "r1"
    archive_run(work, target, cfg)
    return target


def test_fresh_archive_verifies(archived: Path) -> None:
    assert verify_archive(archived) == []
    manifest = json.loads((archived / "manifest.json").read_text())
    paths = {f["path"] for f in manifest["files"]}
    assert {"run/report/delta.json", "inputs/suite.jsonl", "inputs/base_model/config.json"} <= paths
    assert manifest["lineage"][0]["phase"] == "report"
    assert manifest["provenance"]["packages"]["pydantic"]


def test_reproduce_config_points_at_copies(archived: Path) -> None:
    cfg = yaml.safe_load((archived / "inputs" / "loop.yaml").read_text())
    assert cfg["base_model"] == "base_model"
    assert cfg["suite"]["path"] == "suite.jsonl"
    assert cfg["workdir"] == "../../reproduce/r1/work"


def _all_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def test_every_single_flipped_byte_is_detected(archived: Path) -> None:
    files = _all_files(archived)
    assert len(files) >= 6
    for path in files:
        data = bytearray(path.read_bytes())
        pos = len(data) // 2
        data[pos] ^= 0x01
        original = path.read_bytes()
        path.write_bytes(bytes(data))
        try:
            assert verify_archive(archived), f"flip in {path} not detected"
        finally:
            path.write_bytes(original)
    assert verify_archive(archived) == []


def test_missing_and_extra_files_are_reported(archived: Path) -> None:
    (archived / "run" / "report" / "delta.json").unlink()
    (archived / "run" / "stray.txt").write_text("x")
    problems = verify_archive(archived)
    assert "run/report/delta.json: missing" in problems
    assert "run/stray.txt: not in the manifest" in problems


def test_links_are_refused_by_verify(archived: Path, tmp_path: Path) -> None:
    """Defect 13: verify accepted a symlink pointing out of the archive."""
    outside = tmp_path / "secret.txt"
    outside.write_text('{"delta": 0.25}')
    target = archived / "run" / "report" / "delta.json"
    target.unlink()
    target.symlink_to(outside)  # same bytes, but not a file of the archive
    problems = verify_archive(archived)
    assert any("delta.json: is a link" in p for p in problems)
    (archived / "run" / "extra").symlink_to(outside)
    assert any("extra: is a link" in p for p in verify_archive(archived))


def test_an_existing_archive_is_never_overwritten(archived: Path, tmp_path: Path) -> None:
    from tuneloop.errors import PhaseFailed

    cfg = LoopConfig.model_validate(
        {
            "base_model": str(tmp_path / "model"),
            "suite": {"path": str(tmp_path / "suite.jsonl")},
            "workdir": str(tmp_path / "work"),
        }
    )
    before = (archived / "manifest.json").read_bytes()
    # the same run again (a resume after the rename): accepted as it is
    archive_run(tmp_path / "work", archived, cfg)
    assert (archived / "manifest.json").read_bytes() == before
    # another run under the same name, or an archive that no longer verifies: refused
    (archived / "run" / "report" / "delta.json").write_text('{"delta": 0.99}')
    with pytest.raises(PhaseFailed, match="never overwritten"):
        archive_run(tmp_path / "work", archived, cfg)
    assert (archived / "run" / "report" / "delta.json").read_text() == '{"delta": 0.99}'
