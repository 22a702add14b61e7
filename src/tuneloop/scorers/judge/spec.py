"""The judge file: which model judges, where, at what price, with which rubric, and how sure
it must be to gate.

    endpoint: http://127.0.0.1:8011      # OpenAI-compatible base URL (server root or /v1)
    model: judge-small
    api_key_env: JUDGE_API_KEY           # the variable's name; the key is never stored
    price: {input_per_1m: 0.15, output_per_1m: 0.60}
    rubric: rubric.j2                    # Jinja2 template, relative to this file
    mode: grade                          # or pairwise
    calibration: calibration.json        # written by `tuneloop judge calibrate`
    min_agreement: 0.8

`load_judge_spec(path)` reports every problem at once with its YAML key and line (the same
reader as loop.yaml and the teachers file): the schema's, a rubric file that does not exist,
and — when a run needs the machine (`check_env`) — an `api_key_env` that is unset or empty.
A judge's `JudgeIdentity` (core: `records.judge`) is what a judgement's provenance names — the
model, the endpoint, the mode, the rubric's sha256 and the pass threshold; a calibration
record holds only for the identity it measured.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field, ValidationError, field_validator

from tuneloop.config import ConfigPath, Section, read_yaml
from tuneloop.config.load import format_error, line_map
from tuneloop.errors import InputError
from tuneloop.records.judge import JudgeMode


class JudgePrice(Section):
    input_per_1m: float = Field(default=0.0, ge=0)
    """US dollars per million prompt tokens sent to the judge."""
    output_per_1m: float = Field(default=0.0, ge=0)
    """US dollars per million completion tokens the judge writes."""

    def cost(self, prompt_tokens: int | None, completion_tokens: int | None) -> float | None:
        """The call's cost; None when the judge reported no usage."""
        if prompt_tokens is None or completion_tokens is None:
            return None
        return (prompt_tokens * self.input_per_1m + completion_tokens * self.output_per_1m) / 1e6


class JudgeSpec(Section):
    endpoint: str
    """OpenAI-compatible base URL of the judge (server root or its /v1): a hosted API, or a
    model served here (`tuneloop serve`)."""
    model: str
    """The model id sent in each judge request."""
    api_key_env: str | None = None
    """Environment variable holding the judge's API key; the key itself is never written."""
    price: JudgePrice = JudgePrice()
    """Price per million tokens; each judgement's cost comes from its `usage`."""
    rubric: ConfigPath
    """Jinja2 template of the judge prompt (grade: `prompt`, `response`, `reference`;
    pairwise: `prompt`, `response_a`, `response_b`); its sha256 is in every judgement's
    provenance."""
    mode: JudgeMode = "grade"
    """`grade`: a score in [0, 1] per answer (`SCORE: x` on the judgement's last line);
    `pairwise`: which of two answers is better (`VERDICT: A|B|TIE`), asked in both orders."""
    pass_threshold: float = Field(default=0.5, ge=0, le=1)
    """A grade at least this counts as a pass (calibration against people, corpus cuts)."""
    max_tokens: int = Field(default=256, gt=0)
    """Judgement length limit."""
    temperature: float = Field(default=0.0, ge=0)
    """Judge sampling temperature; 0 is greedy."""
    send_seed: bool = True
    """Send a per-request seed (derived from the request and the attempt); some hosted APIs
    refuse the field."""
    max_retries: int = Field(default=4, ge=0)
    """Retries for connection errors, timeouts, 429 and 5xx; then a harness error."""
    parse_retries: int = Field(default=2, ge=0)
    """Times an unparsable judgement is asked again with a new seed before it is a harness
    error (never a score)."""
    backoff_s: float = Field(default=0.5, ge=0)
    """Base of the exponential backoff between transport retries (full jitter)."""
    request_timeout_s: float = Field(default=60.0, gt=0)
    """Per-request timeout."""
    cache: ConfigPath | None = None
    """SQLite cache of judgements by request hash (a rerun or a resumed eval asks nothing
    twice); None: `<judge file>.cache.sqlite` beside the judge file."""
    calibration: ConfigPath | None = None
    """The calibration record (`tuneloop judge calibrate` writes it); gating with this judge
    needs one that measured this judge at `min_agreement` or better."""
    min_agreement: float = Field(default=0.8, ge=0, le=1)
    """Least agreement with human verdicts at which the judge may decide a gate."""

    @field_validator("endpoint")
    @classmethod
    def _http(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"must be an http(s) URL (got {value!r})")
        return value


def load_judge_spec(path: Path, *, check_env: bool = True) -> JudgeSpec:
    """Read and validate a judge file; one InputError listing every problem (key and line).
    `check_env`: also that `api_key_env` is set (what a run needs of this machine)."""
    path = Path(path)
    data, node = read_yaml(path, "judge file")
    lines = line_map(node)
    errors: list[str] = []
    spec: JudgeSpec | None = None
    try:
        spec = JudgeSpec.model_validate(data, context={"base_dir": path.parent.resolve()})
    except ValidationError as err:
        errors.extend(format_error(e, lines, JudgeSpec) for e in err.errors())
    if spec is not None and not spec.rubric.is_file():
        errors.append(f"{_where(lines, 'rubric')}: {spec.rubric}: rubric file not found")
    var = data.get("api_key_env")
    if check_env and isinstance(var, str) and not os.environ.get(var):
        errors.append(
            f"{_where(lines, 'api_key_env')}: environment variable {var} is not set or empty"
        )
    if errors or spec is None:
        raise InputError(f"{path}: {len(errors)} error(s)\n  " + "\n  ".join(errors))
    return spec


def default_cache(path: Path) -> Path:
    """Where a judge file's cache lives when it names none."""
    path = Path(path).resolve()
    return path.with_name(path.name + ".cache.sqlite")


def _where(lines: dict[tuple[str, ...], int], key: str) -> str:
    line = lines.get((key,))
    return key + (f" (line {line})" if line else "")
