"""Command-line options generated from a settings model: one definition per setting.

    @settings_options(TrainConfig, param="settings", aliases={"--lr": "learning_rate"})
    def train(base: Path = typer.Option(...), *, settings: TrainConfig) -> None: ...

adds one option per leaf field of the model (nested sections flatten with dashes:
`lora.r` → `--lora-r`, `grpo.group_size` → `--grpo-group-size`), with the field's docstring as
its help and the model's default as its default. The values become a mapping that the model
validates, so the CLI, loop.yaml and the phase share one set of defaults, types and bounds.
A validation error names the option (`--lora-r: must be > 0 (got 0)`) and exits 2 like any
bad input.

Deliberately different from typer's usual style: the command never repeats a default, and
old spellings of renamed options stay accepted for one release as hidden aliases that print a
deprecation warning (`aliases`). Values of non-scalar fields (lists, mappings) are read as
YAML, as in `tuneloop run … key=value` overrides.
"""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import typer
import yaml
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from tuneloop.config.load import format_error
from tuneloop.errors import InputError

_SCALARS = (bool, int, float, str, Path)
_PREFIX = "set_"
_ALIAS = "alias__"


def leaf_fields(
    model: type[BaseModel], path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], FieldInfo]]:
    """(dotted path, field) of every leaf setting, nested sections flattened in order."""
    for name, field in model.model_fields.items():
        section = _section_type(field.annotation)
        if section is not None:
            yield from leaf_fields(section, (*path, name))
        else:
            yield (*path, name), field


def flag(path: tuple[str, ...]) -> str:
    """The option spelling of a settings path: ("lora", "r") → `--lora-r`."""
    return "--" + "-".join(path).replace("_", "-")


def settings_options(
    model: type[BaseModel],
    *,
    param: str,
    aliases: dict[str, str] | None = None,
    defaults: dict[str, Any] | None = None,
    skip: frozenset[str] = frozenset(),
    panel: str | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a typer command: generate options for `model` and pass it as `param`.

    `aliases` maps an old option spelling to a dotted settings path; `defaults` replaces a
    model default for this command only (e.g. `port: 8000` for a foreground server); `skip`
    names dotted paths the command does not expose (they keep the model's default).
    """
    leaves = [(p, f) for p, f in leaf_fields(model) if ".".join(p) not in skip]
    by_dotted = {".".join(p): (p, f) for p, f in leaves}
    aliases = aliases or {}
    for old, dotted in aliases.items():
        if dotted not in by_dotted:
            raise ValueError(f"alias {old} names unknown setting {dotted!r}")
    panel = panel or f"Settings ({model.__name__})"

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        own = [
            p for p in inspect.signature(fn, eval_str=True).parameters.values() if p.name != param
        ]
        generated = [_parameter(param, p, f, defaults, panel) for p, f in leaves]
        hidden = [_alias_parameter(old, by_dotted[d][1]) for old, d in aliases.items()]

        def command(**kwargs: Any) -> Any:
            values = _given(kwargs, param, by_dotted, aliases)
            kwargs[param] = validate_settings(model, values)
            return fn(**kwargs)

        params = [*own, *generated, *hidden]
        command.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params]
        )
        command.__annotations__ = {p.name: p.annotation for p in params}
        command.__name__, command.__doc__ = fn.__name__, fn.__doc__
        command.__module__, command.__qualname__ = fn.__module__, fn.__qualname__
        return command

    return decorate


def validate_settings(model: type[BaseModel], values: dict[str, Any]) -> Any:
    """`model` from dotted values; a ValidationError becomes one InputError naming options."""
    nested: dict[str, Any] = {}
    for dotted, value in values.items():
        *parents, last = dotted.split(".")
        target = nested
        for part in parents:
            target = target.setdefault(part, {})
        target[last] = value
    try:
        return model.model_validate(nested)
    except ValidationError as err:
        problems = [format_error(e, {}, model, name=flag) for e in err.errors()]
        raise InputError(f"{len(problems)} invalid option(s)\n  " + "\n  ".join(problems)) from None


def _given(
    kwargs: dict[str, Any], param: str, by_dotted: dict[str, Any], aliases: dict[str, str]
) -> dict[str, Any]:
    """The settings from the command line; a deprecated alias, when given, wins (warned)."""
    values = {}
    for dotted, (path, field) in by_dotted.items():
        value = kwargs.pop(_name(param, path), None)
        if value is not None:
            values[dotted] = _parse(value, field)
    for old, dotted in aliases.items():
        value = kwargs.pop(_ALIAS + _ident(old), None)
        if value is not None:
            new = flag(by_dotted[dotted][0])
            print(f"warning: {old} is deprecated; use {new}", file=sys.stderr)
            values[dotted] = _parse(value, by_dotted[dotted][1])
    return values


def _parse(value: Any, field: FieldInfo) -> Any:
    if isinstance(value, str) and _cli_type(field.annotation) is str and not _is_text(field):
        try:
            return yaml.safe_load(value)
        except yaml.YAMLError:
            return value
    return value


def _name(param: str, path: tuple[str, ...]) -> str:
    """The Python name of a generated option (unique across stacked decorators)."""
    return "__".join((_PREFIX + param, *path))


def _parameter(
    param: str,
    path: tuple[str, ...],
    field: FieldInfo,
    defaults: dict[str, Any] | None,
    panel: str,
) -> inspect.Parameter:
    kind = _cli_type(field.annotation)
    dotted = ".".join(path)
    default = (defaults or {}).get(dotted, field.get_default(call_default_factory=True))
    spelling = flag(path)
    if kind is bool:
        spelling = f"{spelling}/--no-{spelling[2:]}"
    help_text = (field.description or "").replace("\n", " ")
    if kind is str and not _is_text(field):
        help_text += " (YAML value)"
    option = typer.Option(
        _cli_default(default, kind),
        spelling,
        help=help_text,
        rich_help_panel=panel,
        metavar=_metavar(field),
    )
    return inspect.Parameter(
        _name(param, path),
        inspect.Parameter.KEYWORD_ONLY,
        default=option,
        annotation=kind | None,
    )


def _alias_parameter(old: str, field: FieldInfo) -> inspect.Parameter:
    kind = _cli_type(field.annotation)
    spelling = f"{old}/--no-{old[2:]}" if kind is bool else old
    return inspect.Parameter(
        _ALIAS + _ident(old),
        inspect.Parameter.KEYWORD_ONLY,
        default=typer.Option(None, spelling, hidden=True),
        annotation=kind | None,
    )


def _ident(option: str) -> str:
    return option.lstrip("-").replace("-", "_")


def _cli_default(default: Any, kind: type) -> Any:
    """The model's default as the option shows and returns it (YAML text for non-scalars)."""
    if default is None or kind is not str or isinstance(default, str):
        return default
    return yaml.safe_dump(default, default_flow_style=True).strip()


def _metavar(field: FieldInfo) -> str | None:
    options = _literals(field.annotation)
    return "|".join(options) if options and _cli_type(field.annotation) is str else None


def _cli_type(annotation: Any) -> type:
    """The click-level type of a field: a scalar, or `str` for anything read as YAML."""
    args = [a for a in _union_args(annotation) if a is not type(None)]
    if len(args) == 1 and args[0] in _SCALARS:
        return args[0]
    if all(get_origin(a) is Literal for a in args):
        return str
    if len(args) == 1 and isinstance(args[0], type) and issubclass(args[0], Path):
        return Path
    return str


def _is_text(field: FieldInfo) -> bool:
    """True when the field's values are plain text (not parsed as YAML)."""
    args = [a for a in _union_args(field.annotation) if a is not type(None)]
    return all(a is str or get_origin(a) is Literal for a in args)


def _literals(annotation: Any) -> list[str]:
    out: list[str] = []
    for arg in _union_args(annotation):
        if get_origin(arg) is Literal:
            out.extend(str(v) for v in get_args(arg))
    return out


def _union_args(annotation: Any) -> tuple[Any, ...]:
    """The alternatives of a type, `Annotated` metadata stripped (`ConfigPath` is a Path)."""
    args = (
        get_args(annotation)
        if get_origin(annotation) in (Union, types.UnionType)
        else (annotation,)
    )
    return tuple(get_args(a)[0] if get_origin(a) is Annotated else a for a in args)


def _section_type(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None
