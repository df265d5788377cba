"""Planning ``ckspace build``: which translation units compile which kernels, each unit's cache key,
and which units the object cache already holds (:class:`Planner`).

Parsing the CK headers costs about 10 s per translation unit, so kernels go ``batch`` to a unit
(each unit includes the kernels' compilation units), and only the units whose object the cache
lacks are compiled. The kernels of a batch that failed are planned again one per unit, so the
report names exactly the kernels that fail. Planning compiles and writes nothing (it reads the
tree's sources, which the keys hash): it is tested with a stand-in cache.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ckspace.compiling import objcache
from ckspace.compiling.executor import Unit
from ckspace.compiling.toolchain import Toolchain
from ckspace.core.ck import CkRevision
from ckspace.emit.rendering import REGISTRY_HEADER
from ckspace.environment.inputs import read_input


@dataclass(frozen=True)
class Round:
    """One round of compiles: its units, and the misses among them (the units whose object the
    cache lacks: what the executor compiles)."""

    units: list[Unit]
    misses: list[Unit]


@dataclass(frozen=True)
class Planner:
    """Plans the units of the emitted ``tree`` for ``toolchain`` and the CK ``revision``;
    ``lookup`` is the object cache (a key's object, or None)."""

    tree: Path
    toolchain: Toolchain
    revision: CkRevision
    lookup: Callable[[str], Path | None] = objcache.lookup

    def unit(self, name: str, kernels: list[str], text: str, files: list[str]) -> Unit:
        """The unit ``text`` including the emitted ``files``, keyed by all that changes its object
        (:func:`~ckspace.compiling.objcache.object_key`)."""
        sources = [text.encode(), *(read_input(self.tree / f, "source") for f in files)]
        key = objcache.object_key(
            sources,
            self.toolchain.identity,
            self.toolchain.compile_flags,
            self.toolchain.arch,
            self.revision.fingerprint,
        )
        return Unit(name=name, kernels=kernels, text=text, files=files, key=key)

    def cached(self, unit: Unit) -> Path | None:
        """``unit``'s object in the cache, or None."""
        return self.lookup(unit.key)

    def batches(self, kernels: list[str], size: int, prefix: str = "batch") -> Round:
        """``kernels`` ``size`` to a unit, in order: ``batch0000``, ``batch0001``, ... (``prefix``
        names the kernels of one set of archs apart in a library of several)."""
        return self._round(self._units(kernels, size, prefix))

    def failed(self, batches: list[Unit]) -> list[Unit]:
        """The batches of more than one kernel that have no object (after their compile: they failed)."""
        return [u for u in batches if len(u.kernels) > 1 and self.cached(u) is None]

    def singles(self, failed: list[Unit]) -> Round:
        """The kernels of the ``failed`` batches one to a unit (``single_<batch>_0000``, ...)."""
        return self._round([s for u in failed for s in self._units(u.kernels, 1, f"single_{u.name}_")])

    def _units(self, kernels: list[str], size: int, prefix: str) -> list[Unit]:
        units = []
        for start in range(0, len(kernels), size):
            members = kernels[start : start + size]
            text = "".join(f'#include "{name}.cpp"\n' for name in members)
            files = [REGISTRY_HEADER, *(f"{name}{suffix}" for name in members for suffix in (".hpp", ".cpp"))]
            units.append(self.unit(f"{prefix}{start // size:04d}", members, text, files))
        return units

    def _round(self, units: list[Unit]) -> Round:
        return Round(units=units, misses=[u for u in units if self.cached(u) is None])
