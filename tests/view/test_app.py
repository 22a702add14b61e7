"""`tuneloop view --serve`'s app (view/app.py): read-only routes over the ledger, no more."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tuneloop.view.app import DASHBOARD_CSP, HEADER_CSP, create_app, is_loopback
from tuneloop.view.history import gather
from tuneloop.view.sources import resolve


@pytest.fixture(scope="module")
def client(world: Path) -> TestClient:
    return TestClient(create_app(resolve(world, None)), base_url="http://127.0.0.1:8150")


def test_the_dashboard_and_the_reports_it_links(client: TestClient, world: Path) -> None:
    page = client.get("/")
    assert (
        page.status_code == 200
        and page.headers["content-security-policy"] == DASHBOARD_CSP + HEADER_CSP
    )
    assert page.headers["cache-control"] == "no-store"
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]

    def timeless(text: str) -> str:
        return re.sub(r"read [0-9T:+-]+", "read …", text)

    assert timeless(client.get("/index.html").text) == timeless(page.text)
    assert page.text.count('class="report"') == 3
    for r in gather(resolve(world, None)).rounds:
        if r.report is None:
            continue
        got = client.get("/" + r.report.href)  # the page's relative link, from /
        assert got.status_code == 200 and got.content == r.report.path.read_bytes()
        assert "script-src 'unsafe-inline'" in got.headers["content-security-policy"]


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/runs/no-such-run/report.html", 404),
        ("GET", "/runs/..%2F..%2Fetc%2Fpasswd/report.html", 404),
        ("GET", "/docs", 404),
        ("GET", "/openapi.json", 404),
        ("POST", "/", 405),
        ("PUT", "/index.html", 405),
        ("DELETE", "/runs/x/report.html", 405),
        ("HEAD", "/", 200),
    ],
)
def test_nothing_else_is_served(client: TestClient, method: str, path: str, status: int) -> None:
    assert client.request(method, path).status_code == status


def test_loopback_hosts() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.0.0.2", "::1", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.1", "example.com"))


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("127.0.0.1:8150", 200),
        ("localhost:8150", 200),
        ("[::1]:8150", 200),
        ("evil.example:8150", 403),  # DNS rebinding: the page's own name
        ("evil.example", 403),
        ("127.0.0.1.evil.example", 403),
    ],
)
def test_a_loopback_dashboard_answers_its_own_hosts_only(
    client: TestClient, host: str, status: int
) -> None:
    got = client.get("/", headers={"host": host})
    assert got.status_code == status, got.text
    assert got.headers["x-content-type-options"] == "nosniff"
    if status == 403:
        assert "is not this dashboard's" in got.text and "<table" not in got.text


def test_with_allow_remote_any_host_is_served(world: Path) -> None:
    remote = TestClient(create_app(resolve(world, None), host="0.0.0.0"))
    assert remote.get("/", headers={"host": "dash.example.org"}).status_code == 200
