"""The provenance stamp names the dependency lock the checkout was installed from."""

from __future__ import annotations

import hashlib
from pathlib import Path

from tuneloop import provenance


def test_lock_sha256_hashes_the_lock_file(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "requirements.lock").write_bytes(b"numpy==2.0.0 --hash=sha256:00\n")
    want = hashlib.sha256(b"numpy==2.0.0 --hash=sha256:00\n").hexdigest()
    assert provenance.lock_sha256(tmp_path) == want


def test_lock_sha256_is_none_without_a_lock_or_outside_a_checkout(tmp_path: Path) -> None:
    assert provenance.lock_sha256(tmp_path) is None
    (tmp_path / "requirements.lock").write_text("numpy==2.0.0\n")
    assert provenance.lock_sha256(tmp_path) is None  # no pyproject.toml beside it
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "requirements.lock").unlink()
    assert provenance.lock_sha256(tmp_path) is None


def test_this_checkout_has_its_lock_in_the_stamp() -> None:
    lock = provenance.CHECKOUT / "requirements.lock"
    assert lock.is_file(), "requirements.lock is missing from the checkout (scripts/lock)"
    stamp = provenance.stamp()
    assert stamp["lock_sha256"] == hashlib.sha256(lock.read_bytes()).hexdigest()
