"""Run every benchmark in sequence and print each ratio beside the figure last recorded.

    benchmarks/run_all                          # every benchmark (over an hour on 2 cores)
    benchmarks/run_all eval_client stats        # some of them
    benchmarks/run_all --record eval_client     # also write what it measured to last.json

Each benchmark runs as a person runs it (its own process, its default arguments, the
environment its peers live in: `scripts/setup --bench` installs them all), one after another,
and its output is kept under `--logs`. The ratios each prints are read from its output
(`BENCHMARKS` below: a regular expression per ratio) and shown beside the figure recorded in
`benchmarks/last.json`, with the date and CPU it was recorded on; a ratio that moved by more
than 20% either way is flagged `<<`. A benchmark that exits non-zero (2: a peer is missing,
and it printed how to install it) or prints no ratio is flagged too, and run_all exits 1.

Not a CI gate: the machine is shared and noisy, and the figures are only comparable on one
machine. Run it on an idle machine before closing an issue that touches a hot path, and
record (`--record`) the figures the README quotes, so the next run compares against them.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAST = ROOT / "benchmarks" / "last.json"
MOVED = 0.20
"""A ratio that moved by more than this fraction of its recorded value is flagged."""


@dataclass(frozen=True)
class Bench:
    """How to run one benchmark and read its ratios."""

    ratios: dict[str, str]
    """Ratio name → a regular expression whose first group is the number (`findall`: a
    pattern that matches several times gives `name 1`, `name 2`, …)."""
    args: tuple[str, ...] = ()
    venv: str = ".venv"
    """The environment it runs in (its peers' environment)."""
    minutes: int = 2
    """Roughly how long it takes on 2 cores (printed before it starts)."""
    env: dict[str, str] = field(default_factory=dict)


N = r"([0-9][0-9,]*\.?[0-9]*)"
BENCHMARKS: dict[str, Bench] = {
    "eval_client": Bench(
        {
            "tuneloop / lm-eval throughput": rf"tuneloop / lm-eval throughput:\s+{N}",
            "tuneloop / raw capacity": rf"tuneloop / raw capacity \(best bare loop\):\s+{N}",
            "lm-eval / tuneloop CPU per sample": rf"lm-eval / tuneloop CPU per sample:\s+{N}",
        },
        minutes=3,
    ),
    "stats": Bench({"scipy / tuneloop": rf"ratio scipy / tuneloop \(CI \+ test\)\s+:\s+{N}x"}),
    "decision_quality": Bench(
        {
            "false promotion, MLflow / tuneloop": rf"permutation\): {N}×",
            "any false promotion, no rule / spending": rf"no rule / alpha spending: {N}×",
            "power a round, spending / no rule": rf"alpha spending / no rule: {N}\n",
        },
        minutes=5,
    ),
    "minhash_peers": Bench({"rensa / datasketch loop": rf"\n(?:datasketch[^\n]*?)\s{N}x "}),
    "corpus": Bench(
        {
            "decontamination vs reference": rf"decontamination: .*?ratio {N}x",
            "near-dup vs datasketch loop": rf"near-dup: .*?ratio {N}x",
        },
        minutes=6,
    ),
    "corpus_ray": Bench(
        {"local / ray": rf"ratio local/ray: {N}x"}, args=("--n", "100000"), minutes=10
    ),
    "proxy": Bench({"proxied / direct throughput": rf": {N}× direct throughput"}, minutes=4),
    "serve_throughput": Bench(
        {"batched / sequential": rf"ratio batched / sequential: {N}x"}, minutes=4
    ),
    "serve_features": Bench({"ms a token / plain": rf"ms/token \({N}x\)"}, minutes=4),
    "serve_peer": Bench({"embedded / vLLM-CPU": rf"\| ratio\s+{N}x"}, minutes=15),
    "constrained": Bench(
        {"xgrammar / llguidance per token": rf"xgrammar / llguidance: per token {N}x"},
        venv=".venv-vllm",
        minutes=5,
    ),
    "train_overhead": Bench({"tuneloop / TRL step time": rf"ratio tuneloop / TRL: {N}"}, minutes=8),
    "grpo_rollouts": Bench(
        {"rollouts/s (no peer on CPU)": rf"in-process generation: {N} rollouts/s"},
        args=("--peer", "none"),
        minutes=4,
    ),
    "diloco": Bench({"DDP / DiLoCo allreduce bytes": rf"  ratio {N}x"}, minutes=10),
    "watch_idle": Bench({"watcher / sleep CPU": rf"ratio watcher/sleep, [^:]+: {N}×"}, minutes=2),
    "reserve_switch": Bench({"requests failed": rf"(?m)^switch\s+\d+ requests\s+{N} failed"}),
    "vocab_memory": Bench({"full / chunked memory": rf"full logits / chunked = {N}x"}, minutes=8),
    "memory_plan": Bench(
        {"measured / estimated added": rf"median ratio of what training adds, [^:]+: {N}"},
        minutes=15,
    ),
}


def read_ratios(bench: Bench, output: str) -> dict[str, float]:
    """Every ratio `bench` names that `output` shows (numbers as printed, commas dropped)."""
    found: dict[str, float] = {}
    for name, pattern in bench.ratios.items():
        values = [float(v.replace(",", "")) for v in re.findall(pattern, output, re.S)]
        if len(values) == 1:
            found[name] = values[0]
        for i, value in enumerate(values if len(values) > 1 else [], start=1):
            found[f"{name} {i}"] = value
    return found


def compare(now: float, last: float | None) -> str:
    """The flag for a ratio against its recorded value: '<<' past MOVED, '' within."""
    if last is None or last == 0:
        return "(none recorded)"
    change = now / last - 1
    return f"{change:+.0%}" + ("  << moved more than 20%" if abs(change) > MOVED else "")


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def run(name: str, bench: Bench, logs: Path) -> tuple[int, str]:
    python = ROOT / bench.venv / "bin" / "python"
    argv = [str(python), str(ROOT / "benchmarks" / f"{name}.py"), *bench.args]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    output = done.stdout + done.stderr
    (logs / f"{name}.log").write_text(output)
    return done.returncode, output


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    known = " ".join(BENCHMARKS)
    parser.add_argument("names", nargs="*", help=f"benchmarks to run (default all): {known}")
    parser.add_argument("--record", action="store_true", help="write the figures to last.json")
    parser.add_argument("--logs", type=Path, default=Path("/tmp/tuneloop-benchmarks"))
    args = parser.parse_args()
    unknown = [n for n in args.names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark {unknown[0]!r}; known: {', '.join(BENCHMARKS)}")
    last = json.loads(LAST.read_text()) if LAST.exists() else {}
    args.logs.mkdir(parents=True, exist_ok=True)
    failed: list[str] = []
    for name in args.names or list(BENCHMARKS):
        bench = BENCHMARKS[name]
        print(f"\n{name} (about {bench.minutes} min; log {args.logs / name}.log)", flush=True)
        t0 = time.monotonic()
        code, output = run(name, bench, args.logs)
        ratios = read_ratios(bench, output)
        if code != 0 or not ratios:
            failed.append(name)
            why = f"exit {code}" if code else "no ratio in its output"
            tail = "\n".join(f"    {line}" for line in output.strip().splitlines()[-3:])
            print(f"  FAILED ({why}):\n{tail}")
            continue
        recorded = last.get(name, {})
        when = f"{recorded.get('date', '?')}, {recorded.get('cpu', '?')}" if recorded else "never"
        print(f"  {time.monotonic() - t0:.0f} s; last recorded {when}")
        for ratio, value in ratios.items():
            before = recorded.get("ratios", {}).get(ratio)
            shown = f"{before:g}" if before is not None else "-"
            print(f"  {ratio:40s} {value:10g}   last {shown:>10s}   {compare(value, before)}")
        if args.record:
            last[name] = {"date": date.today().isoformat(), "cpu": cpu_name(), "ratios": ratios}
            LAST.write_text(json.dumps(last, indent=2, ensure_ascii=False) + "\n")
    if failed:
        print(f"\nfailed: {', '.join(failed)} (see their logs)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
