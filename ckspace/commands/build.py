"""``ckspace build``: compile an emitted tree with a HIP compiler and report per kernel."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from ckspace.commands.common import CK_ROOT_DEFAULT
from ckspace.environment.cpus import available_cpus

NAME = "build"
HELP = "compile an emitted tree (batched, cached) into a shared library with a JSON report"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", type=Path, nargs="?", help="a directory written by ckspace emit")
    parser.add_argument(
        "--arch",
        nargs="+",
        action="extend",
        help="offload target, e.g. gfx942 (required unless --host-only); a tree emitted for several "
        "archs is built for all of them at once into one library (--arch gfx942 gfx950)",
    )
    parser.add_argument(
        "--host-only",
        action="store_true",
        help="build only the dispatcher's host part (tree emitted --with-selector) with the host "
        "C compiler: build/host/libckspace_dispatch.so, no HIP needed",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        help=f"parallel compiles (default: the CPUs this process may use, {available_cpus()} here; "
        "with --executor ray: the cluster's CPUs)",
    )
    parser.add_argument(
        "--executor",
        default="local",
        help="what runs the compiles: local (ninja on this machine, the default) or ray (a Ray cluster; "
        "pip install 'ckspace[ray]', see docs/building.md, 'Building on many machines'); ninja, its old name, "
        "still works",
    )
    parser.add_argument(
        "--address",
        help="with --executor ray: the cluster's head, HOST:PORT as `ray start --head` printed, or "
        "auto (the cluster ray start runs on this machine); default: $RAY_ADDRESS, else a "
        "private Ray instance on this machine",
    )
    parser.add_argument("--batch", type=int, default=8, help="kernels per translation unit (default: 8)")
    parser.add_argument("--ck-root", metavar="PATH", help=f"the CK headers to compile against ({CK_ROOT_DEFAULT})")
    parser.add_argument(
        "--allow-edited",
        action="store_true",
        help="build sources whose sha256 differs from manifest.json (edited by hand)",
    )


def run(args: argparse.Namespace, out: TextIO) -> int:
    from ckspace.compiling.builder import build, build_host, stderr_is_terminal
    from ckspace.compiling.package import adoption
    from ckspace.compiling.report import REPORT_NAME
    from ckspace.core.errors import CkspaceError, InvalidInputError
    from ckspace.core.vocab import arch_names, parse_arch

    if args.dir is None:  # `build --arch gfx942 DIR`: --arch takes several, the last word is the tree
        if not args.arch or args.arch[-1].strip().lower() in arch_names():
            raise InvalidInputError("the tree to build is missing: ckspace build DIR --arch ARCH [ARCH ...]")
        args.dir = Path(args.arch.pop())
    if args.host_only:
        library = build_host(args.dir, args.allow_edited)
        out.write(f"library: {library}\n{adoption(library.parent, None)}\n")
        if _manifest(args.dir).hipdnn is not None:
            out.write("hipDNN plugin: not built (it runs the kernels): build with --arch to link it\n")
        return 0
    if not args.arch:
        raise CkspaceError("--arch is required (or --host-only for the dispatcher's host part alone)")

    report = build(
        args.dir,
        [parse_arch(arch) for arch in args.arch],
        jobs=args.jobs,
        batch=args.batch,
        ck_root=args.ck_root,
        progress=stderr_is_terminal(),
        allow_edited=args.allow_edited,
        executor=args.executor,
        address=args.address,
    )
    out.write(
        f"{report.ok} ok, {report.failed} failed ({report.cached} from cache) in {report.seconds} s; "
        f"{report.compiled_units} of {report.units} translation units compiled with {report.toolchain.version}"
        f"{' on Ray' if report.executor == 'ray' else ''}\n"
    )
    for kernel in report.kernels:
        if kernel.status == "failed":
            out.write(f"FAILED {kernel.name}: {kernel.error}\n")
    if report.link_error:
        out.write(f"link failed: {report.link_error}\n")
    out.write(f"report: {args.dir / 'build' / report.arch / REPORT_NAME}\n")
    if report.library:
        c_api = _manifest(args.dir).dispatcher is not None
        out.write(f"library: {report.library}\n{adoption(Path(report.library).parent, report.arch, c_api)}\n")
    if report.plugin:
        out.write(
            f"hipDNN plugin: {report.plugin} (self-contained: copy it into the directory HIPDNN_PLUGIN_DIR names)\n"
        )
    if report.plugin_error:
        out.write(f"hipDNN plugin failed: {report.plugin_error}\n")
    return 1 if report.failed or report.link_error or report.plugin_error else 0


def _manifest(tree: Path):
    """The tree's manifest (already read by the build, so it is there): whether it was emitted
    --hipdnn-plugin, and whether with the dispatcher that gives its library a C API."""
    from ckspace.emit.manifest import MANIFEST_NAME, Manifest
    from ckspace.environment.inputs import read_json_model

    return read_json_model(Manifest, tree / MANIFEST_NAME, "manifest")
