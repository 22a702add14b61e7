"""The corpus build's per-row steps on Ray Data (`tuneloop corpus build --executor ray`).

    executor: {kind: ray}                          # a local cluster started in this process
    executor: {kind: ray, address: ray://head:10001}   # or a running cluster

What runs where, and why:

- **On Ray, per row** (pure functions of one trace): scrub (e-mails, secrets, IPs), the row
  cut (`training_rows.to_row`: last assistant turn, normalized prompt key, reference), the row's
  MinHash signature over its shingles (`tuneloop.data.dedup.signatures`), and the trace's line of
  `traces.jsonl`. A row's result does not depend on any other row, so any partition gives
  the same values. The traces go out in chunks of `executor.batch_size` (one Ray Data row per
  chunk: one pickle per chunk, not per trace); the rows, signatures and rendered lines come
  back in chunk order (the traces themselves do not: the driver only writes them).
- **On the driver, global** (each needs every row, in order): ingest (an ingester reads a file
  as a stream and may stitch lines into one trace, as `claude_code` does), the preference
  pairs and GRPO candidates (grouped by prompt), the feedback filter, exact dedup (first
  occurrence wins), the LSH banding pass of near-dup (a row is removed when it collides with
  an *earlier kept* row: order-dependent by definition), decontamination and its recall audit
  (one index over the suites, canaries planted with a seeded draw), the judge cut (its
  requests wait on HTTP, not on CPU: a thread pool here, `judge_cut.py`), difficulty bands,
  the seeded final shuffle and the writes. They are the same code as the local executor's.

So the outputs are byte-identical to the local executor's on the same input: the per-row
values are identical wherever computed (the signature is rensa's seeded R-MinHash of the row's
own shingle set, whose tokens rensa hashes with FxHash, not Python's per-process salted hash),
and every order-dependent decision sees the rows in the same order. `provenance.json` records
the executor (and its whole config under `parameters`); the scrub counts are summed over the
tasks. Scaling: the per-row share (about half of a local build's CPU time) spreads over the
cluster's cores; ingest, the global pass and pickling the traces out and the rows back stay
on the driver, which bounds the speed-up (measured by `benchmarks/corpus_ray.py`: about 1.5×
over local with unlimited workers). Deliberately not on Ray yet, and the next step past that
bound: ingest, per file (a rotated log's files) — an ingester reads one file as a stream.

A cluster reached by `address` runs these functions in its own workers: they need the same
tuneloop version installed (Ray pickles `_chunk_pass` and the rows by reference to their
modules, `tuneloop.data.corpus.ray` and `tuneloop.data.corpus.training_rows`). This module's
name shadows nothing: `import ray` below is absolute, the Ray package. A local cluster
started here is shut down after the build.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any

from tuneloop.data.corpus.config import ExecutorSpec
from tuneloop.data.corpus.training_rows import Row, row_or_id
from tuneloop.data.dedup import LshParams, signatures
from tuneloop.data.files import jsonl_bytes
from tuneloop.errors import InputError
from tuneloop.scrub import Scrubber, ScrubRules


@dataclass
class RowPass:
    """What the per-row steps return, in the order of the traces given."""

    trace_lines: bytes
    """Every trace, scrubbed, as the lines of `traces.jsonl` (rendered on the workers: the
    driver needs the traces for nothing else, and unpickling them cost more than a third of
    the per-row work)."""
    rows: list[Row | tuple[str, str]]
    """Each trace's row, or its (source, source id) when it has no assistant message
    (`training_rows.row_or_id`)."""
    signatures: dict[int, Any] | None
    """Each row's MinHash signature by `id(row)`; None when near-dup is off."""
    executor: dict[str, Any]
    """What ran it, for provenance.json."""


def import_ray() -> Any:
    """`ray`, or an InputError naming the extra that installs it."""
    try:
        import ray
        import ray.data  # noqa: F401  (Ray Data is a separate part of the ray package)
    except ImportError as err:
        raise InputError(
            f"executor ray needs Ray Data ({err.name} is not installed): "
            "pip install 'tuneloop[ray]'"
        ) from None
    return ray


def row_pass(
    traces: list[Any], scrubber: Scrubber, lsh: LshParams | None, spec: ExecutorSpec
) -> RowPass:
    """Scrub, cut rows and sign them on Ray; `scrubber.counts` gains the tasks' counts."""
    ray = import_ray()
    started_here = _connect(ray, spec)
    try:
        chunks = [traces[i : i + spec.batch_size] for i in range(0, len(traces), spec.batch_size)]
        items = [{"k": k, "blob": pickle.dumps(c, protocol=5)} for k, c in enumerate(chunks)]
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ctx.execution_options.preserve_order = True
        ds = ray.data.from_items(items, override_num_blocks=max(1, len(items)))
        done = ds.map(_chunk_pass, fn_kwargs={"rules": scrubber.rules, "lsh": lsh}).take_all()
        executor = {
            "kind": "ray",
            "address": spec.address or "local",
            "ray_version": ray.__version__,
            "cluster_cpus": int(ray.cluster_resources().get("CPU", 0)),
            "tasks": len(items),
        }
    finally:
        if started_here:
            ray.shutdown()
    return _merge(sorted(done, key=lambda d: int(d["k"])), scrubber, lsh, executor)


def _connect(ray: Any, spec: ExecutorSpec) -> bool:
    """Join the configured cluster (or start a local one); True when this call started it."""
    if ray.is_initialized():
        return False
    options: dict[str, Any] = dict(
        log_to_driver=False, include_dashboard=False, configure_logging=False
    )
    try:
        if spec.address is not None:
            ray.init(address=spec.address, **options)
        else:
            ray.init(num_cpus=spec.num_cpus, **options)
    except (ConnectionError, RuntimeError, ValueError) as err:
        where = spec.address or "a local cluster"
        raise InputError(f"executor.address: cannot start or reach {where}: {err}") from None
    return True


def _chunk_pass(item: dict[str, Any], rules: ScrubRules, lsh: LshParams | None) -> dict[str, Any]:
    """One Ray task: a chunk's traces scrubbed, their rows, the rows' signatures."""
    traces = pickle.loads(item["blob"])
    scrubber = Scrubber(rules)
    traces = [scrubber.trace(t) for t in traces]
    rows = [row_or_id(t) for t in traces]
    texts = [r.text for r in rows if isinstance(r, Row)]
    sig = signatures(texts, lsh) if lsh is not None and texts else None
    lines = jsonl_bytes([t.to_json() for t in traces])  # joined per chunk = joined whole
    out = (lines, rows, sig, dict(scrubber.counts))
    return {"k": item["k"], "blob": pickle.dumps(out, protocol=5)}


def _merge(
    done: list[dict[str, Any]], scrubber: Scrubber, lsh: LshParams | None, executor: dict[str, Any]
) -> RowPass:
    lines: list[bytes] = []
    rows: list[Row | tuple[str, str]] = []
    sigs: dict[int, Any] | None = {} if lsh is not None else None
    for d in done:
        t, r, sig, counts = pickle.loads(d["blob"])
        lines.append(t)
        rows.extend(r)
        scrubber.counts.update(counts)
        if sigs is not None and sig is not None:
            made = [row for row in r if isinstance(row, Row)]
            sigs.update((id(row), s) for row, s in zip(made, sig, strict=True))
    return RowPass(b"".join(lines), rows, sigs, executor)
