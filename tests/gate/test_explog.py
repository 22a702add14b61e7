"""EXPERIMENT-LOG.md entries (gate/explog.py): a verdict's entry, unchanged without a
portfolio or a cascade, a portfolio round's challengers closing it, and a cascade round's
composition and gate-slice figures after its bar (tests/cascade_fixture.py)."""

from __future__ import annotations

from copy import deepcopy
from pathlib import Path
from typing import Any

from tuneloop.gate import Bar, adjudicate
from tuneloop.gate.explog import cascade_lines, log_path, portfolio_lines, verdict_entry
from tuneloop.records import write_jsonl
from tuneloop.records.cascade_table import CascadeRound, gate_figures
from tuneloop.records.portfolio_table import markdown_table
from tuneloop.samplelog import load_sample_log

from ..cascade_fixture import as_cascade, as_champion, composition_record
from ..portfolio_fixture import DEFAULT, FAILED, SELECTED, portfolio_record
from .conftest import LogMaker, improved, item_id

_VERDICT: dict[str, Any] = {
    "decided_at": "2026-01-01T01:00:00+00:00",
    "run_id": "r1",
    "decision": "promote",
    "slice": "gate",
    "suite_revision": "f" * 64,
    "stats": {
        "n_items": 90,
        "delta": 0.1234,
        "delta_lower_bound": 0.05,
        "bound_confidence": 0.95,
        "p_value": 0.0012,
        "wins": 20,
        "losses": 5,
        "ties": 65,
    },
    "bar": {
        "metric": "mean",
        "margin": 0.02,
        "alpha": 0.05,
        "min_items": 50,
        "max_missing_fraction": 0.05,
        "non_inferiority_epsilon": None,
        "test": "permutation",
    },
    "bar_sha256": "e" * 64,
    "champion": {"model": "base", "mean": 0.5, "missing_fraction": 0.0},
    "challenger": {"model": "chall", "mean": 0.6234, "missing_fraction": 0.01},
    "champion_version": 1,
    "reasons": [],
    "warnings": [],
    "new_champion_version": None,
}


def _verdicts() -> list[dict[str, Any]]:
    rejected = deepcopy(_VERDICT) | {
        "run_id": "r2",
        "decision": "reject",
        "reasons": ["margin: Δ below 0.02", "p above α"],
        "warnings": ["the bar was fixed after the run"],
        "champion_version": None,
        "slice_reuse": {"previous_runs": ["r0", "r1"]},
    }
    rejected["stats"] = rejected["stats"] | {"delta_lower_bound": None}
    crowned = deepcopy(_VERDICT) | {
        "run_id": "r3",
        "new_champion_version": 2,
        "challenger_descriptor": {"kind": "single", "path": "/m", "sha256": "ab" * 32},
    }
    return [deepcopy(_VERDICT), rejected, crowned]


VERDICTS = _verdicts()

EXPECTED_R1 = """\
## 2026-01-01T01:00:00+00:00 — run `r1` — **promote**

- Slice consumed: slice `gate` (suite ffffffffffff, 90 items)
- Champion (v1): `base` — mean 0.5000, 0.00% unscored
- Challenger: `chall` — mean 0.6234, 1.00% unscored
- Δ = +0.1234, 95% lower bound +0.0500; one-sided permutation p = 0.0012; wins/losses/ties 20/5/65
- Bar: margin 0.02, α 0.05, min_items 50, max missing 0.05, non-inferiority ε off (bar eeeeeeeeeeee)
- All conditions passed
- Promotion pending: the champion changes once the run is archived
"""


def test_without_a_portfolio_the_entry_is_unchanged() -> None:
    assert verdict_entry(VERDICTS[0]) == EXPECTED_R1
    for v in VERDICTS:
        assert verdict_entry(v, None) == verdict_entry(v) == verdict_entry(v, None, None)
        assert "Challengers" not in verdict_entry(v)
        assert "Cascade" not in verdict_entry(v) and "gate slice" not in verdict_entry(v)


def test_portfolio_lines_list_every_challenger() -> None:
    record = portfolio_record()
    lines = portfolio_lines(record)
    assert lines[0] == (
        "Rule `default_stays` (sha256 c0ffee000000, sealed 2026-01-01T00:00:00+00:00); "
        "selection slice `validation`, 40 items; budget 600 s / 400 eval samples, estimated "
        "480 s, $0.00, 120 eval samples; spend approval: standing (max_seconds 900)"
    )
    table = [line for line in lines if line.startswith("|")]
    assert table[0] == (
        "| challenger | recipe | est. train s | train s | validation mean | vs default "
        "| status | selected / why |"
    )
    assert table[1] == "|---|---|---|---|---|---|---|---|"
    rows = dict(zip([DEFAULT, SELECTED, FAILED], table[2:], strict=True))
    assert rows[DEFAULT] == (
        f"| `{DEFAULT}` (default) | learning_rate=0.001 | 120 | 131.4 | 0.6200 | default | done "
        "| the default: stays unless another beats it |"
    )
    assert rows[SELECTED] == (
        f"| `{SELECTED}` | learning_rate=0.0003, lora.r=32 | 120 | 127.9 | 0.7000 "
        "| +0.0800, W/L/T 9/2/29, sign p 0.0213 | done | ✓ beats the default: +0.0800, sign p "
        "0.0213 |"
    )
    failed = rows[FAILED]
    assert failed.startswith(f"| `{FAILED}` | method=dpo, dpo.beta=0.3 | 240 | — | — | — |")
    # the error is shortened, and its `|` escaped so the row keeps its columns
    assert "| failed: train: CUDA out of memory \\| tried to allocate" in failed
    assert "…" in failed and "reference model" not in failed
    assert lines[-1].startswith(f"Rule `default_stays` selected `{SELECTED}` of 3 challengers")
    assert "(1 failed and skipped)" in lines[-1]


def test_the_verdict_entry_ends_with_the_challengers() -> None:
    record = portfolio_record()
    plain = verdict_entry(VERDICTS[0])
    entry = verdict_entry(VERDICTS[0], portfolio=record)
    assert entry.startswith(plain)  # the gate decision and the slice consumed, as before
    added = entry[len(plain) :].splitlines()
    assert added[:2] == ["- Challengers:", ""]
    # indented under the list item: its paragraph and table belong to it
    assert added[2:] == [f"  {x}" if x else "" for x in portfolio_lines(record)]


def test_gate_p_column_under_adjudicate_all() -> None:
    record = portfolio_record()
    rows = [
        c.model_copy(update={"gate_p": 0.01 * (i + 1)}) for i, c in enumerate(record.challengers)
    ]
    record = record.model_copy(update={"adjudicate": "all", "challengers": rows})
    table = [line for line in portfolio_lines(record) if line.startswith("|")]
    assert "| vs default | gate p | status |" in table[0]
    assert "| 0.02 | done |" in table[3]
    assert "`holm (adjudicate: all)`" in portfolio_lines(record)[0]


def test_markdown_table_escapes_pipes() -> None:
    assert markdown_table(["a|b"], [["x|y"]]) == ["| a\\|b |", "|---|", "| x\\|y |"]


CASCADE_LINES = [
    "- Cascade chosen on the validation slice: thresholds -0.8 (served at -0.9) → 80.0% at "
    "1.4e-05 USD per item; items answered: `small` 70%, `big` 30%",
    "- Answered on the gate slice: `small` 7 (70.0%), `big` 2 (20.0%), no answer 1 of 10 items",
    "- Mean cost per item on the gate slice: champion (pre) 4e-05 USD (10 items), cascade "
    "(post) 1.09e-05 USD (9 items); 0.272 × the champion's",
]


def _cascade_round(item_ids: list[str], pre: Path, post: Path) -> CascadeRound:
    _, pre_rows = load_sample_log(pre)
    _, post_rows = load_sample_log(post)
    return CascadeRound(
        composition_record(), gate_figures(["small", "big"], pre_rows, post_rows, item_ids)
    )


def _cascade_logs(make_log: LogMaker, n: int, suffix: str = "") -> tuple[Path, Path]:
    """The gate tests' logs on n items (one sample each), priced and answered as in
    tests/cascade_fixture.py."""
    champ = make_log(f"champ{suffix}", [[0.0]] * n)
    chall = make_log(f"chall{suffix}", improved(n, every=2, n_samples=1))
    for log, arm in ((champ, "pre"), (chall, "post")):
        _, rows = load_sample_log(log)
        cast = [as_champion(r) if arm == "pre" else as_cascade(r, i) for i, r in enumerate(rows)]
        write_jsonl(log / "samples.jsonl", [r.to_json() for r in cast])
    return champ, chall


def test_a_cascade_round_says_its_thresholds_coverage_and_cost_after_the_bar(
    make_log: LogMaker,
) -> None:
    champ, chall = _cascade_logs(make_log, 10)
    cascade = _cascade_round([item_id(i) for i in range(10)], champ, chall)
    assert cascade_lines(cascade) == CASCADE_LINES
    plain = verdict_entry(VERDICTS[0]).splitlines()
    entry = verdict_entry(VERDICTS[0], cascade=cascade).splitlines()
    at = next(i for i, line in enumerate(plain) if line.startswith("- Bar: ")) + 1
    assert entry == [*plain[:at], *CASCADE_LINES, *plain[at:]]
    # no `$` on the lines: two of them on one line would render as math
    assert not any("$" in line for line in CASCADE_LINES)


def test_the_gate_writes_a_cascade_round_s_entry(make_log: LogMaker, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.db"
    champ, chall = _cascade_logs(make_log, 60)
    ids = [item_id(i) for i in range(60)]
    adjudicate(
        champ,
        chall,
        bar=Bar(),
        slice_name="gate",
        item_ids=ids,
        ledger_path=ledger,
        out_dir=tmp_path / "one",
        run_id="one",
    )
    plain = log_path(ledger).read_text()
    assert "Cascade chosen" not in plain and "gate slice" not in plain
    # a second round, on fresh items, with the composition it served
    champ, chall = _cascade_logs(make_log, 120, suffix="2")
    adjudicate(
        champ,
        chall,
        bar=Bar(),
        slice_name="gate",
        item_ids=[item_id(i) for i in range(60, 120)],
        ledger_path=ledger,
        out_dir=tmp_path / "two",
        run_id="two",
        composition=composition_record(),
    )
    entry = log_path(ledger).read_text()[len(plain) :].splitlines()
    assert "run `two`" in entry[2]
    assert CASCADE_LINES[0] in entry
    assert (
        "- Answered on the gate slice: `small` 42 (70.0%), `big` 12 (20.0%), no answer 6 of "
        "60 items" in entry
    )
    cost = next(line for line in entry if line.startswith("- Mean cost per item"))
    assert cost.startswith("- Mean cost per item on the gate slice: champion (pre) 4e-05 USD (60")
