"""A round's lineage: its id, its `round.json` (`RoundRecord`) and the config it runs on.

`plan_round` fixes what a new round starts from (the champion, or the bootstrap one; the
first fresh gate slice; the trigger) reading the ledger only; `commit_round` writes
`round.json` and the ledger's start row; `round_config` derives the round's loop config.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tuneloop.cascade_spec import read_cascade
from tuneloop.config import LoopConfig
from tuneloop.config.cascade import CascadeConfig
from tuneloop.errors import InputError, read_utf8
from tuneloop.gate.ledger import Champion, Ledger, RoundStart, open_ledger
from tuneloop.gate.looks import classify
from tuneloop.loop.layout import RunLayout, archive_root, ledger_path
from tuneloop.records import (
    Record,
    atomic_write_text,
    read_record_if_exists,
    sha256_path,
    write_record,
)
from tuneloop.suite import gate_slice_name, load_suite, next_gate_slice, rolling_of
from tuneloop.suite.rolling import VALIDATION

_ID = re.compile(r"^r(\d{4,})$")


class RoundRecord(Record):
    """`round.json`: a round's lineage, fixed before any of its compute."""

    KIND = "round"
    VERSION = 1

    round_id: str
    """`r0001`, `r0002`, … in the order rounds were started."""
    started_at: str
    """ISO-8601 UTC time the round was planned."""
    config_path: str
    """The config the round was run from."""
    parent_version: int
    """The champion version the round starts from."""
    parent: dict[str, Any]
    """That champion's descriptor (its `path` is the round's base model)."""
    bootstrap: bool = False
    """True when the parent is the bootstrap champion (a null baseline, not a won decision)."""
    base_model: str
    """The base checkpoint's folder."""
    gate_slice: str
    """The rolling gate slice this round's gate looks at once (`gate-NNN`)."""
    eval_slice: str
    """What both arms are evaluated on: `audit+gate-NNN`."""
    trigger: dict[str, Any] = {}
    """Why the round ran (the watcher's trigger figures), or {} for a manual round."""


def round_layout(cfg: LoopConfig, round_id: str) -> RunLayout:
    """A round's own run layout: `<workdir>/rounds/<id>/`."""
    return RunLayout(cfg.workdir).round(round_id)


def known_round_ids(cfg: LoopConfig) -> list[str]:
    """Every round id of this config, sorted: its round folders and the ledger's rounds (a
    round refused before it was planned has a ledger row and no folder). Reads only: a
    missing ledger is not created."""
    folder = RunLayout(cfg.workdir).rounds
    ids = {p.name for p in folder.glob("r*") if _ID.match(p.name)}
    ledger = ledger_path(cfg)
    if ledger.is_file():
        with open_ledger(ledger) as opened:
            ids.update(r.round_id for r in opened.rounds() if _ID.match(r.round_id))
    return sorted(ids, key=lambda rid: int(rid[1:]))


def next_round_id(cfg: LoopConfig) -> str:
    """The id after the highest known round (`known_round_ids`; `r0001` for the first)."""
    numbers = [int(rid[1:]) for rid in known_round_ids(cfg)]
    return f"r{max(numbers, default=0) + 1:04d}"


def check_round_id(round_id: str) -> str:
    if not _ID.match(round_id):
        raise InputError(f"--round {round_id!r}: expected `next` or an id like r0001")
    return round_id


def resolve_round_id(cfg: LoopConfig, asked: str, trigger: dict[str, Any]) -> str:
    """The round `--round ASKED` names: a known round (resumed, or re-reported when it has
    ended), the next new id, or the id the watcher allocated for this trigger (its trigger
    file names it). Any other id is refused before anything is written: a typo must not
    start a round and spend a gate slice."""
    round_id = check_round_id(asked)
    known = known_round_ids(cfg)
    fresh = next_round_id(cfg)
    if round_id in known or round_id == fresh or trigger.get("round_id") == round_id:
        return round_id
    listed = ", ".join(known) if known else "none yet"
    raise InputError(
        f"--round {round_id}: no such round in {RunLayout(cfg.workdir).rounds} or the ledger "
        f"(known: {listed}); `--round next` starts the next one ({fresh})"
    )


def existing_round(cfg: LoopConfig, round_id: str) -> RoundRecord | None:
    return read_record_if_exists(round_layout(cfg, round_id).round_file, RoundRecord)


def plan_round(
    cfg: LoopConfig, config_path: Path, round_id: str, trigger: dict[str, Any]
) -> RoundRecord:
    """The lineage a new round would have (reads the ledger; writes nothing)."""
    require_rolling(cfg)
    with open_ledger(ledger_path(cfg)) as ledger:
        champion = ledger.current_champion()
        gate_slice = _fresh_slice(cfg, ledger)
    bootstrap = champion is None or champion.via == "bootstrap"
    parent = bootstrap_descriptor(cfg) if champion is None else champion.descriptor
    # an adapter champion is served on its base; the next round trains from its merged model;
    # a cascade champion's round trains its tunable tier
    path = (parent.get("merged") or {}).get("path") or parent.get("path")
    if parent.get("kind") == "cascade":
        path = tunable_tier(parent).get("path")
    if not path or not (Path(path) / "config.json").is_file():
        raise InputError(
            f"the champion (v{champion.version if champion else '?'}) has no local "
            f"checkpoint folder to start a round from (descriptor path {path!r})"
        )
    return RoundRecord(
        round_id=round_id,
        started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        config_path=str(config_path),
        parent_version=champion.version if champion else 1,
        parent=parent,
        bootstrap=bootstrap,
        base_model=str(path),
        gate_slice=gate_slice,
        eval_slice=f"audit+{gate_slice}",
        trigger=trigger,
    )


def require_rolling(cfg: LoopConfig) -> None:
    """InputError unless the config has a rolling split: without one it has no rounds."""
    if cfg.suite.rolling is None:
        raise InputError(
            "suite.rolling: rounds need a rolling split (an audit part and one-look gate "
            "slices), e.g. suite.rolling: {audit_fraction: 0.2, gate_size: 50}"
        )


def _fresh_slice(cfg: LoopConfig, ledger: Ledger) -> str:
    suite = load_suite(cfg.suite.path, cfg.suite.default_scorer)
    # one look per item id and content, whatever the revision (`tuneloop.gate.looks`)
    contents = {i.id: i.content_sha256 for i in suite.items}
    ids = list(contents)
    status = classify(contents, ledger.item_looks(ids), ledger.renewed_items(ids))
    fresh = set(status.judgeable(cfg.suite.item_changes == "new"))
    index, _ = next_gate_slice(rolling_of(suite, cfg.suite), set(contents) - fresh)
    return gate_slice_name(index)


def bootstrap_descriptor(cfg: LoopConfig, hashed: bool = True) -> dict[str, Any]:
    base = cfg.flywheel.bootstrap or (cfg.base_model if isinstance(cfg.base_model, Path) else None)
    if base is None:
        raise InputError(
            "flywheel.bootstrap: the ledger has no champion yet; name the checkpoint the "
            "first round starts from (flywheel.bootstrap: path/to/model)"
        )
    digest = sha256_path(base) if hashed else None
    return {"kind": "single", "path": str(base), "sha256": digest, "bootstrap": True}


def ensure_champion(cfg: LoopConfig) -> Champion:
    """The current champion; with none yet, register the bootstrap champion first (what the
    first round would do), so that a managed service can serve it before any round."""
    with open_ledger(ledger_path(cfg)) as ledger, ledger.transaction():
        champion = ledger.current_champion()
        if champion is None:
            at = datetime.now(timezone.utc).isoformat(timespec="seconds")
            ledger.add_champion(bootstrap_descriptor(cfg), run_id=None, at=at, via="bootstrap")
            champion = ledger.current_champion()
    assert champion is not None
    return champion


def commit_round(cfg: LoopConfig, record: RoundRecord) -> None:
    """Write `round.json` and the ledger rows (the bootstrap champion first, if any)."""
    with open_ledger(ledger_path(cfg)) as ledger, ledger.transaction():
        if ledger.current_champion() is None:  # the first round: the bootstrap champion
            ledger.add_champion(record.parent, run_id=None, at=record.started_at, via="bootstrap")
        ledger.add_round(RoundStart.of(record))
    write_record(round_layout(cfg, record.round_id).round_file, record)
    if record.parent.get("kind") == "cascade":  # the pre arm serves the champion itself
        text = json.dumps(record.parent, indent=2, sort_keys=True) + "\n"
        atomic_write_text(round_layout(cfg, record.round_id).workdir / CHAMPION_CASCADE, text)


def tunable_tier(descriptor: dict[str, Any]) -> dict[str, Any]:
    """A cascade champion's tier a round trains (`tunable`); InputError when it has none."""
    tiers = [c for c in descriptor.get("components", []) if c.get("tunable")]
    if len(tiers) != 1:
        raise InputError(
            "the champion is a cascade with no tunable tier (one component with "
            "`tunable: true`, a local model folder): a round has nothing to train"
        )
    return dict(tiers[0])


CHAMPION_CASCADE = "champion-cascade.json"
"""A cascade champion's descriptor, written at the top of a round's workdir: its pre arm."""


def cascade_round(cfg: LoopConfig, record: RoundRecord) -> CascadeConfig | None:
    """A round from a cascade champion: the champion's tiers, its tunable one `trained`, the
    pre arm the champion itself; the composition's rule from `cfg.cascade` when set (else
    the cheapest cascade as accurate as its best tier, composed on the rolling split's
    validation part). None for a single champion."""
    parent = record.parent
    if parent.get("kind") != "cascade":
        return None
    where = f"champion v{record.parent_version} (a cascade)"
    spec = read_cascade(parent, where)  # InputError naming the champion and the tier
    tiers = []
    for tier in spec.tiers:
        entry: dict[str, Any] = {"name": tier.name, "usd_per_1m": tier.usd_per_1m}
        if tier.tunable:
            entry["model"] = "trained"
        elif tier.endpoint is not None:
            entry |= {"endpoint": tier.endpoint, "model": tier.model}
            entry |= {"api_key_env": tier.api_key_env} if tier.api_key_env else {}
        else:
            entry["path"] = Path(str(tier.path))
        tiers.append(entry)
    signal = next((t.signal for t in spec.tiers if t.signal), None)
    rule = (
        cfg.cascade.model_dump(exclude={"tiers", "champion"})
        if cfg.cascade is not None
        else {"objective": "min_cost_non_inferior", "slice": VALIDATION}
        | ({"signal": signal} if signal else {})
    )
    champion = round_layout(cfg, record.round_id).workdir / CHAMPION_CASCADE
    try:
        return CascadeConfig.model_validate(rule | {"tiers": tiers, "champion": champion})
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise InputError(
            f"{where}: its tiers do not make a round's cascade: {loc}: {first['msg']}"
        ) from None


def round_config(cfg: LoopConfig, record: RoundRecord) -> LoopConfig:
    """The loop config of one round: its folder, the champion as base, its slices (and from
    a cascade champion, its cascade: `cascade_round`)."""
    cascade = cascade_round(cfg, record)
    serve = cfg.serve.model_copy(update={"challenger": "cascade"}) if cascade else cfg.serve
    return cfg.model_copy(
        update={
            "serve": serve,
            "cascade": cascade or cfg.cascade,
            "name": f"{cfg.name}-{record.round_id}",
            "workdir": round_layout(cfg, record.round_id).workdir,
            "base_model": Path(record.base_model),
            "eval": cfg.eval.model_copy(update={"slice": record.eval_slice}),
            "gate": cfg.gate.model_copy(
                update={
                    "slice": record.gate_slice,
                    "ledger": ledger_path(cfg),
                    "require_approval": cfg.gate.require_approval or cfg.flywheel.approval.promote,
                }
            ),
            "archive": cfg.archive.model_copy(update={"root": archive_root(cfg)}),
        }
    )


def read_trigger(path: Path | None) -> dict[str, Any]:
    """The trigger file's JSON object ({} without one)."""
    if path is None:
        return {}
    try:
        data = json.loads(read_utf8(path, "trigger file"))
    except json.JSONDecodeError as err:
        raise InputError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object (the trigger and its figures)")
    return data
