"""``ckspace bench``: run every supported (kernel, problem) pair of a built library, verified, and
append one CSV row per pair.

Why it is built this way:

* **A batch per process.** Kernels run in worker processes (:mod:`ckspace.run.worker`), a
  batch of kernels each. A page fault or a hang costs the pair in flight, not the sweep: the
  supervisor records it as ``crash`` or ``timeout`` and starts a new worker on the rest of the batch.
  The process that plans and writes never initialises a GPU.
* **One worker per device**, fed from one queue of batches; with Ray, one task per batch on any node
  of the cluster that has a free device, its rows streamed back as they are measured.
* **Nothing lost.** Rows are appended whole, one ``write`` each, as pairs finish; ``--resume`` skips
  the pairs already in the file, so a killed sweep loses at most the pairs in flight.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from ckspace import __version__
from ckspace.core.config import GemmConfig
from ckspace.core.errors import CkspaceError, InvalidInputError
from ckspace.run.results import ResultsFile
from ckspace.core.measurement import config_cells, problem_cells
from ckspace.core.problem import ConvProblem
from ckspace.build.builder import hip_build_of
from ckspace.run.device import Backend, DeviceInfo
from ckspace.run.c_api import Dispatcher
from ckspace.run.loader import exported_functions
from ckspace.run.worker import BatchJob, PairResult, PairSpec

log = logging.getLogger(__name__)

RUN_SYMBOL = "ckspace_run"
STANDIN_RESOURCE = "ckspace_device"
"""The Ray resource a stand-in (host) library's batch asks for in place of a GPU: a cluster's nodes
declare how many stand-in devices they hold (``ray start --resources '{"ckspace_device": 2}'``)."""

PREPARE_LIMIT_S = 900.0
"""How long a worker may go without starting a pair while it loads the library, opens the device
and computes a problem's CPU reference (the per-pair ``--timeout`` starts when the pair does)."""


class SweepOptions(BaseModel):
    backend: Backend = "hip"
    warmup: int = 3
    repeat: int = 10
    verify: bool = True
    timeout: float = 60.0
    batch: int = 8
    """Kernels per worker process."""
    seed: int = 0


@dataclass(frozen=True)
class Outcome:
    """One finished pair, as the supervisor saw it."""

    spec: PairSpec
    result: PairResult
    device: str
    device_info: DeviceInfo | None


# -- planning ---------------------------------------------------------------------------------------

def plan_pairs(library: Dispatcher, configs: dict[str, GemmConfig], problems: Sequence[ConvProblem],
               kernels: Sequence[str] | None = None) -> list[PairSpec]:
    """Every (kernel, problem) pair that ``ckspace_is_supported`` accepts, kernel by kernel."""
    names = library.kernel_names
    wanted = set(kernels) if kernels is not None else None
    if wanted is not None and (unknown := sorted(wanted - set(names))):
        raise InvalidInputError(f"--kernels: {library.path.name} has no kernel {unknown[0]!r} "
                                f"({len(unknown)} unknown of {len(wanted)})")
    pairs = []
    for index, name in enumerate(names):
        if wanted is not None and name not in wanted:
            continue
        config = configs[name]
        for idx, problem in enumerate(problems):
            if problem.ndim == config.ndim and library.is_supported(index, problem, config.variant, config.dtype):
                pairs.append(PairSpec(kernel=index, name=name, variant=config.variant, dtype=config.dtype,
                                      problem_idx=idx, problem=problem))
    return pairs


def batches(pairs: Sequence[PairSpec], kernels_per_batch: int) -> list[list[PairSpec]]:
    """Consecutive kernels ``kernels_per_batch`` at a time; inside a batch, pairs ordered by problem
    so that a worker prepares each problem once for all the batch's kernels."""
    by_kernel: dict[int, list[PairSpec]] = {}
    for pair in pairs:
        by_kernel.setdefault(pair.kernel, []).append(pair)
    kernels = sorted(by_kernel)
    out = []
    for start in range(0, len(kernels), kernels_per_batch):
        members = [p for k in kernels[start:start + kernels_per_batch] for p in by_kernel[k]]
        out.append(sorted(members, key=lambda p: (p.problem_idx, p.kernel)))
    return out


# -- the supervisor -----------------------------------------------------------------------------------

def supervise(job: BatchJob, timeout: float, device: str, env: dict[str, str] | None = None) -> Iterator[Outcome]:
    """Run ``job`` in worker processes until every pair has an outcome: a pair whose worker dies
    is ``crash``, one that outlives ``timeout`` seconds is ``timeout`` (its worker is killed); the
    batch then goes on after it in a new worker. A worker that dies before finishing any pair, twice
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
            proc = subprocess.Popen([sys.executable, "-m", "ckspace.run.worker", str(write_fd)],
                                    stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=stderr,
                                    pass_fds=(write_fd,), env=self.env, start_new_session=True)
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
            if self._in_flight is not None:
                why = _signal_text(proc.returncode) + (f": {tail[-1][:200]}" if tail and proc.returncode > 0 else "")
                yield self._in_flight, PairResult(status="crash", detail=why)

    def _read(self, proc: subprocess.Popen, read_fd: int) -> Iterator[DeviceInfo | tuple[int, PairResult]]:
        assert proc.stdin is not None
        try:
            proc.stdin.write(self.job.model_dump_json().encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass
        self._in_flight: int | None = None
        buffer, since = b"", time.monotonic()
        with os.fdopen(read_fd, "rb", buffering=0) as pipe, selectors.DefaultSelector() as selector:
            selector.register(pipe, selectors.EVENT_READ)
            while True:
                limit = self.timeout if self._in_flight is not None else PREPARE_LIMIT_S
                left = limit - (time.monotonic() - since)
                if left <= 0:
                    _kill(proc)
                    if self._in_flight is not None:
                        yield self._in_flight, PairResult(status="timeout", detail=f"no result after {self.timeout:g} s")
                        self._in_flight = None
                    else:
                        self.error = f"no pair started within {PREPARE_LIMIT_S:g} s"
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
                    elif "start" in message:
                        self._in_flight, since = message["start"], time.monotonic()
                    elif "done" in message:
                        self._in_flight, since = None, time.monotonic()
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
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


# -- executors ----------------------------------------------------------------------------------------

_LIVE: set[subprocess.Popen] = set()
_LIVE_LOCK = threading.Lock()


def _register(proc: subprocess.Popen, alive: bool) -> None:
    with _LIVE_LOCK:
        (_LIVE.add if alive else _LIVE.discard)(proc)


def _kill_all() -> None:
    """Workers run in sessions of their own (a Ctrl-C at the terminal does not reach them), so an
    interrupted sweep ends them itself."""
    with _LIVE_LOCK:
        procs = list(_LIVE)
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def local_outcomes(jobs: Sequence[BatchJob], devices: Sequence[int], options: SweepOptions) -> Iterator[Outcome]:
    """One thread per device, each supervising workers for the next batch in the queue."""
    work: queue.Queue[BatchJob] = queue.Queue()
    for job in jobs:
        work.put(job)
    results: queue.Queue[Outcome | BaseException | None] = queue.Queue()
    stop = threading.Event()

    def serve(device: int) -> None:
        env = dict(os.environ)
        local = device
        if options.backend == "hip":
            env["HIP_VISIBLE_DEVICES"] = str(device)
            local = 0
        try:
            while not stop.is_set():
                try:
                    job = work.get_nowait()
                except queue.Empty:
                    break
                for outcome in supervise(job.model_copy(update={"device": local}), options.timeout, str(device), env):
                    if stop.is_set():
                        break
                    results.put(outcome)
        except BaseException as exc:  # handed to the main thread, which raises it
            results.put(exc)
        finally:
            results.put(None)

    threads = [threading.Thread(target=serve, args=(d,), name=f"bench-device-{d}", daemon=True) for d in devices]
    for thread in threads:
        thread.start()
    running = len(threads)
    try:
        while running:
            item = results.get()
            if item is None:
                running -= 1
            elif isinstance(item, BaseException):
                raise item
            else:
                yield item
    finally:
        stop.set()
        _kill_all()
        for thread in threads:
            thread.join(timeout=10)


def _ray_batch(job: BatchJob, timeout: float, backend: Backend) -> Iterator[Outcome]:
    """A Ray task: one batch on the device Ray gave this task, outcomes streamed back."""
    import ray

    context = ray.get_runtime_context()
    if backend == "hip":
        gpus = context.get_accelerator_ids().get("GPU", [])
        label = f"{ray.util.get_node_ip_address()}:{','.join(map(str, gpus))}"
    else:  # stand-in devices have no ids: the node says where the batch ran
        label = f"{ray.util.get_node_ip_address()}:node-{context.get_node_id()[:8]}"
    yield from supervise(job.model_copy(update={"device": 0}), timeout, label)


def ray_outcomes(jobs: Sequence[BatchJob], options: SweepOptions, address: str | None) -> Iterator[Outcome]:
    """One Ray task per batch wherever the cluster has a free device (``num_gpus=1``; stand-in
    libraries ask for the custom resource ``ckspace_device`` instead). A task lost with its node
    is sent once more with the pairs it had not finished; a second loss is an error. The library
    must be at the same path on every node (shared storage, or the same tree copied there)."""
    from ckspace.build.cluster import connected

    with connected(address) as ray:
        resource = "GPU" if options.backend == "hip" else STANDIN_RESOURCE
        if not ray.cluster_resources().get(resource):
            raise CkspaceError(f"the Ray cluster offers no {resource} resource: start its nodes with "
                               + ("GPUs" if resource == "GPU" else f"ray start --resources '{{\"{resource}\": N}}'"))
        demand = {"num_gpus": 1} if options.backend == "hip" else {"resources": {resource: 1}}
        task = ray.remote(max_retries=0, num_cpus=0, **demand)(_ray_batch).options(num_returns="streaming")
        pending = {task.remote(job, options.timeout, options.backend): (job, set(), False) for job in jobs}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            generator = ready[0]
            job, seen, resent = pending[generator]
            try:
                outcome = ray.get(next(generator))
            except StopIteration:
                del pending[generator]
                continue
            except ray.exceptions.RayError as exc:
                del pending[generator]
                rest = [p for p in job.pairs if (p.kernel, p.problem_idx) not in seen]
                if resent:
                    raise CkspaceError(f"a Ray bench task failed twice ({type(exc).__name__}): {str(exc)[:200]}") from None
                log.warning("a Ray bench task was lost (%s); sending its %d unfinished pair(s) again",
                            type(exc).__name__, len(rest))
                again = job.model_copy(update={"pairs": rest})
                pending[task.remote(again, options.timeout, options.backend)] = (again, set(), True)
                continue
            seen.add((outcome.spec.kernel, outcome.spec.problem_idx))
            yield outcome


# -- the sweep ----------------------------------------------------------------------------------------

def measurement_row(outcome: Outcome, config: GemmConfig, options: SweepOptions) -> dict[str, str]:
    """The CSV row of one outcome (see :mod:`ckspace.core.measurement`)."""
    spec, result = outcome.spec, outcome.result

    def text(value: float | int | None) -> str:
        return "" if value is None else (repr(value) if isinstance(value, float) else str(value))

    timed = result.status in ("ok", "wrong") and result.latency_ms is not None and result.latency_ms > 0
    tflops = spec.problem.flops / (result.latency_ms * 1e-3) / 1e12 if timed else None
    info = outcome.device_info
    return {
        "kernel": spec.name, "problem_idx": str(spec.problem_idx), **problem_cells(spec.problem),
        **config_cells(config),
        "latency_ms": text(result.latency_ms if timed else None), "tflops": text(tflops),
        "non_zero": text(result.non_zero), "status": result.status,
        "max_abs_error": text(result.max_abs_error), "max_rel_error": text(result.max_rel_error),
        "tolerance": result.tolerance or "", "latency_min_ms": text(result.latency_min_ms),
        "latency_max_ms": text(result.latency_max_ms), "warmup": str(options.warmup),
        "repeat": str(options.repeat), "device": outcome.device, "device_name": info.name if info else "",
        "clock_mhz": text(info.clock_mhz if info else None), "detail": result.detail,
        "ckspace_version": __version__,
    }


class SweepSummary(BaseModel):
    pairs: int
    skipped: int
    """Pairs already in the file (``--resume``)."""
    counts: dict[str, int]
    seconds: float


def run_sweep(library_path: Path, host_path: Path, configs: dict[str, GemmConfig], problems: tuple[ConvProblem, ...],
              out: Path, options: SweepOptions, *, kernels: Sequence[str] | None = None, devices: Sequence[int] = (0,),
              resume: bool = False, ray_address: str | None = None, use_ray: bool = False,
              progress: bool = False) -> SweepSummary:
    """Plan the pairs, skip those done, run the rest, append their rows; see the module docstring.

    The pairs are planned with the tree's host-only dispatcher (``host_path``: the same kernel table
    and checks, no HIP), so this process never loads the HIP runtime; only workers load
    ``library_path``."""
    started = time.monotonic()
    if RUN_SYMBOL not in exported_functions(library_path):
        raise InvalidInputError(f"{library_path} has no ckspace_run (a --host-only build): build the kernels")
    if options.backend == "host" and (report := hip_build_of(library_path)) is not None:
        # up front: on host memory every pair of a HIP library would end 'failed', in a sweep that exits 0
        raise InvalidInputError(f"--backend host: {library_path} is a HIP library (ckspace build linked it for "
                                f"{report.arch} with {report.toolchain.version}); bench it with --backend hip on an "
                                "AMD GPU (host is for stand-in libraries whose ckspace_run computes on host memory)")
    host = Dispatcher.load(host_path)
    pairs = plan_pairs(host, configs, problems, kernels)
    results = ResultsFile.open(out, resume, problems)
    todo = [p for p in pairs if (p.name, p.problem_idx) not in results.done]
    log.info("%d supported pairs, %d already in %s, %d to run", len(pairs), len(pairs) - len(todo), out, len(todo))
    jobs = [BatchJob(library=str(library_path.resolve()), backend=options.backend, device=0, pairs=batch,
                     warmup=options.warmup, repeat=options.repeat, verify=options.verify, seed=options.seed)
            for batch in batches(todo, options.batch)]
    counts: dict[str, int] = {}
    outcomes = ray_outcomes(jobs, options, ray_address) if use_ray else local_outcomes(jobs, devices, options)
    from rich.progress import TextColumn, TimeRemainingColumn

    from ckspace.core.progress import counting_bar

    try:
        with counting_bar(enabled=progress, extra=(TextColumn("{task.fields[rate]}"), TextColumn("ETA"),
                                                   TimeRemainingColumn())) as bar:
            task = bar.add_task("bench", total=len(todo), rate="")
            for outcome in outcomes:
                results.append(measurement_row(outcome, configs[outcome.spec.name], options))
                counts[outcome.result.status] = counts.get(outcome.result.status, 0) + 1
                done = sum(counts.values())
                bar.update(task, advance=1, rate=f"{done / max(time.monotonic() - started, 1e-9):.2f} pairs/s")
    finally:
        results.close()
    return SweepSummary(pairs=len(pairs), skipped=len(pairs) - len(todo), counts=counts,
                        seconds=round(time.monotonic() - started, 2))
