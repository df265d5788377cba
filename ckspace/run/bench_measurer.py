"""The learning loop's measurer that builds and times for real (``ckspace learn --tree DIR``).

:class:`BenchMeasurer` answers the loop (:mod:`ckspace.training.learning`) for one cell of a tree
emitted ``--with-selector``: its kernels are the manifest's of that cell (identity is the config),
it builds them with ``ckspace build``'s machinery and times pairs with ``ckspace bench``'s sweep.

Why it is built this way:

* **The tree is built whole, once.** ``ckspace build`` compiles a tree's every kernel (batched
  translation units, the object cache, ninja or Ray); it has no per-kernel build. So the loop's
  first ``build`` builds the whole tree and later ones cost nothing: :attr:`~BenchMeasurer.build_seconds`
  is 0 (a kernel the loop adds costs nothing more), and the tree's build is the one cost stated
  apart, :attr:`~BenchMeasurer.tree_seconds`, which ``ckspace learn`` reports. A kernel that fails
  to compile is data: its pairs are not measured, their rows naming its first error. With
  ``--backend host`` the build is the host build (the dispatcher's host part, which plans the
  pairs); the stand-in kernel library, whose ``ckspace_run`` computes on host memory, must already
  be in the tree, as for ``ckspace bench --backend host``.
* **Timed by bench's sweep.** :meth:`~BenchMeasurer.measure` runs :func:`~ckspace.run.sweep.run_sweep`
  (worker processes, supervision, verification on by default) on the pairs asked, into a CSV in a
  temporary directory removed afterwards: the loop writes the record, bench's CSV is never a
  second copy of it, and nothing is written beside the user's files.
* **The record keeps bench's evidence.** The loop's row of a pair carries only its TFLOPS or a
  reason; :meth:`~BenchMeasurer.record` wraps the loop's record so that each row appended also
  carries what the sweep knew of that pair: the status it ended with (``wrong``, ``crash``,
  ``timeout``...), the check's errors and tolerance, the spread of the timed runs and the device.
"""

from __future__ import annotations

import csv
import logging
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ckspace.compiling.builder import build, build_host, stderr_is_terminal
from ckspace.core.config import GemmConfig
from ckspace.core.errors import CkspaceError, InvalidInputError
from ckspace.core.kernel_key import KernelKey
from ckspace.emit.manifest import Manifest, built_kernel_libraries, read_manifest
from ckspace.environment.progress import NOTICE
from ckspace.run.sweep import SweepOptions, run_sweep
from ckspace.training.measurer import REPLAY_PAIR_SECONDS, Measurer, Pair, Record, supported_pairs
from ckspace.workloads.measurement import EXTRA_PROBLEM_COLUMNS, PROBLEM_COLUMNS, problem_cells
from ckspace.workloads.problem import ConvProblem

log = logging.getLogger(__name__)

EVIDENCE_COLUMNS: tuple[str, ...] = (
    "non_zero",
    "status",
    "max_abs_error",
    "max_rel_error",
    "tolerance",
    "latency_min_ms",
    "latency_max_ms",
    "warmup",
    "repeat",
    "device",
    "device_name",
    "clock_mhz",
    "detail",
)
"""The sweep's columns of a pair that the loop's own row lacks or states less precisely (its status
is ``ok`` or ``failed``); the loop's TFLOPS and latency stay, so a ``wrong`` pair is no measurement."""
UNSUPPORTED = "not supported: the dispatcher's ckspace_is_supported refuses this problem for this kernel"
_PAIR_COLUMNS = (*PROBLEM_COLUMNS, *EXTRA_PROBLEM_COLUMNS)

_Key = tuple[str, tuple[str, ...]]


class BenchMeasurer(Measurer):
    """Builds a tree with ``ckspace build`` and times pairs with ``ckspace bench``'s sweep (see the
    module doc); ``arch`` is the loop's cell's, the tree is built for every arch it holds."""

    build_seconds = 0.0
    pair_seconds = REPLAY_PAIR_SECONDS
    """Stated, not measured, as for replay: the loop plans with it before anything is timed, and a
    cost that changed with the timings would make a resumed run plan differently."""

    def __init__(
        self,
        tree: Path,
        arch: str,
        variant: str,
        dtype: str,
        options: SweepOptions,
        *,
        executor: str = "local",
        address: str | None = None,
        devices: Sequence[int] = (0,),
        jobs: int | None = None,
    ) -> None:
        self.tree = Path(tree)
        self.options, self.executor, self.address, self.devices, self.jobs = options, executor, address, devices, jobs
        manifest = read_manifest(self.tree, dispatcher=True, named=f"--tree {self.tree}")
        self.archs = manifest.arch_list if manifest.archs else [arch]
        self._arch = arch if manifest.archs else None  # run_sweep's arch: only for a library of several
        self._configs = _cell(manifest, self.tree, arch, variant, dtype)
        self._names: dict[KernelKey, str] = {c.kernel_key(): name for name, c in self._configs.items()}
        if options.backend == "host":
            self._stand_in()
        self.device_name = f"bench --backend {options.backend} of {self.tree.name}"
        self.not_measured = "not measured by bench"
        self.tree_seconds: float | None = None
        """What building the tree cost (None before it is built)."""
        self.failed: dict[str, str] = {}
        """Kernels that failed to build, by name, with why."""
        self._library: Path | None = None
        self._host: Path | None = None
        self._evidence: dict[_Key, dict[str, str]] = {}

    def kernels(self) -> tuple[GemmConfig, ...]:
        return tuple(self._configs.values())

    def runs(self, problems: Sequence[ConvProblem]) -> np.ndarray:
        """The pairs whose kernel passes CK's support checks for the problem: the checks the tree's
        dispatcher makes before it runs a pair, so the loop asks none it would refuse."""
        return supported_pairs(problems, self.kernels())

    def build(self, kernels: Sequence[GemmConfig]) -> float:
        """Build the whole tree at the first call (every kernel of it, whichever were asked for);
        later calls cost nothing."""
        if self._host is not None:
            return 0.0
        started = time.monotonic()
        if self.options.backend == "host":
            self._library = self._stand_in()
        else:
            self._build_kernels()
        self._host = build_host(self.tree)
        self.tree_seconds = time.monotonic() - started
        log.log(
            NOTICE,
            "%s built in %.1f s (%d kernels of the cell, %d failed)",
            self.tree,
            self.tree_seconds,
            len(self._configs),
            len(self.failed),
        )
        return self.tree_seconds

    def measure(self, pairs: Sequence[Pair]) -> list[float | None]:
        """Each pair's TFLOPS from a sweep of its kernel on the problems asked of it (a sweep runs
        every kernel given on every problem given: one per kernel times no pair unasked), ``None``
        where it did not end ``ok`` (the row's status and detail, through :meth:`record`, say why)."""
        if self._host is None:
            raise CkspaceError("pairs are timed before the tree was built")
        names = [self._names[config.kernel_key()] for _, config in pairs]
        asked: dict[str, list[ConvProblem]] = {}
        for (problem, _), name in zip(pairs, names, strict=True):
            asked.setdefault(name, []).append(problem)
        rows: dict[_Key, dict[str, str]] = {}
        for name, problems in asked.items():
            if name not in self.failed:
                rows.update(self._sweep(name, tuple(dict.fromkeys(problems))))
        answers: list[float | None] = []
        for (problem, _), name in zip(pairs, names, strict=True):
            key = _key(name, problem_cells(problem))
            row = rows.get(key)
            if name in self.failed:
                evidence = {"status": "failed", "detail": self.failed[name]}
            elif row is None:
                evidence = {"status": "failed", "detail": UNSUPPORTED}
            else:
                evidence = {column: row[column] for column in EVIDENCE_COLUMNS}
                if row["status"] == "ok" and not row["tflops"]:
                    evidence.update(status="failed", detail="ran, but no time was measured")
            self._evidence[key] = evidence
            answers.append(float(row["tflops"]) if row is not None and evidence["status"] == "ok" else None)
        return answers

    def record(self, inner: Record) -> Record:
        """``inner`` with each row the loop appends completed by the sweep's evidence of its pair."""
        return _EvidencedRecord(inner, self._evidence)

    def summary(self) -> str:
        """What building the tree cost (it is built whole, not per kernel); '' if it was not built."""
        if self.tree_seconds is None:
            return ""
        failed = f", {len(self.failed)} of them failed" if self.failed else ""
        kernels = f"{len(self.kernels())} kernels of the cell{failed}"
        return f"{self.tree} built whole in {self.tree_seconds:.1f} s ({kernels})\n"

    def _stand_in(self) -> Path:
        """The tree's stand-in kernel library (``--backend host``), else one line saying what is missing."""
        libraries = built_kernel_libraries(self.tree)
        if len(libraries) != 1:
            raise InvalidInputError(
                f"--tree {self.tree}: --backend host times a stand-in kernel library (one ckspace_run "
                f"computing on host memory, in build/<arch>/), and this tree holds {len(libraries)}"
            )
        return libraries[0]

    def _build_kernels(self) -> None:
        """``ckspace build``'s build of the tree for its archs; a kernel that failed is noted."""
        report = build(
            self.tree,
            self.archs,
            jobs=self.jobs,
            batch=8,
            progress=stderr_is_terminal(),
            executor=self.executor,
            address=self.address,
        )
        for kernel in report.kernels:
            if kernel.status != "ok" and kernel.name in self._configs:
                self.failed[kernel.name] = f"build failed: {kernel.error}"
        if report.library is None:
            reason = f"the library did not link: {report.link_error}" if report.link_error else "no kernel compiled"
            self.failed.update(dict.fromkeys(self._configs, f"build failed: {reason}"))
        else:
            self._library = Path(report.library)

    def _sweep(self, name: str, problems: tuple[ConvProblem, ...]) -> dict[_Key, dict[str, str]]:
        """The sweep's rows of kernel ``name`` on ``problems``, by pair, from a CSV in a temporary
        directory."""
        assert self._library is not None and self._host is not None
        with tempfile.TemporaryDirectory(prefix="ckspace-learn-bench-") as scratch:
            out = Path(scratch) / "bench.csv"
            run_sweep(
                self._library,
                self._host,
                {name: self._configs[name]},
                problems,
                out,
                self.options,
                kernels=[name],
                devices=self.devices,
                ray_address=self.address,
                use_ray=self.executor == "ray",
                arch=self._arch,
            )
            with out.open(newline="") as handle:
                return {_key(row["kernel"], row): row for row in csv.DictReader(handle)}


class _EvidencedRecord:
    """A record whose appended rows take the sweep's evidence of their pair (see the module doc)."""

    def __init__(self, inner: Record, evidence: dict[_Key, dict[str, str]]) -> None:
        self.path = inner.path
        self._inner, self._evidence = inner, evidence

    def append(self, row: dict[str, str]) -> None:
        self._inner.append({**row, **self._evidence.pop(_key(row["kernel"], row), {})})


def _key(name: str, cells: dict[str, str]) -> _Key:
    """A pair by its kernel and its problem's columns (the loop and the sweep index problems apart)."""
    return name, tuple(cells[column] for column in _PAIR_COLUMNS)


def _cell(manifest: Manifest, tree: Path, arch: str, variant: str, dtype: str) -> dict[str, GemmConfig]:
    """The tree's kernels of the cell by name; in a tree of several archs, those ``arch``'s
    dispatcher ranks, as that arch's configs."""
    kernels = {k.name: k.gemm_config() for k in manifest.kernels}
    if manifest.archs:
        assert manifest.dispatcher is not None and manifest.dispatcher.archs is not None
        names = manifest.dispatcher.archs.get(arch, [])
        kernels = {n: kernels[n].model_copy(update={"arch": arch}) for n in names}
    cell = {
        n: c for n, c in kernels.items() if c.arch == arch and c.variant.value == variant and c.dtype.value == dtype
    }
    if not cell:
        held = sorted({f"{c.arch} {c.variant.value} {c.dtype.value}" for c in kernels.values()})
        raise InvalidInputError(
            f"--tree {tree} has no {arch} {variant} {dtype} kernels (it holds {', '.join(held) or 'none'})"
        )
    return cell
