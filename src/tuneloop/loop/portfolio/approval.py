"""A person's sign-off on what a portfolio round will spend, before it spends anything.

`portfolio.approval.spend`:

- `false`: no sign-off (the budget still refuses a round over it).
- `true`: the run stops before its first phase (exit 1) and prints every challenger with its
  estimate and a spend key, `spend-<12 hex>`; `tuneloop approve KEY --config loop.yaml`
  records the approval in the ledger, and the next `tuneloop run` goes ahead.
- `{standing: {max_seconds, max_usd}}`: a round whose estimate fits under the limits is
  approved without asking, and the ledger records that it was (`how`: standing, with the
  limits); a round over them waits as with `true`.

The key is the sha256 of what is approved: the workdir, the base model, every challenger
with its overrides, and the estimate. A changed config is a new key, so an approval covers
exactly the spend a person saw. `approve_spend` refuses a key the config no longer makes.
Approvals are ledger rows (`spend_approvals`), inserted once, never changed.
"""

from __future__ import annotations

import getpass

from tuneloop.config import LoopConfig
from tuneloop.config.portfolio import StandingSpend
from tuneloop.errors import AwaitingApproval, InputError
from tuneloop.gate.ledger import open_ledger
from tuneloop.loop.layout import ledger_path
from tuneloop.loop.portfolio.budget import RoundEstimate
from tuneloop.loop.portfolio.challengers import Challenger
from tuneloop.records import canonical_json, sha256_bytes

NOT_REQUIRED = "not required"


def spend_key(cfg: LoopConfig, challengers: list[Challenger], found: RoundEstimate) -> str:
    what = {
        "workdir": str(cfg.workdir),
        "base_model": str(cfg.base_model),
        "challengers": {c.name: c.overrides for c in challengers},
        "estimate": found.summary(),
    }
    return "spend-" + sha256_bytes(canonical_json(what).encode())[:12]


def approved_how(
    cfg: LoopConfig,
    challengers: list[Challenger],
    found: RoundEstimate,
    at: str,
    config_name: str = "CONFIG",
    *,
    record: bool = True,
) -> str:
    """How the round's spend is approved, in words; `AwaitingApproval` (exit 1) when it is
    not. A standing approval it fits under is recorded in the ledger (with `record`)."""
    assert cfg.portfolio is not None
    spend = cfg.portfolio.approval.spend
    if spend is False:
        return NOT_REQUIRED
    key = spend_key(cfg, challengers, found)
    db = ledger_path(cfg)
    if db.exists():
        with open_ledger(db) as ledger:
            done = ledger.spend_approval(key)
        if done is not None:
            return f"{done.how} at {done.approved_at} ({key})"
    if isinstance(spend, StandingSpend) and _fits(spend, found):
        s = spend.standing
        usd = "" if s.max_usd is None else f", ≤ ${s.max_usd:g}"
        how = f"standing (≤ {s.max_seconds:g} s{usd})"
        if record:
            with open_ledger(db) as ledger, ledger.transaction():
                if ledger.spend_approval(key) is None:
                    ledger.add_spend_approval(key, at, how, found.summary())
        return f"{how} at {at} ({key})"
    over = " (over the standing approval's limits)" if isinstance(spend, StandingSpend) else ""
    raise AwaitingApproval(
        f"the round awaits approval of its spend{over}, before anything runs:\n"
        + "\n".join(found.lines())
        + f"\napprove with: tuneloop approve {key} --config {config_name}"
    )


def _fits(spend: StandingSpend, found: RoundEstimate) -> bool:
    s = spend.standing
    if found.train_seconds > s.max_seconds:
        return False
    return s.max_usd is None or (found.usd is not None and found.usd <= s.max_usd)


def approve_spend(
    cfg: LoopConfig, challengers: list[Challenger], found: RoundEstimate, key: str, at: str
) -> str:
    """Record a person's approval of `key`, which must be the spend the config makes now."""
    now = spend_key(cfg, challengers, found)
    if key != now:
        raise InputError(
            f"{key}: the config's spend is now {now} (its challengers, base or estimate "
            "changed since that key was printed); run `tuneloop run` again to see the new "
            f"estimate, then approve {now}"
        )
    how = f"by {getpass.getuser()}"
    with open_ledger(ledger_path(cfg)) as ledger, ledger.transaction():
        if ledger.spend_approval(key) is None:
            ledger.add_spend_approval(key, at, how, found.summary())
    return how
