"""The bench worker: one process that runs a batch of (kernel, problem) pairs on one device.

``python -m ckspace.run.worker FD`` reads a :class:`BatchJob` as JSON on standard input and
writes JSON lines to file descriptor ``FD``: ``device`` once, then per problem ``prepare`` (the
range of pairs whose operands are being prepared), per pair ``start`` (the pair is in flight) and
``done`` with its :class:`PairResult`. The supervisor (:mod:`ckspace.run.supervisor`) reads them: a
pair that started and never finished is the one that crashed or hung its process, and pairs whose
preparation never finished are the ones whose operands took the process down (out of memory).
Messages go to their own pipe, not stdout, so whatever a kernel library prints cannot corrupt them.

Pairs arrive ordered by problem, so a problem's operands are generated, uploaded and its CPU
reference computed once for all the batch's kernels that run it: the whole reference, or for a big
problem its values at sampled elements (:mod:`ckspace.verify.sampled`). Before that, the bytes it
needs are held against the memory free now (:func:`memory_need`, :meth:`Device.shortfall`): a
problem too big for the device or the host is ``failed`` for its pairs, with the bytes, and the
batch goes on, instead of the allocation killing the worker.
"""

from __future__ import annotations

import ctypes
import itertools
import json
import logging
import os
import signal
import statistics
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

import numpy as np
from pydantic import BaseModel

from ckspace.core.errors import CkspaceError
from ckspace.core.vocab import Dtype, Variant
from ckspace.run.device import Backend, Device, open_device
from ckspace.run.library import STATUS, ConvProblemC, KernelLibrary
from ckspace.verify import reference as ref
from ckspace.verify import sampled
from ckspace.verify.comparison import Verification, tolerance, verify, verify_at
from ckspace.workloads.measurement import Status
from ckspace.workloads.problem import ConvProblem

log = logging.getLogger(__name__)


class PairSpec(BaseModel):
    """One pair to run: the kernel's index in the library's table and the problem."""

    kernel: int
    name: str
    variant: Variant
    dtype: Dtype
    problem_idx: int
    problem: ConvProblem


class BatchJob(BaseModel):
    library: str
    backend: Backend
    device: int
    """The device index inside the worker's process (after HIP_VISIBLE_DEVICES, if set)."""
    pairs: list[PairSpec]
    warmup: int
    repeat: int
    verify: bool
    seed: int


class PairResult(BaseModel):
    status: Status
    latency_ms: float | None = None
    latency_min_ms: float | None = None
    latency_max_ms: float | None = None
    non_zero: int | None = None
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    tolerance: str | None = None
    detail: str = ""


class MemoryNeed(NamedTuple):
    """The bytes a problem holds while its pairs run: its operands on the device, and on the host
    the operands drawn there (a and b), the output read back (c) and the CPU reference's result."""

    operands: ref.OperandBytes
    reference: int

    @property
    def device(self) -> int:
        return sum(self.operands)

    @property
    def host(self) -> int:
        return sum(self.operands) + self.reference

    def text(self) -> str:
        a, b, c = self.operands
        reference = f" + reference {self.reference}" if self.reference else ""
        return f"operands A {a} + B {b} + C {c}{reference} bytes"


def memory_need(spec: PairSpec, verify: bool) -> MemoryNeed:
    """What preparing and running ``spec``'s problem holds (the reference only when it is computed
    whole; values at sampled elements are a few kilobytes)."""
    whole_reference = verify and not sampled.use_sampling(spec.problem, spec.variant)
    c_elements = int(np.prod(ref.operand_shapes(spec.problem, spec.variant).c))
    return MemoryNeed(
        ref.operand_bytes(spec.problem, spec.variant, spec.dtype),
        c_elements * np.dtype(np.float32).itemsize if whole_reference else 0,
    )


def problem_groups(pairs: Sequence[PairSpec]) -> Iterator[range]:
    """The runs of consecutive pairs of one problem (its operands are prepared once for them), as
    ranges of indices into ``pairs``."""
    start = 0
    for _, group in itertools.groupby(pairs, key=lambda p: (p.problem_idx, p.variant, p.dtype)):
        stop = start + sum(1 for _ in group)
        yield range(start, stop)
        start = stop


class _Prepared:
    """A problem's operands on the device and its CPU reference (whole or at sampled elements),
    shared by the batch's kernels."""

    def __init__(self, device: Device, spec: PairSpec, seed: int, verify: bool) -> None:
        a, b = ref.random_operands(spec.problem, spec.variant, spec.dtype, seed + spec.problem_idx)
        self.c_shape = ref.operand_shapes(spec.problem, spec.variant).c
        self.c_dtype = ref.numpy_dtype(spec.dtype)
        self.c_bytes = int(np.prod(self.c_shape)) * self.c_dtype.itemsize
        self.check = self._checker(spec, a, b, seed) if verify else None
        self.device = device
        self.a, self.b, self.c = device.alloc(a.nbytes), device.alloc(b.nbytes), device.alloc(self.c_bytes)
        device.upload(self.a, a)
        device.upload(self.b, b)

    @staticmethod
    def _checker(spec: PairSpec, a: np.ndarray, b: np.ndarray, seed: int) -> Callable[[np.ndarray], Verification]:
        """The check of a kernel's output: against the whole reference, or, for a problem whose
        full reference is too costly (:func:`~ckspace.verify.sampled.use_sampling`), against
        the reference at :data:`~ckspace.verify.sampled.SAMPLES` positions drawn from the seed."""
        tol = tolerance(spec.problem, spec.variant, spec.dtype)
        if sampled.use_sampling(spec.problem, spec.variant):
            positions = sampled.sample_positions(spec.problem, spec.variant, sampled.SAMPLES, seed + spec.problem_idx)
            values = sampled.reference_at(spec.problem, spec.variant, a, b, positions)
            log.info("problem %d: reference at %d sampled elements", spec.problem_idx, positions.size)
            return lambda output: verify_at(output, positions, values, tol)
        c_reference = ref.reference(spec.problem, spec.variant, a, b)
        return lambda output: verify(output, c_reference, tol)

    def release(self) -> None:
        for pointer in (self.a, self.b, self.c):
            self.device.free(pointer)


def run_pair(library: KernelLibrary, device: Device, prepared: _Prepared, spec: PairSpec, job: BatchJob) -> PairResult:
    """Warm up, time ``job.repeat`` runs (each on a zeroed output, so kernels that accumulate with
    atomics are timed and checked as they run in use) and verify the last output. The kernel's
    workspace (``ckspace_workspace_size``) is allocated here, outside the timed runs, as a
    framework's allocator would hand it over."""
    problem = ConvProblemC.of(spec.problem, spec.variant, spec.dtype)
    size = library.workspace_size(spec.kernel, spec.problem, spec.variant, spec.dtype)
    workspace = device.alloc(size) if size else None
    try:
        return _timed_runs(library, device, prepared, spec, job, problem, (workspace, size))
    finally:
        if workspace is not None:
            device.free(workspace)


def _timed_runs(
    library: KernelLibrary,
    device: Device,
    prepared: _Prepared,
    spec: PairSpec,
    job: BatchJob,
    problem: ConvProblemC,
    workspace: tuple[int | None, int],
) -> PairResult:
    times: list[float] = []
    for round_ in range(job.warmup + job.repeat):
        device.zero(prepared.c, prepared.c_bytes)
        status, ms = device.time_ms(
            lambda: library.run_status(
                spec.kernel, problem, prepared.a, prepared.b, prepared.c, *workspace, device.stream
            )
        )
        if status != 0:
            return PairResult(status="failed", detail=f"ckspace_run returned {status} ({STATUS.get(status, '?')})")
        if round_ >= job.warmup:
            times.append(ms)
    output = np.frombuffer(device.download(prepared.c, prepared.c_bytes), dtype=prepared.c_dtype)
    result = PairResult(
        status="ok",
        latency_ms=statistics.median(times),
        latency_min_ms=min(times),
        latency_max_ms=max(times),
        non_zero=int(np.count_nonzero(output)),
    )
    if prepared.check is not None:
        check = prepared.check(output.reshape(prepared.c_shape))
        result.max_abs_error, result.max_rel_error = check.max_abs_error, check.max_rel_error
        result.tolerance, result.detail = check.tolerance, check.summary
        if not check.ok:
            result.status = "wrong"
    return result


def serve(job: BatchJob, send: Sender) -> None:
    device = open_device(job.backend, job.device)
    send({"device": device.info.model_dump()})
    library = KernelLibrary(job.library)
    if job.backend == "hip":  # a kernel launched on a device of another arch fails: say so once
        supported, arch = library.device_supported()
        if not supported:
            raise CkspaceError(f"GPU {job.device} is {arch}; {library.path.name} holds kernels for {library.arch}")
    for group in problem_groups(job.pairs):
        send({"prepare": [group.start, group.stop]})
        first = job.pairs[group.start]
        need = memory_need(first, job.verify)
        if (short := device.shortfall(need.host, need.device)) is not None:
            refused = PairResult(status="failed", detail=f"not run: {need.text()}; {short}")
            log.warning("problem %d: %s", first.problem_idx, refused.detail)
            for i in group:
                send({"done": i, "result": refused.model_dump()})
            continue
        prepared = _Prepared(device, first, job.seed, job.verify)
        try:
            for i in group:
                send({"start": i})
                result = run_pair(library, device, prepared, job.pairs[i], job)
                send({"done": i, "result": result.model_dump()})
        finally:
            prepared.release()


class Sender:
    """Whole JSON lines to the supervisor's pipe, one ``write`` each."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __call__(self, message: dict) -> None:
        os.write(self.fd, (json.dumps(message) + "\n").encode())


def _die_with_parent() -> None:
    """Ask Linux to kill this worker when its supervisor dies (a ``kill -9`` of ``ckspace bench``
    must not leave a hung kernel's process running). Elsewhere the supervisor's own cleanup is all."""
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the supervisor died before the request took effect
        os._exit(1)


def main(argv: list[str]) -> int:
    _die_with_parent()
    logging.basicConfig(level=logging.WARNING, format="ckspace worker: %(message)s")
    job = BatchJob.model_validate_json(sys.stdin.buffer.read())
    try:
        serve(job, Sender(int(argv[0])))
    except CkspaceError as exc:  # a broken setup: one line, which the supervisor reports
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
