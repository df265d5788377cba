"""``ckspace emit``: write CK Tile sources for the valid kernels of a part of the space."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from ckspace.commands.common import add_space_arguments, space_from_args
from ckspace.core.errors import CkspaceError, InvalidInputError

NAME = "emit"
HELP = "write CK Tile C++ sources (kernel headers, wrappers, registration, manifest.json)"


def configure(parser: argparse.ArgumentParser) -> None:
    add_space_arguments(parser, variant_required=False, several_archs=True)  # --kernels: the names carry it
    parser.add_argument("--out", required=True, help="output directory (new, empty, or an emitted tree)")
    parser.add_argument(
        "--force",
        action="store_true",
        help="emit into a non-empty directory that is not an emitted tree (only ckspace files change)",
    )
    parser.add_argument(
        "--with-selector",
        action="store_true",
        help="also write the dispatcher: ckspace_dispatch.h (C API), its host sources and the rankers compiled "
        "to C (always with --kernels: a planned library is linked through its C API)",
    )
    parser.add_argument(
        "--hipdnn-plugin",
        action="store_true",
        help="also write a hipDNN engine plugin over the dispatcher (implies --with-selector); "
        "ckspace build links it into libckspace_hipdnn_<arch>.so for HIPDNN_PLUGIN_DIR",
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
        help="emit exactly these kernels of the target, with the dispatcher (names, one per line, '#' "
        "comments: the output of `ckspace plan`; ckspace and tile-engine benchmark names; --variant, "
        "--ndim and --dtype default to the names'); a kernel that cannot be emitted fails the "
        "command, naming the rules that stop it",
    )
    parser.add_argument(
        "--model",
        type=Path,
        metavar="DIR",
        help="with --with-selector: the model directory of one cell (default: the shipped "
        "models; cells without one rank by the analytical score)",
    )


def run(args: argparse.Namespace, out: TextIO) -> int:
    from ckspace.environment.files import output_path
    from ckspace.workflow import emit_tree

    target = output_path(args.out, "--out")
    args.arch = list(dict.fromkeys(args.arch))  # an arch named twice is one arch
    space, names = _space_and_names(args)
    result = emit_tree(
        space,
        target,
        names=names,
        with_selector=args.with_selector or args.hipdnn_plugin or names is not None,
        hipdnn_plugin=args.hipdnn_plugin,
        fallbacks=args.fallbacks,
        model=args.model,
        force=args.force,
        names_from=f"--kernels {args.kernels}",
    )
    out.write(
        f"{len(result.manifest.kernels)} kernels emitted to {args.out} "
        f"({len(result.written)} files written, {result.unchanged} unchanged, "
        f"{len(result.removed)} removed)\n{space.target.describe()}\n"
    )
    _write_manifest_summary(result.manifest, out)
    return 0


def _space_and_names(args: argparse.Namespace):
    """The space to emit and the kernel names to keep (None: all). A ``--kernels`` file's names carry
    their cells, so the options it leaves out are filled from them rather than required."""
    from ckspace.workflow import named_cells

    if args.kernels is None:
        if args.variant is None:
            raise InvalidInputError(
                "--variant is required: forward, bwd_data, bwd_weight or all (or --kernels FILE, whose names carry it)"
            )
        return space_from_args(args), None
    names = _names_in(args.kernels, args.arch)
    variants, ndims, dtypes = named_cells([n for listed in names.values() for n in listed])
    if len(names) == 1:  # one arch's names: as before libraries of several archs
        names = next(iter(names.values()))
    space = space_from_args(
        args,
        variant=None if args.variant else variants,
        ndim=None if args.ndim else ndims,
        dtype=None if args.dtype else dtypes,
    )
    return space, names


def _write_manifest_summary(manifest, out: TextIO) -> None:
    """What the tree holds beyond its kernels (dispatcher, archs, hipDNN plugin, skipped depthwise
    configs), so the reader learns what to build and link without opening the manifest."""
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
    if manifest.dispatcher is not None and manifest.dispatcher.archs is not None:
        shared = set.intersection(*(set(names) for names in manifest.dispatcher.archs.values()))
        out.write(
            "archs: "
            + ", ".join(f"{arch} {len(names)} kernels" for arch, names in manifest.dispatcher.archs.items())
            + f" ({len(shared)} of them shared, each compiled for every arch that holds it)\n"
        )
    if manifest.hipdnn is not None:
        out.write(
            f"hipDNN plugin {manifest.hipdnn.plugin}: engines {', '.join(manifest.hipdnn.engines)} "
            "(ckspace build links it)\n"
        )
    if manifest.depthwise_note:
        out.write(f"{manifest.depthwise_skipped} depthwise configs skipped: {manifest.depthwise_note}\n")


def _names_in(path: Path, archs: list[str]) -> dict[str, list[str]]:
    """Each arch's kernel names in a ``--kernels`` file: one a line, ``#`` comments and blank lines
    skipped. Names carry no arch. A plan's output says which arch each name was planned for (its
    section's header: :func:`~ckspace.commands.plan.planned_sections`), and each of ``archs`` takes
    its own section: its kernels were chosen by its rules and models, and would be wrong for
    another arch. A list of names without a plan's header is one arch's."""
    from ckspace.commands.plan import planned_sections
    from ckspace.core.vocab import parse_arch
    from ckspace.environment.inputs import read_input_text

    text = read_input_text(path, "--kernels")
    sections = planned_sections(text)
    if sections is None:
        if len(archs) > 1:
            raise InvalidInputError(
                f"--kernels {path} is one arch's plan, not for --arch {' '.join(archs)}: give one --arch, or "
                "plan for them all (ckspace plan --arch ARCH [ARCH ...]) and emit that plan"
            )
        names = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        sections = {parse_arch(archs[0]): names}
    missing = [arch for arch in archs if parse_arch(arch) not in sections]
    if missing:
        planned = " ".join(sections)
        if len(sections) == 1 and len(archs) == 1:
            raise InvalidInputError(
                f"--kernels {path} is a plan for {planned}, not --arch {archs[0]}: emit it with --arch "
                f"{planned}, or plan again with --arch {archs[0]}"
            )
        raise InvalidInputError(
            f"--kernels {path} is a plan for {planned}, not for {' '.join(missing)}: emit it with --arch "
            f"naming some of {planned}, or plan again with --arch {' '.join(archs)}"
        )
    chosen = {parse_arch(arch): sections[parse_arch(arch)] for arch in archs}
    empty = [arch for arch, names in chosen.items() if not names]
    if empty:
        raise CkspaceError(f"--kernels {path} names no kernel" + (f" for {' '.join(empty)}" if len(archs) > 1 else ""))
    return chosen
