"""Two real flywheel rounds on the tiny model, from a scripted traffic file, through the
installed `tuneloop` script; then the champion served behind the proxy. Slow (~2 minutes on
2 cores): it trains twice.

Asserts the lineage (bootstrap champion, each round from the last champion), the rolling
slices used (audit + a fresh gate slice per round, nothing else evaluated), the ledger's
outcomes and the experiment log's entries, the round lineage in each archive's manifest, and
that the served model after the rounds is the ledger's champion — round 1's promoted
challenger (v2) or, if round 2 also promoted, round 2's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import openai
import yaml

from tuneloop.config import load_config
from tuneloop.gate.ledger import open_ledger
from tuneloop.records import Manifest, read_record
from tuneloop.samplelog import EvalSummary
from tuneloop.suite import load_suite, rolling_of

ROOT = Path(__file__).resolve().parents[2]
ARITH = ROOT / "examples" / "arith"
TUNELOOP = Path(sys.executable).with_name("tuneloop")


def _config(tmp: Path) -> Path:
    traffic = tmp / "traffic"
    traffic.mkdir()
    subprocess.run(
        [sys.executable, str(ARITH / "simulate_traffic.py"), "--dry-run"]
        + ["--out", str(traffic / "traffic.jsonl"), "-n", "1200", "--seed", "1"]
        + ["--error-rate", "0.7", "--feedback-rate", "0.6"],
        check=True,
        capture_output=True,
    )
    corpus = {
        "sources": [{"path": str(traffic), "format": "openai_chat", "name": "traffic"}],
        "filter": {"min_score": 0.5, "keep_unrated": False},
        "dedup": {"exact": True, "near": False},
        "decontaminate": {"suites": [str(ARITH / "flywheel_suite.jsonl")], "n": 13},
    }
    (tmp / "corpus.yaml").write_text(yaml.safe_dump(corpus))
    cfg = {
        "name": "fly",
        "workdir": str(tmp / "work"),
        "base_model": "champion",
        "suite": {
            "path": str(ARITH / "flywheel_suite.jsonl"),
            "stratify_by_tag": True,
            "rolling": {"audit_fraction": 0.2, "gate_size": 150, "seed": 0},
        },
        "eval": {"max_tokens": 8, "concurrency": 32},
        "data": {"corpus": str(tmp / "corpus.yaml")},
        "train": {  # the demo's recipe (examples/arith/flywheel.yaml) at half its learning rate
            "method": "sft",
            "steps": 150,
            "learning_rate": 0.002,
            "lr_scheduler": "cosine",
            "warmup_ratio": 0.1,
            "batch_size": 32,
            "torch_threads": 1,
            "lora": {"r": 16, "alpha": 32},
            "extra": {"gradient_checkpointing": False},
        },
        "report": {"n_resamples": 500, "permutation_resamples": 500},
        "gate": {"margin": 0.0, "min_items": 40, "ledger": str(tmp / "ledger.db")},
        "archive": {"root": str(tmp / "archive")},
        "flywheel": {"bootstrap": str(ARITH / "model"), "traffic": [str(traffic)]},
    }
    path = tmp / "flywheel.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_two_rounds_on_the_tiny_model(tmp_path: Path) -> None:
    config = _config(tmp_path)
    codes = []
    for _ in range(2):
        done = subprocess.run(
            [str(TUNELOOP), "run", str(config), "--round", "next"],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode in (0, 1), done.stderr[-3000:]
        codes.append(done.returncode)
    with open_ledger(tmp_path / "ledger.db") as ledger:
        champs, history = ledger.champions(), ledger.rounds()
    assert champs[0].via == "bootstrap" and champs[0].version == 1
    # Measured on the 2-core CPU machine (deterministic: seeded data, training and greedy
    # decoding): round 1 promotes (gate Δ +6.7 pts on 150 items, one-sided p 0.011) and round
    # 2, from v2 on the same traffic, is rejected (Δ +0.7, p 0.5). Another machine's float
    # arithmetic could move round 1's p across alpha; round 2's outcome is not asserted.
    assert codes[0] == 0, "round 1 was expected to promote (p 0.011 on the reference machine)"
    assert len(champs) == 1 + codes.count(0)  # one version per promotion
    r1, r2 = history
    s1, s2 = r1.start, r2.start
    assert (s1.round_id, s1.gate_slice, s1.parent_version) == ("r0001", "gate-000", 1)
    assert (s2.round_id, s2.gate_slice) == ("r0002", "gate-001")
    assert s2.parent_version == (2 if codes[0] == 0 else 1)  # from the last champion
    outcomes = [r.outcomes[-1].outcome for r in history]
    assert outcomes == ["promoted" if c == 0 else "rejected" for c in codes]

    # each round evaluated exactly the audit part and its own gate slice
    cfg = load_config(config)
    split = rolling_of(load_suite(cfg.suite.path), cfg.suite)
    for i, r in enumerate(history):
        folder = tmp_path / "work" / "rounds" / r.round_id
        for arm in ("eval_pre", "eval_post"):
            summary = read_record(folder / arm / "summary.json", EvalSummary)
            assert set(summary.item_ids) == set(split.audit_ids) | set(split.gate_slices[i])
        verdict = json.loads((folder / "gate" / "verdict.json").read_text())
        assert set(verdict["item_ids"]) == set(split.gate_slices[i])
        manifest = read_record(
            tmp_path / "archive" / str(r.outcomes[-1].run_id) / "manifest.json", Manifest
        )
        assert manifest.round is not None and manifest.round["round_id"] == r.round_id

    log = (tmp_path / "EXPERIMENT-LOG.md").read_text()
    for r, outcome in zip(history, outcomes, strict=True):
        assert f"round `{r.round_id}` — **{outcome}**" in log
    assert "Data after each corpus step: traces 1200" in log

    # the champion the ledger names is the model served behind the proxy
    from tuneloop.flywheel.service import ManagedService, ServiceSettings, reserve_champion

    service = ManagedService(
        ServiceSettings(state_dir=tmp_path / "service", port=0, log_dir=tmp_path / "served")
    )
    try:
        served = reserve_champion(service, tmp_path / "ledger.db")
        status = service.status()
        assert served.version == champs[-1].version == status.version
        assert status.model_dir == str(Path(champs[-1].descriptor["path"]).resolve())
        client = openai.OpenAI(base_url=status.url, api_key="none")
        answer = client.chat.completions.create(
            model="champion", messages=[{"role": "user", "content": "What is 12 + 30?"}]
        )
        assert answer.choices[0].message.content is not None
    finally:
        service.stop()
