"""Supervision of the bench workers: one batch of (kernel, problem) pairs run in worker processes
(:mod:`ckspace.run.worker`) until every pair has an outcome.

A page fault, a hang or an allocation beyond memory costs the pairs in flight, not the sweep: the
supervisor reads the worker's messages (``prepare`` per problem, ``start`` and ``done`` per pair),
records the pair a dying worker had in flight as ``crash``, the pairs of a problem whose operands it
died preparing (a ``MemoryError``, the OOM killer's SIGKILL) as ``failed`` with the bytes they need,
and what outlives its time as ``timeout`` (killing the worker), and starts a new worker on the rest
of the batch. Workers run in sessions of their own; every live one is known
here, so that an interrupted sweep ends them (:func:`kill_all`). The executors that feed batches to
devices and the sweep that plans and writes are :mod:`ckspace.run.sweep`.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from ckspace.core.errors import CkspaceError
from ckspace.run.device import DeviceInfo
from ckspace.run.worker import BatchJob, PairResult, PairSpec, memory_need

PREPARE_LIMIT_S = 900.0
"""How long a worker may go without starting a pair while it loads the library, opens the device
and computes a problem's CPU reference (the per-pair ``--timeout`` starts when the pair does)."""


@dataclass(frozen=True)
class Outcome:
    """One finished pair, as the supervisor saw it."""

    spec: PairSpec
    result: PairResult
    device: str
    device_info: DeviceInfo | None


def supervise(job: BatchJob, timeout: float, device: str, env: dict[str, str] | None = None) -> Iterator[Outcome]:
    """Run ``job`` in worker processes until every pair has an outcome: a pair whose worker dies
    is ``crash``, one that outlives ``timeout`` seconds is ``timeout`` (its worker is killed), the
    pairs of a problem whose preparation kills the worker are ``failed``; the batch then goes on
    after them in a new worker. A worker that dies before finishing any pair, twice
    in a row, is a broken setup (library, device), not a kernel: that is an error."""
    remaining = list(job.pairs)
    info: DeviceInfo | None = None
    while remaining:
        worker = _Worker(job.model_copy(update={"pairs": remaining}), timeout, env)
        finished = 0
        for event in worker.events():
            if isinstance(event, DeviceInfo):
                info = event
                continue
            index, result = event
            yield Outcome(remaining[index], result, device, info)
            finished = index + 1
        if finished == 0:
            raise CkspaceError(f"the bench worker on device {device} stopped before running any pair: {worker.error}")
        remaining = remaining[finished:]


class _Worker:
    """One worker process over a job's pairs."""

    def __init__(self, job: BatchJob, timeout: float, env: dict[str, str] | None) -> None:
        self.job, self.timeout, self.env = job, timeout, env
        self.error = ""

    def events(self) -> Iterator[DeviceInfo | tuple[int, PairResult]]:
        """The worker's device, then (index, result) per finished pair, in order; ends with a
        ``crash``/``timeout`` result for the pair in flight if the worker dies or hangs."""
        read_fd, write_fd = os.pipe()
        with tempfile.TemporaryFile() as stderr:
            proc = subprocess.Popen(
                [sys.executable, "-m", "ckspace.run.worker", str(write_fd)],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                pass_fds=(write_fd,),
                env=self.env,
                start_new_session=True,
            )
            os.close(write_fd)
            _register(proc, True)
            try:
                yield from self._read(proc, read_fd)
            finally:
                _kill(proc)
                _register(proc, False)
            stderr.seek(0)
            tail = stderr.read().decode(errors="replace").strip().splitlines()
            self.error = self.error or (tail[-1] if tail else _signal_text(proc.returncode))[:300]
            why = _signal_text(proc.returncode) + (f": {tail[-1][:200]}" if tail and proc.returncode > 0 else "")
            for index in self._in_flight:
                yield index, self._lost(index, why)

    def _lost(self, index: int, why: str) -> PairResult:
        """The outcome of a pair in flight when its worker died: its kernel's crash, or, if the
        worker was preparing the problem's operands, a pair that could not be run."""
        if not self._preparing:
            return PairResult(status="crash", detail=why)
        need = memory_need(self.job.pairs[index], self.job.verify)
        return PairResult(status="failed", detail=f"not run: the worker died preparing {need.text()}: {why}")

    def _read(self, proc: subprocess.Popen, read_fd: int) -> Iterator[DeviceInfo | tuple[int, PairResult]]:
        assert proc.stdin is not None
        try:
            proc.stdin.write(self.job.model_dump_json().encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass
        self._in_flight, self._preparing = range(0), False
        buffer, since = b"", time.monotonic()
        with os.fdopen(read_fd, "rb", buffering=0) as pipe, selectors.DefaultSelector() as selector:
            selector.register(pipe, selectors.EVENT_READ)
            while True:
                limit = self.timeout if self._in_flight and not self._preparing else PREPARE_LIMIT_S
                left = limit - (time.monotonic() - since)
                if left <= 0:
                    _kill(proc)
                    late = PairResult(status="timeout", detail=f"no result after {limit:g} s")
                    for index in self._in_flight:
                        yield index, late
                    if not self._in_flight:
                        self.error = f"no pair started within {PREPARE_LIMIT_S:g} s"
                    self._in_flight = range(0)
                    return
                if not selector.select(left):
                    continue
                chunk = pipe.read(65536)
                if not chunk:
                    proc.wait()
                    return
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    message = json.loads(line)
                    if "device" in message:
                        yield DeviceInfo(**message["device"])
                    elif "prepare" in message:
                        self._in_flight, self._preparing = range(*message["prepare"]), True
                        since = time.monotonic()
                    elif "start" in message:
                        self._in_flight, self._preparing = range(message["start"], message["start"] + 1), False
                        since = time.monotonic()
                    elif "done" in message:
                        self._in_flight, since = range(0), time.monotonic()
                        yield message["done"], PairResult(**message["result"])


def _signal_text(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


def _kill(proc: subprocess.Popen) -> None:
    """End the worker and anything it started (its own session)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


_LIVE: set[subprocess.Popen] = set()
_LIVE_LOCK = threading.Lock()


def _register(proc: subprocess.Popen, alive: bool) -> None:
    with _LIVE_LOCK:
        (_LIVE.add if alive else _LIVE.discard)(proc)


def kill_all() -> None:
    """Workers run in sessions of their own (a Ctrl-C at the terminal does not reach them), so an
    interrupted sweep ends them itself."""
    with _LIVE_LOCK:
        procs = list(_LIVE)
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
