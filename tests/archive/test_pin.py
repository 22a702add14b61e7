"""The pin of a base model too large to copy: every file by sha256, the Hub repo and commit, and
`tuneloop archive reproduce` refusing (exit 2, nothing run) when the files or the pin changed."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.modelfiles import write_model_files
from tuneloop.archive import archive_run, read_manifest
from tuneloop.archive.pin import pin_differences, pinned_files
from tuneloop.config import LoopConfig
from tuneloop.loop.handover import archive_recipe
from tuneloop.loop.state import RunState
from tuneloop.records import Manifest, PinnedFile, read_record, sha256_file, sha256_tree

from ..installed import tuneloop
from ..loop.fakeloop import runner, write_config

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _snapshot(root: Path) -> Path:
    """A Hugging Face cache snapshot of `org/tiny` (its layout: models--org--tiny/snapshots/…)."""
    snap = root / "hub" / "models--org--tiny" / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    write_model_files(snap)
    (snap / "model.safetensors").write_bytes(b"\1" * 4096)
    return snap


def _pinned(tmp_path: Path, base: Path, monkeypatch: pytest.MonkeyPatch) -> Manifest:
    """Archive a run whose base is over the copy limit (set to 0 MB here)."""
    monkeypatch.setattr("tuneloop.archive.MAX_MODEL_COPY_MB", 0)
    (tmp_path / "suite.jsonl").write_text('{"id": "x"}\n')
    (tmp_path / "work").mkdir()
    cfg = LoopConfig.model_validate(
        {"base_model": str(base), "suite": {"path": str(tmp_path / "suite.jsonl")}}
    )
    state = RunState(run_id="r1", config_path="loop.yaml", created_at="t", phases={})
    target = tmp_path / "archive" / "r1"
    archive_run(tmp_path / "work", target, state, archive_recipe(cfg), base_model_sha256="b" * 64)
    return read_manifest(target)


def test_a_hub_snapshot_too_large_to_copy_is_pinned_by_repo_commit_and_every_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snap = _snapshot(tmp_path)
    manifest = _pinned(tmp_path, snap, monkeypatch)
    assert manifest.schema_ == "tuneloop.manifest/3"
    pin = manifest.pins["base_model"]
    assert (pin.repo_id, pin.revision, pin.path) == ("org/tiny", COMMIT, str(snap))
    assert pin.files["model.safetensors"] == PinnedFile(
        sha256=sha256_file(snap / "model.safetensors"), size=4096
    )
    assert {"config.json", "tokenizer.json", "tokenizer_config.json"} <= set(pin.files)
    # the same files, the same hashes as the run's base_model_sha256 (`sha256_tree`)
    lines = b"".join(f"{n}\0{f.sha256}\n".encode() for n, f in sorted(pin.files.items()))
    assert hashlib.sha256(lines).hexdigest() == sha256_tree(snap)
    assert manifest.external_inputs["base_model"]["path"] == str(snap)


def test_a_plain_folder_is_pinned_without_a_hub_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "model").mkdir()
    write_model_files(tmp_path / "model")
    pin = _pinned(tmp_path, tmp_path / "model", monkeypatch).pins["base_model"]
    assert (pin.repo_id, pin.revision) == (None, None)
    assert pin.files == pinned_files(tmp_path / "model")


def test_a_manifest_written_before_pins_still_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = _pinned(tmp_path, _snapshot(tmp_path), monkeypatch)
    old = {k: v for k, v in manifest.to_json().items() if k != "pins"}
    (tmp_path / "v2.json").write_text(json.dumps({**old, "schema": "tuneloop.manifest/2"}))
    assert read_record(tmp_path / "v2.json", Manifest).pins == {}


def test_pin_differences_name_every_file() -> None:
    a, b = PinnedFile(sha256="a" * 64, size=1), PinnedFile(sha256="b" * 64, size=1)
    pinned = {"config.json": a, "model.safetensors": a, "tokenizer.json": a}
    found = {"config.json": a, "model.safetensors": b, "extra.bin": a}
    assert pin_differences(pinned, found) == [
        "model.safetensors: sha256 bbbbbbbbbbbb…, pinned aaaaaaaaaaaa…",
        "tokenizer.json: missing",
        "extra.bin: not in the pin",
    ]
    grown = {**pinned, "tokenizer.json": PinnedFile(sha256="a" * 64, size=2)}
    assert pin_differences(pinned, grown) == ["tokenizer.json: 2 bytes, pinned 1"]
    assert pin_differences(pinned, pinned) == []


# ---- the installed script refuses a tampered pin, and runs nothing -----------------------------


@pytest.fixture()
def pinned_round(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A whole fake-loop round whose base was pinned, not copied; its archive folder."""
    monkeypatch.setattr("tuneloop.archive.MAX_MODEL_COPY_MB", 0)
    runner(write_config(tmp_path)).run()
    (folder,) = (tmp_path / "archive").glob("fake-*")
    assert set(read_manifest(folder).pins) == {"base_model"}
    return folder


def _reproduce(folder: Path) -> str:
    """`tuneloop archive reproduce FOLDER`: refused with exit 2, nothing run; its output."""
    ran = tuneloop("archive", "reproduce", folder, cwd=folder.parent)
    ran.assert_input_error("nothing run")
    assert not (folder.parent / "reproduce").exists()
    return ran.stderr


def test_a_changed_weight_file_is_refused(pinned_round: Path, tmp_path: Path) -> None:
    (tmp_path / "base" / "weights.bin").write_bytes(b"base-weightz")  # same size
    (tmp_path / "base" / "tokenizer.json").unlink()
    err = _reproduce(pinned_round)
    assert f"base_model ({tmp_path / 'base'}): weights.bin: sha256 " in err
    assert "tokenizer.json: missing" in err


def test_a_changed_sha_in_the_pin_is_refused(pinned_round: Path) -> None:
    """The pin edited and the manifest's hash file rewritten to match (verify passes): the files
    on disk are no longer what the pin says."""
    manifest = pinned_round / "manifest.json"
    data = json.loads(manifest.read_text())
    data["pins"]["base_model"]["files"]["weights.bin"]["sha256"] = "0" * 64
    manifest.write_text(json.dumps(data, indent=2))
    (pinned_round / "MANIFEST.sha256").write_text(f"{sha256_file(manifest)}  manifest.json\n")
    assert "weights.bin: sha256 " in _reproduce(pinned_round)


def test_an_archive_that_does_not_verify_is_refused(pinned_round: Path) -> None:
    (pinned_round / "run" / "report" / "delta.json").write_text("{}")
    err = _reproduce(pinned_round)
    assert "does not verify" in err and "run/report/delta.json: content changed" in err


def test_a_pinned_snapshot_moved_to_another_cache_is_found_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another machine, another HF_HOME: the pinned commit is looked up in this machine's cache,
    checked, and handed to the re-run as `base_model=…`; a changed file there is refused."""
    from tuneloop.errors import InputError
    from tuneloop.loop.reproduce import pinned_inputs

    snap = _snapshot(tmp_path)
    manifest = _pinned(tmp_path, snap, monkeypatch)
    moved = tmp_path / "elsewhere"
    (tmp_path / "hub").rename(moved)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(moved))
    found = moved / "models--org--tiny" / "snapshots" / COMMIT
    assert pinned_inputs(tmp_path, manifest) == [f"base_model={found}"]
    (found / "config.json").write_text("{}")
    with pytest.raises(InputError, match=r"config.json: \d+ bytes, pinned \d+"):
        pinned_inputs(tmp_path, manifest)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "empty"))
    with pytest.raises(InputError, match="org/tiny at revision 0123456789abcdef"):
        pinned_inputs(tmp_path, manifest)
