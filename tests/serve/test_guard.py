"""`BrowserGuard`'s rule (serve/guard.py): which Host and Origin headers a web page sends.

The guard in front of the real `tuneloop proxy` and `tuneloop serve` is tested through them
(tests/serve/test_command.py, tests/serve/embedded/test_openai_clients.py).
"""

from __future__ import annotations

import pytest

from tuneloop.serve.guard import refusal


@pytest.mark.parametrize(
    ("headers", "refused"),
    [
        ([(b"host", b"127.0.0.1:8100")], False),
        ([(b"host", b"localhost:8100")], False),
        ([(b"host", b"[::1]:8100")], False),
        ([], False),  # HTTP/1.0 without Host: no browser
        ([(b"host", b"evil.example:8100")], True),
        ([(b"host", b"127.0.0.1.evil.example")], True),
        ([(b"host", b"127.0.0.1:8100"), (b"origin", b"http://127.0.0.1:8100")], False),
        ([(b"host", b"127.0.0.1:8100"), (b"origin", b"http://evil.example")], True),
        ([(b"host", b"127.0.0.1:8100"), (b"origin", b"null")], True),
    ],
)
def test_the_browser_guard_on_a_loopback_bind(
    headers: list[tuple[bytes, bytes]], refused: bool
) -> None:
    assert (refusal(headers, "127.0.0.1") is not None) is refused


def test_the_browser_guard_on_a_remote_bind_checks_origin_only() -> None:
    assert refusal([(b"host", b"gpu-box.lan:8100")], "0.0.0.0") is None
    page = [(b"host", b"gpu-box.lan:8100"), (b"origin", b"http://evil.example")]
    assert refusal(page, "0.0.0.0") is not None
