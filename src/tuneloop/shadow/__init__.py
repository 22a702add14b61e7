"""Shadow evaluation: the challenger's answers to mirrored live traffic, judged pairwise.

    tuneloop proxy --upstream URL --log-dir traffic/ --shadow URL2 --shadow-model challenger
    tuneloop shadow report --log-dir traffic/ --judge judge.yaml --out runs/shadow
    from tuneloop.shadow import shadow_report, write_report

The proxy stores the pairs (`serve/proxy/mirror.py`, `records.shadow.ShadowPair`); this phase
reads them: `report` (read, judge in both orders, count), `paired_preference` (the preference
rate, its bootstrap interval, the sign test), `report_md` (the record and its page),
`command` (`tuneloop shadow report`). Diagnostic evidence beside the gate, never a promotion.
The face is lazy, so that the CLI's help loads no numpy or HTTP client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tuneloop.lazy import lazy_exports

if TYPE_CHECKING:
    from tuneloop.shadow.paired_preference import PreferenceFigures, preference_figures
    from tuneloop.shadow.report import BANNER, PairJudge, judge_pairs, read_pairs, shadow_report
    from tuneloop.shadow.report_md import render, write_report

__all__ = [
    "BANNER",
    "PairJudge",
    "PreferenceFigures",
    "judge_pairs",
    "preference_figures",
    "read_pairs",
    "render",
    "shadow_report",
    "write_report",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "BANNER": "report",
        "PairJudge": "report",
        "PreferenceFigures": "paired_preference",
        "judge_pairs": "report",
        "preference_figures": "paired_preference",
        "read_pairs": "report",
        "render": "report_md",
        "shadow_report": "report",
        "write_report": "report_md",
    },
)
