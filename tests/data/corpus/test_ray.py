"""`corpus build --executor ray`: a real local Ray cluster (2 CPUs), byte-compared with local.

Ray's startup takes seconds, so one module-scoped cluster serves every test here.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.data.conftest import ARITH, exchange, write_jsonl
from tuneloop.data.corpus import build_corpus
from tuneloop.errors import InputError
from tuneloop.records import CorpusProvenance, read_record

WORDS = [
    "order",
    "refund",
    "shipping",
    "account",
    "password",
    "invoice",
    "delivery",
    "package",
    "address",
    "payment",
]


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[str]:
    """A local cluster with 2 CPUs (two worker slots); yields its address."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


def _chats(n: int, seed: int = 3) -> list[dict]:
    """Support chats with exact and near duplicates, ratings, and secrets to scrub."""
    rng = random.Random(seed)
    seen: list[str] = []
    out = []
    for i in range(n):
        if seen and rng.random() < 0.2:
            words = rng.choice(seen).split()
            words[rng.randrange(len(words))] = rng.choice(WORDS)  # one word changed
            q = " ".join(words)
        elif seen and rng.random() < 0.05:
            q = rng.choice(seen)  # exact duplicate
        else:
            q = " ".join(rng.choice(WORDS) for _ in range(rng.randint(12, 40)))
            seen.append(q)
        if rng.random() < 0.05:
            q += f" mail me at user{i}@example.com key sk-{'a' * 20}{i:04d}"
        verdict = rng.choice(["up", "up", "up", "down", None])
        out.append(exchange(i, q, "Thanks, I updated your " + rng.choice(WORDS) + ".", verdict))
    return out


def _config(tmp: Path, batch_size: int) -> Path:
    write_jsonl(tmp / "chats.jsonl", _chats(1500))
    text = (ARITH / "corpus.yaml").read_text()
    text = text.replace("path: traces/production.jsonl", f"path: {ARITH}/traces/production.jsonl")
    text = text.replace("    name: production\n", "    name: production\n  - {path: chats.jsonl}\n")
    text = text.replace("suites: [suite.jsonl]", f"suites: [{ARITH}/suite.jsonl]")
    text += f"executor: {{batch_size: {batch_size}}}\n"
    (tmp / "corpus.yaml").write_text(text)
    return tmp / "corpus.yaml"


def _files(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.name != "provenance.json"}


def _provenance(out: Path) -> dict:
    prov = json.loads((out / "provenance.json").read_text())
    for key in ("created_at", "executor"):
        prov.pop(key)
    prov["parameters"].pop("executor")
    return prov


def test_cli_joins_the_cluster_at_the_configured_address(ray_cluster: str, tmp_path: Path) -> None:
    """The installed command, a separate driver, joins the running cluster (`executor.address`)."""
    config = _config(tmp_path, batch_size=1000)
    (tmp_path / "corpus.yaml").write_text(
        config.read_text().replace("batch_size: 1000", f"batch_size: 1000, address: {ray_cluster}")
    )
    local = build_corpus(config, tmp_path / "local", progress=False)
    argv = [sys.executable, "-m", "tuneloop", "corpus", "build", str(config)]
    run = subprocess.run(
        [*argv, "--out", str(tmp_path / "ray"), "--executor", "ray"], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert _files(tmp_path / "local") == _files(tmp_path / "ray")
    prov = read_record(tmp_path / "ray" / "provenance.json", CorpusProvenance)
    port = ray_cluster.rpartition(":")[2]  # the host is an IP, scrubbed like any in provenance
    assert prov.executor["address"] == f"<IP>:{port}" and prov.executor["tasks"] == 3
    assert prov.executor["cluster_cpus"] == 2
    assert prov.outputs == read_record(local.provenance_path, CorpusProvenance).outputs
    bad = subprocess.run([*argv, "--executor", "spark"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--executor: expected local or ray" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_a_missing_ray_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tuneloop.data.corpus.ray import import_ray

    monkeypatch.setitem(sys.modules, "ray", None)  # what an environment without ray sees
    with pytest.raises(InputError, match=r"pip install 'tuneloop\[ray\]'"):
        import_ray()
    config = tmp_path / "corpus.yaml"
    config.write_text("sources: [{path: none.jsonl}]\nexecutor: {kind: ray}\n")
    with pytest.raises(InputError) as err:  # checked with the other inputs, before any work
        build_corpus(config, tmp_path / "out", progress=False)
    assert "sources.0.path" in str(err.value) and "executor.kind: executor ray" in str(err.value)


def test_ray_executor_writes_the_same_bytes_as_local(ray_cluster: str, tmp_path: Path) -> None:
    config = _config(tmp_path, batch_size=300)  # 2,826 traces: ten tasks
    local = build_corpus(config, tmp_path / "local", progress=False)
    on_ray = build_corpus(config, tmp_path / "ray", progress=False, executor="ray")
    assert _files(tmp_path / "local") == _files(tmp_path / "ray")
    assert _provenance(tmp_path / "local") == _provenance(tmp_path / "ray")
    counts = local.counts
    assert on_ray.counts == counts
    # every global step had work to do, so the comparison covers it
    assert counts["traces"] > counts["exact_dedup"] > counts["near_dedup"] > counts["shuffle"]
    prov = read_record(on_ray.provenance_path, CorpusProvenance)
    assert prov.scrubbed.get("email", 0) > 0 and prov.scrubbed.get("secret", 0) > 0
    assert prov.executor["kind"] == "ray" and prov.executor["tasks"] == 10
    assert prov.executor["cluster_cpus"] == 2
    assert read_record(local.provenance_path, CorpusProvenance).executor == {"kind": "local"}
    assert b"user1" not in (tmp_path / "ray" / "traces.jsonl").read_bytes()  # scrubbed on Ray
