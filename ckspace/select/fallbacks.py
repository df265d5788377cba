"""Vector-width fallbacks: the variant of a kernel family that runs a problem its kernel cannot.

A CK Tile kernel family (tile, waves, warp tile, pipeline, ... everything but the three vector
widths) runs any GEMM size: the kernel pads M/N/K tails itself. What it cannot do is load or store
vectors wider than the channels per group allow (:mod:`ckspace.constraints.rulebook.problem_rules`,
``vec_*_divides_*``). Upstream's runner measured every family on every problem by instantiating a
variant with narrower vectors (its VecStrategy); the ``full`` rule set holds such variants.

A family's *variants* are the configs that differ from its kernel only in narrower (or equal)
vector widths from the vector-width domain of the rule tables, and that break no validity rule
the kernel itself keeps: for a valid kernel, valid configs of the space; for a measured kernel that
some rule already rejects (the benchmark registry has such), no new reason to reject it. They are
ordered widest first (the largest product of the three widths, then vec_a, vec_b, vec_c), and a
problem is served by the first variant that passes every problem rule. The Python selector and the
generated dispatcher use this one list.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product

import numpy as np

from ckspace.constraints.evaluators.classify import columns, rule_masks, satisfies_all
from ckspace.constraints.rulebook.catalogue import target_rules
from ckspace.constraints.rulebook.validity import gemm_rules
from ckspace.core.cells import Cell
from ckspace.core.config import GemmConfig
from ckspace.core.fields import GEMM_FIELD_NAMES
from ckspace.core.kernel_key import KernelKey
from ckspace.core.tables import table
from ckspace.environment.target import Target
from ckspace.workloads.operands import OPERANDS, VECTOR_FIELDS

VECTOR_WIDTHS: tuple[int, ...] = tuple(table("full")["vec_gate"]["widths"])
"""The vector widths the rule tables know (``full.json`` ``vec_gate.widths``)."""

_VEC_INDEX = tuple(GEMM_FIELD_NAMES.index(f) for f in VECTOR_FIELDS)


def _narrower(config: GemmConfig) -> list[tuple[int, int, int]]:
    """Vector triples no wider than ``config``'s in any field, widest first, its own excluded."""
    own = tuple(getattr(config, f) for f in VECTOR_FIELDS)
    triples = [t for t in product(*([w for w in VECTOR_WIDTHS if w <= v] for v in own)) if t != own]
    return sorted(triples, key=lambda t: (-(t[0] * t[1] * t[2]), -t[0], -t[1], -t[2]))


def vector_variants(configs: Sequence[GemmConfig], target: Target | None = None) -> list[list[GemmConfig]]:
    """For each config, its family's other vector variants (see the module doc), widest first; with a
    ``target``, only the variants that are kernels of it (a fallback is never a kernel its CK cannot
    build or upstream documents as wrong).

    All configs must share one cell (arch, variant, dtype); the validity rules are evaluated once
    over every candidate variant at once."""
    if not configs:
        return []
    first = configs[0]
    rules = gemm_rules(first.arch, first.variant, first.dtype)
    own_rows = [c.row() for c in configs]
    own_masks = rule_masks(rules, columns(own_rows, GEMM_FIELD_NAMES), len(own_rows))
    rows, owner, triples = [], [], []
    for i, (config, row) in enumerate(zip(configs, own_rows, strict=True)):
        for triple in _narrower(config):
            changed = list(row)
            for index, width in zip(_VEC_INDEX, triple, strict=True):
                changed[index] = width
            rows.append(tuple(changed))
            owner.append(i)
            triples.append(triple)
    if not rows:
        return [[] for _ in configs]
    owner_index = np.asarray(owner)
    masks = rule_masks(rules, columns(rows, GEMM_FIELD_NAMES), len(rows))
    keep = np.ones(len(rows), dtype=bool)
    for name, ok in masks.items():
        keep &= ok | ~own_masks[name][owner_index]  # a rule the kernel breaks may stay broken
    out: list[list[GemmConfig]] = [[] for _ in configs]
    for j in np.flatnonzero(keep):
        base = configs[owner[j]]
        out[owner[j]].append(base.model_copy(update=dict(zip(VECTOR_FIELDS, triples[j], strict=True))))
    if target is not None:
        inside = in_target(target, [v for family in out for v in family])
        out = [[v for v in family if inside[v.kernel_key()]] for family in out]
    return out


def family_key(config: GemmConfig) -> KernelKey:
    """What a kernel's vector-width variants share: its :meth:`~GemmConfig.kernel_key` with the
    vector widths left out of the row."""
    key = config.kernel_key()
    return key._replace(row=tuple(v for i, v in enumerate(key.row) if i not in _VEC_INDEX))


def in_target(target: Target, configs: Sequence[GemmConfig]) -> dict[KernelKey, bool]:
    """Whether each config passes the target's rules in its cell
    (:func:`ckspace.constraints.rulebook.catalogue.target_rules`), by :meth:`~GemmConfig.kernel_key`;
    the validity rules are the caller's."""
    out: dict[KernelKey, bool] = {}
    cells: dict[tuple, list[GemmConfig]] = {}
    for config in configs:
        cells.setdefault((config.arch, Cell(config.variant, config.ndim, config.dtype)), []).append(config)
    for (arch, cell), members in cells.items():
        rules = target_rules(target, arch, cell).gemm
        ok = satisfies_all(rules, [c.row() for c in members], GEMM_FIELD_NAMES)
        out.update((c.kernel_key(), keep) for c, keep in zip(members, ok, strict=True))
    return out


def serving_variants(configs: Sequence[GemmConfig], target: Target | None = None) -> list[list[GemmConfig]]:
    """For each config, the variants its family falls back to for some channel count: a vector
    width divides a channel count exactly when it is at most the count's largest power-of-two
    divisor, so for every pair of such caps (on Cg and on Kg) the widest variant within them is the
    one a problem with those channels gets. Fewer than the family's variants: the ones a library
    needs to serve every channel count by vector alignment."""
    out = []
    for config, family in zip(configs, vector_variants(configs, target), strict=True):
        gemm = OPERANDS[config.variant]
        channels = {f: gemm.operand(f).channels for f in VECTOR_FIELDS}
        chosen: dict[tuple[int, ...], GemmConfig] = {}
        own = tuple(getattr(config, f) for f in VECTOR_FIELDS)
        for caps in product(VECTOR_WIDTHS, repeat=2):
            cap = dict(zip(("Cg", "Kg"), caps, strict=True))
            if all(getattr(config, f) <= cap[channels[f]] for f in VECTOR_FIELDS):
                continue  # the kernel itself serves these channels
            for variant in family:
                triple = tuple(getattr(variant, f) for f in VECTOR_FIELDS)
                if all(getattr(variant, f) <= cap[channels[f]] for f in VECTOR_FIELDS):
                    if triple != own:
                        chosen.setdefault(triple, variant)
                    break
        out.append(list(chosen.values()))
    return out
