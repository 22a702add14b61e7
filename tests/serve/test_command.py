"""`tuneloop serve` and `tuneloop proxy` (`serve/command.py`): bad input, and the proxy as a
person runs it (the installed script, a real upstream, SIGTERM)."""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import typer
from typer.testing import CliRunner

from tuneloop.errors import InputError
from tuneloop.serve.command import serve

from ..installed import proxy_process, script, tuneloop
from .upstreams import fake_upstream, running


def app() -> typer.Typer:
    app = typer.Typer()
    app.command()(serve)
    return app


def test_the_command_module_imports_nothing_heavy() -> None:
    code = (
        "import sys, tuneloop.serve, tuneloop.serve.command; "
        "heavy = {'torch', 'transformers', 'fastapi', 'uvicorn', 'httpx', 'aiohttp'}; "
        "heavy &= set(sys.modules); "
        "sys.exit(sorted(heavy) or 0)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_serve_refuses_a_folder_without_a_model(tmp_path: Path) -> None:
    result = CliRunner().invoke(app(), [str(tmp_path)])
    assert isinstance(result.exception, InputError)
    assert "config.json" in str(result.exception)


def test_serve_refuses_an_unset_key_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "config.json").write_text("{}")
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    result = CliRunner().invoke(app(), [str(tmp_path), "--api-key-env", "NO_SUCH_KEY_VAR"])
    assert isinstance(result.exception, InputError)
    assert "NO_SUCH_KEY_VAR" in str(result.exception)


def test_python_m_app_exits_2_on_bad_input(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tuneloop.serve.app", str(tmp_path)], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "config.json" in proc.stderr


# ---- tuneloop proxy ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--upstream", "ftp://x"], "--upstream"),
        (["--upstream", "http://127.0.0.1:1", "--log-dir", "{file}/sub"], "--log-dir"),
        (["--upstream", "http://127.0.0.1:1", "--api-key-env", "NO_SUCH_VAR_X"], "NO_SUCH_VAR_X"),
        (
            ["--upstream", "http://127.0.0.1:1", "--admin-token-file", "{file}/t"],
            "--admin-token-file",
        ),
        (["--upstream", "http://127.0.0.1:1", "--admin-token-file", "."], "is a folder"),
        (["--upstream", "http://localhost:8100/v1"], "this proxy's own address"),  # a loop
        (
            [
                "--upstream",
                "http://127.0.0.1:1",
                "--admin-token-env",
                "X",
                "--admin-token-file",
                "t",
            ],
            "give one",
        ),
    ],
)
def test_bad_options_exit_2_with_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "file").write_text("x")
    args = [a.replace("{file}", str(tmp_path / "file")) for a in args]
    done = subprocess.run([script(), "proxy", *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr


def test_a_log_folder_in_use_is_refused(tmp_path: Path) -> None:
    from tuneloop.serve.traffic import TrafficLog

    log = TrafficLog(tmp_path)
    try:
        args = ["proxy", "--upstream", "http://127.0.0.1:1", "--log-dir", str(tmp_path)]
        done = subprocess.run([script(), *args], capture_output=True, text=True, timeout=60)
    finally:
        log.close()
    assert done.returncode == 2 and "another process" in done.stderr


def test_the_proxy_serves_logs_and_stops_on_sigterm(tmp_path: Path) -> None:
    port_file = tmp_path / "port"
    with running(fake_upstream("up")) as upstream:
        args = ["--upstream", f"{upstream}/v1", "--port", "0", "--log-dir", str(tmp_path / "t")]
        proc = subprocess.Popen(
            [script(), "proxy", *args, "--port-file", str(port_file)],
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 30
            while not port_file.exists() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            base = f"http://127.0.0.1:{port_file.read_text().strip()}"
            body = {"model": "up", "messages": [{"role": "user", "content": "hi"}]}
            for _ in range(100):  # the port is written just before uvicorn starts serving
                try:
                    reply = httpx.post(f"{base}/v1/chat/completions", json=body)
                    break
                except httpx.ConnectError:
                    time.sleep(0.05)
            assert reply.json()["choices"][0]["message"]["content"] == "up: hi"
        finally:
            proc.send_signal(signal.SIGTERM)
            _, stderr = proc.communicate(timeout=30)
    # uvicorn shuts down gracefully, then re-raises SIGTERM: the shell sees 143
    assert proc.returncode == -signal.SIGTERM, stderr
    assert "Traceback" not in stderr
    (line,) = (tmp_path / "t" / "traffic.jsonl").read_text().splitlines()
    assert json.loads(line)["response"]["model"] == "up"


def ask(base: str) -> httpx.Response:
    body = {"model": "any", "messages": [{"role": "user", "content": "hi"}]}
    return httpx.post(f"{base}/v1/chat/completions", json=body, timeout=10)


def test_admin_routes_need_the_generated_token_and_refuse_a_browser_post(tmp_path: Path) -> None:
    """Issue 25 defect 1: a page's simple POST (text/plain, foreign Origin) switched the
    upstream to another local listener, which then got prompts and the upstream key."""
    env = {"TL_TEST_UPSTREAM_KEY": "up-secret-value"}
    with running(fake_upstream("real")) as real, running(fake_upstream("evil")) as evil:
        args = ["--upstream", real, "--log-dir", str(tmp_path / "t")]
        with proxy_process(
            tmp_path, *args, "--upstream-key-env", "TL_TEST_UPSTREAM_KEY", env=env
        ) as base:
            token_file = tmp_path / "t" / "admin.token"
            assert token_file.stat().st_mode & 0o777 == 0o600
            token = token_file.read_text().strip()
            assert len(token) >= 32
            simple = {"content-type": "text/plain", "origin": "http://evil.example"}
            body = json.dumps({"upstream": evil})
            for headers in (simple, {**simple, "authorization": f"Bearer {token}"}, {}):
                answer = httpx.post(f"{base}/admin/upstream", content=body, headers=headers)
                assert answer.status_code in (401, 403, 415), answer.text
            rebound = {"host": "evil.example", "authorization": f"Bearer {token}"}
            assert httpx.get(f"{base}/admin/upstream", headers=rebound).status_code == 403
            reply = ask(base)
            assert reply.json()["model"] == "real"
            assert reply.headers["x-seen-authorization"] == "Bearer up-secret-value"
            auth = {"authorization": f"Bearer {token}"}
            switched = httpx.post(f"{base}/admin/upstream", json={"upstream": evil}, headers=auth)
            assert switched.status_code == 200, switched.text
            reply = ask(base)
            assert reply.json()["model"] == "evil"
            assert reply.headers["x-seen-authorization"] == ""  # not configured for the key
    assert token not in (tmp_path / "t" / "traffic.jsonl").read_text()


def test_admin_routes_are_off_without_a_token_file_or_variable(tmp_path: Path) -> None:
    with (
        running(fake_upstream("real")) as real,
        proxy_process(tmp_path, "--upstream", real) as base,
    ):
        answer = httpx.get(f"{base}/admin/upstream")
    assert answer.status_code == 403 and "--admin-token-file" in answer.text


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.1"])
def test_a_non_loopback_bind_needs_a_client_key_or_allow_remote(tmp_path: Path, host: str) -> None:
    ran = tuneloop("proxy", "--upstream", "http://127.0.0.1:1", "--host", host, cwd=tmp_path)
    ran.assert_input_error("--host", "--api-key-env", "--allow-remote")
    assert len(ran.stderr.strip().splitlines()) == 1


def test_a_web_page_cannot_write_traffic_through_the_proxy(tmp_path: Path) -> None:
    """A page's simple cross-site POST (text/plain, its own Origin) to the loopback proxy would
    spend the upstream key and put a made-up exchange into the traffic log the flywheel trains
    on; a rebound Host could read the answer. Both refused before any route."""
    log_dir = ["--log-dir", str(tmp_path / "t")]
    with (
        running(fake_upstream("real")) as real,
        proxy_process(tmp_path, "--upstream", real, *log_dir) as base,
    ):
        body = json.dumps({"model": "x", "messages": [{"role": "user", "content": "lie"}]})
        page = {"content-type": "text/plain", "origin": "http://evil.example"}
        posted = httpx.post(f"{base}/v1/chat/completions", content=body, headers=page)
        feedback = httpx.post(f"{base}/v1/feedback", content="{}", headers=page)
        rebound = httpx.get(f"{base}/v1/models", headers={"host": "evil.example:8100"})
        assert ask(base).status_code == 200  # a plain client still gets through
    assert (posted.status_code, feedback.status_code, rebound.status_code) == (403, 403, 403)
    assert "Origin" in posted.json()["error"]["message"]
    (line,) = (tmp_path / "t" / "traffic.jsonl").read_text().splitlines()
    assert "lie" not in line


@pytest.mark.parametrize("path", ["/v1/../health", "/v1/%2e%2e/health", "/v1/..%2fhealth"])
def test_the_proxy_forwards_nothing_outside_v1(tmp_path: Path, path: str) -> None:
    """`/v1/../health` was forwarded as sent: an upstream (or a server in front of it) that
    normalizes the path answered a route outside /v1 (the fake upstream's /health here)."""
    with (
        running(fake_upstream("real")) as real,
        proxy_process(tmp_path, "--upstream", real) as base,
    ):
        conn = http.client.HTTPConnection(httpx.URL(base).host, httpx.URL(base).port, timeout=10)
        conn.request("GET", path)  # sent as written, as curl --path-as-is does
        answer = conn.getresponse()
        status, body = answer.status, json.loads(answer.read())
        conn.close()
    assert (status, body["error"]["code"]) == (400, "invalid_path"), body


def test_serve_on_a_non_loopback_host_without_a_key_warns(tmp_path: Path) -> None:
    """A warning, not a refusal: loop.yaml's `serve.host` reaches `serve` through the
    embedded backend, after `check` has passed."""
    (tmp_path / "config.json").write_text("{}")  # binds, then fails to load: exit 4
    ran = tuneloop("serve", tmp_path, "--host", "0.0.0.0", "--port", "0", cwd=tmp_path)
    assert ran.code == 4 and "Traceback" not in ran.output, ran.output
    (warning,) = [line for line in ran.stderr.splitlines() if "warning" in line]
    assert "--host 0.0.0.0" in warning and "--api-key-env" in warning
