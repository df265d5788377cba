"""``ckspace bench``: run, verify and time every supported (kernel, problem) pair of a built library."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TextIO

from ckspace.commands.common import data_set_help, problems_file
from ckspace.core.errors import InvalidChoiceError, InvalidInputError
from ckspace.workloads.datasets import Kind
from ckspace.workloads.problem_keys import COLUMNS_HELP

NAME = "bench"
HELP = "run, verify and time a built library's kernels on problems (AMD GPU); one CSV row per pair"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "dir", type=Path, help="a tree written by ckspace emit --with-selector and built by ckspace build"
    )
    parser.add_argument(
        "--problems",
        required=True,
        type=problems_file,
        metavar="CSV",
        help=f"problems: a CSV in the format of the problem lists ({COLUMNS_HELP}; C and K are totals over the "
        "groups), " + data_set_help(Kind.PROBLEMS),
    )
    parser.add_argument(
        "--out",
        required=True,
        type=Path,
        metavar="CSV",
        help="results, one row per pair (never replaced: --resume continues it)",
    )
    parser.add_argument("--variant", help="run only this variant's kernels (default: the library's, if it holds one)")
    parser.add_argument("--kernels", type=Path, metavar="FILE", help="run only these kernels (names, one per line)")
    parser.add_argument("--resume", action="store_true", help="continue --out: skip the pairs it holds")
    parser.add_argument("--devices", metavar="0,1,...", help="GPUs to use, one worker each (default: all)")
    parser.add_argument(
        "--executor",
        default="local",
        help="what runs the batches: local (this machine, the default) or ray (Ray tasks)",
    )
    parser.add_argument(
        "--address", metavar="ADDR", help="with --executor ray: the cluster (default: RAY_ADDRESS or a local instance)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds a pair may run before its worker is killed and the pair is 'timeout' (default 60)",
    )
    parser.add_argument("--no-verify", action="store_true", help="do not check results against the CPU reference")
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs per pair (default 3)")
    parser.add_argument(
        "--repeat", type=int, default=10, help="timed runs per pair; the median is reported (default 10)"
    )
    parser.add_argument("--batch", type=int, default=8, help="kernels per worker process (default 8)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated operands (default 0)")
    parser.add_argument(
        "--backend",
        default="hip",
        help="hip (default: the library runs on AMD GPUs) or host (a stand-in library whose "
        "ckspace_run computes on host memory, as in ckspace's own tests)",
    )


def parse_devices(text: str | None, backend: str) -> list[int] | None:
    """``--devices`` as bench and ``learn --tree`` take it: indices, or None for every GPU (hip),
    device 0 for a stand-in."""
    if text is None:
        return None if backend == "hip" else [0]
    try:
        devices = [int(part) for part in text.split(",")]
    except ValueError:
        raise InvalidInputError(f"--devices {text!r}: a comma-separated list of device indices, e.g. 0,1") from None
    if not devices or min(devices) < 0 or len(set(devices)) != len(devices):
        raise InvalidInputError(f"--devices {text!r}: distinct device indices from 0")
    return devices


def _library(tree: Path) -> tuple[Path, dict]:
    """The built library of ``tree`` and the configs of its kernels (from the manifest: kernel
    identity is the config)."""
    from ckspace.emit.manifest import built_kernel_libraries, read_manifest

    manifest = read_manifest(tree, dispatcher=True)
    built = built_kernel_libraries(tree)
    if not built:
        raise InvalidInputError(f"{tree} is not built: run ckspace build {tree} --arch ARCH first")
    if len(built) > 1:
        raise InvalidInputError(
            f"{tree} holds libraries for several archs ({', '.join(p.parent.name for p in built)}); "
            "bench one copy of the tree per arch"
        )
    configs = {k.name: k.gemm_config() for k in manifest.kernels}
    return built[0], configs


def run(args: argparse.Namespace, out: TextIO) -> int:
    from ckspace.environment.files import output_path
    from ckspace.planning.workload import read_workload

    _check_options(args)
    devices = parse_devices(args.devices, args.backend)
    target = output_path(str(args.out), "--out")
    library, configs = _library(args.dir)
    arch, configs = _arch_of_run(args, library, configs, devices)
    variant = _variant(args, configs)
    names = _kernel_names(args.kernels, configs, variant)
    workload = read_workload(args.problems, variant)
    devices = local_gpus(args, devices)
    summary = _sweep(args, library, configs, workload.problems, Path(target), names, devices, arch)
    counts = ", ".join(f"{k} {v}" for k, v in sorted(summary.counts.items())) or "nothing to run"
    out.write(
        f"{summary.pairs} supported pairs ({len(workload.problems)} problems); {summary.skipped} already in "
        f"{args.out}; ran {sum(summary.counts.values())}: {counts}; {summary.seconds} s\n"
    )
    return 0


def _check_options(args: argparse.Namespace) -> None:
    """Refuse the options no sweep can run with before anything is read, each in one line naming it."""
    from ckspace.compiling.executor import EXECUTORS
    from ckspace.run.device import BACKENDS

    if args.backend not in BACKENDS:
        raise InvalidChoiceError("--backend", args.backend, BACKENDS)
    if args.executor not in EXECUTORS:
        raise InvalidChoiceError("--executor", args.executor, EXECUTORS)
    if args.address and args.executor != "ray":
        raise InvalidInputError("--address is for --executor ray")
    for name, value, least in (("--warmup", args.warmup, 0), ("--repeat", args.repeat, 1), ("--batch", args.batch, 1)):
        if value < least:
            raise InvalidInputError(f"{name} {value}: at least {least}")
    if not args.timeout > 0:
        raise InvalidInputError(f"--timeout {args.timeout}: a positive number of seconds")


def _arch_of_run(args: argparse.Namespace, library: Path, configs: dict, devices: list[int] | None):
    """The arch the sweep runs (None for a library of one arch) and the configs of its kernels: a
    library of several archs is benched for its devices' arch, with that arch's kernels only."""
    from ckspace.emit.manifest import read_manifest

    manifest = read_manifest(args.dir)
    if not manifest.archs:
        return None, configs
    arch = _devices_arch(manifest, library, args.backend, args.executor, devices)
    configs = {k.name: k.gemm_config().model_copy(update={"arch": arch}) for k in manifest.kernels}
    assert manifest.dispatcher is not None and manifest.dispatcher.archs is not None
    return arch, {name: configs[name] for name in manifest.dispatcher.archs[arch]}


def _variant(args: argparse.Namespace, configs: dict):
    """The variant benched: ``--variant`` (one the library holds), else the library's only one; a
    sweep runs one variant, since a problem list is read for one."""
    from ckspace.core.vocab import Variant

    variants = sorted({c.variant.value for c in configs.values()})
    if args.variant is not None:
        variant = Variant.parse(args.variant)
        if variant.value not in variants:
            raise InvalidInputError(f"--variant {variant.value}: {args.dir} holds {', '.join(variants)} kernels only")
        return variant
    if len(variants) == 1:
        return Variant.parse(variants[0])
    raise InvalidInputError(f"{args.dir} holds {', '.join(variants)} kernels: choose one with --variant")


def local_gpus(args: argparse.Namespace, devices: list[int] | None) -> list[int] | None:
    """On this machine's GPUs, the devices asked (all of them by default), each checked to exist,
    so a wrong index fails here in one line, not in a worker; other backends and Ray are as given."""
    from ckspace.run import gpus

    if args.backend != "hip" or args.executor != "local":
        return devices
    found = gpus.probe_devices(gpus.PROBE_SECONDS)
    devices = devices if devices is not None else [d.index for d in found]
    missing = sorted(set(devices) - {d.index for d in found})
    if missing:
        raise InvalidInputError(
            f"--devices: no GPU {missing[0]} (this machine has {len(found)}: {', '.join(str(d.index) for d in found)})"
        )
    return devices


def _sweep(args: argparse.Namespace, library: Path, configs: dict, problems, target: Path, names, devices, arch):
    """Run the sweep with the options of the command line, the tree's host library beside the
    kernels' (it answers which pairs are supported)."""
    from ckspace.compiling.builder import build_host, stderr_is_terminal
    from ckspace.run.sweep import SweepOptions, run_sweep

    options = SweepOptions(
        backend=args.backend,
        warmup=args.warmup,
        repeat=args.repeat,
        verify=not args.no_verify,
        timeout=args.timeout,
        batch=args.batch,
        seed=args.seed,
    )
    return run_sweep(
        library,
        build_host(args.dir),
        configs,
        problems,
        target,
        options,
        kernels=names,
        devices=devices or [0],
        resume=args.resume,
        ray_address=args.address,
        use_ray=args.executor == "ray",
        progress=stderr_is_terminal(),
        arch=arch,
    )


def _devices_arch(manifest, library: Path, backend: str, executor: str, devices: list[int] | None) -> str:
    """The arch of the devices a library of several archs is benched on: one of the library's, the
    same for every device asked (its kernels and its pairs are that arch's), else one line."""
    from ckspace.run import gpus

    archs = manifest.arch_list
    if backend == "host":  # the stand-in's device (tests/standin/standin_run.c): CKSPACE_STANDIN_DEVICE_ARCH
        found = {0: os.environ.get("CKSPACE_STANDIN_DEVICE_ARCH", archs[0]).partition(":")[0]}
    elif executor == "ray":
        raise InvalidInputError(
            f"{library.name} holds kernels for {', '.join(archs)}: bench it with --executor local on a GPU "
            "of one of them (on a Ray cluster, each node's arch is not known here)"
        )
    else:
        probed = gpus.probe_devices(gpus.PROBE_SECONDS)  # names end "(gfx942:sramecc+:xnack-)"
        found = {d.index: d.name.rpartition("(")[2].rstrip(")").partition(":")[0] for d in probed}
    asked = {i: found[i] for i in (devices if devices is not None else sorted(found)) if i in found}
    kinds = sorted(set(asked.values()))
    if len(kinds) > 1:
        raise InvalidInputError(
            "--devices: GPUs of several archs ("
            + ", ".join(f"{i} {a}" for i, a in asked.items())
            + "); bench one arch at a time"
        )
    if kinds and kinds[0] not in archs:
        raise InvalidInputError(f"GPU {min(asked)} is {kinds[0]}; {library.name} holds kernels for {', '.join(archs)}")
    return kinds[0] if kinds else archs[0]


def _kernel_names(path: Path | None, configs: dict, variant) -> list[str]:
    """The library's kernels of ``variant``, or those named in ``path``."""
    of_variant = [n for n, c in configs.items() if c.variant is variant]
    if path is None:
        return of_variant
    from ckspace.environment.inputs import read_input_text

    text = read_input_text(path, "--kernels")
    wanted = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    unknown = [n for n in wanted if n not in configs]
    if unknown:
        raise InvalidInputError(f"--kernels {path}: the library has no kernel {unknown[0]!r}")
    other = [n for n in wanted if configs[n].variant is not variant]
    if other:
        raise InvalidInputError(
            f"--kernels {path}: {other[0]} is a {configs[other[0]].variant.value} kernel, not {variant.value}"
        )
    return wanted
