"""Keep the champion served behind one stable address, and re-serve a new one without downtime.

    settings = ServiceSettings(state_dir=Path("runs/service"), port=8100,
                               log_dir=Path("runs/traffic"))
    service = ManagedService(settings)        # adopts what a previous watcher left running
    service.start(model_dir, version=1)       # the server, then the proxy in front of it
    service.switch_to(new_dir, version=2)     # new server, switch, drain, stop the old one
    reserve_champion(service, ledger_path)    # after a promoted round (`reserve.py`)
    service.stop()                            # or service.close(): leave it running, detach

Clients use `http://HOST:PORT/v1` with model `"champion"` (`ServiceSettings.served_name`), so
neither changes when the champion does. Behind that address is `tuneloop proxy` (with
`--log-dir`: the traffic log the flywheel learns from), and behind the proxy one server on a
free loopback port: the embedded server (`python -m tuneloop.serve.app`), or vLLM's API server
from the vLLM environment with `serve.backend: vllm` (a new server per version, so no adapter
name is ever reloaded: vLLM would answer a reloaded name from its stale prefix cache). An
adapter champion (`serve.challenger: adapter`) is served by vLLM as a LoRA module on its base,
and a later adapter champion on the same base is hot-loaded into that server under a new name
instead (`hot_load.py`): loaded, checked with one real completion under its own name, then the
proxy renames `served_name` to it (`POST /admin/upstream` with `models`), drains the old name's
requests and the old adapter is unloaded — the same steps as a switch, one server throughout.
A hot-load that fails falls back to a new server.

A switch starts the new champion's server and waits for its health check and one real
completion (the loop's `serve.lifecycle.wait_ready`); only then does it `POST /admin/upstream`
to the proxy, `POST /admin/drain` the old upstream (requests already in flight finish on the
old server), and stop the old server's process group (SIGTERM, SIGKILL after a grace period,
wait until it is gone). A champion that does not start — no config.json, a broken config, a
failed first completion, a timeout — is refused: the old one keeps serving, the candidate's
processes are stopped, and the error names the reason with the server's last log lines
(fail closed). Every step logs one line.

The proxy's admin routes need its token: the proxy generates one at each start into
`proxy.token` in the state folder (0600, `--admin-token-file`), and every admin call (switch,
drain, adoption's probe) reads it from there. A switch asks the proxy to send the upstream key
(`serve.api_key_env`) to the new server (`"upstream_key": true`): the proxy sends it only to
upstreams it is told to, and every server of the service takes the same key.

State. `service.json` in the state folder (atomic, rewritten after every step) names the
proxy and the servers with pid, creation time and port (`processes.py`), and
`service.lock` keeps a second `ManagedService` off the same folder. A new `ManagedService`
reads it (`adoption.py`): a process whose pid is gone (or reused) is forgotten; a
proxy that answers its admin route is adopted, and so is the server it sends to if that
answers `/health`; any other server it left (a candidate or an old one, from a switch a crash
interrupted) is stopped. A proxy that is gone takes its servers with it: they are stopped,
and `start()` begins afresh.

Deliberately different from the loop's `serving()`: the processes are not tied to the
watcher (no parent-death signal), because a watcher that restarts must not take the service
down; `stop()`, or the next watcher's adoption, cleans up. For the same reason the proxy is a
subprocess, not a thread of the watcher. Nothing is probed *through* the proxy, so that health
checks never land in the traffic log.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tuneloop.errors import InputError, PhaseFailed
from tuneloop.flywheel.service.adoption import (
    StateLock,
    admin_headers,
    adopt,
    read_token,
    take_lock,
)
from tuneloop.flywheel.service.hot_load import (
    TIMEOUT_S,
    hot_loadable,
    load_adapter,
    loaded_adapters,
    unload_adapter,
    version_name,
)
from tuneloop.flywheel.service.processes import (
    PROXY_GRACE_S,
    ProcessRecord,
    alive,
    created_at,
    load_state,
    save_state,
    spawn_detached,
    stop_group,
    wait_port,
    wait_proxy,
)
from tuneloop.flywheel.service.server_command import server_command
from tuneloop.flywheel.service.settings import ServiceSettings, ServiceStatus


def _stderr(line: str) -> None:
    print(f"tuneloop-service: {line}", file=sys.stderr, flush=True)


class ManagedService:
    """The champion behind a stable address; see the module docstring. One caller at a time
    (the watcher's thread): the methods are not meant to run concurrently."""

    def __init__(self, settings: ServiceSettings, log: Callable[[str], None] | None = None):
        self.settings = settings
        self.log = log or _stderr
        """Where the one line per step goes (stderr by default)."""
        self._children: dict[int, Any] = {}  # pid → Popen, for the processes we spawned
        self._lock: StateLock | None = take_lock(settings.state_dir)
        try:
            found = load_state(settings.state_dir)
            self._state = adopt(
                found,
                host=settings.host,
                port=settings.port,
                grace_s=settings.stop_grace_s,
                log=self.log,
                token=read_token(self._token_file),
                served_name=settings.served_name,
            )
            self._save()
        except BaseException:
            self.close()
            raise

    # -- the four operations ------------------------------------------------------------------

    def start(self, model_dir: Path, version: int, adapter: Path | None = None) -> ServiceStatus:
        """Serve `model_dir` (with `adapter`, a LoRA adapter on it: vLLM only) as champion
        `version`; switches if another one is served."""
        proxy = self._state.proxy
        if proxy is not None and not alive(proxy):
            self.log(f"proxy pid {proxy.pid} is gone; starting the service afresh")
            self.stop()
        if self._state.proxy is not None:
            current = self._state.current()
            wanted = (str(Path(model_dir).resolve()), str(adapter.resolve()) if adapter else None)
            same = current is not None and (current.model_dir, current.adapter_dir) == wanted
            if same and current is not None and current.version == version:
                self.log(f"already serving champion v{version} at {self.url}")
                return self.status()
            return self.switch_to(model_dir, version, adapter)
        server = self._start_server(Path(model_dir), version, adapter=adapter)
        try:
            self._start_proxy(server)
        except BaseException:
            self._stop(server)
            raise
        self._state.current_port = server.port
        self._save()
        self.log(f"serving champion v{version} at {self.url} as {self.settings.served_name!r}")
        return self.status()

    def switch_to(
        self, model_dir: Path, version: int, adapter: Path | None = None
    ) -> ServiceStatus:
        """Serve `model_dir` as champion `version` instead of the current one, without
        downtime; refuses (and keeps the current one) if the new server does not start."""
        proxy = self._state.proxy
        if proxy is None:
            raise PhaseFailed("the managed service is not running; start() it before a switch")
        if not alive(proxy):
            raise PhaseFailed(
                f"the service's proxy (pid {proxy.pid}, port {proxy.port}) is gone; "
                "start() brings the service back with the new champion"
            )
        began = time.monotonic()
        old = self._state.current()
        if adapter is not None and old is not None and self._hot_load(old, version, adapter):
            self.log(f"hot-loaded champion v{version} in {time.monotonic() - began:.1f} s")
            return self.status()
        self.log(f"switch to champion v{version}: starting its server ({model_dir})")
        new = self._start_server(Path(model_dir), version, keeping=old, adapter=adapter)
        body: dict[str, Any] = {"upstream": new.url(self._state.host)}
        if self.settings.server.api_key_env:
            body["upstream_key"] = True  # every server of ours takes the same key
        try:
            answer = self._admin("upstream", body, 10.0)
        except PhaseFailed:
            self._stop(new)
            raise
        self._state.current_port = new.port
        self._save()
        self.log(f"proxy switched: {answer.get('previous')} → {answer.get('upstream')}")
        if old is not None:
            self._retire(old)
        self.log(f"switched to champion v{version} in {time.monotonic() - began:.1f} s")
        return self.status()

    def stop(self) -> None:
        """Stop the proxy, then every server; wait until each is gone."""
        if self._state.proxy is not None:
            self._stop(self._state.proxy)
        for server in list(self._state.servers):
            self._stop(server)
        self._state.current_port = None
        self._save()
        self.log("stopped")

    def status(self) -> ServiceStatus:
        state, current = self._state, self._state.current()
        proxy = state.proxy if state.proxy is not None and alive(state.proxy) else None
        server = current if current is not None and alive(current) else None
        return ServiceStatus(
            running=proxy is not None and server is not None,
            url=self.url,
            model=self.settings.served_name,
            version=current.version if current else None,
            model_dir=current.model_dir if current else None,
            adapter_dir=current.adapter_dir if current else None,
            upstream=current.url(state.host) if current else None,
            proxy_pid=proxy.pid if proxy else None,
            server_pid=server.pid if server else None,
        )

    def close(self) -> None:
        """Let go of the state folder and leave the processes running (for the next
        `ManagedService` to adopt): what a watcher does when it exits."""
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    @property
    def url(self) -> str | None:
        proxy = self._state.proxy
        return f"{proxy.url(self._state.host)}/v1" if proxy is not None else None

    # -- steps ----------------------------------------------------------------------------------

    def _start_server(
        self,
        model_dir: Path,
        version: int,
        keeping: ProcessRecord | None = None,
        adapter: Path | None = None,
    ) -> ProcessRecord:
        """A ready server for `model_dir`, or an error saying why not (candidate stopped)."""
        from tuneloop.serve.lifecycle import Launch, wait_ready

        kept = f"; still serving champion v{keeping.version}" if keeping else ""
        refused = f"champion v{version} ({model_dir}) was not served{kept}"
        if not (model_dir / "config.json").is_file():
            raise InputError(f"{refused}: not a model folder (expected config.json in it)")
        from tuneloop.backend_choice import choose_backend

        server = self.settings.server  # `auto`: resolved for this champion
        backend = choose_backend(server, model_dir, adapter=adapter is not None).backend
        if adapter is not None and backend != "vllm":
            raise InputError(
                f"{refused}: it is a LoRA adapter on its base ({adapter}), and serve.backend "
                f"{backend!r} serves merged models only; serve the service with "
                "serve.backend: vllm"
            )
        folder, host = self.settings.state_dir, self._state.host
        port_file, log = folder / f"server-v{version}.port", folder / f"server-v{version}.log"
        port_file.unlink(missing_ok=True)
        argv, api_key, extra, lora = server_command(
            self.settings, self._state.host, model_dir.resolve(), port_file, backend, adapter
        )
        env = {**os.environ, "HF_HUB_OFFLINE": "1", **extra}  # a local folder needs no hub
        proc = spawn_detached(argv, log, env)
        self._children[proc.pid] = proc
        record: ProcessRecord | None = None
        try:
            port = wait_port(proc, port_file, log, self.settings.startup_timeout_s)
            record = ProcessRecord(
                role="server",
                pid=proc.pid,
                created=created_at(proc.pid),
                port=port,
                log=str(log),
                model_dir=str(model_dir.resolve()),
                adapter_dir=str(adapter.resolve()) if adapter is not None else None,
                lora_name=self.settings.served_name if lora is not None else None,
                max_lora_rank=lora.max_lora_rank if lora is not None else None,
                version=version,
            )
            self._state.servers.append(record)
            self._save()
            self.log(f"server for v{version}: pid {proc.pid}, port {port}; waiting until ready")
            launch = Launch(
                argv=argv,
                served_model=self.settings.served_name,
                host=host,
                port=port,
                startup_timeout_s=self.settings.startup_timeout_s,
                log_path=log,
                api_key=api_key,
            )
            wait_ready(proc, launch)
        except Exception as err:
            self._abandon(proc, record)
            kind = InputError if isinstance(err, InputError) else PhaseFailed
            raise kind(f"{refused}: {err}") from None
        self.log(f"server for v{version} is ready (health + one completion)")
        return record

    def _hot_load(self, old: ProcessRecord, version: int, adapter: Path) -> bool:
        """Load champion `version`'s adapter into `old`'s vLLM server and switch the proxy to
        it (`hot_load.py`); False, with the reason logged, when a new server must serve it
        instead. Raises only when the proxy refuses the switch (the new adapter unloaded)."""
        from tuneloop.envkeys import read_api_key
        from tuneloop.serve.adapter import served_adapter
        from tuneloop.serve.lifecycle import probe

        try:
            lora = served_adapter(adapter.resolve())
        except InputError:
            return False  # the new server's start refuses it, naming the file
        served, model_dir = self.settings.served_name, Path(old.model_dir or "")
        why = hot_loadable(old, model_dir, lora.rank)
        if why is not None:
            self.log(f"champion v{version} gets a new server: {why}")
            return False
        root, name = old.url(self._state.host), version_name(served, version)
        key = read_api_key(self.settings.server.api_key_env, "serve.api_key_env")
        self.log(f"switch to champion v{version}: loading its adapter into v{old.version}'s server")
        try:
            loaded = loaded_adapters(root, key)
            if loaded.get(name) != str(lora.path):
                if name in loaded and name != old.lora_name:
                    unload_adapter(root, name, key)  # left by an interrupted hot-load
                load_adapter(root, name, lora.path, key)
            problem = probe(f"{root}/v1", name, key, TIMEOUT_S)
            if problem is not None:
                raise PhaseFailed(f"its first completion failed ({problem})")
        except PhaseFailed as err:
            self.log(f"hot-load of v{version} failed ({err}); starting a new server instead")
            self._unload(root, name, key, keep=old.lora_name)
            return False
        body: dict[str, Any] = {"upstream": root, "models": {served: name}}
        if self.settings.server.api_key_env:
            body["upstream_key"] = True
        try:
            self._admin("upstream", body, 10.0)
        except PhaseFailed:
            self._unload(root, name, key, keep=old.lora_name)
            raise
        update = {"adapter_dir": str(lora.path), "lora_name": name, "version": version}
        new = old.model_copy(update=update)
        self._state.servers = [new if s.pid == old.pid else s for s in self._state.servers]
        self._save()
        self.log(f"proxy switched: {served!r} is {name!r} (was {old.lora_name!r})")
        if old.lora_name is not None and old.lora_name != name:
            route = {} if old.lora_name == served else {served: old.lora_name}
            self._drain(old, route, "adapter", "unloading it anyway")
            self._unload(root, old.lora_name, key)
        return True

    def _unload(self, root: str, name: str, key: str | None, keep: str | None = None) -> None:
        """Unload adapter `name` (never `keep`, the one the proxy may still send to)."""
        if name == keep:
            return
        try:
            unload_adapter(root, name, key)
            self.log(f"unloaded adapter {name!r}")
        except PhaseFailed as err:
            self.log(f"could not unload adapter {name!r} ({err}); it stays loaded")

    def _abandon(self, proc: Any, record: ProcessRecord | None) -> None:
        """Stop a candidate that failed to start, and forget it."""
        if record is not None:
            self._stop(record)
            return
        stand_in = ProcessRecord(role="server", pid=proc.pid, created=0.0, port=0, log="")
        stop_group(stand_in, proc, self.settings.stop_grace_s)
        self._children.pop(proc.pid, None)

    def _start_proxy(self, server: ProcessRecord) -> ProcessRecord:
        folder, host = self.settings.state_dir, self._state.host
        port_file, log = folder / "proxy.port", folder / "proxy.log"
        port_file.unlink(missing_ok=True)
        self._token_file.unlink(missing_ok=True)
        argv = [sys.executable, "-m", "tuneloop", "proxy", "--upstream", server.url(host)]
        argv += ["--host", host, "--port", str(self.settings.port), "--port-file", str(port_file)]
        argv += ["--admin-token-file", str(self._token_file)]
        if self.settings.log_dir is not None:
            argv += ["--log-dir", str(self.settings.log_dir)]
        key_env = self.settings.server.api_key_env
        if key_env:
            argv += ["--upstream-key-env", key_env]
        proc = spawn_detached(argv, log)
        self._children[proc.pid] = proc
        record: ProcessRecord | None = None
        try:
            port = wait_port(proc, port_file, log, self.settings.startup_timeout_s)
            record = ProcessRecord(
                role="proxy", pid=proc.pid, created=created_at(proc.pid), port=port, log=str(log)
            )
            self._state.proxy = record
            self._save()
            wait_proxy(proc, port_file, log, host, self.settings.startup_timeout_s)
        except Exception as err:
            self._abandon(proc, record)
            kind = InputError if isinstance(err, InputError) else PhaseFailed
            raise kind(f"the proxy on {host}:{self.settings.port} did not start: {err}") from None
        self.log(f"proxy: pid {proc.pid}, http://{host}:{port}/v1 → {server.url(host)}")
        return record

    def _retire(self, old: ProcessRecord) -> None:
        """Drain the old upstream at the proxy, then stop its server."""
        self._drain(old, None, "server", "stopping it anyway")
        self._stop(old)

    def _drain(
        self, old: ProcessRecord, models: dict[str, str] | None, what: str, anyway: str
    ) -> None:
        """Wait, up to the drain timeout, for the requests the proxy sent to `old` (with
        `models`: on that route only, `hot_load.py`); says how it went, then `anyway`."""
        wait, url = self.settings.drain_timeout_s, old.url(self._state.host)
        body: dict[str, Any] = {"upstream": url, "timeout_s": wait}
        if models is not None:
            body["models"] = models
        began = time.monotonic()
        try:
            answer = self._admin("drain", body, wait + 10)
        except PhaseFailed as err:
            self.log(f"could not drain v{old.version}'s {what} ({err}); {anyway}")
            return
        if answer.get("drained"):
            took = time.monotonic() - began
            self.log(f"drained v{old.version}'s {what}: nothing in flight ({took:.2f} s)")
        else:
            left = answer.get("in_flight", {}).get(url, "?")
            self.log(
                f"v{old.version}'s {what} still has {left} requests in flight after "
                f"{wait:g} s (the drain timeout); {anyway}"
            )

    def _stop(self, record: ProcessRecord) -> None:
        grace = PROXY_GRACE_S if record.role == "proxy" else self.settings.stop_grace_s
        how = stop_group(record, self._children.pop(record.pid, None), grace)
        what = "proxy" if record.role == "proxy" else f"server for v{record.version}"
        self.log(f"{what} (pid {record.pid}, port {record.port}): {how}")
        if record.role == "proxy":
            self._state.proxy = None
        else:
            self._state.servers = [s for s in self._state.servers if s.pid != record.pid]
            if self._state.current_port == record.port:
                self._state.current_port = None
        self._save()

    def _admin(self, route: str, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """POST to the proxy's admin route; PhaseFailed if it does not answer as expected."""
        assert self._state.proxy is not None
        url = f"{self._state.proxy.url(self._state.host)}/admin/{route}"
        headers = admin_headers(read_token(self._token_file))
        try:
            answer = httpx.post(url, json=body, headers=headers, timeout=timeout_s)
        except httpx.HTTPError as err:
            raise PhaseFailed(f"{url} did not answer ({type(err).__name__}: {err})") from None
        ok = answer.status_code == 200 or (route == "drain" and answer.status_code == 504)
        if not ok:
            raise PhaseFailed(f"{url} answered HTTP {answer.status_code}: {answer.text[:300]}")
        found: dict[str, Any] = answer.json()
        return found

    @property
    def _token_file(self) -> Path:
        return self.settings.state_dir / "proxy.token"

    def _save(self) -> None:
        save_state(self.settings.state_dir, self._state)
