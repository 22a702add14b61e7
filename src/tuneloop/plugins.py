"""The plugin protocols: the shape of what each registry in `tuneloop.registry` holds.

    scorers:        Registry[ScorerFactory]      factory(**args) -> ScoreFn; fn(item, completion)
                                                 -> Score (also the GRPO rewards)
    serve_backends: Registry[ServeBackend]       `tuneloop.endpoint`, with the types it exchanges
    trainers:       Registry[Trainer]            one protocol for every training method
    ingesters:      Registry[Ingester]           factory(**options) -> Converter
    tools:          Registry[Tool]               a pure function of the model's arguments
    environments:   Registry[EnvironmentFactory] factory(item) -> Environment

Core, beside the registry: a plugin is type-checked against its protocol where it registers
(`@scorer("numeric")`, `@trainers.register("sft")`), and whoever looks one up gets the protocol
back, so mypy sees both ends of every plugin arrow. Plain Protocols and one small value type
(`Score`): nothing here imports a phase, a shared library, torch or a server. The serving
backend's protocol lives with the values it hands over (`Endpoint`, `Decoding`, the arm) in
`tuneloop.endpoint`, also core.

What each kind of plugin means (properties, the rules a plugin keeps) is documented where the
built-ins live: `tuneloop.scorers.base`, `tuneloop.serve.backends`, `tuneloop.train.methods`,
`tuneloop.data.ingest`, `tuneloop.envs.base`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tuneloop.config.train import TrainConfig
from tuneloop.records.trace import Trace

# ---- scorers ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Score:
    value: float
    """In [0, 1]."""
    detail: dict[str, Any] = field(default_factory=dict)
    """What was extracted and why it scored as it did."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.value <= 1.0:
            raise ValueError(f"score must be in [0, 1] (got {self.value})")


class ScoreFn(Protocol):
    """`score(item, completion)`: the item as a plain dict (its reference fields), the
    completion untrusted model output (a trajectory scorer also accepts an `AgentTrace`).
    Never raises on bad model output: it scores 0 with a reason in `detail`."""

    def __call__(self, item: dict[str, Any], completion: str) -> Score: ...


class ScorerFactory(Protocol):
    """A registered scorer: called with its arguments (each scorer names its own, all with
    defaults), it returns the `ScoreFn`."""

    def __call__(self, *args: Any, **kwargs: Any) -> ScoreFn: ...


# ---- trainers --------------------------------------------------------------------------------


class Trainer(Protocol):
    """Every training method (as torchtune's recipe interface is every recipe's).

    `trainer(base, rows, out_dir, settings, nproc=…, default_scorer=…, progress=…)` trains on
    `rows` (the training JSONL's rows, `tuneloop.train.data.Row`: `where` and `data`) from the
    checkpoint folder `base`, under `settings` (loop.yaml's `train:` section), with `nproc`
    processes, `default_scorer` for GRPO rows that name none, and a progress bar when
    `progress`; it leaves in `out_dir` a PEFT adapter (or, with `train.adapter: none`, the
    whole model) and `metrics.jsonl`. Heavy imports (torch, transformers, TRL) happen inside
    the call: registering a trainer, which `tuneloop check` does, must stay torch-free.
    """

    def __call__(
        self,
        base: Path,
        rows: list[Any],
        out_dir: Path,
        settings: TrainConfig,
        /,
        *,
        nproc: int,
        default_scorer: str,
        progress: bool,
    ) -> None: ...


# ---- ingesters -------------------------------------------------------------------------------


class Converter(Protocol):
    """One configured ingester: `convert(file, lines)` turns a file's parsed lines, as
    (line number, JSON object) pairs, into traces and rejects (`tuneloop.data.ingest.Reject`),
    accounting for every line."""

    def __call__(
        self, file: str, lines: Iterable[tuple[int, dict[str, Any]]]
    ) -> Iterable[Trace | Any]: ...


class DocumentConverter(Protocol):
    """One configured document ingester (`tuneloop.data.ingest.documents`): `convert(source)`
    turns one file or session folder into a `Parsed` (traces, rejects, records skipped by
    kind, records read)."""

    def __call__(self, source: Path) -> Any: ...


class Ingester(Protocol):
    """A registered ingester: called with its options (refusing unknown ones), it returns the
    `Converter` (JSONL lines) or, registered `document`, the `DocumentConverter`."""

    def __call__(self, **options: Any) -> Converter | DocumentConverter: ...


# ---- tools and environments ------------------------------------------------------------------


class Tool(Protocol):
    """A pure function called with the model's arguments as keywords, after they validated
    against the schema its registration carries; it returns a string (sent as is) or any JSON
    value (sent as JSON), and raises for a call it cannot serve."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...


class Environment(Protocol):
    """Where a tool call's result comes from: deterministic and hermetic (the same item and
    call give the same result; no network, clock or shared state)."""

    def call(self, name: str, arguments: dict[str, Any]) -> str: ...


class EnvironmentFactory(Protocol):
    """A registered environment: built for one suite item (a plain dict)."""

    def __call__(self, item: dict[str, Any]) -> Environment: ...
