"""Pre and post are served under one decoding contract (defect: a base whose generation config
names the wrong eos ran to max_tokens while the merged checkpoint, repaired by merge, stopped).

M0 is the real demo model with its generation_config eos set to `<|endoftext|>` (0) instead of
the chat template's `<|im_end|>` (2); M1 is M0 merged with a zero adapter (merge adds 2).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx
import pytest

from tuneloop.config import ServeConfig, ServerConfig
from tuneloop.endpoint import Decoding
from tuneloop.serve.backends import embedded_argv, vllm_argv
from tuneloop.serving import serving
from tuneloop.vllm_env import VllmEnv

REPO = Path(__file__).resolve().parents[2]
ARITH_MODEL = REPO / "examples" / "arith" / "model"
QUESTIONS = ["What is 2 + 3?", "What is 4 + 4?", "What is 7 + 1?"]
MAX_TOKENS = 24


@pytest.fixture(scope="module")
def arms(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if not (ARITH_MODEL / "config.json").is_file():
        pytest.skip("examples/arith/model not built (python examples/arith/build_model.py)")
    from tuneloop.train.checkpoint import merge

    root = tmp_path_factory.mktemp("arms")
    m0 = Path(shutil.copytree(ARITH_MODEL, root / "m0"))
    gen = json.loads((m0 / "generation_config.json").read_text())
    gen["eos_token_id"] = 0  # wrong: the chat template ends a turn with <|im_end|> (2)
    (m0 / "generation_config.json").write_text(json.dumps(gen))
    m1 = merge(m0, None, root / "m1")
    assert json.loads((m1 / "generation_config.json").read_text())["eos_token_id"] == [0, 2]
    return m0, m1


def _contract(base: Path) -> Decoding:
    from tuneloop.train.checkpoint import read_decoding

    meta = read_decoding(base)
    return Decoding(meta.stop_token_ids, meta.generation_config)


def _answers(model: Path, decoding: Decoding | None) -> list[tuple[str, str, int]]:
    config = ServeConfig(max_batch_size=8, batch_wait_ms=1)
    with serving(model, config, arm="pre", decoding=decoding) as ep:
        assert ep.decoding_applied == (decoding is not None)
        out = []
        for q in QUESTIONS:
            body = {
                "model": ep.model,
                "messages": [{"role": "user", "content": q}],
                "max_tokens": MAX_TOKENS,
                "temperature": 0,
            }
            r = httpx.post(f"{ep.base_url}/chat/completions", json=body, timeout=60).json()
            choice = r["choices"][0]
            tokens = r["usage"]["completion_tokens"]
            out.append((choice["message"]["content"], choice["finish_reason"], tokens))
    return out


def test_the_contract_is_the_base_stop_set() -> None:
    if not (ARITH_MODEL / "config.json").is_file():
        pytest.skip("examples/arith/model not built")
    contract = _contract(ARITH_MODEL)
    assert contract.stop_token_ids == (2,)
    assert contract.served_generation_config()["eos_token_id"] == [2]


def test_base_and_merged_stop_at_the_same_place_under_one_contract(
    arms: tuple[Path, Path],
) -> None:
    from tuneloop.serve.embedded.engine import load_engine
    from tuneloop.serve.embedded.row import Row

    m0, m1 = arms
    contract = _contract(m0)
    assert contract.stop_token_ids == (0, 2)
    # The defect, in process: on its own metadata M0 never stops (it does not know <|im_end|>).
    engine = load_engine(m0, max_batch_size=8, batch_wait_ms=1).start()
    try:
        prompt = tuple(engine.chat_prompt([{"role": "user", "content": QUESTIONS[0]}]))
        alone = engine.submit([Row(prompt, 0.0, 1.0, MAX_TOKENS, 0)]).result()[0]
    finally:
        engine.close()
    assert (alone.finish_reason, alone.completion_tokens) == ("length", MAX_TOKENS)
    # Served as the loop serves them: both arms under the base's contract.
    pre, post = _answers(m0, contract), _answers(m1, contract)
    assert pre == post
    assert all(reason == "stop" and tokens < MAX_TOKENS for _, reason, tokens in pre), pre


def test_every_process_backend_carries_the_contract() -> None:
    contract = Decoding((0, 2), {"do_sample": False})
    argv = embedded_argv(Path("/m"), "127.0.0.1", 0, ServerConfig(), contract)
    assert argv[argv.index("--stop-token-ids") + 1] == "0,2"
    assert "--stop-token-ids" not in embedded_argv(Path("/m"), "127.0.0.1", 0, ServerConfig())
    gpu = VllmEnv(Path("/env/bin/python"), None, cpu=False, source="test")
    assert "--generation-config" not in vllm_argv("/m", "127.0.0.1", 1, ServeConfig(), gpu)
    assert contract.served_generation_config() == {"do_sample": False, "eos_token_id": [0, 2]}
    # vLLM would cap every request's max_tokens at a generation config's max_new_tokens
    capped = Decoding((2,), {"do_sample": False, "max_new_tokens": 8, "max_length": 64})
    assert capped.served_generation_config() == {"do_sample": False, "eos_token_id": [2]}


def test_the_embedded_server_refuses_stop_ids_outside_the_vocabulary(tmp_path: Path) -> None:
    from tuneloop.errors import PhaseFailed

    if not (ARITH_MODEL / "config.json").is_file():
        pytest.skip("examples/arith/model not built")
    with (
        pytest.raises(PhaseFailed, match="stop-token-ids"),
        serving(ARITH_MODEL, decoding=Decoding((99999,)), log_path=tmp_path / "s.log"),
    ):
        pass


def test_the_loop_evaluates_both_arms_under_the_base_contract(
    arms: tuple[Path, Path], tmp_path: Path
) -> None:
    from tuneloop.config import LoopConfig
    from tuneloop.loop.adapters import _evaluate_model
    from tuneloop.loop.context import PhaseContext
    from tuneloop.report.delta import finish_reasons
    from tuneloop.samplelog import load_sample_log

    m0, m1 = arms
    suite = tmp_path / "suite.jsonl"
    items = [
        {"id": f"q{i}", "messages": [{"role": "user", "content": q}], "answer": "0"}
        for i, q in enumerate(QUESTIONS)
    ]
    suite.write_text("".join(json.dumps(r) + "\n" for r in items))
    cfg = LoopConfig.model_validate(
        {
            "base_model": str(m0),
            "suite": {"path": str(suite)},
            "eval": {"max_tokens": MAX_TOKENS, "concurrency": 3},
            "serve": {"batch_wait_ms": 1},
        }
    )
    logs = {}
    for arm, model in (("pre", m0), ("post", m1)):
        folder = tmp_path / f"eval_{arm}"
        folder.mkdir()
        ctx = PhaseContext(cfg, tmp_path, folder, "run", {}, folder / "phase.log")
        _evaluate_model(ctx, model, "0" * 64, arm)  # type: ignore[arg-type]
        logs[arm] = load_sample_log(folder)
    (pre_summary, pre_rows), (post_summary, post_rows) = logs["pre"], logs["post"]
    assert pre_summary.served_as is not None and post_summary.served_as is not None
    assert pre_summary.served_as.stop_token_ids == post_summary.served_as.stop_token_ids == [0, 2]
    ids = pre_summary.item_ids
    assert finish_reasons(pre_rows, ids) == finish_reasons(post_rows, ids) == {"stop": 3}
    by_key = {(r.item_id, r.sample_index): r.completion for r in post_rows}
    assert all(by_key[(r.item_id, r.sample_index)] == r.completion for r in pre_rows)
