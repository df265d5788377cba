"""The build report and each kernel's log: what ``ckspace build`` writes after the compiles.

:func:`kernel_results` turns the units' outcomes into one :class:`KernelResult` per kernel and
writes each kernel's ``logs/kernels/NAME.log``; :class:`BuildReport` is ``report.json``, which
:func:`hip_build_of` reads back to tell a HIP library from a stand-in. Kept apart from
:mod:`~ckspace.compiling.builder` because none of it compiles or links: it only reads what the
executor left (logs, cached objects) and says what happened, whichever executor ran the compiles.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from ckspace.compiling.executor import Unit
from ckspace.compiling.toolchain import Toolchain
from ckspace.compiling.units import Planner
from ckspace.emit.manifest import logs_dir
from ckspace.environment.files import write_atomic
from ckspace.environment.inputs import read_input

REPORT_NAME = "report.json"
ERROR_LINE = re.compile(r"(^|\s)(fatal )?error:")


class KernelResult(BaseModel):
    name: str
    status: Literal["ok", "failed"]
    cached: bool
    unit: str
    log: str
    error: str | None


class BuildReport(BaseModel):
    arch: str
    toolchain: Toolchain
    ck_revision: str
    ck_fingerprint: str
    batch: int
    jobs: int
    executor: str = "local"
    """What ran the compiles (:data:`~ckspace.compiling.executor.EXECUTORS`): ``local`` (ninja on this
    machine) or ``ray`` (a cluster); a report written before the two were so named says ``ninja``
    for ``local``."""
    units: int
    """Translation units: the batches, plus one per kernel of each failed batch."""
    compiled_units: int
    """Units compiled in this run (the others came from the object cache)."""
    seconds: float
    ok: int
    failed: int
    cached: int
    library: str | None
    link_error: str | None
    kernels: list[KernelResult]
    plugin: str | None = None
    """The hipDNN plugin linked from the same objects (a tree emitted ``--hipdnn-plugin``)."""
    plugin_error: str | None = None


def first_error(text: str) -> str | None:
    for line in text.splitlines():
        if ERROR_LINE.search(line):
            return line.strip()
    return None


def kernel_results(
    build_dir: Path, planner: Planner, units: list[Unit], fresh: set[str]
) -> tuple[list[KernelResult], list[str]]:
    """Each kernel's result (by name) and the objects of the ``units`` that compiled; writes each
    kernel's ``logs/kernels/NAME.log``: its unit's compiler log if the unit was compiled in this run
    (it is in ``fresh``), a header naming the unit either way."""
    results: list[KernelResult] = []
    objects: list[str] = []
    for unit in units:
        cached_obj = planner.cached(unit)
        unit_log = logs_dir(build_dir) / f"{unit.name}.log"
        text = unit_log.read_text(errors="replace") if unit.name in fresh and unit_log.is_file() else ""
        if cached_obj is not None:
            objects.append(str(cached_obj))
        for name in unit.kernels:
            kernel_log = logs_dir(build_dir) / "kernels" / f"{name}.log"
            header = (
                f"# unit {unit.name} ({len(unit.kernels)} kernels), "
                f"{'compiled' if unit.name in fresh else 'from cache'} {unit.key}\n"
            )
            write_atomic(kernel_log, (header + text).encode())
            results.append(
                KernelResult(
                    name=name,
                    status="ok" if cached_obj is not None else "failed",
                    cached=unit.name not in fresh,
                    unit=unit.name,
                    log=str(kernel_log.relative_to(build_dir)),
                    error=None if cached_obj is not None else (first_error(text) or "compiler failed (see log)"),
                )
            )
    results.sort(key=lambda r: r.name)
    return results, objects


def hip_build_of(library: Path) -> BuildReport | None:
    """The report ``ckspace build`` wrote beside ``library`` when it linked it, else None. Such a
    library is HIP code (``--host-only`` links no kernel library), whose ``ckspace_run`` cannot
    compute on host memory; a stand-in library has no report naming it. A report that cannot be
    read says nothing either way (None)."""
    path = library.parent / REPORT_NAME
    try:
        report = BuildReport.model_validate_json(read_input(path, "build report"))  # a fifo there: refused
    except (OSError, ValueError):  # InvalidInputError is a ValueError
        return None
    return report if report.library and Path(report.library).name == library.name else None
