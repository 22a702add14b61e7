"""The external backend names one model per arm (defect: one `serve.external.model` served both
arms, so post's rows were labelled as the merged checkpoint while querying the same model)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from tuneloop.config import LoopConfig
from tuneloop.config.models import ServeConfig
from tuneloop.errors import InputError
from tuneloop.serving import serving


def _serve_cfg(**external: Any) -> ServeConfig:
    return ServeConfig.model_validate({"backend": "external", "external": external})


# ---- config ----------------------------------------------------------------------------------


def test_config_refuses_the_same_model_for_both_arms() -> None:
    same = {"base_url": "http://h/v1", "pre": {"model": "m"}, "post": {"model": "m"}}
    with pytest.raises(ValidationError, match="serve.external.pre and serve.external.post are"):
        _serve_cfg(**same)
    cfg = _serve_cfg(**same, aa_control=True)  # a deliberate A/A control is allowed
    assert cfg.external.arm_endpoint("post") == ("http://h/v1", "m")
    # the same name at two different URLs is two endpoints
    _serve_cfg(
        pre={"model": "m", "base_url": "http://a/v1"},
        post={"model": "m", "base_url": "http://b/v1"},
    )
    with pytest.raises(ValidationError, match="aa_control: true needs"):
        _serve_cfg(base_url="http://h/v1", pre={"model": "a"}, post={"model": "b"}, aa_control=True)


def test_config_refuses_the_old_single_model_and_says_what_to_write() -> None:
    with pytest.raises(ValidationError, match="write serve.external.pre.model"):
        _serve_cfg(base_url="http://h/v1", model="m")


def test_config_needs_both_arms_with_the_external_backend() -> None:
    with pytest.raises(ValidationError, match="serve.external.post.model"):
        _serve_cfg(base_url="http://h/v1", pre={"model": "a"})
    with pytest.raises(ValidationError, match="serve.external.pre.base_url"):
        _serve_cfg(pre={"model": "a"}, post={"model": "b", "base_url": "http://h/v1"})
    with pytest.raises(ValidationError, match="applies only to serve.backend: external"):
        ServeConfig.model_validate({"external": {"aa_control": True}})
    ServeConfig()  # the embedded default needs none of it


def test_config_errors_name_their_yaml_key(tmp_path: Path) -> None:
    from tuneloop.config import load_config

    (tmp_path / "loop.yaml").write_text(
        "base_model: m\nsuite: {path: s.jsonl}\nserve:\n  backend: external\n  external:\n"
        "    base_url: http://h/v1\n    pre: {model: m}\n    post: {model: m}\n"
    )
    with pytest.raises(InputError, match=r"serve\.external \(line 5\): .*same model"):
        load_config(tmp_path / "loop.yaml")


# ---- backend ---------------------------------------------------------------------------------


def test_each_arm_serves_its_own_model(fake_endpoint: Callable[[str], str]) -> None:
    pre_url, post_url = fake_endpoint("champion"), fake_endpoint("challenger")
    cfg = _serve_cfg(
        pre={"model": "champion", "base_url": pre_url},
        post={"model": "challenger", "base_url": post_url + "/"},  # the same URL as without
    )
    with serving("runs/merge/model", cfg, arm="pre") as ep:
        assert (ep.base_url, ep.model, ep.identity) == (pre_url, "champion", "champion")
        assert not ep.decoding_applied
    with serving("runs/merge/model", cfg, arm="post") as ep:
        assert (ep.base_url, ep.model, ep.identity) == (post_url, "challenger", "challenger")
    with pytest.raises(InputError, match="arm='pre'"), serving("x", cfg):
        pass
    # the same model for both arms, and the old single model, are the config's refusals: a
    # ServeConfig that holds them does not exist (test_config_refuses_* above), so the
    # backend never sees one; a trailing slash does not make a URL another endpoint
    same = {"pre": {"model": "m", "base_url": pre_url}, "post": {"model": "m"}}
    with pytest.raises(ValidationError, match="same model"):
        _serve_cfg(**same, base_url=pre_url + "/")


# ---- the loop's eval phases ----------------------------------------------------------------


def _eval_arm(cfg: LoopConfig, folder: Path, model_dir: Path, arm: str) -> dict[str, Any]:
    from tuneloop.loop.adapters import _evaluate_model
    from tuneloop.loop.context import PhaseContext

    folder.mkdir(parents=True)
    ctx = PhaseContext(cfg, folder.parent, folder, "run", {}, folder / "phase.log")
    _evaluate_model(ctx, model_dir, "0" * 64, arm)  # type: ignore[arg-type]
    summary = json.loads((folder / "summary.json").read_text())
    rows = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
    return {"summary": summary, "models": {r["model"] for r in rows}}


@pytest.mark.parametrize("aa", [False, True])
def test_external_rows_are_labelled_with_the_external_model(
    fake_endpoint: Callable[[str], str], tmp_path: Path, aa: bool
) -> None:
    suite = tmp_path / "suite.jsonl"
    rows = [{"id": f"q{i}", "prompt": f"6 * 7 = ? ({i})", "answer": "42"} for i in range(3)]
    suite.write_text("".join(json.dumps(r) + "\n" for r in rows))
    url = fake_endpoint("champion")
    external: dict[str, Any] = {"base_url": url, "pre": {"model": "champion"}}
    external["post"] = {"model": "champion" if aa else "challenger"}
    if not aa:
        external["post"]["base_url"] = fake_endpoint("challenger")
    cfg = LoopConfig.model_validate(
        {
            "base_model": str(tmp_path / "base"),
            "suite": {"path": str(suite), "slices": {"dev": 1.0}},
            "serve": {"backend": "external", "external": {**external, "aa_control": aa}},
            "eval": {"concurrency": 2},
        }
    )
    merged = tmp_path / "merge" / "model"
    pre = _eval_arm(cfg, tmp_path / "eval_pre", tmp_path / "base", "pre")
    post = _eval_arm(cfg, tmp_path / "eval_post", merged, "post")
    want_post = "champion" if aa else "challenger"
    assert pre["models"] == {"champion"} and pre["summary"]["model"] == "champion"
    assert post["models"] == {want_post} and post["summary"]["model"] == want_post
    for arm, out in (("pre", pre), ("post", post)):
        served = out["summary"]["served_as"]
        assert served == {
            "arm": arm,
            "backend": "external",
            "stop_token_ids": None,
            "aa_control": aa,
            "artifact": None,  # an external arm names its model, not local weights
        }
    assert "merge" not in json.dumps(post["summary"]["model"])


def test_an_arm_with_replicas_is_evaluated_over_all_of_them(
    fake_endpoint: Callable[[str], str], tmp_path: Path
) -> None:
    suite = tmp_path / "suite.jsonl"
    rows = [{"id": f"q{i}", "prompt": f"6 * 7 = ? ({i})", "answer": "42"} for i in range(12)]
    suite.write_text("".join(json.dumps(r) + "\n" for r in rows))
    first, second = fake_endpoint("champion"), fake_endpoint("champion")
    external = {
        "pre": {"model": "champion", "base_url": first, "replicas": [second]},
        "post": {"model": "challenger", "base_url": fake_endpoint("challenger")},
    }
    cfg = LoopConfig.model_validate(
        {
            "base_model": str(tmp_path / "base"),
            "suite": {"path": str(suite), "slices": {"dev": 1.0}},
            "serve": {"backend": "external", "external": external},
            "eval": {"concurrency": 2},
        }
    )
    pre = _eval_arm(cfg, tmp_path / "eval_pre", tmp_path / "base", "pre")
    replicas = pre["summary"]["replicas"]
    assert [r["endpoint"] for r in replicas] == [first, second]
    assert sum(r["served"] for r in replicas) == 12 and min(r["served"] for r in replicas) > 0
    bad = _serve_cfg(**{**external, "pre": {**external["pre"], "replicas": ["gpu1:8000"]}})
    with (
        pytest.raises(InputError, match=r"serve.external.pre.replicas.0: expected an http"),
        serving("x", bad, arm="pre"),
    ):
        pass
