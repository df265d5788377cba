"""The rules a target adds to the rule space (:mod:`ckspace.environment.target`): the known-wrong kernels
(:mod:`ckspace.constraints.rulebook.known_wrong`) and what the target's CK headers cannot build
(:mod:`ckspace.constraints.rulebook.ck_rules`). One statement, read by the listing (through the cell cache),
by each cell's CP-SAT model (so ``explain`` names them) and by selection's vector fallbacks."""

from __future__ import annotations

from ckspace.constraints.language.rule import Rule
from ckspace.constraints.rulebook.ck_rules import ck_depthwise_rules, ck_rules
from ckspace.constraints.rulebook.known_wrong import known_wrong_rules
from ckspace.core.cells import Cell
from ckspace.environment.target import Target


def target_rules(target: Target, arch: str, cell: Cell) -> tuple[tuple[Rule, ...], tuple[Rule, ...]]:
    """(GEMM rules, depthwise rules) the target adds in ``cell`` of ``arch``; none for rules only."""
    if target.rules_only:
        return (), ()
    gemm: list[Rule] = list(known_wrong_rules(cell.variant, cell.dtype))
    depthwise: list[Rule] = []
    if target.ck is not None:
        revision = target.ck.revision()
        gemm += ck_rules(revision, cell.variant, cell.dtype, arch=arch, ndim=cell.ndim)
        depthwise += ck_depthwise_rules(revision)
    return tuple(gemm), tuple(depthwise)
