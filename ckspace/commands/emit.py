"""``ckspace emit``: write CK Tile sources for the valid kernels of a part of the space."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from ckspace.core.errors import CkspaceError
from ckspace.commands.common import (
    add_space_arguments,
    request_from_args,
    space_from_args,
)

NAME = "emit"
HELP = "write CK Tile C++ sources (kernel headers, wrappers, registration, manifest.json)"


def configure(parser: argparse.ArgumentParser) -> None:
    add_space_arguments(parser)
    parser.add_argument("--out", required=True, help="output directory (new, empty, or an emitted tree)")
    parser.add_argument("--force", action="store_true",
                        help="emit into a non-empty directory that is not an emitted tree (only ckspace files change)")
    parser.add_argument("--ck-root", help="CK tree or include dir (default: CK_ROOT, ROCm, amd-aiter wheel)")
    parser.add_argument("--with-selector", action="store_true",
                        help="also write the dispatcher: ckspace_dispatch.h (C API), its host sources and the "
                             "rankers compiled to C")
    parser.add_argument("--fallbacks", action="store_true",
                        help="with --with-selector: also emit, as fallback-only kernels, the narrower-vector variants "
                             "that let every kernel's family serve any channel count")
    parser.add_argument("--kernels", type=Path, metavar="FILE",
                        help="emit exactly these kernels of the space (names, one per line, '#' comments: "
                             "the output of `ckspace plan`)")
    parser.add_argument("--model", type=Path, metavar="DIR",
                        help="with --with-selector: the model directory of one cell (default: the shipped "
                             "models; cells without one rank by the analytical score)")


def run(args: argparse.Namespace, out: TextIO) -> int:
    from ckspace.core.files import output_path
    from ckspace.emit.emitter import SelectorOptions, emit
    from ckspace.core.ck_headers import find_revision

    target = output_path(args.out, "--out")
    request = request_from_args(args)
    revision = find_revision(args.ck_root)
    space = space_from_args(args)
    kernels = space.kernels() if args.kernels is None else _named(space, args.kernels)
    described = {"arch": request.arch, "rule_set": request.rule_set,
                 "variants": [v.value for v in request.variants], "ndims": list(request.ndims),
                 "dtypes": [d.value for d in request.dtypes], "where": list(args.where),
                 "problem": args.problem, "rules_revision": request.rules_revision,
                 **({"kernels_file": str(args.kernels)} if args.kernels is not None else {})}
    if (args.model is not None or args.fallbacks) and not args.with_selector:
        raise CkspaceError("--model and --fallbacks are for the dispatcher: add --with-selector")
    selector = SelectorOptions(model=args.model, fallbacks=args.fallbacks) if args.with_selector else None
    result = emit(kernels, target, revision, arch=request.arch, request=described, selector=selector,
                  force=args.force)
    manifest = result.manifest
    out.write(f"{len(manifest.kernels)} kernels emitted to {args.out} "
              f"({len(result.written)} files written, {result.unchanged} unchanged, "
              f"{len(result.removed)} removed); CK {revision.label}"
              f"{'' if revision.verified else ' (unverified)'}\n")
    if manifest.excluded:
        counts: dict[str, int] = {}
        for item in manifest.excluded:
            for rule in item.rules:
                counts[rule] = counts.get(rule, 0) + 1
        listed = ", ".join(f"{rule} {n}" for rule, n in sorted(counts.items()))
        out.write(f"{len(manifest.excluded)} configs excluded by this CK's rules ({listed}); "
                  "see manifest.json 'excluded'\n")
    if manifest.dispatcher is not None:
        models = ", ".join(f"{cell}: {source}" for cell, source in manifest.dispatcher.models.items())
        extra = (f", {len(manifest.dispatcher.fallback_only)} of them vector-width fallbacks only"
                 if manifest.dispatcher.fallback_only else "")
        out.write(f"dispatcher: {len(manifest.dispatcher.kernels)} kernels behind ckspace_dispatch.h{extra} ({models})\n")
    if manifest.depthwise_note:
        out.write(f"{manifest.depthwise_skipped} depthwise configs skipped: {manifest.depthwise_note}\n")
    return 0


def _named(space, path: Path) -> list:
    """The kernels named in ``path`` (a `ckspace plan` output): those of the space, and valid
    kernels of its cells the rule set does not propose (the vector-width variants a plan's
    fallbacks reach); a name that is neither is an error naming the rules it breaks."""
    from ckspace.core.cells import Cell
    from ckspace.core.config import GemmConfig
    from ckspace.space.listing import Kernel

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CkspaceError(f"cannot read --kernels {path}: {exc.strerror}") from None
    wanted = {line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")}
    if not wanted:
        raise CkspaceError(f"--kernels {path} names no kernel")
    chosen = [k for k in space.kernels() if k.name in wanted]
    cells = {(r.arch, cell) for r in space.requests for cell in r.cells}
    for name in sorted(wanted - {k.name for k in chosen}):
        for config in space.configs_from_name(name):
            cell = Cell(config.variant, config.ndim, config.dtype) if isinstance(config, GemmConfig) else None
            broken = space.violated_rules(config)
            if cell is None or (config.arch, cell) not in cells or broken:
                why = f"breaks {', '.join(broken)}" if broken else "is outside the requested cells"
                raise CkspaceError(f"--kernels {path}: {name} {why} (arch, variant, ndim, dtype as given)")
            chosen.append(Kernel(config.arch, cell, False, config.row(), True))
    return chosen
