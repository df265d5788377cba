"""What the learning loop measures through: a :class:`Measurer` builds kernels and times pairs.

On a GPU the two costs differ by orders of magnitude: building a kernel is a compile of ~20 s of
CPU, timing a (problem, kernel) pair on a built kernel is milliseconds of GPU plus the supervisor's
set-up. The loop (:mod:`ckspace.training.learning`) trades them off, so a measurer states both
(:attr:`Measurer.build_seconds`, :attr:`Measurer.pair_seconds`) before it is asked to do anything.

:class:`ReplayMeasurer` answers from a recorded measurement CSV (either schema
:mod:`ckspace.training.dataset` reads) instead of a GPU: the honest stand-in where there is none. A
pair the recording lacks is *not measured* (``None``), never invented. The measurer that builds
through ``ckspace build`` and times through ``ckspace bench``'s sweep is
:class:`ckspace.run.bench_measurer.BenchMeasurer`, in ``run/`` (this layer cannot import it).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from ckspace.core.config import GemmConfig
from ckspace.core.errors import CkspaceError
from ckspace.core.kernel_key import KernelKey
from ckspace.select.candidates import CandidateSet, Rows
from ckspace.select.feasibility import feasible
from ckspace.training.dataset import Measurements, load_measurements
from ckspace.workloads.problem import ConvProblem

log = logging.getLogger(__name__)

REPLAY_BUILD_SECONDS = 22.0
"""What building one kernel costs in replay: the measured CPU cost of compiling one gfx942 kernel on
this project's machine, stated rather than replayed because a recording holds no compile times."""
REPLAY_PAIR_SECONDS = 1.0
"""What timing one pair costs in replay: an assumption, not a measurement (no GPU here). A pair's
kernel runs milliseconds (3 warm-up and 10 timed runs by default); bench's worker set-up, operand
upload and CPU check of the result dominate, and are taken as about a second."""

Pair = tuple[ConvProblem, GemmConfig]


class Record(Protocol):
    """Where measurement rows go (``ckspace.run.results.ResultsFile`` is one): already opened,
    checked against the problems and locked by the caller."""

    path: Path

    def append(self, row: dict[str, str]) -> None: ...


class Measurer(ABC):
    """Builds kernels and times (problem, kernel) pairs of one cell, and states what each costs."""

    build_seconds: float
    """The cost of building one kernel, known before it is built (the loop plans with it)."""
    pair_seconds: float
    """The cost of timing one pair on a built kernel, known before it is timed."""
    device_name: str
    """What the measurement rows name as their device."""
    not_measured: str
    """Why a pair this measurer answers ``None`` for has no measurement (a row's ``detail``)."""

    @abstractmethod
    def kernels(self) -> tuple[GemmConfig, ...]:
        """The kernels this measurer can build: the loop's candidates."""

    @abstractmethod
    def build(self, kernels: Sequence[GemmConfig]) -> float:
        """Build ``kernels``; returns the seconds it cost."""

    @abstractmethod
    def measure(self, pairs: Sequence[Pair]) -> list[float | None]:
        """TFLOPS of each pair on its built kernel, ``None`` where the pair has no measurement."""

    def record(self, inner: Record) -> Record:
        """The record the loop appends its rows to: ``inner``, or ``inner`` behind a wrapper that
        adds what this measurer knows of each pair beyond its TFLOPS (a GPU measurer: the check of
        the result, the device)."""
        return inner

    def summary(self) -> str:
        """What the measurer has to say after the loop, beyond the loop's own report ('' for nothing):
        a line, or lines, each ending in a newline."""
        return ""

    def runs(self, problems: Sequence[ConvProblem]) -> np.ndarray | None:
        """Which (problem, kernel) pairs of :meth:`kernels` can run at all, known before anything is
        built (problems x kernels); None when the measurer cannot tell, and every pair may run. The
        loop never asks a pair that cannot run: on a GPU it would be a pair of the budget spent on
        a refusal."""
        return None


class ReplayMeasurer(Measurer):
    """Answers from a recording; builds cost :data:`REPLAY_BUILD_SECONDS` each."""

    build_seconds = REPLAY_BUILD_SECONDS
    pair_seconds = REPLAY_PAIR_SECONDS

    def __init__(self, data: Measurements, label: str) -> None:
        self._configs = data.configs
        self._values = _recorded(data)
        self._built: set[KernelKey] = set()
        self.device_name = f"replay of {label}"
        self.not_measured = f"not in the replay recording {label}"

    @classmethod
    def load(cls, path: Path, arch: str, variant: str, dtype: str) -> ReplayMeasurer:
        """The recording of one cell in ``path`` (read and cleaned as ``ckspace train`` reads it)."""
        return cls(load_measurements([path], arch, variant, dtype), Path(path).name)

    def kernels(self) -> tuple[GemmConfig, ...]:
        return self._configs

    def build(self, kernels: Sequence[GemmConfig]) -> float:
        self._built.update(c.kernel_key() for c in kernels)
        return self.build_seconds * len(kernels)

    def measure(self, pairs: Sequence[Pair]) -> list[float | None]:
        out: list[float | None] = []
        for problem, config in pairs:
            key = config.kernel_key()
            if key not in self._built:
                raise CkspaceError(f"{config.name} is timed before it was built")
            out.append(self._values.get((problem, key)))
        return out


def supported_pairs(problems: Sequence[ConvProblem], configs: Sequence[GemmConfig]) -> np.ndarray:
    """The pairs whose kernel, as it is (no vector fallback: the loop times the kernel it names),
    passes every check CK's ``IsSupportedArgument`` makes for the problem
    (:func:`ckspace.select.feasibility.feasible`, the checks the generated dispatcher's
    ``ckspace_is_supported`` makes): problems x kernels."""
    candidates = CandidateSet(
        tuple(c.name for c in configs), Rows.build(list(configs)), np.asarray([c.ndim for c in configs])
    )
    cell = configs[0]
    return np.vstack([feasible(p, candidates, cell.variant, cell.dtype) for p in problems])


def _recorded(data: Measurements) -> dict[tuple[ConvProblem, KernelKey], float]:
    """Each recorded (shape, kernel) pair's TFLOPS; a shape the recording measured more than once
    is answered by the median of its measurements, as the reader merges a pair's duplicate rows."""
    values: dict[tuple[ConvProblem, KernelKey], list[float]] = {}
    keys = [c.kernel_key() for c in data.configs]
    for problem, line in zip(data.problems, data.tflops, strict=True):
        for key, value in zip(keys, line.tolist(), strict=True):
            if not np.isnan(value):
                values.setdefault((problem, key), []).append(value)
    return {pair: float(np.median(v)) for pair, v in values.items()}
