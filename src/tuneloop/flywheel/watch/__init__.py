"""The watcher: `tuneloop watch`, `tuneloop approve`, and what they keep and read.

- `watcher`: `Watcher` — look, decide, run one round at a time, remember everything;
- `round`: its plain values (`Site`, `Work`, `Step`), a round's cost estimate and exit;
- `look`: which round came last, what it left, and a look not repeated on unchanged inputs;
- `state`: `<workdir>/flywheel.db` — rounds, decisions, pacing; the trigger record;
- `process`: the one-per-ledger lock, signals, the round process;
- `command`: `tuneloop watch` and `tuneloop approve` (a watcher round's spend, or a promotion).

Code outside this package imports from here; the modules import their siblings directly.
"""

from tuneloop.flywheel.watch.command import approve, audit_part, build_site, round_command, watch
from tuneloop.flywheel.watch.look import (
    Looker,
    last_round,
    last_round_of,
    ledger_rounds,
    round_artifacts,
    round_dir,
)
from tuneloop.flywheel.watch.process import WatchLock, describe_holder, lock_path
from tuneloop.flywheel.watch.round import (
    Site,
    Step,
    Work,
    classify_exit,
    estimate_cost,
    new_row,
)
from tuneloop.flywheel.watch.state import (
    AttemptEnd,
    CostEstimate,
    Decision,
    RoundRow,
    RoundStatus,
    RoundTrigger,
    WatchState,
    open_watch_state,
)
from tuneloop.flywheel.watch.watcher import Watcher

__all__ = [
    "AttemptEnd",
    "CostEstimate",
    "Decision",
    "Looker",
    "RoundRow",
    "RoundStatus",
    "RoundTrigger",
    "Site",
    "Step",
    "WatchLock",
    "WatchState",
    "Watcher",
    "Work",
    "approve",
    "audit_part",
    "build_site",
    "classify_exit",
    "describe_holder",
    "estimate_cost",
    "last_round",
    "last_round_of",
    "ledger_rounds",
    "lock_path",
    "new_row",
    "open_watch_state",
    "round_artifacts",
    "round_command",
    "round_dir",
    "watch",
]
