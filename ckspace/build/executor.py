"""The seam between ``ckspace build`` and what runs its compiles: translation units in, one result
per unit out.

An executor (:mod:`~ckspace.build.ninja_executor` on this machine, the default;
:mod:`~ckspace.build.ray_executor` on a Ray cluster) gets the units whose objects are not in the
cache and returns, for every one of them, the object's bytes or none, and the compiler's log. What
follows — storing objects in the cache, isolating failed batches, the per-kernel logs, the report
and the link — is the build's and shared, so both executors give the same report by construction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from pydantic import BaseModel


class Unit(BaseModel):
    """One translation unit: the kernels it includes, its text, the emitted files it includes (paths
    relative to the tree: hashed into the key, and shipped to a remote worker) and its cache key."""

    name: str
    kernels: list[str]
    text: str
    files: list[str]
    key: str


class UnitResult(BaseModel):
    """What compiling one unit gave: the object (``None`` when it failed) and the compiler's log."""

    object: bytes | None
    log: str


class Executor(Protocol):
    """Compiles units; ``stage`` names the round (``build``, ``singles``, ``dispatch``) for the files
    an executor keeps, ``advance(n)`` moves the progress bar as units finish."""

    def compile(self, stage: str, units: list[Unit], advance: Callable[[int], None]) -> dict[str, UnitResult]: ...
