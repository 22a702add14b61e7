"""One cascade round's artifacts, built by hand, for the tests of what shows them: the
experiment log (tests/gate/test_explog.py), the capstone (tests/report/test_cascade_section.py)
and the words both use (tests/records/test_cascade_table.py).

The composition (`records.composition.CompositionRecord`): `small` → `big` on 20 validation
items under `max_accuracy_under_cost` with a budget of 2e-05 USD per item; the chosen setting
hands off below -0.8 (served at -0.9), 80% accurate at 1.4e-05 USD per item with `small`
answering 70% of the items. On the gate slice the cascade's rows say, per item index i:
i % 10 < 7 answered by `small` (2e-06 USD), 7 and 8 by `big` after `small` (4.2e-05 USD),
9 no answer (missing, no cost); the champion's rows cost 4e-05 USD each.

`make_cascade_round(workdir)` turns a finished round of fake model phases into what a cascade
round leaves: the composition and its frontier in compose/, and the arms' rows rewritten (the
gate slice's items numbered by their place in the verdict's sorted slice).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from tuneloop.cascade.plot import frontier_svg
from tuneloop.gate.verdict_record import GateVerdict
from tuneloop.loop.layout import RunLayout
from tuneloop.records import atomic_write_text, read_record, write_jsonl, write_record
from tuneloop.records.composition import CompositionRecord, Point, TierFigures
from tuneloop.samplelog import EvalSummary, SampleRow, SamplingParams, load_sample_log
from tuneloop.tiers import CascadeTrace, TierStep

SMALL_USD, BIG_USD, CHAMPION_USD = 2e-6, 4e-5, 4e-5
"""Per answer: `small`'s, `big`'s (on top of `small`'s when handed on), the champion's."""
REASON = "the most accurate setting at most $2e-05 per item: 80.0% at $1.4e-05"


def composition_record() -> CompositionRecord:
    front = [
        Point(thresholds=[-3.0], accuracy=0.55, cost=2e-6, coverage=[1.0, 0.0]),
        Point(thresholds=[-0.8], accuracy=0.8, cost=1.4e-5, coverage=[0.7, 0.3]),
        Point(thresholds=[math.inf], accuracy=0.85, cost=4.2e-5, coverage=[0.0, 1.0]),
    ]
    tiers = [
        TierFigures(
            name="small",
            log="compose/tiers/small",
            log_sha256="1" * 64,
            model="small-model",
            usd_per_1m=0.2,
            accuracy=0.55,
            cost=2e-6,
        ),
        TierFigures(
            name="big",
            log="compose/tiers/big",
            log_sha256="2" * 64,
            model="big-model",
            usd_per_1m=4.0,
            accuracy=0.85,
            cost=4e-5,
        ),
    ]
    descriptor = {
        "kind": "cascade",
        "name": "small-big",
        "components": [
            {
                "role": "tier-1",
                "name": "small",
                "path": "/m/small",
                "usd_per_1m": 0.2,
                "signal": "mean_logprob",
                "threshold": -0.9,
            },
            {"role": "tier-2", "name": "big", "path": "/m/big", "usd_per_1m": 4.0},
        ],
        "composition_sha256": "ab" * 32,
    }
    return CompositionRecord(
        signal="mean_logprob",
        objective="max_accuracy_under_cost",
        budget=2e-5,
        epsilon=0.0,
        n_items=20,
        item_ids_sha256="3" * 64,
        tiers=tiers,
        frontier=front,
        chosen=front[1],
        chosen_sha256="ab" * 32,
        reason=REASON,
        descriptor=descriptor,
    )


def write_composition(folder: Path) -> tuple[Path, Path]:
    """composition.json and frontier.svg in `folder`, as the compose phase writes them."""
    record = composition_record()
    write_record(folder / "composition.json", record)
    atomic_write_text(folder / "frontier.svg", frontier_svg(record))
    return folder / "composition.json", folder / "frontier.svg"


def tier_of(index: int) -> str | None:
    """The tier that answered the item with this index on the gate slice (None: none)."""
    return "small" if index % 10 < 7 else ("big" if index % 10 < 9 else None)


def _step(name: str, kept: bool, usd: float) -> TierStep:
    return TierStep(name=name, kept=kept, latency_s=0.01, cost_usd=usd)


def as_cascade(row: SampleRow, index: int) -> SampleRow:
    """The row as the served cascade answered it (module docstring)."""
    tier = tier_of(index)
    if tier is None:
        update = {"status": "missing", "completion": None, "score": None, "cost_usd": None}
        return row.model_copy(update=update)
    steps = [_step("small", tier == "small", SMALL_USD)]
    if tier == "big":
        steps.append(_step("big", True, BIG_USD))
    usd = sum(s.cost_usd for s in steps)
    trace = CascadeTrace(tier=tier, cost_usd=usd, steps=steps)
    return row.model_copy(update={"cascade": trace, "cost_usd": usd})


def as_champion(row: SampleRow) -> SampleRow:
    return row.model_copy(update={"cost_usd": CHAMPION_USD})


def write_arm(folder: Path, item_ids: Sequence[str], *, cascade: bool) -> Path:
    """A one-sample-per-item log of `item_ids`: the cascade's (`as_cascade`) or the
    champion's (`as_champion`)."""
    rows = []
    for i, item in enumerate(item_ids):
        row = SampleRow(
            suite_revision="rev",
            item_id=item,
            sample_index=0,
            model="cascade" if cascade else "champion",
            seed=0,
            completion="1",
            score=1.0,
            scorer="numeric",
        )
        rows.append((as_cascade(row, i) if cascade else as_champion(row)).to_json())
    write_jsonl(folder / "samples.jsonl", rows)
    summary = EvalSummary(
        suite_path="suite.jsonl",
        suite_revision="rev",
        item_ids=list(item_ids),
        model="cascade" if cascade else "champion",
        endpoint="http://127.0.0.1:0/v1",
        sampling=SamplingParams(n_samples=1, temperature=0.0, max_tokens=8),
    )
    write_record(folder / "summary.json", summary)
    return folder


def make_cascade_round(workdir: Path) -> None:
    """The round in `workdir`, as a cascade round left it (module docstring)."""
    run = RunLayout(workdir)
    run.compose.mkdir(exist_ok=True)
    write_composition(run.compose)
    gate = sorted(read_record(run.verdict, GateVerdict).item_ids)
    place = {item: i for i, item in enumerate(gate)}
    for log, cascade in ((run.eval_pre, False), (run.eval_post, True)):
        _, rows = load_sample_log(log)
        cast = [as_cascade(r, place.get(r.item_id, 0)) if cascade else as_champion(r) for r in rows]
        write_jsonl(log / "samples.jsonl", [r.to_json() for r in cast])
