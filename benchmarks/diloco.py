"""DiLoCo (torchft, 2 replica processes) against DDP (2 gloo ranks) on the arith demo model.

Run: `nice -n 10 .venv/bin/python benchmarks/diloco.py [--steps 200] [--inner-steps 10]`.
Both runs use `plain_sft`'s loop with the same settings, rows and order: the same total
samples (steps × batch_size rows), the same inner AdamW. Prints, measured in this run:
- the final loss of each (the adapter on the first 512 training rows) and the gap;
- the bytes each process handed to gloo's allreduce (counted) and the DDP / DiLoCo ratio,
  which should be H (`--inner-steps`);
- each run's wall time.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from peers import require  # benchmarks/ is on sys.path when run

from tuneloop.config import TrainConfig
from tuneloop.train.distributed import run_ddp, run_diloco

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "examples" / "arith" / "model"
DATA = ROOT / "examples" / "arith" / "train_prompts.jsonl"


def settings(args: argparse.Namespace) -> TrainConfig:
    return TrainConfig(
        method="sft",
        steps=args.steps,
        batch_size=args.batch,
        learning_rate=args.lr,
        torch_threads=1,
        lora={"r": 16, "alpha": 32},
        diloco={
            "replicas": 2,
            "inner_steps": args.inner_steps,
            "outer_lr": args.outer_lr,
            "outer_momentum": args.outer_momentum,
        },
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--inner-steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--outer-lr", type=float, default=0.5)
    ap.add_argument("--outer-momentum", type=float, default=0.5)
    args = ap.parse_args()
    require("torchft")
    s = settings(args)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        ddp = run_ddp(MODEL, DATA, Path(tmp) / "ddp", s, nproc=2)
        t_ddp = time.perf_counter() - t0
        work = Path(tmp) / "diloco"
        work.mkdir()
        t0 = time.perf_counter()
        dl = run_diloco(MODEL, DATA, work, s)
        t_dl = time.perf_counter() - t0
    ddp_bytes, dl_bytes = ddp[0].bytes_allreduced, dl.bytes_allreduced[0]
    gap = dl.final_loss - ddp[0].final_loss
    base = ddp[0].final_loss
    share = args.batch // 2
    print(f"settings: {args.steps} steps x {args.batch} rows (2 x {share}), H={args.inner_steps}")
    print(f"  inner lr {args.lr}, outer lr {args.outer_lr}, momentum {args.outer_momentum}")
    print(f"final loss: DDP {base:.4f}  DiLoCo {dl.final_loss:.4f}  gap {gap / base:+.1%}")
    print(f"bytes allreduced per process: DDP {ddp_bytes:,}  DiLoCo {dl_bytes:,}")
    print(f"  ratio {ddp_bytes / max(dl_bytes, 1):.2f}x")
    print(f"wall: DDP {t_ddp:.1f} s  DiLoCo {t_dl:.1f} s (each including process start-up)")


if __name__ == "__main__":
    main()
