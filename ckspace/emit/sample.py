"""A small set of kernels that exercises everything a CK revision can build (the CI compile sample).

Covers every variant, 2D and 3D, every dtype, every (pipeline, scheduler) pair and every trait
(two-stage, split-image, groups-to-merge, double LDS buffer, each specialization) that the space
holds and the revision supports. bwd_data comes from the ``default`` rule set because ``full``
proposes none (an upstream quirk). Greedy set cover, preferring small tiles, which compile fastest.

A trait the revision supports but no buildable config of the space carries (with the 2025-11 CK,
forward split-image and groups-to-merge: the space proposes them only with compv1, which that CK
cannot build) is exercised by a *trait probe*: the cheapest sampled config of the variant with the
trait switched on. Probes are outside the space and are named as such in the manifest's request.

``python3 -m ckspace.emit.sample OUT [--arch A] [--ck-root PATH]`` emits the sample into OUT.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path

from ckspace.constraints.request import Cell, Request
from ckspace.emit.ck_revision import CkRevision, detect_revision, locate_ck
from ckspace.emit.emitter import emit, select
from ckspace.space.config import GemmConfig
from ckspace.space.listing import Kernel, iter_kernels
from ckspace.space.vocab import Variant

SOURCES = (("full", (Variant.FORWARD, Variant.BWD_WEIGHT)), ("default", (Variant.BWD_DATA,)))


def tags(config: GemmConfig) -> set[tuple]:
    """What compiling ``config`` proves something about."""
    v = config.variant.value
    out = {("variant", v), ("dtype", v, config.dtype.value), ("pipeline", v, config.pipeline.value),
           ("pipeline_scheduler", config.pipeline.value, config.scheduler.value),
           ("specialization", v, config.specialization.value)}
    if config.ndim in (2, 3):
        out.add(("ndim", v, config.ndim))
    for trait in ("two_stage", "split_image", "double_smem_buffer", "streamk_enabled", "explicit_gemm"):
        if getattr(config, trait):
            out.add((trait, v))
    if config.num_groups_to_merge > 1:
        out.add(("groups_to_merge", v))
    return out


def _cost(config: GemmConfig) -> tuple:
    return (config.tile_m * config.tile_n * config.tile_k, config.ndim, config.name)


def cover(configs: Iterable[GemmConfig]) -> list[GemmConfig]:
    """Greedy set cover of :func:`tags`, cheapest config first among equals; sorted by name."""
    pool = {c.name: (c, tags(c)) for c in configs}
    uncovered = set().union(*(t for _, t in pool.values())) if pool else set()
    chosen: list[GemmConfig] = []
    while uncovered:
        config, gained = min(((c, t & uncovered) for c, t in pool.values()),
                             key=lambda item: (-len(item[1]), _cost(item[0])))
        chosen.append(config)
        uncovered -= gained
        del pool[config.name]
    return sorted(chosen, key=lambda c: c.name)


def _probes(chosen: list[GemmConfig], revision: CkRevision) -> list[GemmConfig]:
    covered = set().union(*(tags(c) for c in chosen))
    traits = (("split_image", revision.split_image_variants, {"split_image": True}),
              ("groups_to_merge", revision.merge_groups_variants, {"num_groups_to_merge": 8}))
    probes = []
    for tag, variants, update in traits:
        for variant in variants:
            members = [c for c in chosen if c.variant.value == variant and c.ndim in (2, 3)]
            if (tag, variant) not in covered and members:
                probes.append(min(members, key=_cost).model_copy(update=update))
    return probes


def sample_kernels(arch: str, revision: CkRevision) -> tuple[list[Kernel], list[str]]:
    """The kernels of the sample for ``arch`` under ``revision``, and the names of trait probes."""
    listed: dict[str, Kernel] = {}
    configs: list[GemmConfig] = []
    for rule_set, variants in SOURCES:
        kernels = list(iter_kernels([Request.build(arch, rule_set, [v.value for v in variants])]))
        listed.update((k.name, k) for k in kernels if not k.depthwise)
        configs += select(kernels, revision)[0]
    chosen = cover(configs)
    probes = _probes(chosen, revision)
    out = [listed[c.name] for c in chosen]
    out += [Kernel(arch, Cell(p.variant, p.ndim, p.dtype), False, p.row(), True) for p in probes]
    return out, sorted(p.name for p in probes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="emit the CI compile sample")
    parser.add_argument("out", type=Path)
    parser.add_argument("--arch", default="gfx942")
    parser.add_argument("--ck-root")
    args = parser.parse_args(argv)
    revision = detect_revision(str(locate_ck(args.ck_root)))
    kernels, probes = sample_kernels(args.arch, revision)
    emit(kernels, args.out, revision, arch=args.arch,
         request={"sample": "ci", "arch": args.arch, "trait_probes_outside_the_space": probes})
    print(f"{len(kernels)} kernels ({len(probes)} trait probes) -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
