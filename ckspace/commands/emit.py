"""``ckspace emit``: write CK Tile sources for the valid kernels of a part of the space."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from ckspace.commands.common import add_space_arguments, request_from_args, space_from_args
from ckspace.core.errors import CkspaceError, NoKernelError

NAME = "emit"
HELP = "write CK Tile C++ sources (kernel headers, wrappers, registration, manifest.json)"


def configure(parser: argparse.ArgumentParser) -> None:
    add_space_arguments(parser)
    parser.add_argument("--out", required=True, help="output directory (new, empty, or an emitted tree)")
    parser.add_argument(
        "--force",
        action="store_true",
        help="emit into a non-empty directory that is not an emitted tree (only ckspace files change)",
    )
    parser.add_argument(
        "--with-selector",
        action="store_true",
        help="also write the dispatcher: ckspace_dispatch.h (C API), its host sources and the rankers compiled to C",
    )
    parser.add_argument(
        "--fallbacks",
        action="store_true",
        help="with --with-selector: also emit, as fallback-only kernels, the narrower-vector variants "
        "that let every kernel's family serve any channel count",
    )
    parser.add_argument(
        "--kernels",
        type=Path,
        metavar="FILE",
        help="emit exactly these kernels of the target (names, one per line, '#' comments: the "
        "output of `ckspace plan`; ckspace and tile-engine benchmark names); a kernel that "
        "cannot be emitted fails the command, naming the rules that stop it",
    )
    parser.add_argument(
        "--model",
        type=Path,
        metavar="DIR",
        help="with --with-selector: the model directory of one cell (default: the shipped "
        "models; cells without one rank by the analytical score)",
    )


def run(args: argparse.Namespace, out: TextIO) -> int:
    from ckspace.core.files import output_path
    from ckspace.emit.emitter import SelectorOptions, emit

    target = output_path(args.out, "--out")
    if args.rules_only:
        raise CkspaceError(
            "emit writes kernels the CK headers of the target can build: not with --rules-only "
            "(--ck-root PATH names other headers)"
        )
    request = request_from_args(args)
    space = space_from_args(args)
    if space.target.ck is None:
        raise CkspaceError(
            f"emit needs CK headers: none found (looked at {space.target.looked}); "
            "scripts/install-toolchain-gfx942.sh installs them, --ck-root PATH names them"
        )
    revision = space.ck
    kernels = space.kernels() if args.kernels is None else _named(space, args.kernels)
    if not any(not k.depthwise for k in kernels):
        raise NoKernelError(
            f"no kernel to emit: the space {space!r} holds no GEMM kernel for this target "
            f"({space.target.describe().removeprefix('target: ')})",
            {},
        )
    described = {
        "arch": request.arch,
        "rule_set": request.rule_set,
        "variants": [v.value for v in request.variants],
        "ndims": list(request.ndims),
        "dtypes": [d.value for d in request.dtypes],
        "where": list(args.where),
        "problem": args.problem,
        "rules_revision": request.rules_revision,
        "target": space.target.record(),
        **({"kernels_file": str(args.kernels)} if args.kernels is not None else {}),
    }
    if (args.model is not None or args.fallbacks) and not args.with_selector:
        raise CkspaceError("--model and --fallbacks are for the dispatcher: add --with-selector")
    selector = SelectorOptions(model=args.model, fallbacks=args.fallbacks) if args.with_selector else None
    result = emit(kernels, target, revision, arch=request.arch, request=described, selector=selector, force=args.force)
    manifest = result.manifest
    out.write(
        f"{len(manifest.kernels)} kernels emitted to {args.out} "
        f"({len(result.written)} files written, {result.unchanged} unchanged, "
        f"{len(result.removed)} removed)\n{space.target.describe()}\n"
    )
    if manifest.dispatcher is not None:
        models = ", ".join(f"{cell}: {source}" for cell, source in manifest.dispatcher.models.items())
        extra = (
            f", {len(manifest.dispatcher.fallback_only)} of them vector-width fallbacks only"
            if manifest.dispatcher.fallback_only
            else ""
        )
        out.write(
            f"dispatcher: {len(manifest.dispatcher.kernels)} kernels behind ckspace_dispatch.h{extra} ({models})\n"
        )
    if manifest.depthwise_note:
        out.write(f"{manifest.depthwise_skipped} depthwise configs skipped: {manifest.depthwise_note}\n")
    return 0


def _named(space, path: Path) -> list:
    """The kernels named in ``path`` (a `ckspace plan` output, ckspace or tile-engine benchmark names):
    kernels of the space, and configs of its cells every rule of the target allows although the rule
    set does not propose them (the vector-width variants a plan's fallbacks reach). Every name must be
    one or the other: the command fails naming each that is not, with the rules that stop it."""
    from ckspace.core.cells import Cell
    from ckspace.core.config import GemmConfig
    from ckspace.core.inputs import read_input_text
    from ckspace.space.listing import Kernel

    text = read_input_text(path, "--kernels")
    wanted = list(
        dict.fromkeys(line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#"))
    )
    if not wanted:
        raise CkspaceError(f"--kernels {path} names no kernel")
    listed = {k.kernel_key: k for k in space.kernels()}
    cells = {(r.arch, cell) for r in space.requests for cell in r.cells}
    chosen: dict[tuple, Kernel] = {}
    refused: dict[str, tuple[str, ...]] = {}
    for name in wanted:
        for config in space.configs_from_name(name):
            if not isinstance(config, GemmConfig):
                refused[name] = ("depthwise: CK Tile has no instance to emit",)
                continue
            cell = Cell(config.variant, config.ndim, config.dtype)
            kernel = Kernel(config.arch, cell, False, config.row(), True)
            if kernel.kernel_key in listed:
                chosen.setdefault(kernel.kernel_key, kernel)
            elif (config.arch, cell) not in cells:
                refused[name] = (f"outside the requested cells ({config.arch} {cell.label()})",)
            elif broken := space.excluded_by(config):
                refused[name] = tuple(broken)
            else:
                chosen.setdefault(kernel.kernel_key, kernel)
    if refused:
        detail = "; ".join(f"{name}: {', '.join(rules)}" for name, rules in refused.items())
        raise NoKernelError(
            f"--kernels {path}: {len(refused)} of {len(wanted)} kernels cannot be emitted for this "
            f"target ({space.target.describe().removeprefix('target: ')}): {detail}",
            refused,
        )
    return list(chosen.values())
