"""Serve a cascade for as long as it is needed: its local tiers, then the cascade server in
front of them, as one `Endpoint`.

    with serving("champion/cascade.json", cfg.serve) as ep:   # `serving` sees a cascade file
        client.chat.completions.create(model=ep.model, ...)     # answers say which tier

Registered as the `cascade` serve backend; `tuneloop.serving.serving` picks it for a model
that is a cascade descriptor file (`spec.is_cascade_file`), whatever `serve.backend` says,
and `serve.backend` then serves the local tiers (an `external` backend's settings name one
model per arm, not a tier's: local tiers are then served embedded). Each local tier is served
on a port of its own (`serve.port` is the cascade's); its log is `<log>.tier-<name>.log`
beside the cascade server's. The decoding contract (derived from the round's base) reaches the
tunable tier, the one trained from that base; every other tier decodes as its own checkpoint
says (another family's stop tokens are not the base's), alike in both arms of a round, and an
external tier as its owner set it up. `Endpoint.decoding_applied` says whether the contract
reached the tunable tier.

The cascade server is a process of its own (`app.py`, spawned like any server and torn down
with its process group); it reads a plan file with the descriptor and the tiers' endpoints,
keys by variable name only.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from tuneloop.cascade_spec import CascadeSpec, load_cascade
from tuneloop.client.completions import api_base
from tuneloop.config import ServeConfig
from tuneloop.endpoint import Arm, Decoding, Endpoint
from tuneloop.envkeys import read_api_key
from tuneloop.registry import serve_backends
from tuneloop.serve.lifecycle import Launch, launched, log_file


@serve_backends.register("cascade")
@contextmanager
def cascade(
    model: str | Path,
    config: ServeConfig,
    *,
    log_path: Path | None,
    arm: Arm | None = None,
    decoding: Decoding | None = None,
) -> Iterator[Endpoint]:
    """The cascade described by the file `model` (module docstring)."""
    with serve_cascade(
        load_cascade(Path(model)), config, log_path=log_path, decoding=decoding
    ) as ep:
        yield ep


@contextmanager
def serve_cascade(
    spec: CascadeSpec,
    config: ServeConfig,
    *,
    log_path: Path | None = None,
    decoding: Decoding | None = None,
) -> Iterator[Endpoint]:
    """Serve `spec`'s local tiers and the cascade server in front; yields its endpoint."""
    from tuneloop.serving import serving

    backend = "embedded" if config.backend in ("external", "cascade") else config.backend
    tier_config = config.model_copy(update={"backend": backend, "port": 0})
    api_key = read_api_key(config.api_key_env, "serve.api_key_env")
    with ExitStack() as stack:
        log = stack.enter_context(log_file(log_path))
        endpoints = {}
        for tier in spec.tiers:
            if tier.path is not None:
                tier_log = log.with_name(f"{log.name}.tier-{tier.name}.log")
                # the round's decoding contract is the tunable tier's (it is the base's kin);
                # a fixed tier decodes as its own checkpoint says, alike in both arms
                contract = decoding if tier.tunable else None
                ep = stack.enter_context(
                    serving(tier.path, tier_config, log_path=tier_log, decoding=contract)
                )
                endpoints[tier.name] = {
                    "base_url": ep.base_url,
                    "model": ep.model,
                    "api_key_env": config.api_key_env,
                }
            else:
                assert tier.endpoint is not None and tier.model is not None
                endpoints[tier.name] = {
                    "base_url": api_base(tier.endpoint),
                    "model": tier.model,
                    "api_key_env": tier.api_key_env,
                }
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tuneloop-cascade-")))
        plan = tmp / "plan.json"
        descriptor = _descriptor_of(spec)
        plan.write_text(
            json.dumps(
                {
                    "descriptor": descriptor,
                    "base": "/",
                    "endpoints": endpoints,
                    "api_key_env": config.api_key_env,
                }
            )
        )
        argv = [sys.executable, "-m", "tuneloop.serve.cascade.app", str(plan)]
        argv += [
            "--host",
            config.host,
            "--port",
            str(config.port),
            "--port-file",
            str(tmp / "port"),
        ]
        argv += ["--parent-pid", str(os.getpid())]
        launch = Launch(
            argv=argv,
            served_model=spec.name,
            host=config.host,
            port=config.port or None,
            port_file=tmp / "port",
            startup_timeout_s=config.startup_timeout_s,
            log_path=log,
            api_key=api_key,
        )
        with launched(launch) as (base_url, pid):
            yield Endpoint(
                base_url,
                spec.name,
                api_key,
                pid,
                identity=spec.identity,
                decoding_applied=bool(decoding) and any(t.tunable and t.local for t in spec.tiers),
            )


def _descriptor_of(spec: CascadeSpec) -> dict[str, object]:
    """The descriptor as the spec read it (local paths absolute)."""
    return {
        "kind": "cascade",
        "name": spec.name,
        "components": [t.model_dump(mode="json", exclude_none=True) for t in spec.tiers],
        "routing": spec.routing.model_dump(mode="json"),
    }
