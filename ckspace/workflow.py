"""The Python flow of a kernel library, as upstream users know it: kernels → emit → build → open →
select → run::

    from ckspace import ConvProblem, Space, build_library, emit_tree

    space = Space("gfx942", "forward", 2, "bf16", rule_set="default")
    emit_tree(space, "kernels")                             # ckspace emit --with-selector
    library = build_library("kernels", "gfx942", jobs=8)    # ckspace build (executor="local" or "ray")
    problem = ConvProblem.parse("N=8,C=256,K=256,Hi=56,Wi=56,Y=3,X=3,pad=1")
    choice = library.select(problem, "forward", "bf16")     # ckspace_select; NoKernelError if none
    size = library.workspace_size(choice.kernel, problem, "forward", "bf16")
    library.run(choice.kernel, problem, "forward", "bf16", (a, b, c), (workspace, size), stream)

``ckspace emit`` and ``ckspace build`` are these functions behind their argument parsing: one
implementation. :class:`~ckspace.run.library.KernelLibrary` is the handle on what was built.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

from ckspace.compiling.builder import build, build_host
from ckspace.constraints.language.where import where_text
from ckspace.core.cells import Cell
from ckspace.core.config import GemmConfig
from ckspace.core.errors import CkspaceError, NoKernelError
from ckspace.core.naming import is_benchmark_name, parse_benchmark_name, parse_kernel_name
from ckspace.emit import manifest as tree_layout
from ckspace.emit.emitter import EmitResult, SelectorOptions, emit
from ckspace.run.library import KernelLibrary
from ckspace.space.listing import Kernel
from ckspace.space.rule_set_choice import refuse_rule_set_without_kernels
from ckspace.space.space import Space

log = logging.getLogger(__name__)


def emit_tree(
    space: Space,
    out: str | Path,
    *,
    names: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
    with_selector: bool = True,
    fallbacks: bool = False,
    model: str | Path | None = None,
    force: bool = False,
    names_from: str = "names",
    hipdnn_plugin: bool = False,
) -> EmitResult:
    """Write the CK Tile sources of ``space``'s kernels (or of the kernels ``names`` gives, see
    :func:`named_kernels`) and, ``with_selector``, the dispatcher (and, ``hipdnn_plugin``, a hipDNN
    engine plugin over it: :mod:`ckspace.emit.hipdnn_plugin`), under ``out``. ``space`` is for CK headers
    it found (a rules-only space names kernels no CK may build); a space of several archs emits one
    library of them (each arch's kernels as its target lists them, each compiled for its archs, the
    dispatcher answering for the current device's arch)."""
    _refuse_target(space)
    archs = _archs(space, names)
    kernels = _kernels_to_emit(space, names, names_from)
    if (model is not None or fallbacks) and not with_selector:
        raise CkspaceError("--model and --fallbacks are for the dispatcher: add --with-selector")
    if hipdnn_plugin and not with_selector:
        raise CkspaceError("the hipDNN plugin runs over the dispatcher: emit it with the selector")
    selector = (
        SelectorOptions(model=Path(model) if model else None, fallbacks=fallbacks, hipdnn_plugin=hipdnn_plugin)
        if with_selector
        else None
    )
    described = _described(space, archs, names is not None, names_from)
    return emit(kernels, Path(out), space.ck, arch=",".join(archs), request=described, selector=selector, force=force)


def _refuse_target(space: Space) -> None:
    """Emit writes what CK headers can build: a rules-only space, or a target without headers, has
    nothing an emitted tree could be compiled against."""
    if space.target.rules_only:
        raise CkspaceError(
            "emit writes kernels the CK headers of the target can build: not with --rules-only "
            "(--ck-root PATH names other headers)"
        )
    if space.target.ck is None:
        raise CkspaceError(
            f"emit needs CK headers: none found (looked at {space.target.looked}); "
            "scripts/install-toolchain-gfx942.sh installs them, --ck-root PATH names them"
        )


def _archs(space: Space, names: Sequence[str] | Mapping[str, Sequence[str]] | None) -> list[str]:
    """The tree's archs, sorted; names without their arch (a plan's) are refused for several archs,
    since they could be any of them, unless each arch's names are given apart."""
    archs = list(dict.fromkeys(r.arch for r in space.requests))
    if len(archs) > 1 and names is not None and not isinstance(names, Mapping):
        raise CkspaceError(
            f"named kernels are one arch's (a plan's): emit them for one of {', '.join(archs)}, "
            "or give each arch's names (a fleet plan's sections), or a space for several archs"
        )
    return sorted(archs)


def _kernels_to_emit(
    space: Space, names: Sequence[str] | Mapping[str, Sequence[str]] | None, names_from: str
) -> list[Kernel]:
    """The space's kernels, or the named ones (from their own cells, whatever the rule set
    proposes); none that CK Tile can emit (depthwise only, or nothing) is a negative answer."""
    if names is None:
        refuse_rule_set_without_kernels(space)
    kernels = space.kernels() if names is None else named_kernels(space, names, names_from)
    if not any(not k.depthwise for k in kernels):
        raise NoKernelError(
            f"no kernel to emit: the space {space!r} holds no GEMM kernel for this target "
            f"({space.target.describe().removeprefix('target: ')})",
            {},
        )
    return kernels


def _described(space: Space, archs: list[str], named: bool, names_from: str) -> dict:
    """The request the manifest records: what was asked for, so that the tree says how to emit it
    again (and an emit of the same request finds nothing to rewrite)."""
    request = space.requests[0]
    return {
        "arch": ",".join(archs),
        "rule_set": request.rule_set,
        "variants": [v.value for v in request.variants],
        "ndims": list(request.ndims),
        "dtypes": [d.value for d in request.dtypes],
        "where": [where_text(f) for f in space.filters],
        "problem": space.problem.text() if space.problem is not None else None,
        "rules_revision": request.rules_revision,
        "target": space.target.record(),
        **({"kernels_file": names_from} if named else {}),
    }


def named_cells(names: Sequence[str]) -> tuple[list[str], list[int], list[str]]:
    """The variants, ndims and dtypes ``names`` carry (ckspace and tile-engine benchmark names), in
    the order they first appear: the request ``emit --kernels`` makes when not told one, so that a
    plan's names are emitted without repeating the cell they were planned for."""
    fields = [parse_benchmark_name(name) if is_benchmark_name(name) else parse_kernel_name(name) for name in names]

    def carried(key: str) -> list:
        return list(dict.fromkeys(getattr(f[key], "value", f[key]) for f in fields if key in f))

    return carried("variant"), carried("ndim"), carried("dtype")


def named_kernels(
    space: Space, names: Sequence[str] | Mapping[str, Sequence[str]], source: str = "names"
) -> list[Kernel]:
    """The kernels ``names`` gives (ckspace names, tile-engine benchmark names, a ``ckspace plan``
    output's lines): kernels of ``space``, and configs of its cells every rule of the target allows
    although the rule set does not propose them (the vector-width variants a plan's fallbacks
    reach). Every name must be one or the other: :class:`NoKernelError` names each that is not,
    with the rules that stop it. ``source`` names where the names came from, for the message.
    A mapping gives each arch its own names (a fleet plan's sections: names carry no arch); a
    sequence stands for every arch of the space."""
    per_arch = {arch: set(listed) for arch, listed in names.items()} if isinstance(names, Mapping) else None
    every = [n for listed in names.values() for n in listed] if isinstance(names, Mapping) else names
    wanted = list(dict.fromkeys(every))
    if not wanted:
        raise CkspaceError(f"{source} names no kernel")
    listed = {k.kernel_key: k for k in space.kernels()}
    cells = {(r.arch, cell) for r in space.requests for cell in r.cells}
    chosen: dict[tuple, Kernel] = {}
    refused: dict[str, tuple[str, ...]] = {}
    for name in wanted:
        for config in space.configs_from_name(name):
            if per_arch is not None and name not in per_arch.get(config.arch, ()):
                continue  # another arch's kernel
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
            f"{source}: {len(refused)} of {len(wanted)} kernels cannot be emitted for this "
            f"target ({space.target.describe().removeprefix('target: ')}): {detail}",
            refused,
        )
    return list(chosen.values())


def build_library(
    tree: str | Path,
    arch: str | None = None,
    *,
    host_only: bool = False,
    jobs: int | None = None,
    batch: int = 8,
    executor: str = "local",
    address: str | None = None,
    ck_root: str | None = None,
    partial: bool = False,
    progress: bool = False,
) -> KernelLibrary:
    """Compile the emitted ``tree`` (``jobs`` at once, by ninja here or on a Ray cluster) and open
    the library. ``host_only``: the dispatcher's host part alone, no HIP compiler needed. A kernel
    that fails to compile fails the call, naming it and its first error, unless ``partial`` (the
    library then holds the others: its ``names`` say which)."""
    tree = Path(tree)
    if host_only:
        return KernelLibrary(build_host(tree))
    if not arch:
        raise CkspaceError("an arch is required to build kernels (or host_only=True for the dispatcher alone)")
    report = build(
        tree, arch, jobs=jobs, batch=batch, ck_root=ck_root, progress=progress, executor=executor, address=address
    )  # arch: one, or several comma-separated for a tree emitted for several
    failed = [k for k in report.kernels if k.status != "ok"]
    if report.library is None or (failed and not partial):
        first = f" (first: {failed[0].name}: {failed[0].error})" if failed else ""
        raise CkspaceError(
            f"{len(failed)} of {len(report.kernels)} kernels of {tree} failed to compile{first}"
            + (f"; link: {report.link_error}" if report.link_error else "")
            + f"; see {tree_layout.logs_dir(tree_layout.build_dir(tree, report.arch))}"
        )
    if failed:
        log.warning(
            "%d of %d kernels failed to compile; the library holds the others", len(failed), len(report.kernels)
        )
    return KernelLibrary(report.library)
