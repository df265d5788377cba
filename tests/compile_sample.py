"""A small set of kernels that exercises everything a CK revision can build (the CI compile sample).

Covers every variant, 2D and 3D, every dtype, every (pipeline, scheduler) pair and every trait
(two-stage, split-image, groups-to-merge, double LDS buffer, each specialization) that the space
holds and the revision supports. bwd_data comes from the ``default`` rule set because ``full``
proposes none (an upstream quirk). Greedy set cover, preferring small tiles, which compile fastest.

A trait or pipeline the revision supports but no buildable config of the space carries (with the
2025-11 CK: forward split-image, proposed only with compv1, and the compv5 pipeline, proposed by no
rule set) is exercised by a *probe*: the cheapest sampled config with it switched on that passes
every ck_revision rule. Probes are outside the space and are named as such in the manifest's
request, next to ``not_covered``: what this CK lacks (stream-K, explicit GEMM, forward
groups-to-merge, bwd specializations, ...) with the rule that says why.

``python3 tests/compile_sample.py OUT [--arch A] [--ck-root PATH]`` emits the sample into OUT.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path

from ckspace.core.cells import Cell
from ckspace.core.ck import CkRevision
from ckspace.core.config import GemmConfig
from ckspace.core.vocab import Dtype, Pipeline, Variant
from ckspace.emit.emitter import emit
from ckspace.emit.rendering import buildable
from ckspace.environment.ck_header_cache import find_revision
from ckspace.space.listing import Kernel
from ckspace.space.space import Space

SOURCES = (("full", (Variant.FORWARD, Variant.BWD_WEIGHT)), ("default", (Variant.BWD_DATA,)))


def tags(config: GemmConfig) -> set[tuple]:
    """What compiling ``config`` proves something about."""
    v = config.variant.value
    out = {
        ("variant", v),
        ("dtype", v, config.dtype.value),
        ("pipeline", v, config.pipeline.value),
        ("pipeline_scheduler", config.pipeline.value, config.scheduler.value),
        ("specialization", v, config.specialization.value),
    }
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
        config, gained = min(
            ((c, t & uncovered) for c, t in pool.values()), key=lambda item: (-len(item[1]), _cost(item[0]))
        )
        chosen.append(config)
        uncovered -= gained
        del pool[config.name]
    return sorted(chosen, key=lambda c: c.name)


def _passes(config: GemmConfig, revision: CkRevision) -> bool:
    kernel = Kernel(config.arch, Cell(config.variant, config.ndim, config.dtype), False, config.row(), True)
    return bool(buildable([kernel], revision)[0])


def _probes(chosen: list[GemmConfig], revision: CkRevision) -> list[GemmConfig]:
    """Trait and pipeline probes: for what the revision supports but no sampled config carries, the
    cheapest sampled config (2D/3D) with it switched on that still passes every ck_revision rule."""
    covered = set().union(*(tags(c) for c in chosen))
    wanted: list[tuple[tuple, list[str], dict]] = [
        (("split_image", variant), [variant], {"split_image": True}) for variant in revision.split_image_variants
    ]
    wanted.extend(
        (("groups_to_merge", variant), [variant], {"num_groups_to_merge": 8})
        for variant in revision.merge_groups_variants
    )
    callable_ = [*revision.single_lds_pipelines, *revision.double_lds_pipelines]
    sampled = {c.pipeline.value for c in chosen}
    wanted.extend(
        (
            ("pipeline_any", pipeline),
            [v.value for v in Variant],
            {"pipeline": Pipeline(pipeline), "double_smem_buffer": pipeline in revision.double_lds_pipelines},
        )
        for pipeline in callable_
        if pipeline not in sampled
    )
    probes = []
    for tag, variants, update in wanted:
        if tag in covered:
            continue
        members = sorted((c for c in chosen if c.variant.value in variants and c.ndim in (2, 3)), key=_cost)
        for member in members:
            probe = GemmConfig.from_fields({**member.fields(), **update})
            if _passes(probe, revision):
                probes.append(probe)
                break
    return probes


def not_covered(revision: CkRevision, kernels: list[Kernel]) -> dict[str, str]:
    """What the issue asks the sample to cover that this CK (or the space) does not offer, and why."""
    configs = [GemmConfig.from_row(k.arch, *k.cell, k.row) for k in kernels]
    out: dict[str, str] = {}
    if not revision.streamk_conv:
        out["stream-K"] = "absent: this CK's grouped-conv kernels take no stream-K partitioner (rule ck_streamk)"
    if not revision.explicit_gemm:
        out["explicit GEMM"] = "absent: this CK's GroupedConvTraits has no explicit-GEMM parameter (ck_explicit_gemm)"
    for variant in Variant:
        if variant.value not in revision.merge_groups_variants:
            out[f"groups-to-merge {variant.value}"] = (
                "excluded by ck_groups_to_merge (the kernel does not merge groups)"
            )
        if variant.value in revision.broken_specialization_variants:
            out[f"specializations {variant.value}"] = (
                "default only: ck_specialization (kernel reads the undeclared GroupedConvTraits::NDimSpatial_)"
            )
    pipelines = {c.pipeline.value for c in configs}
    for pipeline in revision.pipelines:
        if pipeline not in pipelines:
            out[f"pipeline {pipeline}"] = (
                "no grouped-conv kernel can call it in this CK (ck_pipeline_call)"
                if pipeline not in (*revision.single_lds_pipelines, *revision.double_lds_pipelines)
                else "no config of the space or probe passes the ck_revision rules"
            )
    dtypes = {(c.variant.value, c.dtype.value) for c in configs}
    for variant in Variant:
        for dtype in Dtype:
            if (variant.value, dtype.value) not in dtypes:
                out[f"dtype {variant.value} {dtype.value}"] = "no config of the space passes the ck_revision rules"
    return out


def sample_kernels(arch: str, revision: CkRevision) -> tuple[list[Kernel], list[str]]:
    """The kernels of the sample for ``arch`` under ``revision``, and the names of the probes."""
    listed: dict[str, Kernel] = {}
    configs: list[GemmConfig] = []
    for rule_set, variants in SOURCES:
        kernels = Space(arch, [v.value for v in variants], rule_set=rule_set).kernels()
        listed.update((k.name, k) for k in kernels if not k.depthwise)
        configs += buildable(kernels, revision)[0]
    chosen = cover(configs)
    probes = _probes(chosen, revision)
    out = [listed[c.name] for c in chosen]
    out += [Kernel(arch, Cell(p.variant, p.ndim, p.dtype), False, p.row(), True) for p in probes]
    return out, sorted(p.name for p in probes)


def sample_request(arch: str, revision: CkRevision, kernels: list[Kernel], probes: list[str]) -> dict[str, object]:
    """The manifest request of the sample: the probes and what is not covered, with the reason."""
    return {
        "sample": "ci",
        "arch": arch,
        "probes_outside_the_space": probes,
        "not_covered": not_covered(revision, kernels),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="emit the CI compile sample")
    parser.add_argument("out", type=Path)
    parser.add_argument("--arch", default="gfx942")
    parser.add_argument("--ck-root")
    args = parser.parse_args(argv)
    revision = find_revision(args.ck_root)
    kernels, probes = sample_kernels(args.arch, revision)
    emit(kernels, args.out, revision, arch=args.arch, request=sample_request(args.arch, revision, kernels, probes))
    print(f"{len(kernels)} kernels ({len(probes)} probes) -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
