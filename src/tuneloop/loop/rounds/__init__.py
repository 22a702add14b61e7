"""Rounds: one run of the loop from the current champion, on the next fresh gate slice.

    tuneloop run flywheel.yaml --round next        # or: base_model: champion in the config
    tuneloop run flywheel.yaml --round r0003       # resume r0003 (a new id: only the next)

A round runs in `<workdir>/rounds/<id>/` with its own run id and archive. Before any compute
it fixes its lineage in `round.json` and in the ledger: the parent champion (version and
descriptor; on the first round a *bootstrap* champion from `flywheel.bootstrap` or a
`base_model` path, recorded with `via: bootstrap` — a null baseline, not a won decision), the
gate slice (the first `gate-NNN` of `suite.rolling` none of whose items a verdict has looked
at) and the trigger that called for it. The round's loop is the ordinary one on a derived
config: base model = the champion's folder, `eval.slice = audit+gate-NNN`, `gate.slice =
gate-NNN` (so the report covers the audit part), the ledger and archive root shared by all
rounds. A round id that has a `round.json` is resumed exactly as it was planned.

Every end of a round appends an outcome to the ledger and one entry to EXPERIMENT-LOG.md —
promoted, rejected, awaiting approval, refused before training (with the reason), failed or
interrupted — with the trigger, data counts per corpus step, recipe, Δ with CI and p, the
verdict and why, and time and cost. Nothing is rewritten.

- `lineage`: `RoundRecord` (`round.json`), round ids, planning and committing a round, its config;
- `preview`: the next round seen before it exists — what `tuneloop check` and `run` preflight;
- `power`: whether the next round's gate can detect the target effect (`GatePower`; a round
  held for power is refused before compute);
- `outcome`: how a round ended — its `RoundOutcome` in the ledger, its EXPERIMENT-LOG.md entry;
- `driver`: `tuneloop run --round` — plan, check, record and run one round, then its outcome.

Code outside this package imports from here, except the driver: it runs the loop (`Runner`),
while the loop's own phases read a round's lineage from here (`handover`, `track_facts`), so
re-exporting it would close an import cycle. `tuneloop run` (`loop/command.py`) imports it as
`tuneloop.loop.rounds.driver`. The modules import their siblings directly.
"""

from tuneloop.loop.rounds.lineage import (
    RoundRecord,
    check_round_id,
    commit_round,
    ensure_champion,
    existing_round,
    next_round_id,
    plan_round,
    read_trigger,
    require_rolling,
    round_config,
    round_layout,
)
from tuneloop.loop.rounds.outcome import TERMINAL, record_outcome
from tuneloop.loop.rounds.preview import checked_config, preflight_errors, preview_round

__all__ = [
    "TERMINAL",
    "RoundRecord",
    "check_round_id",
    "checked_config",
    "commit_round",
    "ensure_champion",
    "existing_round",
    "next_round_id",
    "plan_round",
    "preflight_errors",
    "preview_round",
    "read_trigger",
    "record_outcome",
    "require_rolling",
    "round_config",
    "round_layout",
]
