"""The replay phase: every sampled assistant step to every teacher, scored, priced, selected.

    from tuneloop.replay import replay
    result = replay(Path("traces.jsonl"), Path("teachers.yaml"), Path("runs/replay"),
                    ReplayConfig(sample_fraction=0.5, judge="exact"))

or `tuneloop replay --traces traces.jsonl --teachers teachers.yaml --out runs/replay`.
Writes into `out`: `calls.jsonl` (one `ReplayCall` per (trace, step, teacher), appended as each
finishes: the resume log, `store.py`), `sft.jsonl` and `dpo.jsonl` (`select.py`; the shapes
`tuneloop train --method sft|dpo` reads), `report.json` and `report.md` (`report.py`).

Calls go through the eval's client (`tuneloop.client`): async, one request per (step,
teacher) with its own seed, connection errors / timeouts / 429 / 5xx retried with backoff and
never scored; a call still without an answer is a `missing` row — not a failure of the teacher
— and is asked again by the next run. 401/403/404 stop the replay with the teacher's name
(rows so far are kept). An embedded teacher (a local model folder) is served for the run
through `tuneloop.serving.serving()` with the `serve` section's defaults (the `embedded`
backend), only when it has calls left. Every verifier's scorer is looked up — and the LLM
judge loaded — before any call, so a typo costs nothing. Steps without a verifier go to the
step judge (`judging.py`: what the LLM judge is shown in grade and in pairwise mode, and why).
Deliberately, the outputs are rebuilt from the whole log at the end of every run, so a rerun
of a finished replay calls nothing, pays nothing (`cost_usd_this_run` 0) and writes the same
rows — except that answers whose scoring failed (`scorer_error`: a judge that was down or
answered prose) are scored again, without asking their teacher again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuneloop.client import EndpointRefused, OpenAIClient, RequestFailed
from tuneloop.config import ServeConfig
from tuneloop.config.replay import ReplayConfig
from tuneloop.envkeys import Redactor, read_api_key
from tuneloop.errors import InputError, did_you_mean
from tuneloop.records import append_jsonl
from tuneloop.records.replay import ReplayCall, ReplayReport
from tuneloop.registry import scorers
from tuneloop.replay.calls import (
    Malformed,
    answered_row,
    malformed_row,
    missing_row,
    parse_answer,
    score_text,
    scored_text,
    scoring_item,
)
from tuneloop.replay.judging import (
    JudgeUse,
    OriginalVerdicts,
    beaten_originals,
    judge_cost,
    judge_use,
)
from tuneloop.replay.outputs import write_outputs
from tuneloop.replay.plan import Step, build_request, plan_steps, read_traces, request_hash
from tuneloop.replay.store import (
    CALLS_FILE,
    CallId,
    CallWriter,
    call_id,
    carry_over,
    load_calls,
)
from tuneloop.replay.teachers import Teacher, TeachersFile, load_teachers
from tuneloop.scorers.resolve import ScorerResolver
from tuneloop.serving import serving


@dataclass(frozen=True)
class Job:
    """One (step, teacher) call with its request."""

    step: Step
    teacher: Teacher
    payload: dict[str, Any]
    id: CallId


@dataclass
class _Run:
    settings: ReplayConfig
    judge: JudgeUse
    resolver: ScorerResolver
    writer: CallWriter
    new: dict[CallId, ReplayCall] = field(default_factory=dict)


@dataclass(frozen=True)
class ReplayResult:
    report: ReplayReport
    out_dir: Path


def replay(
    traces: Path,
    teachers_file: Path,
    out_dir: Path,
    settings: ReplayConfig,
    *,
    earlier: Sequence[Path] = (),
) -> ReplayResult:
    """Run (or resume) one replay into `out_dir`; see the module docstring. `earlier`: call
    logs of other replays whose finished calls with the same identity are reused, not paid
    again (`store.carry_over`; the report's `reused_from`)."""
    teachers = load_teachers(teachers_file)
    keys = {
        t.name: read_api_key(t.api_key_env, f"teachers.{t.name}.api_key_env")
        for t in teachers.teachers
    }
    redactor = Redactor(tuple(keys.values()))
    records = read_traces(traces)
    steps, available = plan_steps(
        records,
        fraction=settings.sample_fraction,
        max_steps=settings.max_steps,
        seed=settings.seed,
        default_scorer=settings.default_scorer,
        include_sidechains=settings.include_sidechains,
    )
    if not steps:  # never an empty replay with exit 0
        why = "raise --sample-fraction or --max-steps" if available else "no assistant step"
        raise InputError(
            f"{traces}: 0 steps to replay ({len(records)} traces, {available} steps; {why}); "
            "nothing written"
        )
    _check_scorers(steps, settings)
    judge = judge_use(settings)  # the LLM judge loaded (file, rubric, key) before any call
    jobs = [_job(step, teacher, settings.seed) for step in steps for teacher in teachers.teachers]
    out_dir.mkdir(parents=True, exist_ok=True)
    logged = load_calls(out_dir / CALLS_FILE)
    run = _Run(
        settings,
        judge,
        ScorerResolver(settings.default_scorer),
        CallWriter(out_dir / CALLS_FILE, redactor),
    )
    reused_from = _reuse(run, logged, {j.id: j for j in jobs}, earlier)
    _rescore_failed(run, logged, {j.id: j for j in jobs})
    todo = [j for j in jobs if j.id not in logged or logged[j.id].status == "missing"]
    if todo:
        with _endpoints(teachers, {j.teacher.name for j in todo}, out_dir) as endpoints:
            asyncio.run(_call_all(run, todo, endpoints, keys))
    calls = {j.id: run.new.get(j.id) or logged[j.id] for j in jobs}
    originals = _score_originals(steps, run, calls)
    report = write_outputs(
        out_dir,
        redactor,
        steps=steps,
        teachers=teachers,
        calls=calls,
        new=set(run.new),
        originals=originals,
        judge=judge,
        settings=settings,
        sources=(str(traces), str(teachers_file), available),
        reused_from=reused_from,
    )
    return ReplayResult(report, out_dir)


def _reuse(
    run: _Run, logged: dict[CallId, ReplayCall], jobs: dict[CallId, Job], earlier: Sequence[Path]
) -> dict[str, int]:
    """Carry earlier logs' finished calls into this log (`store.carry_over`), re-scored under
    this replay's settings; returns log path → calls taken."""
    rows, taken = carry_over(logged, jobs, earlier)
    _append_rescored(run, logged, jobs, rows)
    return taken


def _rescore_failed(run: _Run, logged: dict[CallId, ReplayCall], jobs: dict[CallId, Job]) -> None:
    """Answers already paid for whose scoring failed (`scorer_error`: a judge that was down
    or answered prose) are scored again — the teacher is not asked again."""
    rows = [r for c, r in logged.items() if r.status == "scorer_error" and c in jobs]
    _append_rescored(run, logged, jobs, rows)


def _append_rescored(
    run: _Run, logged: dict[CallId, ReplayCall], jobs: dict[CallId, Job], rows: list[ReplayCall]
) -> None:
    """`rows` re-scored under this replay's settings, appended to the log as their last row."""
    if not rows:
        return
    fresh = [_rescored(run, jobs[call_id(r)].step, r) for r in rows]
    append_jsonl(run.writer.path, [run.writer.redactor.value(r.to_json()) for r in fresh])
    logged.update((call_id(r), r) for r in fresh)


def _rescored(run: _Run, step: Step, row: ReplayCall) -> ReplayCall:
    """A carried answer scored as this replay scores (verifier, judge, threshold may differ)."""
    if row.status == "malformed" or row.response is None:
        return row
    item = scoring_item(step, run.judge)
    clear: dict[str, Any] = {"score": None, "passed": None, "scorer": None, "error": None}
    clear["detail"] = {}
    if item is None:
        scored: dict[str, Any] = {"status": "unscored", "error": "no verifier and no judge"}
    else:
        args = (run.resolver.resolve(item), item, scored_text(step, row.response, run.judge))
        scored = score_text(*args, run.settings.pass_threshold)
    return row.model_copy(update={**clear, **scored})


def _job(step: Step, teacher: Teacher, seed: int) -> Job:
    payload = build_request(step, teacher, teacher.requested_model(), seed)
    return Job(
        step, teacher, payload, (step.trace, step.index, teacher.name, request_hash(payload))
    )


def _check_scorers(steps: list[Step], settings: ReplayConfig) -> None:
    """Every scorer a step names, and the judge, must be registered (before any call)."""
    named = {str(s.verifier["scorer"]): s.key for s in steps if s.verifier is not None}
    if settings.judge is not None:
        named.setdefault(settings.judge, "replay.judge")
    bad = [
        f"{where}: unknown scorer {name!r}{did_you_mean(name, scorers.names())}"
        for name, where in named.items()
        if name not in scorers
    ]
    if bad:
        raise InputError("\n".join(bad))


@contextmanager
def _endpoints(teachers: TeachersFile, needed: set[str], out_dir: Path) -> Iterator[dict[str, str]]:
    """name → base URL of every teacher with calls left; embedded ones served meanwhile."""
    with ExitStack() as stack:
        urls = {}
        for t in teachers.teachers:
            if t.name not in needed:
                continue
            if t.endpoint is not None:
                urls[t.name] = t.endpoint
                continue
            assert t.embedded is not None  # a teacher gives exactly one of the two (Teacher)
            log_path = out_dir / f"teacher-{t.name}.log"
            endpoint = stack.enter_context(serving(t.embedded, ServeConfig(), log_path=log_path))
            urls[t.name] = endpoint.base_url
        yield urls


async def _call_all(
    run: _Run, todo: list[Job], urls: dict[str, str], keys: dict[str, str | None]
) -> None:
    teachers = {j.teacher.name: j.teacher for j in todo}
    async with AsyncExitStack() as stack:
        clients = {}
        for name, url in urls.items():
            t = teachers[name]
            clients[name] = await stack.enter_async_context(
                OpenAIClient(
                    url,
                    api_key=keys[name],
                    concurrency=run.settings.concurrency,
                    timeout_s=t.timeout_s,
                    max_retries=t.max_retries,
                    backoff_s=t.backoff_s,
                )
            )
        work = iter(todo)

        async def worker() -> None:
            for job in work:
                row = await _one(run, clients[job.teacher.name], job)
                run.new[job.id] = row
                await run.writer.put(row)

        n = min(run.settings.concurrency, len(todo))
        tasks = [asyncio.ensure_future(worker()) for _ in range(n)]
        done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        for task in done:
            if task.exception() is not None:
                raise task.exception()  # type: ignore[misc]


async def _one(run: _Run, client: OpenAIClient, job: Job) -> ReplayCall:
    step, teacher = job.step, job.teacher
    base = {
        "trace": step.trace,
        "step": step.index,
        "teacher": teacher.name,
        "model": teacher.requested_model(),
        "request_hash": job.id[3],
    }
    item = scoring_item(step, run.judge)
    try:
        body, latency_s = await client.request(job.payload, chat=True)
    except RequestFailed as err:
        return missing_row(base, str(err))
    except EndpointRefused as err:
        raise InputError(
            f"teacher {teacher.name!r} refused the request: {err}. Check its endpoint, model "
            "and api_key_env (calls so far are kept; rerun to resume)"
        ) from None
    try:
        answer = parse_answer(body)
    except Malformed as err:
        return malformed_row(base, str(err), latency_s, item["scorer"] if item else None)
    if item is None:
        scored: dict[str, Any] = {"status": "unscored", "error": "no verifier and no judge"}
    else:
        scorer = run.resolver.resolve(item)
        text = scored_text(step, answer.message, run.judge)
        args = (scorer, item, text, run.settings.pass_threshold)
        scored = score_text(*args) if scorer.inline else await asyncio.to_thread(score_text, *args)
    return answered_row(base, answer, teacher.price, latency_s, scored)


def _score_originals(
    steps: list[Step], run: _Run, calls: dict[CallId, ReplayCall]
) -> OriginalVerdicts:
    """The trace's own responses, scored as the teachers' answers are (concurrently: a judge
    waits on HTTP); a step judged pairwise by whether a teacher beat it (`judging.py`)."""
    use, threshold = run.judge, run.settings.pass_threshold
    todo = []
    for step in steps:
        item = None if use.pairwise(step) else scoring_item(step, use)
        if item is not None:  # resolved here: the resolver builds each scorer once
            todo.append((step, item, run.resolver.resolve(item)))

    def one(job: tuple[Step, dict[str, Any], Any]) -> dict[str, Any]:
        step, item, scorer = job
        return score_text(scorer, item, scored_text(step, step.original, use), threshold)

    with ThreadPoolExecutor(max_workers=run.settings.concurrency) as pool:
        scored = dict(zip((s.key for s, _, _ in todo), pool.map(one, todo), strict=True))
    passed: dict[str, bool | None] = {s.key: scored.get(s.key, {}).get("passed") for s in steps}
    passed |= beaten_originals(steps, calls, use)
    judged = {s.key for s in steps if use.judges(s)}
    mine = [v for k, v in scored.items() if k in judged]
    return OriginalVerdicts(
        passed,
        judged=sum(1 for k in judged if passed[k] is not None),
        judge_errors=sum(1 for v in mine if v["status"] == "scorer_error"),
        judge_cost_usd=sum(judge_cost(v.get("detail") or {}) for v in mine),
    )
