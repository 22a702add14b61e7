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


# ---- hardware: what decides whether a re-run may differ -------------------------------------

X86 = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9654 96-Core Processor
flags\t\t: fpu sse sse2 ssse3 sse4_1 sse4_2 fma avx avx2 avx512f avx512_bf16

processor\t: 1
model name\t: another
flags\t\t: sse2
"""
ARM = """processor\t: 0
BogoMIPS\t: 50.00
Features\t: fp asimd evtstrm aes sve sve2
CPU part\t: 0xd4f
"""


def test_cpuinfo_gives_the_first_cpus_model_and_flags() -> None:
    facts = provenance.parse_cpuinfo(X86)
    assert facts.model == "AMD EPYC 9654 96-Core Processor"
    assert {"avx2", "avx512f", "avx512_bf16"} <= facts.flags and "fpu" in facts.flags
    arm = provenance.parse_cpuinfo(ARM)
    assert arm.model is None and "sve2" in arm.flags


def test_the_vector_isa_is_the_widest_the_cpu_has() -> None:
    assert provenance.vector_isa(provenance.parse_cpuinfo(X86).flags) == "avx512f"
    assert provenance.vector_isa({"sse2", "avx", "avx2", "fma"}) == "avx2"
    assert provenance.vector_isa(provenance.parse_cpuinfo(ARM).flags) == "sve2"
    assert provenance.vector_isa({"fpu"}) is None


def test_machine_info_records_cpu_model_isa_and_torch_kernels() -> None:
    import torch

    info = provenance.machine_info()
    assert info["cpu"]  # kept for older readers
    assert info["cpu_model"] and isinstance(info["cpu_flags"], list)
    assert info["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    if provenance.CPUINFO.is_file():
        facts = provenance.parse_cpuinfo(provenance.CPUINFO.read_text())
        assert info["cpu_model"] == facts.model
        assert info["cpu_isa"] == provenance.vector_isa(facts.flags)
    hw = provenance.hardware(info)
    assert hw.known and hw.cpu_model in hw.describe()
    assert "cpu_model" in provenance.stamp()["machine"]


def test_a_machine_recorded_before_its_cpu_was_is_unknown_hardware() -> None:
    old = {"hostname": "h", "cpu": "x86_64", "cpu_count": 8, "gpus": []}
    assert provenance.hardware(old) == provenance.Hardware(None, None, None)
    assert not provenance.hardware(old).known
