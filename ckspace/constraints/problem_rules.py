"""The checks CK Tile makes before running a kernel on a problem, as named rules.

Each rule is one check of the kernel's ``IsSupportedArgument`` in the CK revision ckspace targets
(the tree vendored in amd-aiter 0.1.7.post2.dev18), with the header and lines it comes from. The
problem's numbers are folded in as constants, so a rule is an expression over config fields only
and joins a cell's CP-SAT model and the vectorised listing like every other rule (predicate
``problem``). CK counts channels per group: Cg = C / G, Kg = K / G.

Vector widths read the contiguous channels of their implicit-GEMM operand
(:data:`ckspace.core.operands.OPERANDS`): forward reads In and Wei along Cg and writes Out along
Kg; the backward variants read the output gradient along Kg.
"""

from __future__ import annotations

import math

from ckspace.constraints.expr import TRUE, Const, Field, Not, all_of, implies
from ckspace.constraints.rule import Rule, TableValue
from ckspace.core.operands import OPERANDS, VECTOR_FIELDS
from ckspace.core.problem import ConvProblem
from ckspace.core.vocab import Dtype, Predicate, Specialization, Variant

_KERNEL = "ck_tile/ops/grouped_convolution/kernel/grouped_convolution_{}_kernel.hpp"
_FILE = {Variant.FORWARD: _KERNEL.format("forward"), Variant.BWD_DATA: _KERNEL.format("backward_data"),
         Variant.BWD_WEIGHT: _KERNEL.format("backward_weight")}
# IsSupportedArgument line ranges per check, in the targeted CK revision
_LINES = {
    Variant.FORWARD: {"k_batch": "596-608", "1x1_s1_p0": "614-629", "1x1_p0": "630-644", "3x3": "645-660",
                      "vec_a": "664-678", "vec_b": "682-696", "vec_c": "699-713"},
    Variant.BWD_DATA: {"k_batch": "593-605", "gemm_count": "607-610", "1x1_s1_p0": "616-631",
                       "1x1_p0": "632-646", "3x3": "647-662", "vec_a": "699-713", "vec_b": "666-680",
                       "vec_c": "683-697"},
    Variant.BWD_WEIGHT: {"k_batch": "508-520", "1x1_s1_p0": "526-541", "1x1_p0": "542-556", "3x3": "557-572",
                         "vec_a": "609-624", "vec_b": "576-591", "vec_c": "593-607", "groups_merge": "626-636"},
}
MAX_BWD_DATA_GEMMS = TableValue(_FILE[Variant.BWD_DATA], "MaxGroupedGemmGroupsNum", 128)
"""The most GEMMs the backward-data kernel splits a convolution into, a constant of its header."""
DEPTHWISE_SOURCE = ("ckspace: a depthwise kernel is specialised for one convolution shape "
                    "(grouped_conv/grouped_config_rules_full.py DEPTHWISE_PARAMS)")


def _source(variant: Variant, check: str) -> str:
    return f"{_FILE[variant]}, IsSupportedArgument, lines {_LINES[variant][check]}"


def _bool(value: bool) -> Const:
    return Const(int(value))


def gemm_problem_rules(problem: ConvProblem, variant: Variant, ndim: int, dtype: Dtype) -> tuple[Rule, ...]:
    """Rules a GEMM config must satisfy to run ``problem`` in cell (variant, ndim, dtype)."""
    F = Field
    rules: list[Rule] = []

    def add(name: str, check: str, expr, text: str, *reads: TableValue) -> None:
        rules.append(Rule(name, Predicate.PROBLEM, expr, text, _source(variant, check) if check else "ckspace",
                          reads=reads))

    add("problem_ndim", "", _bool(problem.ndim == ndim), f"the problem is {problem.ndim}D, kernels of this cell "
        f"are {ndim}D")
    dims = problem.dims
    filters = [problem.filter_size(d) for d in dims]
    unit = all(f == 1 for f in filters)
    no_pad = all(getattr(problem, f"pad_{d}") == 0 for d in dims)
    unit_stride = all(getattr(problem, f"stride_{d}") == 1 for d in dims)
    spec = F("specialization")
    add("spec_filter1x1_stride1_pad0", "1x1_s1_p0",
        implies(spec.eq(Specialization.FILTER1X1_STRIDE1_PAD0.code), _bool(unit and no_pad and unit_stride)),
        f"filter1x1_stride1_pad0 needs 1x1 filters, stride 1 and no padding (filter {filters}, "
        f"stride {[getattr(problem, f'stride_{d}') for d in dims]}, pad {[getattr(problem, f'pad_{d}') for d in dims]})")
    add("spec_filter1x1_pad0", "1x1_p0",
        implies(spec.eq(Specialization.FILTER1X1_PAD0.code), _bool(unit and no_pad)),
        f"filter1x1_pad0 needs 1x1 filters and no padding (filter {filters})")
    add("spec_filter3x3", "3x3",
        implies(spec.eq(Specialization.FILTER3X3.code), _bool(problem.Cg == 1 and all(f == 3 for f in filters))),
        f"filter3x3 needs one input channel per group and 3-wide filters (Cg={problem.Cg}, filter {filters})")
    gemm = OPERANDS[variant]
    for field in VECTOR_FIELDS:
        operand = gemm.operand(field)
        size = getattr(problem, operand.channels)
        add(f"{field}_divides_{operand.channels.lower()}", field, (Const(size) % F(field)).eq(0),
            f"{field} divides the {operand.description}'s contiguous channels per group ({operand.channels}={size})")
    if variant is Variant.BWD_WEIGHT:
        atomic = dtype in (Dtype.FP16, Dtype.BF16)
        add("split_k_atomic_dtype", "k_batch",
            TRUE if problem.k_batch == 1 or not atomic else
            Not(all_of((F("vec_c") % 2).eq(1), F("two_stage").eq(0))),
            f"split-K (k_batch={problem.k_batch}) adds {dtype.value} results atomically, which needs an even "
            "vec_c unless the kernel is two-stage (fp32 workspace)")
        add("groups_to_merge_divides_g", "groups_merge",
            implies(F("num_groups_to_merge") > 1, (Const(problem.G) % F("num_groups_to_merge")).eq(0)),
            f"merged groups divide G={problem.G}")
    else:
        add("no_split_k", "k_batch", _bool(problem.k_batch == 1),
            f"{variant.value} has no split-K: k_batch must be 1 (k_batch={problem.k_batch})")
    if variant is Variant.BWD_DATA:
        count = math.prod(
            min(getattr(problem, f"stride_{d}") // math.gcd(getattr(problem, f"stride_{d}"),
                                                            getattr(problem, f"dil_{d}")), problem.filter_size(d))
            for d in dims)
        add("bwd_data_gemm_count", "gemm_count", _bool(count <= MAX_BWD_DATA_GEMMS.value),
            f"backward data splits into {count} GEMMs (at most {MAX_BWD_DATA_GEMMS.value})", MAX_BWD_DATA_GEMMS)
    return tuple(rules)


def depthwise_problem_rules(problem: ConvProblem) -> tuple[Rule, ...]:
    """A depthwise config runs exactly the convolutions it is specialised for: one channel per
    group in and out, a square filter of its size, its strides and pads, and its dilation."""
    F = Field
    src = DEPTHWISE_SOURCE
    if problem.ndim != 2:
        return (Rule("problem_ndim", Predicate.PROBLEM, Const(0), f"depthwise kernels are 2D, the problem is {problem.ndim}D", src),)
    return (
        Rule("depthwise_channels", Predicate.PROBLEM, _bool(problem.Cg == 1 and problem.Kg == 1),
             f"a depthwise kernel needs one input and one output channel per group (Cg={problem.Cg}, Kg={problem.Kg})",
             src),
        Rule("depthwise_filter", Predicate.PROBLEM, all_of(F("filter").eq(problem.Y), F("filter").eq(problem.X)),
             f"the kernel's filter size is the problem's ({problem.Y}x{problem.X})", src),
        Rule("depthwise_stride", Predicate.PROBLEM, all_of(F("stride_h").eq(problem.stride_h), F("stride_w").eq(problem.stride_w)),
             f"the kernel's strides are the problem's ({problem.stride_h}, {problem.stride_w})", src),
        Rule("depthwise_pad", Predicate.PROBLEM, all_of(F("pad_h").eq(problem.pad_h), F("pad_w").eq(problem.pad_w)),
             f"the kernel's pads are the problem's ({problem.pad_h}, {problem.pad_w})", src),
        Rule("depthwise_dilation", Predicate.PROBLEM,
             all_of(F("dilation").eq(problem.dil_h), F("dilation").eq(problem.dil_w)),
             f"the kernel's dilation is the problem's ({problem.dil_h}, {problem.dil_w})", src),
    )
