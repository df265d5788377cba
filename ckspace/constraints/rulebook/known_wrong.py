"""Kernels upstream itself documents as giving wrong results, as named rules of predicate
``known_wrong``.

The upstream generator still emits them (its rule set ``full`` only records the defect in a
comment), so the rule space holds them and the parity tests keep them. The *target* every command
answers for by default (:mod:`ckspace.environment.target`; its rules:
:func:`ckspace.constraints.rulebook.catalogue.target_rules`) leaves them out: a selector that picks a
fast kernel with a wrong answer is worse than one that picks a slower right one, and upstream's
users report exactly that (split-K weight gradients off by 1.5-2x, a broken instance winning an
exhaustive search because it was faster).

Each rule names where upstream says so. :data:`ckspace.environment.target.KNOWN_WRONG_VERSION` changes
whenever a rule here is added or changed, so cached target listings are rebuilt.
"""

from __future__ import annotations

from ckspace.constraints.language.expr import Field, Not, all_of
from ckspace.constraints.language.rule import Rule, TableValue
from ckspace.core.revisions import Quirk
from ckspace.core.vocab import Dtype, Pipeline, Predicate, Scheduler, Specialization, Variant

F = Field

UPSTREAM_RULES_FILE = "dispatcher/codegen/grouped_conv/grouped_config_rules_full.py"

HALF = (Dtype.FP16, Dtype.BF16)
INTERWAVE_BROKEN_PIPELINES = (Pipeline.COMPV1, Pipeline.MEM)


def known_wrong_rules(variant: Variant, dtype: Dtype) -> tuple[Rule, ...]:
    """The known-wrong rules of one cell's variant and dtype (empty where upstream documents none).

    ``bwd_weight_half_interwave_multiwave``: upstream's ``full`` rules file (ROCm/composable_kernel,
    ``dispatcher/codegen/grouped_conv/grouped_config_rules_full.py`` at commit 610e69bf, the
    "KNOWN LIMITATION (bwd_weight, half precision)" comment in its config loop) states that the
    interwave compv1 (BASIC_V1 at run time) and mem (MEMORY) pipelines give incorrect bwd_weight
    results for the default specialization in fp16/bf16 when the block tile is split over more than
    one wave along M and N (wave_m x wave_n > 1): about half of the weight gradient (whole groups)
    comes back zero, seen on 64x64x64 (2,2,1), 64x16x64 (2,1,1) and 16x32x64 (1,2,1). Upstream saw
    it on grouped convolutions with a small per-group GEMM-M; the rule excludes the configs for every
    problem, since no bound on "small" is documented.
    """
    if variant is not Variant.BWD_WEIGHT or dtype not in HALF:
        return ()
    broken = all_of(
        F("scheduler").eq(Scheduler.INTERWAVE.code),
        F("pipeline").isin([p.code for p in INTERWAVE_BROKEN_PIPELINES]),
        F("specialization").eq(Specialization.DEFAULT.code),
        F("wave_m") * F("wave_n") > 1,
    )
    pipelines = ", ".join(p.value for p in INTERWAVE_BROKEN_PIPELINES)
    return (
        Rule(
            "bwd_weight_half_interwave_multiwave",
            Predicate.KNOWN_WRONG,
            Not(broken),
            f"upstream documents wrong bwd_weight results in {dtype.value} for interwave {pipelines} with the "
            "default specialization when wave_m x wave_n > 1 (about half the weight gradient comes back zero)",
            f"{UPSTREAM_RULES_FILE} (ROCm/composable_kernel 610e69bf), comment 'KNOWN LIMITATION (bwd_weight, "
            "half precision)' in get_configs",
            quirk=Quirk.KNOWN_WRONG_EMITTED,
            reads=(TableValue("upstream comment", "pipelines", [p.value for p in INTERWAVE_BROKEN_PIPELINES]),),
        ),
    )
