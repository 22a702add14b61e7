"""Reading YAML configs into pydantic models: every error at once, with its YAML path and line.

`load_yaml_model(path, Model)` reads the YAML, applies dotted command-line overrides
(`train.steps=50`), resolves relative paths against the YAML file's folder (through the
`ConfigPath` type), and validates. Every problem is collected and raised together as one
`InputError`, each line naming the YAML path (and line, where the key exists in the file;
`(override)` for a value a command-line override set, never the line it replaced) and what
was expected; unknown keys get "did you mean …". Nothing is written while loading.
`loop.yaml` (`load_config`) and `corpus.yaml` both load through it.

Schema and semantic errors in one report: a caller that checks more than the schema (the
preflight of `tuneloop check`: plugin names, slices, paths, cross-section rules) passes it as
`semantic`. When the schema holds, the caller runs its checks on the config as before. When it
does not, the semantic checks still run, on a best-effort config: the values that failed are
dropped (their defaults stand in) and the model validated again, and the semantic errors are
reported with the schema errors, except those that concern a value that failed (their key, or
their message, names it: a judgement on a stand-in default would mislead). Deliberately
limited: when a required key is missing or a whole-model rule fails, there is no best-effort
config and only the schema errors are reported.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from tuneloop.config.models import LoopConfig
from tuneloop.errors import InputError, did_you_mean, read_utf8

M = TypeVar("M", bound=BaseModel)

_COMPARISONS = (
    ("greater than or equal to", ">="),
    ("less than or equal to", "<="),
    ("greater than", ">"),
    ("less than", "<"),
)


Semantic = Callable[[M], Iterable[tuple[str, str]]]
"""Checks beyond the schema: a config → its errors as (dotted key, message)."""


def load_config(
    path: Path,
    overrides: list[str] | None = None,
    semantic: Semantic[LoopConfig] | None = None,
) -> LoopConfig:
    """Read, override, resolve and validate a loop.yaml; raise InputError with every error
    (with `semantic`'s too when the schema fails; see the module docstring)."""
    return load_yaml_model(path, LoopConfig, "config file", overrides, semantic)


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


def load_yaml_model(
    path: Path,
    model: type[M],
    what: str,
    overrides: list[str] | None = None,
    semantic: Semantic[M] | None = None,
) -> M:
    """Read a YAML file into `model`; relative `ConfigPath`s resolve against its folder."""
    path = Path(path)
    data, node = read_yaml(path, what)
    errors: list[str] = []
    for item in overrides or []:
        try:
            apply_override(data, item)
        except ValueError as err:
            errors.append(f"override {item!r}: {err}")
    context = {"base_dir": path.parent.resolve()}
    try:
        cfg = model.model_validate(data, context=context)
    except ValidationError as err:
        lines = line_map(node)
        given = overridden(overrides)
        errors.extend(format_error(e, lines, model, from_overrides=given) for e in err.errors())
        if semantic is not None:
            where = locator(lines, overrides)
            errors.extend(
                f"{where(key)}: {message}"
                for key, message in _semantic_errors(model, data, context, semantic)
            )
        cfg = None
    if errors or cfg is None:
        raise InputError(f"{path}: {len(errors)} error(s)\n  " + "\n  ".join(errors))
    return cfg


def locator(lines: dict[tuple[str, ...], int], overrides: list[str] | None) -> Callable[[str], str]:
    """A dotted key → `key (line n)`, or `key (override)` / `key (default)` where it is not in
    the file: how every error of a config names its place."""
    given = overridden(overrides)

    def where(key: str) -> str:
        if _is_overridden(tuple(key.split(".")), given):
            return f"{key} (override)"
        line = lines.get(tuple(key.split(".")))
        return f"{key} (line {line})" if line else f"{key} (default)"

    return where


def overridden(overrides: list[str] | None) -> frozenset[tuple[str, ...]]:
    """The YAML paths the command-line overrides set (`train.steps=5` → `(train, steps)`)."""
    return frozenset(tuple(item.partition("=")[0].split(".")) for item in overrides or [])


def _is_overridden(loc: tuple[str, ...], given: frozenset[tuple[str, ...]]) -> bool:
    """Whether the value at `loc` came from an override (it or a section above it)."""
    return any(loc[: len(g)] == g for g in given)


def _semantic_errors(
    model: type[M], data: dict[str, Any], context: dict[str, Any], semantic: Semantic[M]
) -> list[tuple[str, str]]:
    """`semantic`'s errors on the best-effort config, less those about a failed value."""
    best, failed = _best_effort(model, data, context)
    if best is None:
        return []

    def about_failed(key: str, message: str) -> bool:
        return any(
            key == f or key.startswith(f"{f}.") or f.startswith(f"{key}.") or f in message
            for f in failed
        )

    return [(k, m) for k, m in semantic(best) if not about_failed(k, m)]


def _best_effort(
    model: type[M], data: dict[str, Any], context: dict[str, Any]
) -> tuple[M | None, set[str]]:
    """The model with every value that fails validation dropped (its default stands in), and
    the dotted keys dropped; None when that cannot validate (a required key is missing)."""
    data = copy.deepcopy(data)
    failed: set[str] = set()
    while True:
        try:
            return model.model_validate(data, context=context), failed
        except ValidationError as err:
            if any(e["type"] == "missing" for e in err.errors()):
                return None, failed
            paths = {_value_path(data, e["loc"]) for e in err.errors()} - {()}
            if not paths:  # a whole-model rule: nothing to drop
                return None, failed
            for path in sorted(paths, key=len):
                if not any(path[: len(p)] == p for p in paths if len(p) < len(path)):
                    _drop(data, path)
                    failed.add(".".join(path))


def _value_path(data: dict[str, Any], loc: tuple[Any, ...]) -> tuple[str, ...]:
    """The mapping keys of `loc` down to the failed value as far as `data` has them (a failed
    list item: the whole list; a union's branch names: the value itself)."""
    keys: list[str] = []
    target: Any = data
    for part in loc:
        if not (isinstance(target, dict) and isinstance(part, str) and part in target):
            break
        target = target[part]
        keys.append(part)
    return tuple(keys)


def _drop(data: dict[str, Any], path: tuple[str, ...]) -> None:
    target = data
    for part in path[:-1]:
        target = target[part]
    del target[path[-1]]


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
    from_overrides: frozenset[tuple[str, ...]] = frozenset(),
) -> str:
    """One pydantic error as `where: what (got …)`; `name` spells a location (YAML path or
    command-line option), `lines` adds the YAML line where known, and a value that came from
    a command-line override (`from_overrides`, as `overridden()` gives) is `key (override)`,
    never the line of the file's value it replaced."""
    loc = tuple(str(p) for p in e["loc"] if not str(p).startswith("function-"))
    dotted = name(loc) if loc else "(top level)"
    line = lines.get(loc)
    if loc and _is_overridden(loc, from_overrides):
        where = f"{dotted} (override)"
    else:
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
