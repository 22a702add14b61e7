"""`tuneloop shadow report`: the challenger's mirrored answers judged against the champion's.

    tuneloop shadow report --log-dir traffic/ --judge judge.yaml --out runs/shadow
    report = shadow_report(pairs_path, judge, max_pairs=None, progress=print_progress)

Reads `<log-dir>/shadow/pairs.jsonl` (`records.shadow.ShadowPair`, written by `tuneloop proxy
--shadow`; a last line still being written is left for the next report), asks the judge
`judge.compare(messages, baseline=champion, candidate=challenger)` for each pair — both orders
inside `compare`, so a position-biased judge yields ties, not wins — and counts wins, ties and
losses of the challenger. Pairs whose challenger failed are skipped and counted; so are pairs
the judge could not judge (unparsable or unreachable after its retries); a judge that refuses
(401/403/404, `JudgeRefused`) stops the report. `--max-pairs N` judges the first N pairs that
have both answers, in file order (a budget on the judge's cost).

The figures (`paired_preference.py`, pure): the preference rate (wins + ties/2) / n with a
percentile bootstrap interval over pairs, and the exact two-sided sign test of wins against
losses.

Deliberately diagnostic: the pairs are whatever users asked, not the sealed fresh slice; the
judge's measured error is not carried in; nothing here writes the ledger or promotes. The
report says so in its banner. Written atomically (`shadow-report.json`, the `ShadowReport`
record, and `shadow-report.md`) only once every pair is judged, so a refused or interrupted
report leaves nothing half-written.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from tuneloop.errors import InputError
from tuneloop.records import parse_record
from tuneloop.records.judge import JudgeIdentity
from tuneloop.records.shadow import ShadowPair, ShadowReport
from tuneloop.scorers.judge import JudgeError, JudgeUnavailable, JudgeUnparsable, Preference
from tuneloop.shadow.paired_preference import preference_figures

JUDGE_CONCURRENCY = 8
"""Pairs judged at once (each pair is two judge requests, one per order)."""

BANNER = (
    "Diagnostic evidence beside the gate, never a promotion: these pairs are live traffic the "
    "proxy mirrored, not the sealed fresh slice, and the judge's own error is not corrected "
    "here. Only `tuneloop gate` on the fresh slice decides whether the challenger ships."
)

Progress = Callable[[int, int], None]
"""Called with (pairs judged so far, pairs to judge)."""


class PairJudge(Protocol):
    """What the report needs of a judge (`tuneloop.scorers.judge.Judge` is one)."""

    @property
    def identity(self) -> JudgeIdentity: ...

    def compare(
        self, messages: Sequence[Mapping[str, Any]], baseline: str, candidate: str
    ) -> Preference: ...


class PairsRead(NamedTuple):
    """The complete lines of a pairs file, parsed."""

    pairs: list[ShadowPair]
    sha256: str
    """sha256 of the bytes read (complete lines only)."""


@dataclass
class Tally:
    """The judge's outcomes over the pairs."""

    wins: int = 0
    ties: int = 0
    losses: int = 0
    values: list[float] = field(default_factory=list)
    """Per judged pair: 1 win, 0.5 tie, 0 loss (the preference's sample)."""
    judge_errors: int = 0
    cost_usd: float = 0.0
    priced: int = 0
    """Pairs whose judgements had a price (both orders)."""
    cached: int = 0

    def add(self, preference: Preference) -> None:
        outcome = preference.outcome
        self.wins += outcome == "candidate"
        self.ties += outcome == "tie"
        self.losses += outcome == "baseline"
        self.values.append(preference.value)
        self.cached += preference.cached
        if preference.cost_usd is not None:
            self.cost_usd += preference.cost_usd
            self.priced += 1


def read_pairs(path: Path) -> PairsRead:
    """Every complete line of `path` as a `ShadowPair`; errors name the file and line."""
    data = path.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]  # a line still being appended waits
    pairs = []
    for lineno, line in enumerate(complete.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            row = json.loads(line)
        except ValueError as err:
            raise InputError(f"{where}: invalid JSON: {err}") from None
        pairs.append(parse_record(row, ShadowPair, where))
    return PairsRead(pairs, hashlib.sha256(complete).hexdigest())


def judge_pairs(
    pairs: Sequence[ShadowPair],
    judge: PairJudge,
    progress: Progress | None = None,
    concurrency: int = JUDGE_CONCURRENCY,
) -> Tally:
    """Each pair judged (champion = baseline, challenger = candidate), `concurrency` pairs at
    a time (the judge is thread-safe), counted in pair order; pairs the judge cannot judge
    are counted. `JudgeRefused` propagates: a wrong endpoint or key stops the rest."""

    def one(pair: ShadowPair) -> Preference | JudgeError | None:
        champion, challenger = pair.champion.text, pair.challenger.text
        if champion is None or challenger is None:
            return None  # nothing to compare (the caller counts challenger errors)
        try:
            return judge.compare(pair.messages, baseline=champion, candidate=challenger)
        except (JudgeUnparsable, JudgeUnavailable) as err:
            return err

    tally = Tally()
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="shadow-judge")
    try:
        for done, got in enumerate(pool.map(one, pairs), start=1):
            if isinstance(got, JudgeError):
                tally.judge_errors += 1
            elif got is not None:
                tally.add(got)
            if progress is not None:
                progress(done, len(pairs))
    finally:
        pool.shutdown(cancel_futures=True)
    return tally


def shadow_report(
    pairs_path: Path,
    judge: PairJudge,
    *,
    max_pairs: int | None = None,
    progress: Progress | None = None,
) -> ShadowReport:
    """The report over `pairs_path` (module docstring); writes nothing."""
    read = read_pairs(pairs_path)
    answered = [p for p in read.pairs if p.challenger.text is not None]
    errors = len(read.pairs) - len(answered)
    chosen = answered if max_pairs is None else answered[:max_pairs]
    tally = judge_pairs(chosen, judge, progress)
    figures = preference_figures(tally.values, tally.wins, tally.losses)
    return ShadowReport(
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        pairs_file=str(pairs_path),
        pairs_sha256=read.sha256,
        challenger_models=sorted({p.challenger_model for p in chosen}),
        champion_models=sorted({p.model for p in chosen if p.model is not None}),
        n_pairs=len(read.pairs),
        n_judged=len(tally.values),
        n_challenger_errors=errors,
        n_judge_errors=tally.judge_errors,
        wins=tally.wins,
        ties=tally.ties,
        losses=tally.losses,
        preference=figures.preference,
        ci_low=figures.ci_low,
        ci_high=figures.ci_high,
        confidence=figures.confidence,
        ci_method=figures.method,
        sign_test_p=figures.sign_test_p,
        judge=judge.identity,
        judge_cost_usd=tally.cost_usd if tally.priced else None,
        judge_cached=tally.cached,
        banner=BANNER,
    )
