"""The API key never reaches samples.jsonl, summary.json or the terminal, even when the
server echoes the Authorization header back in an error body."""

from __future__ import annotations

import contextlib
import io
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tuneloop.cli import main

KEY_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_."
TEMPLATES = [
    '{"error": {"message": "Incorrect API key provided: {auth}"}}',
    '{"error": "bad request", "headers": {"Authorization": "{auth}"}}',
    "x" * 170 + " {auth} " + "y" * 50,  # the key straddles the 200-character cut
    "Authorization:\t{auth}",
]


def _eval(url: str, suite, out, env: str) -> tuple[int, str]:
    argv = ["tuneloop", "eval", "--endpoint", url, "--model", "fake", "--suite", str(suite)]
    argv += ["--out", str(out), "--api-key-env", env, "--max-retries", "1", "--no-progress"]
    buf = io.StringIO()
    old = sys.argv
    sys.argv = argv
    try:
        with (
            contextlib.redirect_stdout(buf),
            contextlib.redirect_stderr(buf),
            pytest.raises(SystemExit) as done,
        ):
            main()
    finally:
        sys.argv = old
    return int(done.value.code or 0), buf.getvalue()


@pytest.fixture(scope="module")
def echo_server(kit_module):
    server = kit_module.ServerThread(kit_module.FakeState())
    yield server
    server.stop()


@pytest.fixture(scope="module")
def kit_module():
    from .conftest import FakeKit

    return FakeKit()


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    # a digit and a capital, as real keys have: hypothesis also draws the string constants of
    # the code under test, and a field name such as `completion_tokens` as "the key" would
    # redact the sample rows' own field names (conftest's `_forget_keys_read` keeps a test's
    # keys from outliving it)
    key=st.text(alphabet=KEY_CHARS, min_size=12, max_size=48).filter(
        lambda k: any(c.isdigit() for c in k) and any(c.isupper() for c in k)
    ),
    status=st.sampled_from([400, 401, 403, 404, 422, 429, 500, 503]),
    template=st.sampled_from(TEMPLATES),
)
def test_an_echoed_key_is_never_stored_or_printed(
    echo_server, small_suite, tmp_path_factory, monkeypatch, key, status, template
):
    monkeypatch.setenv("TL_TEST_KEY", key)
    echo_server.state.echo_auth = (status, template)
    out = tmp_path_factory.mktemp("eval")
    code, printed = _eval(echo_server.url, small_suite, out, "TL_TEST_KEY")
    assert code != 0
    assert key not in printed, printed
    for path in out.iterdir():
        assert key.encode() not in path.read_bytes(), path.name
    rows = (out / "samples.jsonl").read_text() if (out / "samples.jsonl").exists() else ""
    assert status in (401, 403, 404) or "<SECRET>" in rows
