"""`model.chat_template: FILE`: the base as the run uses it, its own files plus that template.

A base that has no chat template (a GPT-2 or GPT-NeoX style pretrained model), or one whose
template the user replaces, is given `model.chat_template` without touching the user's
folder: `<workdir>/base/` holds a symbolic link to each of the base's files, except the
tokenizer config, which is rewritten without its own template, and `chat_template.jinja`,
which is the supplied file's text. Every phase then reads that folder as the base — the
embedded server and vLLM serve it, training renders with it, the merge writes the template
into the merged checkpoint — so there is one place the template enters, and the base's hash in
every record (`sha256_tree` follows the links) covers the template too. Links cost nothing
for a base of any size; the archive copies what they point to, as it copies any base.

`with_chat_template(cfg)` is idempotent: the folder is rebuilt when the base's files or the
template changed, and left alone otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from tuneloop.config import LoopConfig
from tuneloop.records import atomic_write_text
from tuneloop.train.checkpoint.compat import read_template

OVERLAY = "base"
TEMPLATE_FILE = "chat_template.jinja"
REPLACED = frozenset({"chat_template.jinja", "chat_template.json", "tokenizer_config.json"})


def with_chat_template(cfg: LoopConfig) -> LoopConfig:
    """`cfg` with its base replaced by `<workdir>/base/` when `model.chat_template` is set."""
    template_path = cfg.model.chat_template
    if template_path is None or not isinstance(cfg.base_model, Path):
        return cfg
    base = cfg.base_model
    folder = cfg.workdir / OVERLAY
    if base.resolve() == folder.resolve():
        return cfg
    build_overlay(base, read_template(template_path), folder)
    return cfg.model_copy(update={"base_model": folder})


def build_overlay(base: Path, template: str, folder: Path) -> Path:
    """Write `folder` as links to `base`'s files plus `template`; atomically replaced."""
    work = folder.with_name(folder.name + ".partial")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    for path in sorted(base.rglob("*")):
        rel = path.relative_to(base)
        if path.is_dir() or rel.as_posix() in REPLACED:
            continue
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(path.resolve(), work / rel)
    config = base / "tokenizer_config.json"
    if config.is_file():
        data = json.loads(config.read_text(encoding="utf-8"))
        data.pop("chat_template", None)
        atomic_write_text(work / "tokenizer_config.json", json.dumps(data, indent=2) + "\n")
    atomic_write_text(work / TEMPLATE_FILE, template)
    if folder.exists() and _same(folder, work):
        shutil.rmtree(work)
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(work, folder)
    return folder


def _same(a: Path, b: Path) -> bool:
    """Same names, the same link targets and the same written files."""

    def listing(root: Path) -> dict[str, str]:
        out = {}
        for p in sorted(root.rglob("*")):
            if p.is_dir() and not p.is_symlink():
                continue
            rel = p.relative_to(root).as_posix()
            out[rel] = os.readlink(p) if p.is_symlink() else p.read_text(encoding="utf-8")
        return out

    return listing(a) == listing(b)
