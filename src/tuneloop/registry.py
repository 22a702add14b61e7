"""Named plugins: scorers, serving backends, trainers, trace ingesters, tools and environments.

Built-ins register themselves with a decorator when their module is imported
(`@scorers.register("name")`, or for scorers `@scorer("numeric", inline=True)`, which also
records the scorer's properties on its factory); a registry imports its built-in modules the
first time it is asked for a name. Third-party packages add plugins through entry points, one
group per kind (`tuneloop.scorers`, `tuneloop.serve_backends`, `tuneloop.trainers`,
`tuneloop.ingesters`, `tuneloop.tools`, `tuneloop.environments`); an entry point names the
object to register under its name.
Unknown names raise `InputError` with "did you mean …". There is deliberately no discovery
by `__subclasses__()`: what is registered is exactly what `tuneloop plugins` lists.

Each registry is typed by its plugin protocol (`tuneloop.plugins`; the serving backend's is
`tuneloop.endpoint.ServeBackend`), so a registration is checked against the protocol and a
look-up returns it. The built-in modules are named by string, deliberately: they are phases
and shared libraries (`tuneloop.serve.backends`, `tuneloop.train.methods`, …), and this core
module imports none of them, so importing the registry stays light and every phase may import
it; each is imported on the first look-up instead.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

from tuneloop.endpoint import ServeBackend
from tuneloop.errors import InputError, did_you_mean
from tuneloop.plugins import EnvironmentFactory, Ingester, ScorerFactory, Tool, Trainer

T = TypeVar("T")


class Registry(Generic[T]):
    """A name → plugin map for one kind of plugin."""

    def __init__(self, kind: str, group: str, builtin_modules: tuple[str, ...] = ()) -> None:
        self.kind = kind
        self.group = group
        self._builtin_modules = builtin_modules
        self._items: dict[str, T] = {}
        self._origins: dict[str, str] = {}
        self._loaded = False

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: register the decorated object under `name` (snake_case)."""
        if not name.replace("_", "").replace("-", "").isalnum():
            raise ValueError(f"{self.kind} name {name!r} must be snake_case")

        def deco(obj: T) -> T:
            self.add(name, obj, origin=getattr(obj, "__module__", "?"))
            return obj

        return deco

    def add(self, name: str, obj: T, origin: str = "?") -> None:
        if name in self._items and self._items[name] is not obj:
            raise ValueError(
                f"{self.kind} {name!r} is registered twice ({self._origins[name]} and {origin})"
            )
        self._items[name] = obj
        self._origins[name] = origin

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        for module in self._builtin_modules:
            importlib.import_module(module)
        for ep in entry_points(group=self.group):
            if ep.name not in self._items:
                self.add(ep.name, ep.load(), origin=f"entry point {ep.value}")

    def get(self, name: str) -> T:
        self._load()
        try:
            return self._items[name]
        except KeyError:
            known = ", ".join(sorted(self._items)) or "none"
            raise InputError(
                f"unknown {self.kind} {name!r}{did_you_mean(name, self._items)}; known: {known}"
            ) from None

    def names(self) -> list[str]:
        self._load()
        return sorted(self._items)

    def origin(self, name: str) -> str:
        self._load()
        return self._origins[name]

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._items


# The registries, each with the modules of its built-ins (imported on first use; see above).
scorers: Registry[ScorerFactory] = Registry("scorer", "tuneloop.scorers", ("tuneloop.scorers",))
serve_backends: Registry[ServeBackend] = Registry(
    "serve backend",
    "tuneloop.serve_backends",
    ("tuneloop.serve.backends", "tuneloop.serve.cascade.backend"),
)
trainers: Registry[Trainer] = Registry("trainer", "tuneloop.trainers", ("tuneloop.train.methods",))
ingesters: Registry[Ingester] = Registry(
    "ingester", "tuneloop.ingesters", ("tuneloop.data.ingest",)
)
tools: Registry[Tool] = Registry("tool", "tuneloop.tools", ("tuneloop.envs",))
environments: Registry[EnvironmentFactory] = Registry(
    "environment", "tuneloop.environments", ("tuneloop.envs",)
)

ALL: dict[str, Registry[Any]] = {
    "scorers": scorers,
    "serve_backends": serve_backends,
    "trainers": trainers,
    "ingesters": ingesters,
    "tools": tools,
    "environments": environments,
}
