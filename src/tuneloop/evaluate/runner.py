"""The eval runner: every (item, sample) of a suite (or slice) against an OpenAI-compatible
endpoint, scored by the item's scorer, appended to a sample log as each finishes.

    from tuneloop.evaluate import EvalSettings, evaluate
    summary = evaluate("http://127.0.0.1:8000", "tiny", Path("suite.jsonl"), Path("runs/pre"),
                       EvalSettings(n_samples=4, temperature=0.7))

or `tuneloop eval --endpoint URL --model NAME --suite FILE --out DIR`. The log format is
`tuneloop/samplelog/`. Infrastructure failures are retried by the client and never scored;
keys still without a completion at the end get `missing` rows (failures in the denominator).
An eval in which no request at all succeeded writes its log and then raises `PhaseFailed`.

Resume: rerunning into the same `out_dir` cuts a torn last line, checks that the existing
summary and rows come from the same suite revision, model, sampling parameters, slice and base
seed (else `InputError` naming the difference), and requests only the keys without an `ok` or
`harness_error` row. Rows superseded by a later one (a `missing` row filled in by the rerun) are
compacted away at the end, so a finished log holds each key exactly once.

Deliberately, rows are fsynced in group commits (`rowwriter.py`), so a fast server is not
throttled to the disk's fsync rate.

Agent items (with `tools`) run the agent loop of `agent.py` and log the whole trajectory in
their row (`SampleRow.agent`); `eval.metrics` names further scorers run on every sample and
recorded by name in `SampleRow.metrics`.

Scorers registered `inline` (the built-in text scorers: microseconds) run on the event loop;
other scorers, such as the sandboxed `python_tests`, run in worker threads so they never stall
the requests in flight. Which scorer an item gets is `scorers/resolve.py`'s, as in training.
The API key is redacted from every row, summary and error on its way out (`redact.py`).
What the process held before the eval is kept out of the collector's full scans (`heap.py`).
Items scored `judge` are graded by the judge file of `eval.judge`, loaded and checked before
any request; a judge that refuses (401/403/404) stops the eval like a refusing endpoint.

Several replicas of one model (a list of base URLs; `--endpoint` given more than once) share
the suite through `client.ReplicaClient`: `concurrency` requests in flight on each, a failed
replica's requests retried on the others within the same per-request retry budget, and the
rows identical to a single-endpoint eval's (the request, seed included, does not depend on the
replica). The summary lists the replicas and what each served (`EvalSummary.replicas`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from tuneloop.client import (
    EndpointRefused,
    MalformedResponse,
    OpenAIClient,
    ReplicaClient,
    RequestFailed,
    client_for,
)
from tuneloop.client.confidence import answer_confidence
from tuneloop.config import EvalConfig, SlicingConfig
from tuneloop.envkeys import Redactor
from tuneloop.envs import is_agent_item
from tuneloop.errors import InputError, PhaseFailed
from tuneloop.evaluate.agent import run_agent
from tuneloop.evaluate.heap import frozen_heap
from tuneloop.evaluate.plan import (
    Key,
    build_payload,
    check_resumable,
    endpoint_list,
    missing_row,
    read_existing_rows,
    sample_seed,
    totals,
    turn_seed,
)
from tuneloop.evaluate.progress import EvalProgress
from tuneloop.evaluate.redact import as_stored, redacted_errors, stored, stored_line
from tuneloop.evaluate.rowwriter import RowFields, RowWriter
from tuneloop.evaluate.scoring import score_all
from tuneloop.records import append_lines, read_record, repair_jsonl_tail, write_json, write_lines
from tuneloop.registry import scorers
from tuneloop.samplelog import (
    SAMPLES_FILE,
    SUMMARY_FILE,
    AgentBudget,
    AgentTrace,
    EvalSummary,
    ReplicaUse,
    SampleRow,
    SamplingParams,
)
from tuneloop.scorers.judge import (
    JudgeRefused,
    judge_configured,
    judge_cost,
    judge_for,
    judge_unanswered,
)
from tuneloop.scorers.resolve import ScorerResolver
from tuneloop.suite import SuiteItem, load_suite, resolve_slice

T = TypeVar("T")


EvalSettings = EvalConfig
"""How to sample and how hard to push the endpoint: loop.yaml's `eval:` section, as is."""


@dataclass
class _Run:
    """What one run needs: the work, where it goes, and what it has done so far."""

    items: dict[str, SuiteItem]
    summary: EvalSummary
    samples: Path
    settings: EvalSettings
    served_model: str
    redactor: Redactor
    """Applied to every row and summary as it is written (see `redact.py`)."""
    scorers: ScorerResolver
    endpoints: list[str]
    """Every replica's base URL (one for a plain eval)."""
    rows: dict[Key, SampleRow] = field(default_factory=dict)
    errors: dict[Key, str] = field(default_factory=dict)

    def stored(self, record: SampleRow | EvalSummary) -> dict[str, Any]:
        """The record as it is written: redacted."""
        return stored(self.redactor, record)

    def line(self, row: SampleRow) -> str:
        """The row's line in the sample log: redacted."""
        return stored_line(self.redactor, row)

    def record(self, row: SampleRow) -> None:
        """Keep a row the writer built (for the totals and the missing rows at the end)."""
        self.rows[(row.item_id, row.sample_index)] = row


def evaluate(
    base_url: str | Sequence[str],
    model: str,
    suite_path: Path,
    out_dir: Path,
    settings: EvalSettings,
    *,
    slicing: SlicingConfig | None = None,
    api_key: str | None = None,
    model_identity: str | None = None,
    progress: bool = True,
) -> EvalSummary:
    """Run (or resume) one eval; writes out_dir/samples.jsonl and out_dir/summary.json.

    The API key's value, and anything shaped like a credential, is redacted from every row
    and summary field written and from every error raised: servers echo the request's
    `Authorization` header in error bodies, and models repeat what they are shown.
    `settings.slice` names the slice to evaluate; `slicing` (loop.yaml's `suite:` keys) says
    how the suite is cut and scored by default. `base_url` may list several replicas of the
    model (see the module docstring).
    """
    endpoints = endpoint_list(base_url)
    redactor = Redactor((api_key,))
    slicing = slicing or SlicingConfig()
    slice_name = settings.slice
    with redacted_errors(redactor), frozen_heap():
        suite = load_suite(Path(suite_path), slicing.default_scorer)
        ids = [i.id for i in suite.items]
        if slice_name is not None:
            ids = resolve_slice(suite, slicing, slice_name)
            if not ids:
                raise InputError(f"slice {slice_name!r} of {suite_path} is empty")
        by_id = suite.by_id()
        for name in settings.metrics:
            scorers.get(name)  # an unknown name: "did you mean", before any request
        agentic = any(is_agent_item(by_id[i].raw) for i in ids)
        summary = EvalSummary(
            suite_path=str(suite_path),
            suite_revision=suite.revision,
            slice=slice_name,
            item_ids=ids,
            model=model_identity or model,
            endpoint=endpoints[0],
            sampling=SamplingParams(
                n_samples=settings.n_samples,
                temperature=settings.temperature,
                top_p=settings.top_p,
                max_tokens=settings.max_tokens,
                seed=settings.seed,
                logprobs=settings.logprobs,
            ),
            started_at=_now(),
            agent=AgentBudget(max_turns=settings.max_turns, token_budget=settings.token_budget)
            if agentic
            else None,
            metrics=list(settings.metrics),
            usd_per_1m=settings.usd_per_1m,
            judge=judge_for(settings.judge).identity if settings.judge else None,
        )
        items = {i: by_id[i] for i in ids}
        samples = Path(out_dir) / SAMPLES_FILE
        configured = judge_configured(settings.judge)  # the judge file, checked before any request
        resolver = ScorerResolver(slicing.default_scorer, configured=configured)
        run = _Run(items, summary, samples, settings, model, redactor, resolver, endpoints)
        lines, prior_retries = _prepare(run, Path(out_dir))
        write_json(Path(out_dir) / SUMMARY_FILE, run.stored(summary))  # pins settings for a resume
        started = time.perf_counter()
        retries, appended = _run_loop(_run_all(run, api_key, progress))
        final = _finish(run, Path(out_dir), lines + appended, prior_retries + retries, started)
        problem = judge_unanswered(run.rows.values(), run.settings.judge)
        if problem is not None:
            raise InputError(problem)
        if final.counts["ok"] + final.counts["harness_error"] == 0:
            # fail closed: a log with no completion at all says nothing about the model
            last = next(iter(run.errors.values()), "none recorded")
            raise PhaseFailed(
                f"no request to {', '.join(endpoints)} succeeded "
                f"({final.counts['missing']} samples missing; "
                f"last error: {last}). Is the server running? Rerun with the same --out to resume."
            )
        return final


def _run_loop(coro: Coroutine[Any, Any, T]) -> T:
    """asyncio.run, on uvloop when it is installed (as uvicorn's `loop="auto"` does): the
    client's per-request socket and scheduling work is most of an eval's CPU time."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _prepare(run: _Run, out_dir: Path) -> tuple[int, int]:
    """Load a log being resumed into run.rows; returns (rows in the file, prior retries)."""
    if not run.samples.exists():
        return 0, 0
    old_summary = out_dir / SUMMARY_FILE
    prior_retries = 0
    # the log holds redacted values: compare it with this eval as it would be stored
    this = as_stored(run.redactor, run.summary, str(old_summary))
    if old_summary.exists():
        old = read_record(old_summary, EvalSummary)
        check_resumable(old, this, old_summary)
        prior_retries = old.retries
    repair_jsonl_tail(run.samples)
    rows, lines = read_existing_rows(run.samples, this, run.settings.seed)
    run.rows = {k: r for k, r in rows.items() if r.status != "missing"}
    return lines, prior_retries


async def _run_all(run: _Run, api_key: str | None, show: bool) -> tuple[int, int]:
    """Request every key without a row; returns (retries, rows appended)."""
    n = run.summary.sampling.n_samples
    todo = [
        (item, k) for item in run.items.values() for k in range(n) if (item.id, k) not in run.rows
    ]
    s = run.settings
    client = client_for(
        run.endpoints,
        api_key=api_key,
        concurrency=s.concurrency,
        timeout_s=s.request_timeout_s,
        max_retries=s.max_retries,
        backoff_s=s.backoff_s,
    )
    slots = s.concurrency * len(run.endpoints)  # `concurrency` is per replica
    writer = RowWriter(run.samples, run.line, run.record)
    with EvalProgress(len(run.items), n, run.rows, enabled=show) as bar:
        async with client:
            work = iter(todo)

            async def worker() -> None:
                for item, k in work:
                    fields = await _one_sample(run, client, item, k)
                    if fields is not None:
                        writer.put(fields)
                    bar.advance(item.id, fields["status"] if fields else None, client.retries)

            tasks = [asyncio.ensure_future(worker()) for _ in range(min(slots, len(todo)))]
            try:
                await _wait_all(tasks)
            finally:
                await writer.close()
    if isinstance(client, ReplicaClient):
        run.summary.replicas = [ReplicaUse(**vars(r)) for r in client.stats]
    return client.retries, writer.written


async def _wait_all(tasks: Sequence[asyncio.Future[None]]) -> None:
    """Wait for the workers; on the first failure cancel the rest and re-raise it."""
    if not tasks:
        return
    done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    for task in done:
        err = task.exception()
        if isinstance(err, EndpointRefused):
            raise InputError(
                f"the endpoint refused the request: {err}. Check --endpoint, --model and "
                "--api-key-env (rows written so far are kept; rerun to resume)"
            )
        if isinstance(err, JudgeRefused):
            raise InputError(
                f"the judge refused the request: {err}. Check the judge file's endpoint, model "
                "and api_key_env (rows written so far are kept; rerun to resume)"
            )
        if err is not None:
            raise err


async def _one_sample(
    run: _Run, client: OpenAIClient | ReplicaClient, item: SuiteItem, k: int
) -> RowFields | None:
    """One sample (a request, or an agent trajectory) and its scores, as its row's fields (the
    writer validates them: see rowwriter.py); None when it failed for infrastructure reasons."""
    seed = sample_seed(run.settings.seed, item.id, k)
    payload, chat = build_payload(item, run.served_model, run.summary.sampling, seed)
    fields: RowFields = dict(
        suite_revision=run.summary.suite_revision,
        item_id=item.id,
        sample_index=k,
        model=run.summary.model,
        seed=seed,
        scorer=item.scorer,
        tags=list(item.tags),
    )
    try:
        scored, text, trace = await _complete(run, client, item, k, payload, chat)
    except RequestFailed as err:
        run.errors[(item.id, k)] = str(err)
        return None
    except MalformedResponse as err:
        return {**fields, "status": "harness_error", "error": str(err)}
    fields.update(scored)
    try:
        result, metrics = await score_all(run.scorers, run.settings.metrics, item.raw, text, trace)
    except JudgeRefused:
        raise  # a wrong judge endpoint, key or model stops the eval, as a refusing endpoint does
    except Exception as err:  # a scorer bug must not stop the eval; the row says what broke
        msg = f"scorer {item.scorer!r} raised {type(err).__name__}: {err}"[:500]
        return {**fields, "status": "harness_error", "error": msg}
    fields.update(status="ok", score=result.value, detail=result.detail, metrics=metrics)
    return fields


async def _complete(
    run: _Run,
    client: OpenAIClient | ReplicaClient,
    item: SuiteItem,
    k: int,
    payload: dict[str, Any],
    chat: bool,
) -> tuple[dict[str, Any], str, AgentTrace | None]:
    """(the row's completion fields, the final text, the trajectory of an agent item)."""
    if run.summary.agent is None or not is_agent_item(item.raw):
        done = await client.complete(payload, chat)
        fields: dict[str, Any] = dict(
            completion=done.text,
            finish_reason=done.finish_reason,
            prompt_tokens=done.prompt_tokens,
            completion_tokens=done.completion_tokens,
            latency_s=round(done.latency_s, 6),
        )
        if run.summary.sampling.logprobs:
            fields["confidence"] = answer_confidence(done)
        if done.cascade is not None:  # a cascade reports its tier and what it cost
            fields.update(cascade=done.cascade, cost_usd=done.cascade.cost_usd)
        else:
            fields["cost_usd"] = _priced(run, done.completion_tokens)
        return fields, done.text, None
    base_seed = run.settings.seed
    ran = await run_agent(
        client, item, payload, run.summary.agent, lambda t: turn_seed(base_seed, item.id, k, t)
    )
    trace = ran.trace
    fields = dict(
        completion=trace.answer,
        finish_reason=ran.finish_reason,
        prompt_tokens=trace.prompt_tokens,
        completion_tokens=trace.completion_tokens,
        latency_s=round(ran.latency_s, 6),
        agent=trace,
        cost_usd=_priced(run, trace.completion_tokens),
    )
    return fields, trace.answer, trace


def _priced(run: _Run, completion_tokens: int | None) -> float | None:
    """The sample's cost at `eval.usd_per_1m`; None without a price or a token count."""
    price = run.summary.usd_per_1m
    if price is None or completion_tokens is None:
        return None
    return completion_tokens * price / 1e6


def _finish(run: _Run, out_dir: Path, lines: int, retries: int, started: float) -> EvalSummary:
    """Write missing rows, compact superseded rows, and write the final summary."""
    n = run.summary.sampling.n_samples
    missing = [
        missing_row(
            item,
            k,
            run.summary.suite_revision,
            run.summary.model,
            run.settings.seed,
            run.errors.get((item.id, k)),
        )
        for item in run.items.values()
        for k in range(n)
        if (item.id, k) not in run.rows
    ]
    append_lines(run.samples, [run.line(r) for r in missing])
    for row in missing:
        run.rows[(row.item_id, row.sample_index)] = row
    if lines + len(missing) != len(run.rows):
        ordered = [run.rows[(i, k)] for i in run.summary.item_ids for k in range(n)]
        write_lines(run.samples, [run.line(r) for r in ordered])
    stats = totals(run.rows, run.summary.item_ids, n)
    summary = run.summary.model_copy(
        update={
            **stats,
            "retries": retries,
            "judge_cost_usd": judge_cost(run.rows.values()) if run.summary.judge else None,
            "finished_at": _now(),
            "duration_s": round(time.perf_counter() - started, 3),
        }
    )
    write_json(out_dir / SUMMARY_FILE, run.stored(summary))
    return summary
