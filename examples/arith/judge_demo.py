"""The judge demo: an open-ended slice graded by an LLM judge, the judge calibrated against
labels, and one round gated with it.

    .venv/bin/python examples/arith/judge_demo.py [--fresh] [--error-rate 0.1]

1. Starts the demo judge (judge/server.py: a deterministic rubric-following process that
   gets `--error-rate` of its judgements wrong, chosen by a hash, so the truth is known).
2. Builds the labelled audit set: the base model (served by the embedded backend) answers the
   dev slice of suite.jsonl, and each answer is labelled by its reference — the stand-in for
   people here, said plainly; in production the labels are your reviewers' verdicts or the
   thumbs in the traffic log (`--audit <traffic folder>`).
3. `tuneloop judge calibrate`: agreement, Cohen's κ, FPR and FNR with Wilson intervals, J.
4. `tuneloop check examples/arith/loop_judge.yaml`: the gate's MDE, now in true pass rate.
5. `tuneloop run examples/arith/loop_judge.yaml`: the demo round on judged_suite.jsonl (the same
   items without their answers), both arms scored by the judge, gated on the fresh slice; the
   verdict shows the calibration beside the Δ.

Everything goes under runs/arith-judge/ (and the ledger ledger/arith-judge.db); `--fresh`
moves both aside first. Takes about 5 minutes on 2 CPU cores (the round trains 300 steps).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUT = ROOT / "runs" / "arith-judge"
LEDGER = ROOT / "ledger" / "arith-judge.db"
JUDGE = HERE / "judge" / "judge.yaml"
PORT = 8011  # judge.yaml's endpoint
BIN = Path(sys.executable).parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fresh", action="store_true", help="move runs/arith-judge aside first")
    ap.add_argument("--error-rate", type=float, default=0.1, help="the demo judge's error rate")
    args = ap.parse_args(argv)
    if args.fresh:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for path in (OUT, LEDGER):
            if path.exists():
                path.rename(path.with_name(f"{path.name}.{stamp}"))
    OUT.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    judge = _start_judge(args.error_rate)
    try:
        audit = _audit_set()
        _tuneloop("judge", "calibrate", "--judge", str(JUDGE), "--audit", str(audit))
        _tuneloop("check", str(HERE / "loop_judge.yaml"), show=_power_lines)
        code = _tuneloop("run", str(HERE / "loop_judge.yaml"), check=False)
    finally:
        judge.terminate()
        judge.wait(10)
    _summary(code, time.monotonic() - started)
    return 0 if code in (0, 1) else code


def _start_judge(error_rate: float) -> subprocess.Popen:
    cmd = [sys.executable, str(HERE / "judge" / "server.py"), "--port", str(PORT)]
    judge = subprocess.Popen([*cmd, "--error-rate", str(error_rate), "--seed", "0"])
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{PORT}/health", timeout=1).close()
            print(f"demo judge on port {PORT}, error rate {error_rate}", flush=True)
            return judge
        except OSError:
            time.sleep(0.1)
    judge.kill()
    raise SystemExit(f"the demo judge did not start on port {PORT}")


def _audit_set() -> Path:
    """The base model's answers to suite.jsonl's dev slice, labelled by their references."""
    from tuneloop.config import SlicingConfig
    from tuneloop.evaluate import EvalSettings, evaluate
    from tuneloop.records import read_jsonl
    from tuneloop.serving import serving
    from tuneloop.suite import load_suite

    log = OUT / "audit-eval"
    settings = EvalSettings(slice="dev", max_tokens=8, concurrency=32)
    slicing = SlicingConfig(slices={"dev": 0.5, "gate": 0.5})
    with serving(str(HERE / "model")) as ep:
        evaluate(ep.base_url, ep.model, HERE / "suite.jsonl", log, settings, slicing=slicing)
    items = load_suite(HERE / "suite.jsonl").by_id()
    audit = OUT / "audit.jsonl"
    rows = [
        {
            "id": r["item_id"],
            "messages": items[r["item_id"]].raw["messages"],
            "response": r["completion"],
            "human": r["score"] == 1.0,
        }
        for r in read_jsonl(log / "samples.jsonl")
        if r["status"] == "ok"
    ]
    audit.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"audit set: {len(rows)} answers of the base model, labelled by reference", flush=True)
    return audit


def _power_lines(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if line.startswith("warning:"))


def _tuneloop(*args: str, check: bool = True, show=None) -> int:
    print(f"\n$ tuneloop {' '.join(args)}", flush=True)
    if show is None:
        ran = subprocess.run([str(BIN / "tuneloop"), *args], cwd=ROOT)
    else:
        ran = subprocess.run(
            [str(BIN / "tuneloop"), *args], cwd=ROOT, capture_output=True, text=True
        )
        print(show(ran.stdout + ran.stderr) or "(no power warning)", flush=True)
    if check and ran.returncode != 0:
        raise SystemExit(f"tuneloop {args[0]} exited {ran.returncode}")
    return ran.returncode


def _summary(code: int, wall_s: float) -> None:
    verdict = OUT / "loop" / "gate" / "verdict.json"
    print(f"\njudge demo: {wall_s / 60:.1f} min, round exit {code}")
    if verdict.is_file():
        v = json.loads(verdict.read_text())
        s = v["stats"]
        n, delta, p = s["n_items"], s["delta"], s["p_value"]
        print(f"verdict {v['decision']}: Δ {delta:+.4f}, p {p:.3g} on {n} items")
        if v.get("judge"):
            from tuneloop.gate.verdict_record import JudgeNote

            print(JudgeNote.model_validate(v["judge"]).sentence())


if __name__ == "__main__":
    sys.exit(main())
