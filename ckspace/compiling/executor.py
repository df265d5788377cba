"""The seam between ``ckspace build`` and what runs its compiles: translation units in, one result
per unit out.

An executor (``local``: :mod:`~ckspace.compiling.ninja_executor` on this machine, the default; ``ray``:
:mod:`~ckspace.compiling.ray_executor` on a Ray cluster) gets the units whose objects are not in the
cache and returns, for every one of them, the object's bytes or none, and the compiler's log. What
follows — storing objects in the cache, isolating failed batches, the per-kernel logs, the report
and the link — is the build's and shared, so both executors give the same report by construction.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from pydantic import BaseModel

from ckspace.core.errors import InvalidChoiceError

log = logging.getLogger(__name__)

EXECUTORS = ("local", "ray")
"""Where the work runs, in the one vocabulary of ``build`` and ``bench`` (``--executor``): ``local``
on this machine (ninja's compiles, bench's worker processes), ``ray`` as tasks on a Ray cluster."""

RENAMED = {"ninja": "local"}
"""Executor names ``build`` took before build and bench named executors alike, and their names now."""


def executor_name(name: str) -> str:
    """``name`` as one of :data:`EXECUTORS`: an old name (:data:`RENAMED`) is still accepted, with
    a one-line warning naming the new one, so scripts written for it keep working; anything else
    is refused naming the valid ones."""
    if name in RENAMED:
        log.warning("executor %r is now called %r (as in bench); %r is accepted for now", name, RENAMED[name], name)
        return RENAMED[name]
    if name not in EXECUTORS:
        raise InvalidChoiceError("executor", name, EXECUTORS)
    return name


class Unit(BaseModel):
    """One translation unit: the kernels it includes, its text, the emitted files it includes (paths
    relative to the tree: hashed into the key, and shipped to a remote worker) and its cache key."""

    name: str
    kernels: list[str]
    text: str
    files: list[str]
    key: str

    @property
    def items(self) -> list[str]:
        """What the build's progress counts this unit as when it finishes: its kernels, or the unit
        itself when it has none (the dispatcher's ``ckspace_run``)."""
        return self.kernels or [self.name]


class UnitResult(BaseModel):
    """What compiling one unit gave: the object (``None`` when it failed) and the compiler's log."""

    object: bytes | None
    log: str


class Executor(Protocol):
    """Compiles units; ``stage`` names the round (``build``, ``singles``, ``dispatch``) for the files
    an executor keeps; ``advance(unit)`` is called once as each unit finishes, whether it compiled or
    not, so that the build's progress counts the unit's kernels."""

    def compile(self, stage: str, units: list[Unit], advance: Callable[[Unit], None]) -> dict[str, UnitResult]: ...
