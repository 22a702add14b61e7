"""The teachers file: which models answer the replayed steps, where, at what price.

    teachers:
      - name: big
        endpoint: https://api.example.com/v1
        model: big-model-2026
        api_key_env: BIG_API_KEY          # the variable's name; the key is never stored
        price: {input_per_1m: 3.0, output_per_1m: 15.0}
        sampling: {temperature: 0.0, max_tokens: 512}
      - name: tiny
        embedded: examples/arith/model    # served by the embedded backend for the run

`load_teachers(path)` reports every problem at once, each with its YAML path and line: the
schema's (unknown fields with did-you-mean, bad values, endpoint *and* embedded), a name
given twice, an `embedded` folder that does not exist, and an
`api_key_env` whose variable is unset or empty (checked when the run or `tuneloop check`
happens, not stored) — the checks beyond the schema run on the raw entries, so a schema error
in one teacher hides none of them. Relative `embedded` paths resolve against the file's
folder, as in loop.yaml.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError, model_validator

from tuneloop.config import ConfigPath, Section, read_yaml
from tuneloop.config.load import format_error, line_map
from tuneloop.config.replay import ReplayConfig
from tuneloop.errors import InputError, did_you_mean
from tuneloop.registry import scorers
from tuneloop.replay.judge_file import judge_file_problems


class Price(Section):
    input_per_1m: float = Field(default=0.0, ge=0)
    """US dollars per million prompt tokens."""
    output_per_1m: float = Field(default=0.0, ge=0)
    """US dollars per million completion tokens."""

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_per_1m + completion_tokens * self.output_per_1m) / 1e6


class TeacherSampling(Section):
    temperature: float = Field(default=0.0, ge=0)
    """Sampling temperature; 0 is greedy."""
    top_p: float = Field(default=1.0, gt=0, le=1)
    """Nucleus sampling mass."""
    max_tokens: int = Field(default=512, gt=0)
    """Completion length limit."""
    send_seed: bool = True
    """Send a per-request seed derived from (replay seed, trace, step, teacher); some hosted
    APIs refuse the field."""


class Teacher(Section):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    """The teacher's name in rows and the report (letters, digits, `_`, `.`, `-`)."""
    endpoint: str | None = None
    """OpenAI-compatible base URL (server root or /v1); or give `embedded`."""
    embedded: ConfigPath | None = None
    """A local Hugging Face model folder served by the embedded backend for the run."""
    model: str | None = None
    """The model id sent in requests; required with `endpoint`. An embedded teacher is
    requested by its folder (as the embedded server names it), so it takes no `model`."""
    api_key_env: str | None = None
    """Environment variable holding the API key; the key itself is never written."""
    price: Price = Price()
    """Price per million tokens; cost is computed from each response's `usage`."""
    sampling: TeacherSampling = TeacherSampling()
    """How this teacher samples."""
    timeout_s: float = Field(default=120.0, gt=0)
    """Per-request timeout."""
    max_retries: int = Field(default=4, ge=0)
    """Retries for connection errors, timeouts, 429 and 5xx; then the call is `missing`."""
    backoff_s: float = Field(default=0.5, ge=0)
    """Base of the exponential backoff between retries (full jitter)."""

    @model_validator(mode="after")
    def _one_source(self) -> Teacher:
        if (self.endpoint is None) == (self.embedded is None):
            raise ValueError("give exactly one of `endpoint` (a URL) and `embedded` (a folder)")
        if self.endpoint is not None:
            if not self.endpoint.startswith(("http://", "https://")):
                raise ValueError(f"endpoint must be an http(s) URL (got {self.endpoint!r})")
            if self.model is None:
                raise ValueError("`model` (the model id to request) is required with `endpoint`")
        elif self.model is not None:
            raise ValueError("an `embedded` teacher is requested by its folder; remove `model`")
        return self

    def requested_model(self) -> str:
        """The model id sent in requests (the embedded server serves a folder by its path)."""
        return self.model if self.model is not None else str(self.embedded)


class TeachersFile(Section):
    teachers: list[Teacher] = Field(min_length=1)
    """The teachers, in the order ties are broken in."""

    def by_name(self) -> dict[str, Teacher]:
        return {t.name: t for t in self.teachers}


def resolved_teachers_yaml(path: Path) -> str:
    """The teachers file at `path` as YAML with `embedded` folders absolute: a copy elsewhere
    (an archive's `inputs/teachers.yaml`) names the same models."""
    cfg = load_teachers(path, check_env=False)
    return yaml.safe_dump(cfg.model_dump(mode="json", exclude_none=True), sort_keys=False)


def load_teachers(path: Path, *, check_env: bool = True) -> TeachersFile:
    """Read and validate a teachers file; one InputError listing every problem. `check_env`:
    also what a run needs of this machine (each `api_key_env` set, each `embedded` folder a
    model folder); False to read the file of a finished run."""
    path = Path(path)
    data, node = read_yaml(path, "teachers file")
    lines = line_map(node)
    errors: list[str] = []
    cfg: TeachersFile | None = None
    try:
        cfg = TeachersFile.model_validate(data, context={"base_dir": path.parent.resolve()})
    except ValidationError as err:
        errors.extend(format_error(e, lines, TeachersFile) for e in err.errors())
    raw = data.get("teachers")
    raw = raw if isinstance(raw, list) else []
    errors.extend(_duplicate_names(raw, lines))
    if check_env:
        errors.extend(_missing_models(raw, lines, path.parent.resolve()))
        errors.extend(_missing_keys(raw, lines))
    if errors or cfg is None:
        raise InputError(f"{path}: {len(errors)} error(s)\n  " + "\n  ".join(errors))
    return cfg


def _where(lines: dict[tuple[str, ...], int], *loc: str) -> str:
    line = lines.get(loc)
    return ".".join(loc) + (f" (line {line})" if line else "")


def _duplicate_names(raw: list[Any], lines: dict[tuple[str, ...], int]) -> list[str]:
    first: dict[str, int] = {}
    out = []
    for i, entry in enumerate(raw):
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str):
            continue
        if name in first:
            out.append(
                f"{_where(lines, 'teachers', str(i), 'name')}: duplicate teacher name {name!r} "
                f"(first as teachers.{first[name]}.name); names must be unique"
            )
        else:
            first[name] = i
    return out


def _missing_models(raw: list[Any], lines: dict[tuple[str, ...], int], base: Path) -> list[str]:
    """An `embedded` teacher whose folder is missing (its server would fail minutes into the
    run)."""
    out = []
    for i, entry in enumerate(raw):
        folder = entry.get("embedded") if isinstance(entry, dict) else None
        if not isinstance(folder, str) or not folder:
            continue
        model = base / Path(folder).expanduser()
        if model.is_dir():
            continue
        problem = "not found" if not model.exists() else "a file, expected a model folder"
        out.append(f"{_where(lines, 'teachers', str(i), 'embedded')}: {model}: {problem}")
    return out


def _missing_keys(raw: list[Any], lines: dict[tuple[str, ...], int]) -> list[str]:
    out = []
    for i, entry in enumerate(raw):
        var = entry.get("api_key_env") if isinstance(entry, dict) else None
        if isinstance(var, str) and not os.environ.get(var):
            out.append(
                f"{_where(lines, 'teachers', str(i), 'api_key_env')}: environment variable "
                f"{var} is not set or empty"
            )
    return out


def check_replay(cfg: ReplayConfig) -> list[tuple[str, str]]:
    """(loop.yaml key, problem) for everything wrong with a `replay:` section that can be
    known before compute: the teachers file (all its problems), the traces file, the judge
    (and the LLM judge's file, `replay.judge_args.judge`)."""
    found: list[tuple[str, str]] = []
    if cfg.teachers is not None:
        try:
            load_teachers(cfg.teachers)
        except InputError as err:
            found.append(("replay.teachers", str(err).replace("\n  ", "\n    ")))
    if cfg.traces is not None and cfg.traces_format != "trace" and not cfg.traces.exists():
        found.append(("replay.traces", f"{cfg.traces}: not found"))
    elif cfg.traces is not None and cfg.traces_format == "trace" and not cfg.traces.is_file():
        found.append(("replay.traces", f"{cfg.traces}: not found (`tuneloop ingest` writes it)"))
    for key, name in (("replay.judge", cfg.judge), ("replay.default_scorer", cfg.default_scorer)):
        if name is not None and name not in scorers:
            found.append((key, f"unknown scorer {name!r}{did_you_mean(name, scorers.names())}"))
    found += judge_file_problems(cfg)
    return found
