"""Functions registered by name, as verl registers its advantage estimators and policy losses: a recipe names
a part, the registry finds it, and a new part is one decorated function."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Generic, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class Registry(Generic[F]):
    """Functions registered by name. An unknown name lists the valid ones; a second registration raises."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._fns: dict[str, F] = {}

    def register(self, *names: str) -> Callable[[F], F]:
        def deco(fn: F) -> F:
            for name in names:
                if name in self._fns:
                    raise ValueError(f"{self.kind} {name!r} is already registered (by {self._fns[name].__name__})")
                self._fns[name] = fn
            return fn

        return deco

    def get(self, name: str) -> F:
        try:
            return self._fns[name]
        except KeyError:
            raise ValueError(f"unknown {self.kind} {name!r}; valid choices: {sorted(self._fns)}") from None

    def names(self) -> list[str]:
        return sorted(self._fns)

    def __contains__(self, name: object) -> bool:
        return name in self._fns


def load_target(target: str) -> Any:
    """The object a lazy ``"module:attribute"`` entry names, imported only now (demo parts, training loops, value
    kinds: parts whose modules pull in heavy dependencies are named by string and loaded when used)."""
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)
