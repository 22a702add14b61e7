"""Champion versions after a decision: promote, approve, register a base, reset, show.

`promote(ledger, verdict, descriptor)` is the LAST step of a loop round: the caller has put
the challenger in its final place (the archive) and verified it; only then does the ledger
name it champion (decision `promote`), or record where it lies so that a later `approve` can
(`awaiting_approval`). It is idempotent: a resumed round finds its champion version again.
A crash before it leaves the old champion in charge.

`approve(run_id)` completes a verdict that stopped at `awaiting_approval`: the descriptor its
round recorded as final becomes the next champion version, and the approval is recorded
(once — approving twice is refused). `register_champion` records a champion that did not come
through the gate (the base model a loop starts from) so that later verdicts can name it.
`reset_one_look` starts a new one-look history on purpose, recording who and why.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tuneloop.errors import InputError
from tuneloop.gate.champion import parse_descriptor
from tuneloop.gate.explog import append_entry, approval_entry, log_path, promotion_entry
from tuneloop.gate.ledger import Champion, open_ledger
from tuneloop.gate.verdict import GateVerdict, now
from tuneloop.records import Record


class Promotion(Record):
    """What the last step of a round did with its verdict."""

    KIND = "promotion"
    VERSION = 1

    run_id: str
    """The run whose verdict this is."""
    decision: str
    """The verdict's decision."""
    champion_version: int | None
    """The champion version the promotion created (or found again); None unless promoted."""
    descriptor: dict[str, Any]
    """Where the challenger lies, verified, in its final place."""
    at: str
    """ISO-8601 UTC time of this step."""


def promote(ledger_path: Path, verdict: GateVerdict, descriptor: dict[str, Any]) -> Promotion:
    """Name the challenger champion (decision promote) now that it is in its final place."""
    data = parse_descriptor(descriptor, "challenger descriptor").model_dump(mode="json")
    at = now()
    version: int | None = None
    with open_ledger(ledger_path) as ledger, ledger.transaction():
        ledger.add_promotable(verdict.run_id, data, at)
        if verdict.decision == "promote":
            found = ledger.champion_of_run(verdict.run_id)
            version = found.version if found else None
            if version is None:
                version = ledger.add_champion(data, run_id=verdict.run_id, at=at, via="gate")
                _log_promotion(ledger_path, verdict.run_id, at, version, data)
    return Promotion(
        run_id=verdict.run_id,
        decision=verdict.decision,
        champion_version=version,
        descriptor=data,
        at=at,
    )


def _log_promotion(
    ledger_path: Path, run_id: str, at: str, version: int, descriptor: dict[str, Any]
) -> None:
    append_entry(
        log_path(ledger_path),
        f"promotion {run_id}",
        promotion_entry(run_id, at, version, descriptor),
    )


def default_user() -> str:
    """Who ran a command, for the record (login name, else the uid)."""
    try:
        return os.getlogin()
    except OSError:
        import pwd

        try:
            return pwd.getpwuid(os.getuid()).pw_name
        except KeyError:
            return os.environ.get("USER") or f"uid {os.getuid()}"


def reset_one_look(ledger_path: Path, who: str, reason: str) -> str:
    """Forget earlier looks for the one-look rule, on purpose and on the record."""
    ledger_path = Path(ledger_path)
    if not reason.strip():
        raise InputError("a reset needs a reason (--reason): it goes into the experiment log")
    if not ledger_path.exists():
        raise InputError(f"{ledger_path}: no ledger here; nothing to reset")
    at = now()
    with open_ledger(ledger_path) as ledger, ledger.transaction():
        ledger.add_reset(at, who, reason)
    append_entry(
        log_path(ledger_path),
        f"reset {at}",
        f"## {at} — one-look history reset by {who}\n\n- Reason: {reason}\n"
        "- Verdicts, champions and consumed items before this point stay in the ledger.\n",
    )
    return at


def approve(run_id: str, ledger_path: Path) -> int:
    """Promote the challenger of `run_id`'s awaiting verdict; returns the new champion version."""
    ledger_path = Path(ledger_path)
    if not ledger_path.exists():
        raise InputError(
            f"{ledger_path}: no ledger here; a gate (the loop's gate phase, or `tuneloop "
            "gate`) creates it"
        )
    with open_ledger(ledger_path) as ledger, ledger.transaction():
        stored = ledger.verdict(run_id)
        if stored is None:
            raise InputError(f"{ledger_path}: no verdict for run {run_id!r}")
        if stored.decision != "awaiting_approval":
            raise InputError(
                f"run {run_id!r} has decision {stored.decision!r}; only an "
                "'awaiting_approval' verdict can be approved"
            )
        done = ledger.approval(run_id)
        if done is not None:
            raise InputError(
                f"run {run_id!r} was already approved at {done.approved_at} "
                f"(champion v{done.champion_version})"
            )
        at = now()
        final = ledger.promotable(run_id)
        if final is None:
            raise InputError(
                f"run {run_id!r} has not put its challenger in its final place yet; "
                "finish its run (`tuneloop run CONFIG`: archive and promote) first"
            )
        version = ledger.add_champion(final.descriptor, run_id=run_id, at=at, via="approval")
        ledger.add_approval(run_id, at, version)
    append_entry(
        log_path(ledger_path),
        f"approval {run_id}",
        approval_entry(run_id, at, version, final.descriptor),
    )
    return version


def register_champion(ledger_path: Path, descriptor: dict[str, Any], run_id: str | None) -> int:
    """Record a champion that did not pass through the gate (e.g. the base model)."""
    data = parse_descriptor(descriptor, "champion descriptor").model_dump(mode="json")
    with open_ledger(ledger_path) as ledger, ledger.transaction():
        return ledger.add_champion(data, run_id=run_id, at=now(), via="registered")


def champion_history(ledger_path: Path) -> list[Champion]:
    """Every champion version, oldest first (empty if the ledger does not exist)."""
    ledger_path = Path(ledger_path)
    if not ledger_path.exists():
        return []
    with open_ledger(ledger_path) as ledger:
        return ledger.champions()
