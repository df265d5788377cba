"""Compiling translation units as Ray tasks, on whichever machines the cluster has.

Each unit is one task (one CPU of the cluster) running :func:`~ckspace.compiling.ray_task.compile_unit`
with the toolchain's compile command (:meth:`Toolchain.compile_command`, the ninja rule's) in a
temporary folder on the worker. The emitted sources a unit includes travel with the task (the files
every unit includes, such as the registry header, are put in the object store once per round), so no
shared storage is assumed: a tree's sources are kilobytes per kernel, while sharing the tree would
tie every worker to one file server and to the driver's paths. The CK headers and the compiler are
large and fixed, so they are installed on every worker at the driver's paths instead.

A task that fails — its compile fails, or its worker dies (Ray's worker-crash errors) — runs once
more; the second outcome is the unit's, and its log says it was retried and why.
"""

from __future__ import annotations

import logging
import re
from collections import deque
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from ckspace.compiling import ray_task
from ckspace.compiling.executor import Unit, UnitResult
from ckspace.compiling.toolchain import Toolchain

log = logging.getLogger(__name__)

ATTEMPTS = 2
TERMINAL_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


class RayExecutor:
    """Units of the tree at ``tree`` compiled on the connected Ray cluster, ``jobs`` tasks in flight
    at most; ``ck_include`` is the CK include directory, at the same path on every worker."""

    def __init__(self, ray: ModuleType, tree: Path, toolchain: Toolchain, ck_include: str, jobs: int) -> None:
        self.ray = ray
        self.tree = tree
        self.toolchain = toolchain
        self.ck_include = ck_include
        self.jobs = jobs
        ray.cloudpickle.register_pickle_by_value(ray_task)
        self.task = ray.remote(ray_task.compile_unit).options(num_cpus=1, max_retries=0, retry_exceptions=False)

    def compile(self, stage: str, units: list[Unit], advance: Callable[[Unit], None]) -> dict[str, UnitResult]:
        if not units:
            return {}
        common = set.intersection(*(set(u.files) for u in units)) if len(units) > 1 else set()
        shared = self.ray.put({f: (self.tree / f).read_bytes() for f in sorted(common)})
        queue: deque[tuple[Unit, int]] = deque((u, 1) for u in units)
        pending: dict[object, tuple[Unit, int]] = {}
        earlier: dict[str, str] = {}
        results: dict[str, UnitResult] = {}
        while queue or pending:
            while queue and len(pending) < self.jobs:
                unit, attempt = queue.popleft()
                own = {f: (self.tree / f).read_bytes() for f in unit.files if f not in common}
                command = self.toolchain.compile_command(
                    f"tu/{unit.name}.cpp", f"{unit.name}.o", (".", self.ck_include)
                )
                pending[self.task.remote(unit.name, unit.text, shared, own, command, self.toolchain.version)] = (
                    unit,
                    attempt,
                )
            done, _ = self.ray.wait(list(pending), num_returns=1)
            for ref in done:
                unit, attempt = pending.pop(ref)
                obj, text = self._outcome(ref)
                if obj is None and attempt < ATTEMPTS:
                    log.info("%s: unit %s failed (attempt %d), retrying", stage, unit.name, attempt)
                    earlier[unit.name] = text
                    queue.appendleft((unit, attempt + 1))
                    continue
                if unit.name in earlier:
                    text = (
                        f"# attempt 1 of {ATTEMPTS} failed; retried:\n{earlier.pop(unit.name)}"
                        f"# attempt 2 of {ATTEMPTS}:\n{text}"
                    )
                results[unit.name] = UnitResult(object=obj, log=text)
                advance(unit)
        return results

    def _outcome(self, ref: object) -> tuple[bytes | None, str]:
        """The task's object and log; a task that raised or whose worker died has no object, and its
        log names Ray's error (a worker crash, a node lost, ...)."""
        try:
            return self.ray.get(ref)
        except self.ray.exceptions.RayError as exc:
            text = TERMINAL_COLOUR.sub("", str(exc)).strip()  # Ray colours its task names
            first = text.splitlines()[0] if text else ""
            return None, f"error: the Ray task failed ({type(exc).__name__}): {first}\n"
