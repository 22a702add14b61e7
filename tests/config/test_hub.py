"""`base_model: org/name` from the local Hugging Face cache, never downloaded (`config/hub.py`).

The cache is laid out here as `huggingface_hub` writes it (`models--org--name/refs/main` →
`snapshots/<commit>/`, files linked to `blobs/`), holding a family-matrix checkpoint; the
installed `tuneloop check` runs with `HF_HOME` pointing at it and `HF_HUB_OFFLINE=1`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tuneloop.config.hub import HubPin, hub_id, hub_pin

from ..installed import tuneloop

COMMIT = "0123456789abcdef0123456789abcdef01234567"
SUITE = "".join(
    f'{{"id": "q{i}", "messages": [{{"role": "user", "content": "{i}+1="}}], '
    f'"answer": "{i + 1}"}}\n'
    for i in range(40)
)


def cache_with(model: Path, hf_home: Path, repo: str) -> Path:
    """`hf_home/hub` holding `model` as the snapshot COMMIT of `repo` (blobs by sha256)."""
    root = hf_home / "hub" / ("models--" + repo.replace("/", "--"))
    snapshot = root / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    (root / "blobs").mkdir()
    for path in sorted(model.iterdir()):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        shutil.copy2(path, root / "blobs" / digest)
        os.symlink(Path("..") / ".." / "blobs" / digest, snapshot / path.name)
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(COMMIT, encoding="utf-8")
    return snapshot


def project(folder: Path, base: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "suite.jsonl").write_text(SUITE, encoding="utf-8")
    (folder / "train.jsonl").write_text(SUITE, encoding="utf-8")
    config = (
        f"base_model: {base}\nserve: {{backend: embedded}}\n"
        "suite: {path: suite.jsonl, default_scorer: numeric, slices: {dev: 0.5, gate: 0.5}}\n"
        "train: {method: sft, data: train.jsonl, allow_contamination: true}\n"
        "gate: {min_items: 10, margin: 0.5}\n"
    )
    (folder / "loop.yaml").write_text(config, encoding="utf-8")
    return folder / "loop.yaml"


def test_hub_ids_and_pins() -> None:
    assert hub_id("Qwen/Qwen2.5-0.5B-Instruct") == ("Qwen/Qwen2.5-0.5B-Instruct", None)
    assert hub_id("org/name@v1.0") == ("org/name", "v1.0")
    assert hub_id("./org/name") is None and hub_id("/abs/path") is None and hub_id("x") is None
    folder = Path("/c/hub/models--my-org--tiny.llama/snapshots") / COMMIT
    assert hub_pin(folder) == HubPin("my-org/tiny.llama", COMMIT)
    assert hub_pin(Path("/plain/folder")) is None


def test_a_cached_hub_id_resolves_offline_through_the_installed_script(
    family_model: Callable[[str], Path], tmp_path: Path
) -> None:
    snapshot = cache_with(family_model("llama"), tmp_path / "hf", "tiny-org/llama")
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    env["HF_HUB_CACHE"] = str(tmp_path / "hf" / "hub")
    ran = tuneloop("check", project(tmp_path / "p", "tiny-org/llama"), env=env)
    assert ran.code == 0, ran.output
    assert f"\nbase_model: {snapshot}\n" in ran.stdout, ran.output  # the resolved config
    assert "model: LlamaForCausalLM (llama)" in ran.output  # preflight read the snapshot


@pytest.mark.parametrize("name", ["tiny-org/not-cached", "tiny-org/llama@v9"])
def test_a_name_not_in_the_cache_is_one_line_naming_the_cache(
    family_model: Callable[[str], Path], tmp_path: Path, name: str
) -> None:
    cache_with(family_model("llama"), tmp_path / "hf", "tiny-org/llama")
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_CACHE": str(tmp_path / "hf" / "hub")}
    ran = tuneloop("check", project(tmp_path / "p", name), env=env)
    ran.assert_input_error("base_model", "is not in the Hugging Face cache", str(tmp_path / "hf"))
    assert "Traceback" not in ran.output
