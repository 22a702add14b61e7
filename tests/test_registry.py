"""The plugin registry: decorator registration, did-you-mean, entry points, duplicates."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tuneloop import registry as reg
from tuneloop.errors import InputError, did_you_mean
from tuneloop.registry import Registry


def test_register_and_get() -> None:
    r: Registry[object] = Registry("widget", "tuneloop.test_widgets")

    @r.register("shiny")
    def shiny() -> str:
        return "ok"

    assert r.get("shiny") is shiny
    assert r.names() == ["shiny"]
    assert "shiny" in r


def test_unknown_name_suggests() -> None:
    r: Registry[object] = Registry("widget", "tuneloop.test_widgets")
    r.add("numeric", object())
    with pytest.raises(InputError, match=r"unknown widget 'numerc' \(did you mean 'numeric'\?\)"):
        r.get("numerc")


def test_duplicate_registration_refused() -> None:
    r: Registry[object] = Registry("widget", "tuneloop.test_widgets")
    r.add("a", object())
    with pytest.raises(ValueError, match="registered twice"):
        r.add("a", object())


def test_bad_name_refused() -> None:
    r: Registry[object] = Registry("widget", "g")
    with pytest.raises(ValueError, match="snake_case"):
        r.register("has space")


def test_entry_points_are_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = object()
    ep = SimpleNamespace(name="third_party", value="pkg.mod:obj", load=lambda: plugin)
    monkeypatch.setattr(reg, "entry_points", lambda group: [ep] if group == "g.x" else [])
    r: Registry[object] = Registry("widget", "g.x")
    assert r.get("third_party") is plugin
    assert r.origin("third_party") == "entry point pkg.mod:obj"


def test_did_you_mean_empty_when_nothing_close() -> None:
    assert did_you_mean("zzz", ["numeric", "exact"]) == ""
