"""Every validity rule of the upstream generator, as named expressions.

Rules are built per cell: arch facts, variant and dtype are folded in as constants, so a rule that
cannot apply in a cell (the WMMA rules on a wave64 arch, say) becomes the constant TRUE there but
keeps its name. Each rule belongs to one *predicate*, the upstream function that checks it (files
of ROCm/rocm-libraries ``projects/composablekernel/dispatcher/codegen/``, at the commits the tables'
``_source_commits`` name):

* ``tile_divisibility`` -- ``codegen_common.py`` ``TileConfig.is_valid``, which only the ``full``
  rule set calls;
* ``is_valid_for_arch`` -- ``unified_grouped_conv_codegen.py``
  ``GroupedConvKernelConfig.is_valid_for_arch``, which the ``default`` and ``full`` rule sets call
  on their proposals; its steps call helpers of ``grouped_conv/grouped_config_rules_full.py`` and
  ``grouped_conv/grouped_config_rules_default.py``;
* ``is_config_valid`` -- ``UnifiedGroupedConvCodegen.is_config_valid``, which the generator applies
  to everything it emits: ``arch_filter.py`` ``ArchFilter.is_kernel_valid`` in non-strict mode with
  wave_k forced to 1, whose ``_validate_*`` checks run in order;
* ``structure`` -- consistency of ckspace's own fields (stream-K flags), true of every proposal;
* ``depthwise`` -- ``grouped_conv/tile_math.py`` ``is_valid_depthwise_config``, which
  ``grouped_config_rules_full.py`` ``get_depthwise_configs`` asserts for its parameter sets.

:func:`gemm_rules` is the table of contents: it calls one function per upstream check, the
``is_valid_for_arch`` steps living in :mod:`ckspace.constraints.rulebook.arch_check` and the
``is_config_valid`` checks in :mod:`ckspace.constraints.rulebook.config_check`. The parameters come from the
shipped tables (``validity.json``, ``arch.json``, ``depthwise.json``) as a rule revision has them
(:mod:`ckspace.core.revisions`), each read with :func:`~ckspace.constraints.language.rule.read` so that the
rule lists it and its words are built from it; the logic lives in these modules and only there. A
rule that upstream changed between revisions has one formulation per state (:data:`FORMULATIONS`),
and each revision names the one it uses. ``docs/rules.md`` lists the rules of one cell.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, partial

from ckspace.constraints.language.expr import Expr, Field, Not, all_of, any_of, implies, lookup
from ckspace.constraints.language.rule import TILE, WARP, WAVE, Rule, TableValue, read
from ckspace.constraints.rulebook.arch_check import arch_check_rules
from ckspace.constraints.rulebook.config_check import LDS_BUDGETS, config_check_rules
from ckspace.constraints.rulebook.gemm_cell import GemmCell
from ckspace.core.arch import arch_facts
from ckspace.core.revisions import rules_revision
from ckspace.core.vocab import Dtype, Predicate, StreamKStrategy, Variant

F = Field

DEPTHWISE_CHECK = "grouped_conv/tile_math.py is_valid_depthwise_config"

FORMULATIONS: dict[str, dict[str, Callable]] = {"lds_budget": LDS_BUDGETS}
"""Per rule that has more than one, its formulations by the name a rule revision gives them
(``revisions.json`` ``rules``)."""


@cache
def gemm_rules(arch: str, variant: Variant, dtype: Dtype, revision: str | None = None) -> tuple[Rule, ...]:
    """The rules of a GEMM config in cell (arch, variant, *, dtype), in upstream check order, as rule
    revision ``revision`` (None: the newest merged one) has them: its tables and its formulation of each rule."""
    rev = rules_revision(revision)
    cell = GemmCell(rev, partial(read, revision=rev), arch_facts(arch, rev.name), variant, dtype)
    return (_streamk_fields(), _tile_divisibility(), *arch_check_rules(cell), *config_check_rules(cell))


def _streamk_fields() -> Rule:
    """Fields of ckspace's own model that must agree with each other (predicate ``structure``)."""
    return Rule(
        "streamk_fields",
        Predicate.STRUCTURE,
        all_of(
            F("streamk_enabled").eq(F("streamk_strategy").ne(StreamKStrategy.NONE.code)),
            implies(F("streamk_persistent").eq(1), F("streamk_enabled").eq(1)),
        ),
        "stream-K is enabled exactly when a strategy is set, and persistence needs stream-K",
        "ckspace model",
    )


def _tile_divisibility() -> Rule:
    """``TileConfig.is_valid``, which only the ``full`` rule set calls."""
    return Rule(
        "tile_divisibility",
        Predicate.TILE_DIVISIBILITY,
        all_of(*(t > 0 for t in TILE), *((t % (wv * wp)).eq(0) for t, wv, wp in zip(TILE, WAVE, WARP, strict=True))),
        "each tile dimension is positive and a multiple of waves x warp tile along it (wave_k counted)",
        "codegen_common.py TileConfig.is_valid",
    )


def _ceil_div(a: Expr, b: Expr) -> Expr:
    return (a + b - 1) // b


@cache
def depthwise_rules() -> tuple[Rule, ...]:
    """The generation-time depthwise checks, on depthwise fields; each names the constraint number
    upstream's ``is_valid_depthwise_config`` gives it."""

    def validation(key: str) -> TableValue:
        return read("depthwise", "validation", key)

    block, size, smem, capped, lds_loads = (
        validation(k)
        for k in ("block_size", "element_size_bytes", "max_smem_bytes", "in_vec_internal_cap", "max_lds_w_vector_loads")
    )
    bs, es, cap = block.value, size.value, capped.value
    th, tw, flt = F("tile_h"), F("tile_w"), F("filter")
    sh, sw, ph, pw = F("stride_h"), F("stride_w"), F("pad_h"), F("pad_w")
    sub_h, sub_w, in_vec, out_vec = F("sub_h"), F("sub_w"), F("in_vec"), F("out_vec")
    pow2 = [1 << i for i in range(8)]
    subtiles = _ceil_div(th, sub_h) * _ceil_div(tw, sub_w)
    tpw = bs // subtiles
    ivi = lookup(in_vec, {x: min(x, cap) for x in pow2}, cap)
    lds_w = tw * sw + 2 * pw
    lds_h = th * sh + 2 * ph
    roundup_a = _ceil_div(lds_w, in_vec) * in_vec
    roundup_b = _ceil_div(lds_w + pw, ivi) * ivi
    stride_a_wins = roundup_a >= roundup_b
    smem_a = lds_h * roundup_a * tpw * es <= smem.value
    smem_b = lds_h * roundup_b * tpw * es <= smem.value

    def rule(name: str, constraint: int, expr: Expr, text: str, *reads: TableValue) -> Rule:
        return Rule(name, Predicate.DEPTHWISE, expr, text, f"{DEPTHWISE_CHECK}, constraint {constraint}", reads=reads)

    return (
        rule("dw_filter", 5, all_of(flt >= 1, (flt % 2).eq(1)), "filter is odd and >= 1"),
        rule("dw_vec_pow2", 6, all_of(in_vec.isin(pow2), out_vec.isin(pow2)), "in_vec and out_vec are powers of two"),
        rule(
            "dw_sub_tile",
            7,
            all_of(sub_h >= 1, sub_h <= th, sub_w >= 1, sub_w <= tw),
            "1 <= sub <= tile in each dimension",
        ),
        rule("dw_stride_w", 9, any_of(sw.eq(1), (sw % 2).eq(0)), "stride_w is 1 or even"),
        rule("dw_pad_w", 15, pw > 0, "pad_w > 0"),
        rule("dw_subtiles", 8, subtiles <= bs, f"ceil(th/sub_h) x ceil(tw/sub_w) <= {bs} (threads per block)", block),
        rule(
            "dw_nbatch",
            13,
            all_of(tpw >= 1, (F("nbatch") % tpw).eq(0)),
            f"nbatch is a multiple of {bs} // subtiles (tiles per wave)",
            block,
        ),
        rule(
            "dw_in_vec_sub_w",
            14,
            ((sub_w * sw) % ivi).eq(0),
            f"sub_w x stride_w is a multiple of min(in_vec, {cap})",
            capped,
        ),
        rule(
            "dw_lds_w",
            16,
            _ceil_div(lds_w, in_vec) <= lds_loads.value,
            f"ceil((tw x sw + 2 pw) / in_vec) <= {lds_loads.value}",
            lds_loads,
        ),
        rule(
            "dw_smem",
            17,
            any_of(all_of(stride_a_wins, smem_a), all_of(Not(stride_a_wins), smem_b)),
            f"the LDS tile (rows x padded row stride x tiles per wave x {es} B) fits {smem.value} B",
            block,
            size,
            smem,
            capped,
        ),
    )
