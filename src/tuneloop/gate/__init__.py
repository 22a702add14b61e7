"""Phase: the promotion gate — champion vs challenger on a fresh slice, against a fixed bar.

Run it as `tuneloop gate --champion LOG --challenger LOG --slice gate --suite suite.jsonl
[--bar bar.yaml] [--ledger ledger.db]` (exit 0 promote, 1 reject or awaiting
approval, 2 input error), or from the loop via `adjudicate`. The rule itself is the pure function
`tuneloop.gate.rule.decide`; its module docstring states it precisely. The ledger
(`tuneloop.gate.ledger`: SQLite, opened with `open_ledger`, read as typed rows) refuses a second
look at a consumed slice and keeps sealed bars, champion versions, verdicts, approvals and the
flywheel's rounds; `EXPERIMENT-LOG.md` beside it (`gate.explog`) gets one Markdown entry per
round. Under a sequence rule (`gate.sequence`) the rounds of one ledger share one α, each
sealed at its α_k (`tuneloop.gate.sequence`: `round_bar`, `alpha_budget`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tuneloop.lazy import lazy_exports

if TYPE_CHECKING:
    from tuneloop.gate.bar import Bar, load_bar
    from tuneloop.gate.champion import ChampionDescriptor
    from tuneloop.gate.promotion import approve, champion_history, register_champion
    from tuneloop.gate.rule import Condition, Decision, decide, item_scores
    from tuneloop.gate.verdict import GateVerdict, adjudicate, pretest

# Exports load lazily (PEP 562) so that importing `tuneloop.gate.command` for `--help` does
# not pull numpy and scipy in through the rule.
_EXPORTS = {
    "Bar": "bar",
    "load_bar": "bar",
    "ChampionDescriptor": "champion",
    "approve": "promotion",
    "champion_history": "promotion",
    "register_champion": "promotion",
    "Condition": "rule",
    "Decision": "rule",
    "decide": "rule",
    "item_scores": "rule",
    "GateVerdict": "verdict",
    "adjudicate": "verdict",
    "pretest": "verdict",
}
__all__ = [
    "Bar",
    "ChampionDescriptor",
    "Condition",
    "Decision",
    "GateVerdict",
    "adjudicate",
    "approve",
    "champion_history",
    "decide",
    "item_scores",
    "load_bar",
    "pretest",
    "register_champion",
]


__getattr__ = lazy_exports(__name__, _EXPORTS)
