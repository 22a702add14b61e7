"""Archive: a copy with a manifest; verify detects a single flipped byte anywhere.

The archive takes plain inputs (a folder, paths, a config dict, the run state); the loop's
`handover.archive_recipe` says which config keys name what a re-run needs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.modelfiles import write_model_files
from tuneloop.archive import (
    ARCHIVED_RUN_DIR,
    ArchiveInput,
    Recipe,
    archive_run,
    read_manifest,
    verify_archive,
)
from tuneloop.config import LoopConfig
from tuneloop.errors import InputError, PhaseFailed
from tuneloop.loop.handover import archive_recipe
from tuneloop.loop.state import PhaseRecord, RunState

from .installed import tuneloop

SKIP = (".lock", "archive", "quarantine")


def _state(run_id: str = "r1") -> RunState:
    report = PhaseRecord(
        phase="report", status="done", fingerprint="f", inputs={"x": "1"}, outputs={"o": "2"}
    )
    failed = PhaseRecord(phase="gate", status="failed", fingerprint="g")
    return RunState(
        run_id=run_id,
        config_path="loop.yaml",
        created_at="t",
        phases={"report": report, "gate": failed},
    )


def _cfg(tmp_path: Path) -> LoopConfig:
    return LoopConfig.model_validate(
        {
            "base_model": str(tmp_path / "model"),
            "suite": {"path": str(tmp_path / "suite.jsonl")},
            "workdir": str(tmp_path / "work"),
        }
    )


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
    (work / ".lock").write_text("123")
    (work / "quarantine" / "old").mkdir(parents=True)
    (work / "quarantine" / "old" / "x.json").write_text("{}")
    (work / "archive").mkdir()  # the archive phase's own folder
    # a folder named like a skipped entry, deeper down, is part of the run
    (work / "report" / "archive").mkdir()
    (work / "report" / "archive" / "kept.txt").write_text("kept")
    target = tmp_path / "archive" / "r1"
    archive_run(
        work,
        target,
        _state(),
        archive_recipe(_cfg(tmp_path)),
        base_model_sha256="b" * 64,
        skip=SKIP,
    )
    return target


def test_fresh_archive_verifies(archived: Path) -> None:
    assert verify_archive(archived) == []
    manifest = json.loads((archived / "manifest.json").read_text())
    assert manifest["schema"] == "tuneloop.manifest/3"
    assert list(manifest) == [
        "schema",
        "run_id",
        "config",
        "code_version",
        "provenance",
        "timings_s",
        "lineage",
        "external_inputs",
        "base_model_sha256",
        "files",
        "round",
        "pins",
    ]
    paths = {f["path"] for f in manifest["files"]}
    assert {"run/report/delta.json", "inputs/suite.jsonl", "inputs/base_model/config.json"} <= paths
    assert "run/report/archive/kept.txt" in paths  # only the top-level entries are skipped
    assert not any(p.startswith(("run/quarantine", "run/archive", "run/.lock")) for p in paths)
    assert manifest["lineage"] == [{"phase": "report", "inputs": {"x": "1"}, "outputs": {"o": "2"}}]
    assert manifest["timings_s"] == {"report": None, "gate": None}
    assert manifest["provenance"]["packages"]["pydantic"]
    assert manifest["base_model_sha256"] == "b" * 64
    assert read_manifest(archived).run_id == "r1"


def test_reproduce_config_points_at_copies(archived: Path) -> None:
    cfg = yaml.safe_load((archived / "inputs" / "loop.yaml").read_text())
    assert cfg["base_model"] == "base_model"
    assert cfg["suite"]["path"] == "suite.jsonl"
    assert cfg["workdir"] == "../../reproduce/r1/work"
    assert cfg["archive"]["root"] == "../../reproduce/r1/archive"
    assert cfg["gate"]["ledger"] == "../../reproduce/r1/ledger.db"
    manifest = read_manifest(archived)
    assert manifest.config["suite"]["path"].endswith("suite.jsonl")  # the original, as run
    assert manifest.config["suite"]["path"] != "suite.jsonl"


def test_plain_inputs_and_a_large_input_recorded_not_copied(tmp_path: Path) -> None:
    """No LoopConfig: a folder, a dict, paths; an input over its size limit is only recorded."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "out.txt").write_text("result")
    (tmp_path / "data.jsonl").write_text("{}\n")
    (tmp_path / "big").mkdir()
    (tmp_path / "big" / "w.bin").write_bytes(b"\0" * 2048)
    recipe = Recipe(
        config={"data": {"file": str(tmp_path / "data.jsonl")}, "model": str(tmp_path / "big")},
        inputs=(
            ArchiveInput("data.file", tmp_path / "data.jsonl", "data.jsonl"),
            ArchiveInput("model", tmp_path / "big", "model", max_copy_mb=0.001),
        ),
        outputs={"out": "work"},
        notes={"why": "a caveat"},
    )
    target = tmp_path / "arch" / "r9"
    archive_run(tmp_path / "run", target, _state("r9"), recipe, base_model_sha256="c" * 64)
    assert verify_archive(target) == []
    again = yaml.safe_load((target / "inputs" / "loop.yaml").read_text())
    assert again == {
        "data": {"file": "data.jsonl"},
        "model": str(tmp_path / "big"),
        "out": again["out"],
    }
    assert again["out"] == "../../reproduce/r9/work"
    assert not (target / "inputs" / "model").exists()
    external = read_manifest(target).external_inputs
    assert external == {"why": "a caveat", "model": {"path": str(tmp_path / "big"), "size_mb": 0.0}}
    (pin,) = read_manifest(target).pins.values()  # and pinned, file by file
    assert pin.path == str(tmp_path / "big") and set(pin.files) == {"w.bin"}


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
    (archived / ARCHIVED_RUN_DIR / "report" / "delta.json").unlink()
    (archived / ARCHIVED_RUN_DIR / "stray.txt").write_text("x")
    problems = verify_archive(archived)
    assert "run/report/delta.json: missing" in problems
    assert "run/stray.txt: not in the manifest" in problems


def test_a_manifest_of_another_kind_is_a_problem_named(archived: Path) -> None:
    manifest = archived / "manifest.json"
    manifest.write_text(json.dumps({"schema": "tuneloop.manifest/4", "files": []}))
    problems = verify_archive(archived)
    assert any("newer than this tuneloop reads" in p for p in problems)
    (archived / "manifest.json").unlink()
    with pytest.raises(InputError, match="no manifest.json"):
        verify_archive(archived)


def test_links_are_refused_by_verify(archived: Path, tmp_path: Path) -> None:
    """Defect 13: verify accepted a symlink pointing out of the archive."""
    outside = tmp_path / "secret.txt"
    outside.write_text('{"delta": 0.25}')
    target = archived / ARCHIVED_RUN_DIR / "report" / "delta.json"
    target.unlink()
    target.symlink_to(outside)  # same bytes, but not a file of the archive
    problems = verify_archive(archived)
    assert any("delta.json: is a link" in p for p in problems)
    (archived / ARCHIVED_RUN_DIR / "extra").symlink_to(outside)
    assert any("extra: is a link" in p for p in verify_archive(archived))


def test_an_existing_archive_is_never_overwritten(archived: Path, tmp_path: Path) -> None:
    recipe = archive_recipe(_cfg(tmp_path))
    work, before = tmp_path / "work", (archived / "manifest.json").read_bytes()
    # the same run again (a resume after the rename): accepted as it is
    archive_run(work, archived, _state(), recipe, base_model_sha256="b" * 64, skip=SKIP)
    assert (archived / "manifest.json").read_bytes() == before
    # another run under the same name: refused
    with pytest.raises(PhaseFailed, match="holds run 'r1'"):
        archive_run(work, archived, _state("r2"), recipe, base_model_sha256="b" * 64)
    # an archive that no longer verifies: refused, and left as it is
    (archived / ARCHIVED_RUN_DIR / "report" / "delta.json").write_text('{"delta": 0.99}')
    with pytest.raises(PhaseFailed, match="never overwritten"):
        archive_run(work, archived, _state(), recipe, base_model_sha256="b" * 64, skip=SKIP)
    assert (archived / ARCHIVED_RUN_DIR / "report" / "delta.json").read_text() == '{"delta": 0.99}'


def test_archive_knows_nothing_of_the_loop() -> None:
    """Plain inputs: the archive package imports neither the config models nor the loop."""
    import ast

    root = Path(__file__).resolve().parents[1] / "src" / "tuneloop" / "archive"
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith(("tuneloop.loop", "tuneloop.config")), path


def test_a_target_that_climbs_out_of_its_root_is_refused(tmp_path: Path) -> None:
    """The last guard (the config refuses such a name at load): nothing written anywhere."""
    (tmp_path / "work").mkdir()
    recipe = Recipe(config={})
    target = tmp_path / "root" / ".." / ".." / "evil-1"
    with pytest.raises(InputError, match="not a folder inside the archive root"):
        archive_run(tmp_path / "work", target, _state(), recipe, base_model_sha256="b" * 64)
    assert not (tmp_path.parent / "evil-1").exists()
    assert not list(tmp_path.parent.glob(".evil-1*"))


# ---- the installed script on a real (fake-loop) archive --------------------------------------


def _fake_round(tmp_path: Path, **sections: object) -> Path:
    """A whole fake-loop round (real report, gate, capstone, archive); its archive folder."""
    from .loop.fakeloop import runner, write_config

    data = tmp_path / "train.jsonl"
    row = {"messages": [{"role": "user", "content": "1+1"}, {"role": "assistant", "content": "2"}]}
    data.write_text(json.dumps(row) + "\n")
    config = write_config(tmp_path, train={"data": str(data)}, **sections)
    runner(config).run()
    (archive,) = (tmp_path / "archive").glob("fake-*")
    return archive


def test_an_archive_reproduces_with_the_readme_command(tmp_path: Path) -> None:
    """Issue 25 item 5: `tuneloop check ROOT/RUN/inputs/loop.yaml` of a fresh archive exits 0
    (it held the whole resolved `replay:` block with `teachers: null`, which check refused)."""
    archive = _fake_round(tmp_path)
    config = archive / "inputs" / "loop.yaml"
    assert yaml.safe_load(config.read_text())["replay"]["teachers"] is None  # as resolved
    ran = tuneloop("check", config, cwd=tmp_path)
    assert ran.code == 0, ran.output
    assert "Traceback" not in ran.output
    ran = tuneloop("run", config, "--plan", cwd=tmp_path)  # the README's re-run, planned
    assert ran.code == 0, ran.output
    assert tuneloop("archive", "verify", archive, cwd=tmp_path).code == 0


def test_verify_flags_a_run_id_that_names_a_path_and_a_missing_folder(tmp_path: Path) -> None:
    """Issue 25 item 8: an archive of `name: ../../evil` verified; its manifest's run id is
    now a FAIL of `tuneloop archive verify`, and a folder that does not exist says so."""
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "x.txt").write_text("x")
    target = tmp_path / "root" / "evil"
    archive_run(
        tmp_path / "work",
        target,
        _state("../../evil"),
        Recipe(config={}),
        base_model_sha256="b" * 64,
    )
    ran = tuneloop("archive", "verify", target, cwd=tmp_path)
    assert ran.code == 1 and "run id '../../evil' is not one folder name" in ran.stderr
    tuneloop("archive", "verify", tmp_path / "nope", cwd=tmp_path).assert_input_error(
        "nope: not found"
    )


def test_an_archived_corpus_config_reads_the_same_sources(tmp_path: Path) -> None:
    """A verbatim copy of corpus.yaml in `inputs/` resolved its relative source paths against
    `inputs/`, where no traces are: the archive's own `corpus build` failed. The archived copy
    names the files the run read."""
    fixtures = Path(__file__).resolve().parent / "data" / "fixtures"
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "api.jsonl").write_bytes((fixtures / "openai_proxy.jsonl").read_bytes())
    (tmp_path / "corpus.yaml").write_text(
        "sources: [{path: traces/api.jsonl, format: openai_chat}]\n"
        "filter: {min_score: null, keep_unrated: true}\n"
    )
    (tmp_path / "model").mkdir()
    write_model_files(tmp_path / "model")
    (tmp_path / "suite.jsonl").write_text('{"id": "x"}\n')
    (tmp_path / "work").mkdir()
    cfg = LoopConfig.model_validate(
        {
            "base_model": str(tmp_path / "model"),
            "suite": {"path": str(tmp_path / "suite.jsonl")},
            "data": {"corpus": str(tmp_path / "corpus.yaml")},
        }
    )
    target = tmp_path / "archive" / "r1"
    recipe = archive_recipe(cfg)
    archive_run(tmp_path / "work", target, _state(), recipe, base_model_sha256="b" * 64)
    copy = target / "inputs" / "corpus.yaml"
    assert yaml.safe_load(copy.read_text())["sources"][0]["path"] == str(
        tmp_path / "traces" / "api.jsonl"
    )
    ran = tuneloop("corpus", "build", copy, "--out", tmp_path / "again", cwd=tmp_path)
    assert ran.code == 0, ran.output
    assert verify_archive(target) == []
