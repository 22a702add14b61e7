"""Reading YAML configs into pydantic models: every error at once, with its YAML path and line.

`load_yaml_model(path, Model)` reads the YAML, applies dotted command-line overrides
(`train.steps=50`), resolves relative paths against the YAML file's folder (through the
`ConfigPath` type), and validates. Every problem is collected and raised together as one
`InputError`, each line naming the YAML path (and line, where the key exists in the file) and
what was expected; unknown keys get "did you mean …". Nothing is written while loading.
`loop.yaml` (`load_config`) and `corpus.yaml` both load through it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from tuneloop.config.models import LoopConfig
from tuneloop.errors import InputError, read_utf8
from tuneloop.registry import did_you_mean

M = TypeVar("M", bound=BaseModel)

_COMPARISONS = (
    ("greater than or equal to", ">="),
    ("less than or equal to", "<="),
    ("greater than", ">"),
    ("less than", "<"),
)


def load_config(path: Path, overrides: list[str] | None = None) -> LoopConfig:
    """Read, override, resolve and validate a loop.yaml; raise InputError with every error."""
    return load_yaml_model(path, LoopConfig, "config file", overrides)


def read_yaml(path: Path, what: str) -> tuple[dict[str, Any], yaml.Node | None]:
    """The mapping in a YAML file and its node tree (for line numbers); errors name the line."""
    path = Path(path)
    text = read_utf8(path, what)
    try:
        node, data = yaml.compose(text), yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise InputError(f"{where}: invalid YAML: {getattr(err, 'problem', err)}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping at the top level")
    duplicates = list(_duplicate_keys(node))
    if duplicates:
        raise InputError("\n".join(f"{path}:{d}" for d in duplicates))
    return data, node


def _duplicate_keys(node: yaml.Node | None) -> Iterator[str]:
    """`line: duplicate key …` for each key repeated within one mapping.

    PyYAML keeps the last of two equal keys without a word, so a pasted-twice section would
    silently override the first; we refuse instead.
    """
    if isinstance(node, yaml.MappingNode):
        first: dict[object, int] = {}
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else None
            if name is not None and name in first:
                yield (
                    f"{key.start_mark.line + 1}: duplicate key {name!r}"
                    f" (first at line {first[name]})"
                )
            elif name is not None:
                first[name] = key.start_mark.line + 1
            yield from _duplicate_keys(value)
    elif isinstance(node, yaml.SequenceNode):
        for child in node.value:
            yield from _duplicate_keys(child)


def load_yaml_model(path: Path, model: type[M], what: str, overrides: list[str] | None = None) -> M:
    """Read a YAML file into `model`; relative `ConfigPath`s resolve against its folder."""
    path = Path(path)
    data, node = read_yaml(path, what)
    errors: list[str] = []
    for item in overrides or []:
        try:
            apply_override(data, item)
        except ValueError as err:
            errors.append(f"override {item!r}: {err}")
    try:
        cfg = model.model_validate(data, context={"base_dir": path.parent.resolve()})
    except ValidationError as err:
        lines = line_map(node)
        errors.extend(format_error(e, lines, model) for e in err.errors())
        cfg = None
    if errors or cfg is None:
        raise InputError(f"{path}: {len(errors)} error(s)\n  " + "\n  ".join(errors))
    return cfg


def apply_override(data: dict[str, Any], item: str) -> None:
    """Apply `a.b.c=value` (value parsed as YAML) to a nested dict in place."""
    key, sep, raw = item.partition("=")
    if not sep or not key:
        raise ValueError("expected KEY=VALUE with a dotted key, e.g. train.steps=50")
    parts = key.split(".")
    target = data
    for part in parts[:-1]:
        nxt = target.setdefault(part, {})
        if not isinstance(nxt, dict):
            raise ValueError(f"{part!r} is not a section")
        target = nxt
    try:
        value = yaml.safe_load(raw) if raw else ""
    except yaml.YAMLError as err:
        raise ValueError(f"the value is not valid YAML: {getattr(err, 'problem', err)}") from None
    target[parts[-1]] = value


def line_map(node: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], int]:
    out: dict[tuple[str, ...], int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = (*prefix, str(key_node.value))
            out[key] = key_node.start_mark.line + 1
            out.update(line_map(value_node, key))
    elif isinstance(node, yaml.SequenceNode):
        for i, value_node in enumerate(node.value):
            out[(*prefix, str(i))] = value_node.start_mark.line + 1
            out.update(line_map(value_node, (*prefix, str(i))))
    return out


def _model_at(root: type[BaseModel], loc: tuple[str, ...]) -> type[BaseModel] | None:
    """The section model at a YAML path (through lists and optionals), for did-you-mean."""
    model = root
    for part in loc:
        if part.isdigit():
            continue
        field = model.model_fields.get(part)
        ann = field.annotation if field else None
        args = getattr(ann, "__args__", ())
        inner = next(
            (a for a in (ann, *args) if isinstance(a, type) and issubclass(a, BaseModel)), None
        )
        if inner is None:
            return None
        model = inner
    return model


def format_error(
    e: Any,
    lines: dict[tuple[str, ...], int],
    root: type[BaseModel],
    name: Callable[[tuple[str, ...]], str] = ".".join,
) -> str:
    """One pydantic error as `where: what (got …)`; `name` spells a location (YAML path or
    command-line option), `lines` adds the YAML line where known."""
    loc = tuple(str(p) for p in e["loc"] if not str(p).startswith("function-"))
    dotted = name(loc) if loc else "(top level)"
    line = lines.get(loc)
    where = f"{dotted} (line {line})" if line else dotted
    kind = e["type"]
    if kind == "extra_forbidden":
        parent = _model_at(root, loc[:-1])
        hint = did_you_mean(loc[-1], parent.model_fields) if parent else ""
        return f"{where}: unknown key{hint}"
    if kind == "missing":
        return f"{where}: required key is missing"
    msg = str(e["msg"]).removeprefix("Value error, ")  # our validators' own words
    if kind in {"greater_than", "greater_than_equal", "less_than", "less_than_equal"}:
        msg = msg.replace("Input should be", "must be")
        for words, sign in _COMPARISONS:
            msg = msg.replace(words, sign)
    got = e.get("input")
    return f"{where}: {msg}" if isinstance(got, dict | list) else f"{where}: {msg} (got {got!r})"


def dump_config(cfg: BaseModel) -> str:
    """The resolved config as YAML (paths absolute)."""
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
