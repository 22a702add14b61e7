"""One DiLoCo replica group: a process that trains the LoRA adapter and joins torchft's rounds.

Run by `diloco.run_diloco` as `python -m tuneloop.train.distributed.diloco_replica SPEC.json
INDEX [--restart]`. The replica is a replica group of one process: its own TCPStore, a torchft
`Manager` (rank 0 of 1) that heartbeats to the lighthouse, and a reconfigurable
`ProcessGroupGloo` that spans the replicas of the current round. `torchft.local_sgd.DiLoCo`
hooks the inner AdamW: every `inner_steps` steps it computes the pseudo-gradients of the
trainable (LoRA) parameters (global minus local), allreduces their mean over the round's
replicas, and applies them with the outer SGD (Nesterov momentum) to the global copy. Only
the LoRA tensors are a fragment: the frozen base weights never travel.

Recovery is torchft's: the Manager's state is the LoRA tensors and the inner optimizer
(registered here) plus DiLoCo's global copy and outer optimizer (registered by DiLoCo). A
restarted replica trains its first round from the start, and at that round's quorum finds a
peer ahead of it, fetches the peer's state over torchft's HTTP checkpoint transport, adopts
it, and carries on from the peer's outer step. Its batches follow the outer step
(`plain_sft.batch_indices`), so after recovery it draws the rows it would have drawn.

Every allreduce passes through `CountingGloo`, which adds up the bytes of the tensors handed
to gloo: the communication figure is counted, not estimated. Each replica appends its log
to `replica_<i>.jsonl` (steps, rounds, recovery) and, when done, saves its adapter (the
global one) to `adapter_<i>/` and writes `replica_<i>.json`; the launcher keeps the first.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from tuneloop.errors import TuneloopError
from tuneloop.records import append_jsonl, atomic_write_text, write_record
from tuneloop.train.common import quiet
from tuneloop.train.data import read_rows
from tuneloop.train.distributed.diloco import EXIT_NO_PEER, ReplicaSummary
from tuneloop.train.distributed.plain_sft import PlainSft, batch_indices
from tuneloop.train.settings import TrainSettings


def counting_gloo(timeout: timedelta) -> Any:
    """torchft's reconfigurable gloo group, counting the bytes handed to each allreduce."""
    from torchft.process_group import ProcessGroupGloo

    class CountingGloo(ProcessGroupGloo):
        bytes_allreduced = 0
        allreduce_calls = 0

        def allreduce(self, tensors: list, opts: object) -> Any:
            self.bytes_allreduced += sum(t.numel() * t.element_size() for t in tensors)
            self.allreduce_calls += 1
            return super().allreduce(tensors, opts)

    return CountingGloo(timeout=timeout)


class Fragment:
    """An `nn.Module` whose parameters are the LoRA tensors only (DiLoCo's model fragment)."""

    @staticmethod
    def of(params: dict[str, Any]) -> Any:
        import torch

        frag = torch.nn.Module()
        frag.lora = torch.nn.ParameterDict({n.replace(".", "__"): p for n, p in params.items()})
        return frag


def make_manager(plain: PlainSft, spec: dict[str, Any], index: int, pg: Any) -> Any:
    """A torchft Manager for this replica group (one process, rank 0 of 1)."""
    import torch
    from torch.distributed import TCPStore
    from torchft.manager import Manager

    d = spec["settings"]["diloco"]
    timeout = timedelta(seconds=d["timeout_s"])

    def state_dict() -> dict[str, Any]:
        return {
            "lora": {n: p.detach().clone() for n, p in plain.params.items()},
            "inner": plain.optimizer.state_dict(),
        }

    def load_state_dict(state: dict[str, Any]) -> None:
        with torch.no_grad():
            for n, p in plain.params.items():
                p.copy_(state["lora"][n])
        plain.optimizer.load_state_dict(state["inner"])

    store = TCPStore("localhost", 0, is_master=True, wait_for_workers=False)
    manager = Manager(
        pg=pg,
        load_state_dict=load_state_dict,
        state_dict=state_dict,
        min_replica_size=1,
        use_async_quorum=False,  # DiLoCo needs the synchronous quorum
        timeout=timeout,
        quorum_timeout=timedelta(seconds=max(120.0, 4 * d["join_timeout_s"])),
        connect_timeout=timeout,
        rank=0,
        world_size=1,
        store_addr="localhost",
        store_port=store.port,
        lighthouse_addr=spec["lighthouse"],
        replica_id=f"tuneloop_diloco_{index}",
        hostname=spec["hostname"],
        init_sync=False,  # every replica seeds the same adapter; a restarted one still heals
    )
    manager._tuneloop_store = store  # keep the store alive as long as the manager
    return manager


class NoPeer(Exception):
    """A restarted replica found no live peer at its first round: the run finished (or every
    peer died) while it was starting, and training on alone from the base would be wrong."""


def round_row(before: int, after: int, manager: Any, pg: Any) -> dict[str, Any]:
    """The log row of one DiLoCo round: committed, and whether this replica recovered from a
    peer (its outer step jumped past the next one)."""
    return {
        "event": "round",
        "t": time.time(),
        "outer_before": before,
        "outer_after": after,
        "committed": after > before,
        "recovered": after > before + 1,
        "participants": manager.num_participants(),
        "bytes_allreduced": pg.bytes_allreduced,
    }


def start_barrier(out: Path, index: int, replicas: int, timeout_s: float) -> None:
    """Wait until every replica of the first start has its manager up (heartbeating).

    Without it a replica that loads faster would find itself alone at the lighthouse and run
    its first rounds as a group of one (measured: a 2.6 s start skew made both replicas train
    every round alone). A restarted replica skips this: it joins a run in progress.
    """
    folder = out / "diloco_ready"
    folder.mkdir(exist_ok=True)
    (folder / str(index)).touch()
    deadline = time.time() + timeout_s
    while len(list(folder.iterdir())) < replicas and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # a few heartbeats (every 0.1 s), so the lighthouse counts everyone


def train_replica(
    spec: dict[str, Any], index: int, restart: bool = False
) -> tuple[ReplicaSummary, PlainSft]:
    """Train this replica until the run's last outer step is committed; its summary and its
    model (holding the final global adapter)."""
    import torch
    from torchft.local_sgd import DiLoCo

    s = TrainSettings.model_validate(spec["settings"])
    d, out = s.diloco, Path(spec["out_dir"])
    log = out / f"replica_{index}.jsonl"
    if s.torch_threads:
        torch.set_num_threads(s.torch_threads)
    plain = PlainSft(Path(spec["base"]), read_rows(Path(spec["data"])), s)
    pg = counting_gloo(timedelta(seconds=d.timeout_s))
    manager = make_manager(plain, spec, index, pg)
    if not restart:
        start_barrier(out, index, d.replicas, d.join_timeout_s)
    append_jsonl(log, [{"event": "start", "t": time.time(), "pid": os.getpid()}])
    outer_steps, h = s.steps // d.inner_steps, d.inner_steps
    outer = torch.optim.SGD(
        list(plain.params.values()),
        lr=d.outer_lr,
        momentum=d.outer_momentum,
        nesterov=d.outer_momentum > 0,  # torch refuses Nesterov without momentum
    )
    recovered_to: int | None = None
    t, first = 0, True
    try:
        with DiLoCo(manager, [Fragment.of(plain.params)], plain.optimizer, outer, sync_every=h):
            while manager.current_step() < outer_steps:
                k = manager.current_step()
                g = k * h + t
                idx = batch_indices(len(plain.rows), g, s.batch_size, index, d.replicas, s.seed)
                loss = plain.step(plain.model, idx, g)
                row = {"event": "step", "t": time.time(), "outer": k, "inner": t, "loss": loss}
                append_jsonl(log, [row])
                t = (t + 1) % h
                if t == 0:  # DiLoCo's round ended inside that optimizer step
                    row = round_row(k, manager.current_step(), manager, pg)
                    recovered_to = row["outer_after"] - 1 if row["recovered"] else recovered_to
                    append_jsonl(log, [row])
                    if restart and first and not row["recovered"] and row["participants"] < 2:
                        raise NoPeer(index)
                    first = False
    finally:
        manager.shutdown(wait=False)
    summary = ReplicaSummary(
        replica=index,
        outer_steps=manager.current_step(),
        bytes_allreduced=pg.bytes_allreduced,
        allreduce_calls=pg.allreduce_calls,
        trainable_bytes=sum(p.numel() * p.element_size() for p in plain.params.values()),
        recovered_to_outer_step=recovered_to,
        final_loss=plain.eval_loss(),
    )
    return summary, plain


def main(argv: list[str] | None = None) -> None:
    args = argv if argv is not None else sys.argv[1:]
    spec = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    index = int(args[1])
    quiet()
    try:
        summary, plain = train_replica(spec, index, restart="--restart" in args[2:])
    except NoPeer:
        print(f"diloco replica {index}: restarted, but no live peer to recover from", flush=True)
        os._exit(EXIT_NO_PEER)
    except TuneloopError as err:  # the launcher raises it again instead of restarting
        atomic_write_text(Path(spec["out_dir"]) / f"replica_{index}.error", str(err))
        print(f"error: {err}", file=sys.stderr, flush=True)
        os._exit(err.exit_code)
    out = Path(spec["out_dir"])
    plain.model.save_pretrained(str(out / f"adapter_{index}"))
    write_record(out / f"replica_{index}.json", summary)  # last: it marks the replica done
    print(f"diloco replica {index}: done ({summary.outer_steps} outer steps)", flush=True)
    # Everything is on disk. Interpreter teardown of torchft's server and transport threads
    # was measured to take ~5 s more (2-core CPU), so the replica leaves at once.
    os._exit(0)


if __name__ == "__main__":
    main()
