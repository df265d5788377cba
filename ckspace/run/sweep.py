"""``ckspace bench``: run every supported (kernel, problem) pair of a built library, verified, and
append one CSV row per pair.

Why it is built this way:

* **A batch per process.** Kernels run in worker processes (:mod:`ckspace.run.worker`), a
  batch of kernels each. A page fault or a hang costs the pair in flight, not the sweep: the
  supervisor (:mod:`ckspace.run.supervisor`) records it as ``crash`` or ``timeout`` and starts a new
  worker on the rest of the batch. The process that plans and writes never initialises a GPU.
* **One worker per device**, fed from one queue of batches; with Ray, one task per batch on any node
  of the cluster that has a free device, its rows streamed back as they are measured.
* **Nothing lost.** Rows are appended whole, one ``write`` each, as pairs finish; ``--resume`` skips
  the pairs already in the file, so a killed sweep loses at most the pairs in flight.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from pydantic import BaseModel

from ckspace import __version__
from ckspace.compiling.report import hip_build_of
from ckspace.core.config import GemmConfig
from ckspace.core.errors import CkspaceError, InvalidInputError
from ckspace.run.device import Backend
from ckspace.run.library import KernelLibrary
from ckspace.run.results import ResultsFile
from ckspace.run.supervisor import Outcome, kill_all, supervise
from ckspace.run.worker import BatchJob, PairSpec
from ckspace.workloads.measurement import config_cells, problem_cells
from ckspace.workloads.problem import ConvProblem

log = logging.getLogger(__name__)

STANDIN_RESOURCE = "ckspace_device"
"""The Ray resource a stand-in (host) library's batch asks for in place of a GPU: a cluster's nodes
declare how many stand-in devices they hold (``ray start --resources '{"ckspace_device": 2}'``)."""


class SweepOptions(BaseModel):
    backend: Backend = "hip"
    warmup: int = 3
    repeat: int = 10
    verify: bool = True
    timeout: float = 60.0
    batch: int = 8
    """Kernels per worker process."""
    seed: int = 0


# -- planning ---------------------------------------------------------------------------------------


def plan_pairs(
    library: KernelLibrary,
    configs: dict[str, GemmConfig],
    problems: Sequence[ConvProblem],
    kernels: Sequence[str] | None = None,
) -> list[PairSpec]:
    """Every (kernel, problem) pair that ``ckspace_is_supported`` accepts, kernel by kernel."""
    names = library.names
    wanted = set(kernels) if kernels is not None else None
    if wanted is not None and (unknown := sorted(wanted - set(names))):
        raise InvalidInputError(
            f"--kernels: {library.path.name} has no kernel {unknown[0]!r} ({len(unknown)} unknown of {len(wanted)})"
        )
    pairs = []
    for index, name in enumerate(names):
        if (wanted is not None and name not in wanted) or name not in configs:  # configs: the device arch's
            continue
        config = configs[name]
        for idx, problem in enumerate(problems):
            if problem.ndim == config.ndim and library.is_supported(index, problem, config.variant, config.dtype):
                pairs.append(
                    PairSpec(
                        kernel=index,
                        name=name,
                        variant=config.variant,
                        dtype=config.dtype,
                        problem_idx=idx,
                        problem=problem,
                    )
                )
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
        members = [p for k in kernels[start : start + kernels_per_batch] for p in by_kernel[k]]
        out.append(sorted(members, key=lambda p: (p.problem_idx, p.kernel)))
    return out


# -- executors ----------------------------------------------------------------------------------------


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
        kill_all()
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
    from ckspace.compiling.cluster import connected

    with connected(address) as ray:
        resource = "GPU" if options.backend == "hip" else STANDIN_RESOURCE
        if not ray.cluster_resources().get(resource):
            raise CkspaceError(
                f"the Ray cluster offers no {resource} resource: start its nodes with "
                + ("GPUs" if resource == "GPU" else f"ray start --resources '{{\"{resource}\": N}}'")
            )
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
                    raise CkspaceError(
                        f"a Ray bench task failed twice ({type(exc).__name__}): {str(exc)[:200]}"
                    ) from None
                log.warning(
                    "a Ray bench task was lost (%s); sending its %d unfinished pair(s) again",
                    type(exc).__name__,
                    len(rest),
                )
                again = job.model_copy(update={"pairs": rest})
                pending[task.remote(again, options.timeout, options.backend)] = (again, set(), True)
                continue
            seen.add((outcome.spec.kernel, outcome.spec.problem_idx))
            yield outcome


# -- the sweep ----------------------------------------------------------------------------------------


def measurement_row(outcome: Outcome, config: GemmConfig, options: SweepOptions) -> dict[str, str]:
    """The CSV row of one outcome (see :mod:`ckspace.workloads.measurement`)."""
    spec, result = outcome.spec, outcome.result

    def text(value: float | int | None) -> str:
        return "" if value is None else (repr(value) if isinstance(value, float) else str(value))

    timed = result.status in ("ok", "wrong") and result.latency_ms is not None and result.latency_ms > 0
    tflops = spec.problem.flops / (result.latency_ms * 1e-3) / 1e12 if timed else None
    info = outcome.device_info
    return {
        "kernel": spec.name,
        "problem_idx": str(spec.problem_idx),
        **problem_cells(spec.problem),
        **config_cells(config),
        "latency_ms": text(result.latency_ms if timed else None),
        "tflops": text(tflops),
        "non_zero": text(result.non_zero),
        "status": result.status,
        "max_abs_error": text(result.max_abs_error),
        "max_rel_error": text(result.max_rel_error),
        "tolerance": result.tolerance or "",
        "latency_min_ms": text(result.latency_min_ms),
        "latency_max_ms": text(result.latency_max_ms),
        "warmup": str(options.warmup),
        "repeat": str(options.repeat),
        "device": outcome.device,
        "device_name": info.name if info else "",
        "clock_mhz": text(info.clock_mhz if info else None),
        "detail": result.detail,
        "ckspace_version": __version__,
    }


class SweepSummary(BaseModel):
    pairs: int
    skipped: int
    """Pairs already in the file (``--resume``)."""
    counts: dict[str, int]
    seconds: float


def run_sweep(
    library_path: Path,
    host_path: Path,
    configs: dict[str, GemmConfig],
    problems: tuple[ConvProblem, ...],
    out: Path,
    options: SweepOptions,
    *,
    kernels: Sequence[str] | None = None,
    devices: Sequence[int] = (0,),
    resume: bool = False,
    ray_address: str | None = None,
    use_ray: bool = False,
    progress: bool = False,
    arch: str | None = None,
) -> SweepSummary:
    """Plan the pairs, skip those done, run the rest, append their rows; see the module docstring.

    The pairs are planned with the tree's host-only dispatcher (``host_path``: the same kernel table
    and checks, no HIP), so this process never loads the HIP runtime; only workers load
    ``library_path``. ``arch``: the devices' arch, of a library of several archs (``configs`` are
    that arch's kernels; the host-only dispatcher answers for it)."""
    started = time.monotonic()
    _refuse_unrunnable(library_path, options)
    pairs = plan_pairs(_planning_library(host_path, arch), configs, problems, kernels)
    results = ResultsFile.open(out, resume, problems)
    todo = [p for p in pairs if (p.name, p.problem_idx) not in results.done]
    log.info("%d supported pairs, %d already in %s, %d to run", len(pairs), len(pairs) - len(todo), out, len(todo))
    jobs = _batch_jobs(library_path, todo, options)
    outcomes = ray_outcomes(jobs, options, ray_address) if use_ray else local_outcomes(jobs, devices, options)
    counts = _record(outcomes, results, configs, options, len(todo), progress, started)
    return SweepSummary(
        pairs=len(pairs), skipped=len(pairs) - len(todo), counts=counts, seconds=round(time.monotonic() - started, 2)
    )


def _refuse_unrunnable(library_path: Path, options: SweepOptions) -> None:
    """Refuse up front a library no pair can run on: one without ``ckspace_run`` (read from its
    symbol table, nothing loaded), or a HIP library on ``--backend host``, where every pair would
    end 'failed' in a sweep that exits 0."""
    if not KernelLibrary(library_path).has_run:
        raise InvalidInputError(f"{library_path} has no ckspace_run (a --host-only build): build the kernels")
    if options.backend == "host" and (report := hip_build_of(library_path)) is not None:
        raise InvalidInputError(
            f"--backend host: {library_path} is a HIP library (ckspace build linked it for "
            f"{report.arch} with {report.toolchain.version}); bench it with --backend hip on an "
            "AMD GPU (host is for stand-in libraries whose ckspace_run computes on host memory)"
        )


def _planning_library(host_path: Path, arch: str | None) -> KernelLibrary:
    """The host-only dispatcher the pairs are planned with (the same checks, no HIP loaded in this
    process), answering for ``arch`` when the library holds several."""
    host = KernelLibrary(host_path)
    if arch is not None:
        host.use_arch(arch)
    return host


def _batch_jobs(library_path: Path, todo: Sequence[PairSpec], options: SweepOptions) -> list[BatchJob]:
    """One worker job per batch of ``options.batch`` kernels (:func:`batches`), naming the library
    by its absolute path, since workers may run elsewhere (another directory, a Ray node)."""
    return [
        BatchJob(
            library=str(library_path.resolve()),
            backend=options.backend,
            device=0,
            pairs=batch,
            warmup=options.warmup,
            repeat=options.repeat,
            verify=options.verify,
            seed=options.seed,
        )
        for batch in batches(todo, options.batch)
    ]


def _record(
    outcomes: Iterator[Outcome],
    results: ResultsFile,
    configs: dict[str, GemmConfig],
    options: SweepOptions,
    todo: int,
    progress: bool,
    started: float,
) -> dict[str, int]:
    """Append each outcome's row as it arrives (a killed sweep loses only the pairs in flight) and
    count the outcomes by status, showing the rate; the results file is closed whatever happens."""
    from rich.progress import TextColumn, TimeRemainingColumn

    from ckspace.environment.progress import counting_bar

    counts: dict[str, int] = {}
    try:
        with counting_bar(
            enabled=progress, extra=(TextColumn("{task.fields[rate]}"), TextColumn("ETA"), TimeRemainingColumn())
        ) as bar:
            task = bar.add_task("bench", total=todo, rate="")
            for outcome in outcomes:
                results.append(measurement_row(outcome, configs[outcome.spec.name], options))
                counts[outcome.result.status] = counts.get(outcome.result.status, 0) + 1
                done = sum(counts.values())
                bar.update(task, advance=1, rate=f"{done / max(time.monotonic() - started, 1e-9):.2f} pairs/s")
    finally:
        results.close()
    return counts
