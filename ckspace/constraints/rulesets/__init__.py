"""The registry of rule sets.

Every module of this package that defines a :class:`RuleSet` subclass with a ``name`` registers it
by importing: adding a rule set is adding a module here, nothing else changes.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from ckspace.constraints.rulesets.base import RuleSet
from ckspace.core.errors import InvalidChoiceError

_REGISTRY: dict[str, type[RuleSet]] = {}


def register(cls: type[RuleSet]) -> type[RuleSet]:
    """Class decorator: make ``cls`` available under ``cls.name``."""
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise RuntimeError(f"rule set {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls
    return cls


@cache
def _load_all() -> None:
    for info in pkgutil.iter_modules(__path__):
        if info.name != "base":
            importlib.import_module(f"{__name__}.{info.name}")


def rule_set_names() -> tuple[str, ...]:
    _load_all()
    return tuple(sorted(_REGISTRY))


@cache
def get_rule_set(name: str) -> RuleSet:
    """The rule set called ``name``; :class:`InvalidChoiceError` lists the others."""
    _load_all()
    key = str(name).strip().lower()
    if key not in _REGISTRY:
        raise InvalidChoiceError("rule set", name, rule_set_names())
    return _REGISTRY[key]()
