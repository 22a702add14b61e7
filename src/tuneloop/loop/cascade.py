"""A cascade round's `compose` phase, and the champion a promoted cascade becomes.

    … → merge → doctor → compose → eval_post (serves compose/cascade.json) → … → gate

With `serve.challenger: cascade` (`config/cascade.py`), after the round's model is merged:

1. each tier of `cascade.tiers` (`trained` is the merged model, `base` the round's base) is
   served alone and evaluated on `cascade.slice` (a validation slice, never the gate's) with
   logprobs, under the same decoding contract as the arms — `compose/tiers/<name>/`;
2. `tuneloop.cascade.compose` composes them offline (every threshold, the frontier, the
   objective's choice) — `compose/composition.json`, `compose/frontier.svg`;
3. the choice is sealed in the ledger (seal id `<run id>:composition`: the rule, the tiers
   with their logs' hashes, the chosen setting and the descriptor's hash) before the post
   arm is evaluated, so a second composition of the same round cannot replace it;
4. the chosen cascade is written as a descriptor, `compose/cascade.json`, whose trained tier
   is marked `tunable`: the post arm serves it, the gate judges its hash, and `promote`
   records it (the trained tier pointed at the archived merged model) as the champion.

A composition that chooses nothing (no setting meets the objective, or every item handed to
the last tier) stops the round here with the composition's reason: a cascade that does not
pay off is a result, reported with its frontier, not a post arm.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tuneloop.cascade.plot import frontier_svg
from tuneloop.config import LoopConfig
from tuneloop.config.cascade import CascadeConfig
from tuneloop.envkeys import read_api_key
from tuneloop.errors import PhaseFailed
from tuneloop.gate.seal import seal_composition
from tuneloop.loop.context import MERGED, PhaseContext, decoding_contract
from tuneloop.loop.layout import ledger_path, slice_ids
from tuneloop.loop.state import now_iso
from tuneloop.records import (
    atomic_write_text,
    canonical_json,
    sha256_bytes,
    sha256_file,
    write_record,
)
from tuneloop.serving import serving

TIERS = "tiers"
"""The compose phase's folder of tier evaluations, one sample log per tier."""
FRONTIER_FILE = "frontier.svg"


def cascade_section(cfg: LoopConfig) -> CascadeConfig:
    assert cfg.cascade is not None, "serve.challenger: cascade without a cascade section"
    return cfg.cascade


def tier_folders(cfg: LoopConfig, merged: Path) -> dict[str, Path | None]:
    """Each tier's model folder (None for an endpoint tier)."""
    out: dict[str, Path | None] = {}
    for tier in cascade_section(cfg).tiers:
        if tier.model == "trained":
            out[tier.name] = merged
        elif tier.model == "base":
            out[tier.name] = cfg.base
        else:
            out[tier.name] = tier.path
    return out


def cascade_files(cfg: LoopConfig) -> dict[str, Path]:
    """The tiers' own folders, hashed into the compose phase's fingerprint (input key
    `tier_<name>`, which the descriptor's hash of the tier reads)."""
    if cfg.cascade is None:
        return {}
    return {f"tier_{t.name}": t.path for t in cfg.cascade.tiers if t.path is not None}


CHAMPION_CASCADE = "champion_cascade"
"""The eval_pre phase's input key of a cascade champion's descriptor (its pre arm)."""


def champion_cascade(cfg: LoopConfig) -> Path | None:
    """The cascade descriptor the pre arm serves (a round from a cascade champion); None:
    the pre arm is `base_model`."""
    return cfg.cascade.champion if cfg.cascade is not None else None


def champion_files(cfg: LoopConfig) -> dict[str, Path]:
    """eval_pre's inputs besides the suite: the base, and a cascade champion's descriptor."""
    champion = champion_cascade(cfg)
    return {"base_model": cfg.base} | ({CHAMPION_CASCADE: champion} if champion else {})


def run_compose(ctx: PhaseContext) -> None:
    from tuneloop.cascade import Tier, compose_logs

    cfg, section = ctx.cfg, cascade_section(ctx.cfg)
    folders = tier_folders(cfg, ctx.layout.merged_model)
    logs = {}
    for i, tier in enumerate(section.tiers, start=1):
        print(f"compose: tier {i}/{len(section.tiers)} {tier.name!r} on {section.slice!r}")
        logs[tier.name] = _evaluate_tier(ctx, tier.name, folders[tier.name])
    given = [Tier(t.name, logs[t.name], t.usd_per_1m, path=folders[t.name]) for t in section.tiers]
    record = compose_logs(
        given,
        signal=section.signal,
        objective=section.objective,
        budget=section.budget,
        epsilon=section.epsilon,
        calibrate=section.calibrate,
    )
    write_record(ctx.layout.composition, record)
    atomic_write_text(ctx.folder / FRONTIER_FILE, frontier_svg(record))
    ctx.notes["composition"] = record.reason
    if record.descriptor is None:
        raise PhaseFailed(f"the composition chose no cascade: {record.reason}")
    descriptor = _round_descriptor(cfg, record.descriptor, ctx)
    text = json.dumps(descriptor, indent=2, sort_keys=True) + "\n"
    seal_composition(
        ledger_path(cfg),
        ctx.run_id,
        {
            "rule": section.model_dump(mode="json", exclude={"tiers"})
            | {"tiers": [(t.name, t.usd_per_1m) for t in section.tiers]},
            "logs": {t.name: t.log_sha256 for t in record.tiers},
            "chosen_sha256": record.chosen_sha256,
            "descriptor_sha256": sha256_bytes(canonical_json(descriptor).encode()),
        },
        section.slice,
        slice_ids(cfg, section.slice),
        now_iso(),
    )
    atomic_write_text(ctx.layout.cascade, text)
    ctx.notes["coverage"] = record.chosen.coverage if record.chosen else None


def _round_descriptor(
    cfg: LoopConfig, composed: dict[str, Any], ctx: PhaseContext
) -> dict[str, Any]:
    """The composed descriptor, named after the run, its trained tier `tunable`, every local
    tier with the hash of its folder as this phase's inputs recorded it (so the descriptor's
    own hash, what the gate judges, changes when any tier's weights do)."""
    section = cascade_section(cfg)
    components = []
    for tier, c in zip(section.tiers, composed["components"], strict=True):
        c = dict(c)
        if tier.model == "trained":
            c |= {"tunable": True, "sha256": ctx.inputs[MERGED]}
        elif tier.model == "base":
            c |= {"sha256": ctx.inputs["base_model"]}
        elif tier.path is not None:
            c |= {"sha256": ctx.inputs[f"tier_{tier.name}"]}
        if tier.endpoint is not None:  # an external tier: its URL, name and key variable
            c = {k: v for k, v in c.items() if k not in ("path", "sha256")}
            c |= {"endpoint": tier.endpoint, "model": tier.model}
            c |= {"api_key_env": tier.api_key_env} if tier.api_key_env else {}
        components.append(c)
    return composed | {"name": cfg.name, "components": components}


def _evaluate_tier(ctx: PhaseContext, name: str, folder: Path | None) -> Path:
    """One tier alone on the validation slice, with logprobs; its sample-log folder."""
    from tuneloop.evaluate import evaluate  # the eval runner: httpx, the scorers

    cfg, section = ctx.cfg, cascade_section(ctx.cfg)
    tier = next(t for t in section.tiers if t.name == name)
    out = ctx.folder / TIERS / name
    settings = cfg.eval.model_copy(
        update={"slice": section.slice, "logprobs": section.signal != "agreement"}
    )
    if folder is None:  # an endpoint tier, as the cascade will ask it
        assert tier.endpoint is not None and tier.model is not None
        key = read_api_key(tier.api_key_env, f"cascade.tiers.{name}.api_key_env")
        evaluate(
            tier.endpoint, tier.model, cfg.suite.path, out, settings, slicing=cfg.suite, api_key=key
        )
        return out
    log = ctx.folder / f"server-{name}.log"
    # the contract is the base's, for the tier trained from it; another tier decodes as its
    # checkpoint says, as the served cascade has it (`serve/cascade/backend.py`)
    contract = decoding_contract(cfg) if tier.model == "trained" else None
    with serving(folder, cfg.serve, log_path=log, arm="post", decoding=contract) as ep:
        evaluate(
            ep.base_url,
            ep.model,
            cfg.suite.path,
            out,
            settings,
            slicing=cfg.suite,
            api_key=ep.api_key,
            model_identity=f"{name}:{folder}",
        )
    return out


def cascade_champion(descriptor_file: Path, merged: Path, run_id: str) -> dict[str, Any]:
    """The champion descriptor of a promoted cascade: the composed one with its trained tier
    pointed at `merged` (the archived merged model) and the run that made it."""
    descriptor = json.loads(descriptor_file.read_text())
    for c in descriptor["components"]:
        if c.get("tunable"):
            c["path"] = str(merged)
    return descriptor | {
        "run_id": run_id,
        "model": f"{descriptor.get('name', 'cascade')}@sha256:{sha256_file(descriptor_file)}",
    }
