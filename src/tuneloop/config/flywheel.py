"""The `flywheel:` section of loop.yaml: traffic to watch, rolling slices, triggers, approvals.

    flywheel:
      traffic: [logs/]            # traffic.jsonl and its rotations traffic-<n>.jsonl
      triggers: {min_new_labels: 200, drift_psi: 0.25, accuracy_floor: 0.8,
                 min_interval_s: 3600, max_rounds_per_day: 4}
      approval: {spend: false, promote: true}

Models only, a docstring under each field (as `config.models`); the flywheel code receives
plain values unpacked from them. The rolling one-look split of the suite is the suite's own
setting (`suite.rolling`, `tuneloop.config.slicing`).
"""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from tuneloop.config.base import ConfigPath, Section


class TriggersConfig(Section):
    min_new_labels: int | None = Field(default=100, ge=1)
    """Fire when at least this many new training rows came from feedback since the last round
    started: labelled exchanges (a verdict or a correction) counted after the corpus steps —
    filters, exact and near dedup against each other and the rows already trained on, and
    decontamination — so 49 copies of one prompt are one. None turns the trigger off."""
    drift_psi: float | None = Field(default=None, gt=0)
    """Fire when any feature's PSI between the last round's training rows and recent traffic
    reaches this value (0.1 moderate, 0.25 significant); None turns the trigger off."""
    drift_min_requests: int = Field(default=50, ge=1)
    """Drift is not judged on fewer recent requests than this (PSI of a handful is noise)."""
    accuracy_floor: float | None = Field(default=None, ge=0, le=1)
    """Fire when the champion's audit accuracy is below this with 95% confidence (the upper
    end of its Wilson interval is below it); None turns the trigger off."""
    power_factor: float | None = Field(default=None, gt=0)
    """Hold a round whose gate slice's minimum detectable effect (one-sided at the round's α,
    80% power, from the champion's last sample log) exceeds this × the target effect (e.g.
    2): it would most often call a real improvement of that size "not significant". The hold
    says how many more gate items would release it. None: power holds no round; the MDE is
    still shown by `status` and the watcher's log, and `check` warns when it exceeds the
    margin."""
    target_effect: float | None = Field(default=None, gt=0, le=1)
    """The improvement a round must be able to detect; None uses gate.margin (a margin of 0
    sets no target: the MDE is shown and nothing is held)."""
    features: list[str] = []
    """Extra drift features: keys of the traffic requests' `metadata` (beside `tag` and
    `prompt_words`, which are always measured)."""
    min_interval_s: float = Field(default=3600.0, ge=0)
    """Least time between the starts of two rounds."""
    backoff_factor: float = Field(default=2.0, ge=1)
    """After each consecutive rejected round, the wait before the next round is multiplied by
    this; after each consecutive poll where nothing fired, so is the wait before the next
    poll."""
    max_backoff_s: float = Field(default=86400.0, gt=0)
    """Longest wait either backoff can reach."""
    max_rounds_per_day: int | None = Field(default=None, ge=1)
    """Rounds started per UTC day at most; None is no cap."""
    max_train_seconds_per_day: float | None = Field(default=None, gt=0)
    """Training seconds per UTC day at most; no round starts once they are spent. None is no
    cap."""

    @model_validator(mode="after")
    def _one_trigger(self) -> TriggersConfig:
        if (self.min_new_labels, self.drift_psi, self.accuracy_floor) == (None, None, None):
            raise ValueError(
                "no trigger is set: set at least one of min_new_labels, drift_psi, "
                "accuracy_floor (or stop the watcher)"
            )
        return self

    @field_validator("features")
    @classmethod
    def _features(cls, features: list[str]) -> list[str]:
        # a field's own rule, so that it is reported beside the other fields' errors (a
        # model rule runs only once every field is valid: one more round of fixes)
        if len(set(features)) != len(features):
            raise ValueError(f"a name is given twice ({features})")
        reserved = {"tag", "prompt_words"} & set(features)
        if reserved:
            raise ValueError(f"{sorted(reserved)} are always measured; remove them")
        return features


class ApprovalConfig(Section):
    spend: bool = False
    """A round that the triggers call for waits for a person's approval before it spends
    compute (training, evaluation)."""
    promote: bool = False
    """A challenger the gate promotes waits for `tuneloop approve` before it is served (a
    round sets `gate.require_approval` from this)."""


class ServeChampionConfig(Section):
    managed: bool = False
    """`tuneloop watch` serves the champion itself: the embedded server (with `serve:`'s
    settings) behind `tuneloop proxy`, which logs the traffic; after each promotion the new
    champion is started, checked with a real completion, switched to and the old one drained
    and stopped — clients keep one address and see no downtime."""
    port: int = Field(default=8100, ge=0, le=65535)
    """The proxy's port on loopback: the address clients use (`http://127.0.0.1:PORT/v1`)."""
    log_dir: ConfigPath | None = None
    """Where the proxy writes the traffic log; None uses the first `flywheel.traffic` entry."""
    served_name: str = "champion"
    """The model name clients request, the same for every champion version."""


class FlywheelConfig(Section):
    bootstrap: ConfigPath | None = None
    """The checkpoint the first round's champion is bootstrapped from when the ledger has
    none (recorded as a bootstrap, not as a won decision); None uses `base_model` when it is
    a path."""
    traffic: list[ConfigPath] = []
    """Traffic logs: files, or folders holding `traffic.jsonl` and `traffic-<n>.jsonl`."""
    triggers: TriggersConfig = TriggersConfig()
    """When a round is worth its cost, and how often one may run."""
    approval: ApprovalConfig = ApprovalConfig()
    """Where a person must say yes."""
    serve: ServeChampionConfig = ServeChampionConfig()
    """Whether the watcher serves the champion (and re-serves each new one) itself."""
    poll_s: float = Field(default=300.0, gt=0)
    """Seconds between two looks at the traffic when nothing fired (before backoff)."""
