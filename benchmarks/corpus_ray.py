"""Benchmark the corpus build: the local executor vs Ray Data on this machine.

Run: `.venv/bin/python benchmarks/corpus_ray.py [--n 1000000] [--cpus 2] [--batch-size 8192]`.
Generates N synthetic traces (the mix of `benchmarks/corpus.py`: arithmetic exchanges with
planted suite items, support chats with exact and near duplicates; seeded), builds the same
corpus with `executor: local` and `executor: ray` (a local cluster of `--cpus` CPUs, started
before the clock: its start-up is printed apart), checks that the outputs have the same
sha256, and prints both throughputs and their ratio. It also times the per-row steps alone
(scrub, row cut, MinHash signatures: what Ray parallelizes) in this process, to split the
build into its parallel and serial shares.

How it grows with nodes (Amdahl, from the CPU seconds this prints): a Ray build takes about
`driver + per_row / cores`, where `per_row` is the share Ray spreads (scrub, row cut,
signatures) and `driver` is what stays on one core whatever the cluster: ingest, the global
pass (dedup banding, decontamination, shuffle, writes) and pickling every trace out to the
workers and back. On one 2-core machine Ray cannot win: its workers share the cores with the
driver and the trip is added. On k nodes of c cores the per-row share shrinks as 1/(k·c), so
the build tends to `driver`, and the speed-up over local is bounded by local CPU / driver
CPU (printed as "bound"). Past that, the serial steps must be distributed too (ingest per
file on Ray, a sharded banding pass), within what byte-identical outputs allow (see
`tuneloop/data/corpus/ray.py`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from peers import require  # benchmarks/ is on sys.path when run

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "examples" / "arith" / "suite.jsonl"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import iter_traces  # noqa: E402  (the sibling benchmark's traffic)


def write_traces(path: Path, n: int, seed: int = 0) -> None:
    """`benchmarks/corpus.py`'s mix, streamed to a file (1M traces do not fit as dicts)."""
    with path.open("w") as out:
        for trace in iter_traces(n, seed):
            out.write(json.dumps(trace) + "\n")


def per_row_seconds(config: Path) -> float:
    """CPU seconds of the per-row steps alone (what the Ray tasks do, less their pickling),
    in this process, over the same traces."""
    from tuneloop.data.corpus import Row, load_corpus_config
    from tuneloop.data.corpus.pipeline import _ingest, _lsh
    from tuneloop.data.corpus.training_rows import row_or_id
    from tuneloop.data.dedup import signatures
    from tuneloop.data.files import jsonl_bytes
    from tuneloop.scrub import Scrubber, ScrubRules

    cfg = load_corpus_config(config)
    traces, _, _ = _ingest(cfg)
    started = time.process_time()
    scrubber = Scrubber(ScrubRules(**cfg.scrub.model_dump()))
    traces = [scrubber.trace(t) for t in traces]
    rows = [row_or_id(t) for t in traces]
    signatures([r.text for r in rows if isinstance(r, Row)], _lsh(cfg))
    jsonl_bytes([t.to_json() for t in traces])
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray cluster")
    parser.add_argument("--batch-size", type=int, default=8192)
    args = parser.parse_args()
    require("ray", what="Ray Data")

    import ray

    from tuneloop.data.corpus import build_corpus

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        write_traces(folder / "t.jsonl", args.n)
        (folder / "warm").mkdir()
        print(f"generated {args.n:,} traces in {time.perf_counter() - t0:.1f} s")
        (folder / "corpus.yaml").write_text(
            f"sources: [{{path: t.jsonl}}]\ndecontaminate: {{suites: [{SUITE}]}}\n"
            f"executor: {{batch_size: {args.batch_size}}}\n"
        )
        config = folder / "corpus.yaml"
        t0, c0 = time.perf_counter(), time.process_time()
        local = build_corpus(config, folder / "local", progress=False)
        t_local, c_local = time.perf_counter() - t0, time.process_time() - c0
        t0 = time.perf_counter()
        ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
        t_start = time.perf_counter() - t0
        try:
            # warm-up: the first tasks start worker processes that import tuneloop and numpy
            write_traces(folder / "warm" / "t.jsonl", 2 * args.cpus * 100, seed=1)
            warm = config.read_text().replace("t.jsonl", f"{folder}/warm/t.jsonl")
            (folder / "warm" / "corpus.yaml").write_text(warm.replace(str(args.batch_size), "100"))
            t0 = time.perf_counter()
            build_corpus(folder / "warm" / "corpus.yaml", folder / "warm" / "out", progress=False,
                         executor="ray")  # fmt: skip
            t_start += time.perf_counter() - t0
            t0, c0 = time.perf_counter(), time.process_time()
            on_ray = build_corpus(config, folder / "ray", progress=False, executor="ray")
            t_ray, c_driver = time.perf_counter() - t0, time.process_time() - c0
        finally:
            ray.shutdown()
        same = _outputs(local.provenance_path) == _outputs(on_ray.provenance_path)
        assert same, "the Ray build's outputs differ from the local build's"
        t_rows = per_row_seconds(config)
    n = args.n
    print(f"counts: {local.counts}")
    print(f"local executor: {t_local:.1f} s = {n / t_local:,.0f} traces/s")
    print(
        f"ray executor ({args.cpus} CPUs, batch {args.batch_size}): {t_ray:.1f} s = "
        f"{n / t_ray:,.0f} traces/s (cluster start-up and worker warm-up {t_start:.1f} s, "
        "not included)"
    )
    print(f"ratio local/ray: {t_local / t_ray:.2f}x (> 1: Ray faster); outputs identical: {same}")
    # CPU seconds, not wall: on a shared machine they do not count the time others take
    print(
        f"CPU: local build {c_local:.1f} s, of which the per-row steps {t_rows:.1f} s "
        f"({t_rows / c_local:.0%}); Ray build's driver {c_driver:.1f} s (ingest, pickling "
        "out and back, the global pass, writes: what stays on one core)"
    )
    print(
        f"bound on the speed-up over local with unlimited workers: local CPU / driver CPU = "
        f"{c_local / c_driver:.2f}x"
    )


def _outputs(provenance: Path) -> dict[str, str]:
    return json.loads(provenance.read_text())["outputs"]


if __name__ == "__main__":
    main()
