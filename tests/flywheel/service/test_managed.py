"""The managed service: the real tiny model (examples/arith/model) behind the real proxy.

One service is started per module (a server load costs ~10 s on 2 cores): a bounded request
loop with the official `openai` client runs while `reserve_champion` switches to a new
champion (zero failed requests), champions that cannot start are refused with the old one
still serving, and a restarted manager adopts the processes and stops them all. The adoption
rules themselves are checked without a model, on plain `sleep` processes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import pytest

from tuneloop.config import ServeConfig
from tuneloop.errors import InputError, PhaseFailed
from tuneloop.flywheel.service import (
    ManagedService,
    ProcessRecord,
    ServiceSettings,
    ServiceState,
    ledger_champion,
    reserve_champion,
)
from tuneloop.flywheel.service.processes import STATE_FILE, created_at, save_state
from tuneloop.flywheel.service.server_command import server_command

from .switching import add_champion, new_version, switch_under_load

MODEL = Path(__file__).resolve().parents[3] / "examples" / "arith" / "model"


def children(mark: Path) -> list[psutil.Process]:
    """Our descendants whose command line names `mark` (servers and proxies lead their own
    sessions, but are still our children)."""
    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if str(mark) in " ".join(proc.cmdline()):
                found.append(proc)
        except psutil.Error:
            pass
    return found


@dataclass
class Served:
    settings: ServiceSettings
    service: ManagedService
    v1: Path
    lines: list[str] = field(default_factory=list)

    def running(self) -> ManagedService:
        """The service serving v1 or later (another test may have switched it)."""
        if not self.service.status().running:
            self.service.start(self.v1, 1)
        return self.service


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("service")
    v1 = root / "v1"
    shutil.copytree(MODEL, v1)
    lines: list[str] = []
    settings = ServiceSettings(
        state_dir=root / "state",
        port=0,
        log_dir=root / "traffic",
        server=ServeConfig(threads=1),
        startup_timeout_s=120,
        drain_timeout_s=30,
    )
    box = Served(settings, ManagedService(settings, log=lines.append), v1, lines)
    box.service.start(v1, 1)
    try:
        yield box
    finally:
        box.service.stop()
        box.service.close()


def ask(url: str) -> str:
    """The finish reason of one real completion through `url` (raises if the request fails).
    Not the text: the model's greedy answer may be empty, which says nothing about serving."""
    import openai

    client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=60)
    reply = client.chat.completions.create(
        model="champion", messages=[{"role": "user", "content": "2+3="}], max_tokens=8
    )
    return reply.choices[0].finish_reason


@pytest.mark.slow
def test_a_switch_under_load_fails_no_request(served: Served, tmp_path: Path) -> None:
    service = served.running()
    before = service.status()
    assert before.url is not None and before.version is not None
    ledger = tmp_path / "ledger.sqlite"
    add_champion(ledger, Path(str(before.model_dir)))  # the ledger's champion is what runs…
    assert reserve_champion(service, ledger).action == "unchanged"
    v2 = new_version(MODEL, tmp_path / "v2")
    version = add_champion(ledger, v2)  # …until a round promotes a new one

    switch = switch_under_load(service, ledger, before.url)
    load, reserved, failed = switch.load, switch.reserved, switch.failed
    during, after = switch.during, switch.after
    switch_began, switched_at = switch.began, switch.ended
    print(
        f"{len(load.done)} requests, {len(failed)} failed, {len(during)} during the "
        f"{switched_at - switch_began:.1f} s switch, {len(after)} after it"
    )
    assert not failed, failed[:3]
    assert reserved.action == "switched" and (reserved.previous, reserved.version) == (
        before.version,
        version,
    )
    assert len(during) >= 20 and len(after) >= 20
    now = service.status()
    assert now.running and now.version == version and now.model_dir == str(v2.resolve())
    assert now.url == before.url and now.proxy_pid == before.proxy_pid  # clients kept it
    assert now.server_pid != before.server_pid
    assert before.server_pid is not None and not psutil.pid_exists(before.server_pid)
    admin_url = f"{now.url.removesuffix('/v1')}/admin/upstream"
    assert httpx.get(admin_url, timeout=10).status_code == 401  # the token is needed
    token = (served.settings.state_dir / "proxy.token").read_text().strip()
    assert (served.settings.state_dir / "proxy.token").stat().st_mode & 0o777 == 0o600
    headers = {"authorization": f"Bearer {token}"}
    admin = httpx.get(admin_url, headers=headers, timeout=10).json()
    assert admin["upstream"] == now.upstream
    assert admin["in_flight"][before.upstream] == 0
    traffic = (served.settings.log_dir or Path()) / "traffic.jsonl"
    assert len(traffic.read_text().splitlines()) >= len(load.done)
    assert any("drained" in line for line in served.lines)


def broken_config(folder: Path) -> str:
    shutil.copytree(MODEL, folder)
    (folder / "config.json").write_text('{"architectures": ["Qwen2ForCausalLM"]}')
    return "model_type"


def no_config(folder: Path) -> str:
    shutil.copytree(MODEL, folder)
    (folder / "config.json").unlink()
    return "config.json"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("breaks", "error"), [(no_config, InputError), (broken_config, PhaseFailed)]
)
def test_a_champion_that_does_not_start_is_refused(
    served: Served, tmp_path: Path, breaks: object, error: type[Exception]
) -> None:
    service = served.running()
    before = service.status()
    assert before.url is not None
    bad = tmp_path / "bad"
    reason = breaks(bad)  # type: ignore[operator]
    with pytest.raises(error) as refused:
        service.switch_to(bad, 99)
    message = str(refused.value)
    assert "champion v99" in message and "was not served" in message and reason in message
    assert f"still serving champion v{before.version}" in message
    assert service.status() == before  # the same processes, the same champion
    assert ask(before.url) in ("stop", "length")  # and it answers
    state = ServiceState.model_validate_json((served.settings.state_dir / STATE_FILE).read_text())
    assert [s.pid for s in state.servers] == [before.server_pid]
    assert not children(bad)


@pytest.mark.slow
def test_a_restarted_manager_adopts_then_stop_leaves_nothing(served: Served) -> None:
    running = served.running().status()
    served.service.close()  # the watcher dies mid-switch: its candidate is in the state file
    path = served.settings.state_dir / STATE_FILE
    state = ServiceState.model_validate_json(path.read_text())
    candidate = sleeper()
    state.servers.append(record(candidate, version=9))
    save_state(served.settings.state_dir, state)
    lines: list[str] = []
    served.service = adopted = ManagedService(served.settings, log=lines.append)
    assert adopted.status() == running, lines
    assert any("adopted proxy" in line for line in lines)
    assert not psutil.pid_exists(candidate.pid), "the interrupted switch's candidate lives on"
    assert running.url is not None and ask(running.url) in ("stop", "length")
    pids = [running.proxy_pid, running.server_pid]
    adopted.stop()
    assert not any(pid is not None and psutil.pid_exists(pid) for pid in pids)
    assert not children(served.settings.state_dir)
    assert not adopted.status().running


# -- adoption rules, on plain processes (no model) ------------------------------------------------


def sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "60"], start_new_session=True)


def record(proc: subprocess.Popen[bytes], role: str = "server", **extra: object) -> ProcessRecord:
    return ProcessRecord(
        role=role,  # type: ignore[arg-type]
        pid=proc.pid,
        created=created_at(proc.pid),
        port=1,
        log="/dev/null",
        **extra,  # type: ignore[arg-type]
    )


def manager(folder: Path, state: ServiceState) -> tuple[ManagedService, list[str]]:
    save_state(folder, state)
    lines: list[str] = []
    return ManagedService(ServiceSettings(state_dir=folder, port=0), log=lines.append), lines


def test_a_gone_or_reused_pid_is_forgotten_and_never_signalled(tmp_path: Path) -> None:
    gone = sleeper()
    gone_record = record(gone, version=1)
    gone.kill()
    gone.wait()
    other = sleeper()  # alive, but not the process the state file names
    reused = record(other, version=2).model_copy(update={"created": 1.0})
    try:
        service, lines = manager(tmp_path, ServiceState(servers=[gone_record, reused]))
        assert other.poll() is None, "a process that is not ours was signalled"
        assert sum("forgot server" in line for line in lines) == 2, lines
        assert not service.status().running
        assert ServiceState.model_validate_json((tmp_path / STATE_FILE).read_text()).servers == []
        service.close()
    finally:
        other.kill()
        other.wait()


def test_processes_left_without_an_answering_proxy_are_stopped(tmp_path: Path) -> None:
    proxy, server = sleeper(), sleeper()  # alive and ours, but they answer no HTTP
    try:
        state = ServiceState(proxy=record(proxy, "proxy"), servers=[record(server, version=3)])
        service, lines = manager(tmp_path, state)
        # stopped and reaped (by the manager: it found them as a restarted watcher would)
        assert not psutil.pid_exists(proxy.pid) and not psutil.pid_exists(server.pid)
        assert any("does not answer" in line for line in lines), lines
        assert any("interrupted start or switch" in line for line in lines), lines
        service.close()
    finally:
        for proc in (proxy, server):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_switching_a_service_that_is_not_running_is_refused(tmp_path: Path) -> None:
    service = ManagedService(ServiceSettings(state_dir=tmp_path, port=0), log=lambda _: None)
    with pytest.raises(PhaseFailed, match="not running; start"):
        service.switch_to(MODEL, 2)
    service.close()


def test_one_manager_per_state_folder(tmp_path: Path) -> None:
    first = ManagedService(ServiceSettings(state_dir=tmp_path, port=0), log=lambda _: None)
    try:
        with pytest.raises(InputError, match=f"another process .*pid {os.getpid()}"):
            ManagedService(ServiceSettings(state_dir=tmp_path, port=0))
    finally:
        first.close()
    ManagedService(ServiceSettings(state_dir=tmp_path, port=0), log=lambda _: None).close()


def test_an_unreadable_state_file_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / STATE_FILE).write_text("{not json")
    with pytest.raises(InputError, match="not a service state file"):
        ManagedService(ServiceSettings(state_dir=tmp_path, port=0))


def test_the_ledger_must_name_one_checkpoint(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite"
    with pytest.raises(InputError, match="no champion to serve"):
        ledger_champion(ledger)
    add_champion(ledger, tmp_path / "m")
    assert ledger_champion(ledger) == (1, tmp_path / "m", None)
    from tuneloop.gate.ledger import open_ledger

    cascade = {"kind": "cascade", "components": [{"role": "draft", "path": "a"}]}
    with open_ledger(ledger) as book, book.transaction():
        book.add_champion(cascade, run_id=None, at="2026-12-01T00:00:00Z", via="test")
    with pytest.raises(InputError, match="v2 is not one local checkpoint"):
        ledger_champion(ledger)


def test_an_adapter_champion_is_its_base_and_its_adapter(tmp_path: Path) -> None:
    from tuneloop.gate.ledger import open_ledger

    ledger = tmp_path / "ledger.sqlite"
    descriptor = {"kind": "single", "path": str(tmp_path / "base"), "sha256": "b" * 64}
    descriptor["adapter"] = {"path": str(tmp_path / "lora"), "sha256": "a" * 64}
    with open_ledger(ledger) as book, book.transaction():
        book.add_champion(descriptor, run_id="r1", at="2026-12-01T00:00:00Z", via="test")
    assert ledger_champion(ledger) == (1, tmp_path / "base", tmp_path / "lora")


def test_an_adapter_champion_is_served_by_vllm_as_the_clients_model(tmp_path: Path) -> None:
    from ...serve.fake_vllm_env import make_fake_vllm_env
    from ...serve.test_adapter import adapter_dir

    lora = adapter_dir(tmp_path, r=12)
    env = make_fake_vllm_env(tmp_path / "env")
    server = ServeConfig(backend="vllm", vllm={"env": str(env)})
    settings = ServiceSettings(state_dir=tmp_path / "svc", port=0, server=server)
    argv = server_command(settings, "127.0.0.1", MODEL, tmp_path / "port", "vllm", lora).argv
    assert argv[argv.index("--lora-modules") + 1] == f"champion={lora.resolve()}"
    assert argv[argv.index("--max-lora-rank") + 1] == "16"
    assert argv[argv.index("--served-model-name") + 1] == "champion-base"


def test_the_embedded_service_refuses_an_adapter_champion(tmp_path: Path) -> None:
    from ...serve.test_adapter import adapter_dir

    server = ServeConfig(backend="embedded")
    settings = ServiceSettings(state_dir=tmp_path / "svc", port=0, server=server)
    service = ManagedService(settings, log=lambda _: None)
    try:
        with pytest.raises(
            InputError, match="v3 .* LoRA adapter on its base .*serve.backend: vllm"
        ):
            service.start(MODEL, 3, adapter=adapter_dir(tmp_path))
        assert service.status().running is False
    finally:
        service.close()
