"""The checks CK Tile makes before running a kernel on a problem, as named rules.

Each rule is one check of the kernel's ``IsSupportedArgument`` in the CK revision ckspace targets
(the tree vendored in amd-aiter 0.1.7.post2.dev18), with the header and lines it comes from. Each is
stated once, as a :class:`ProblemRule` over config fields and problem quantities
(:class:`~ckspace.constraints.language.expr.Param`). For the Python backends a problem's numbers are folded
in (:meth:`ProblemRule.bind`), so a bound rule is an expression over config fields only and joins a
cell's CP-SAT model and the vectorised listing like every other rule (predicate ``problem``); the
generated C dispatcher renders the unbound expressions. CK counts channels per group:
Cg = C / G, Kg = K / G.

Vector widths read the contiguous channels of their implicit-GEMM operand
(:data:`ckspace.workloads.operands.OPERANDS`): forward reads In and Wei along Cg and writes Out along
Kg; the backward variants read the output gradient along Kg.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, cached_property

from ckspace.constraints.language.expr import Const, Expr, Field, Not, Param, all_of, bind, gcd, implies, minimum
from ckspace.constraints.language.partial_eval import Partial, partial
from ckspace.constraints.language.rule import Rule, TableValue
from ckspace.core.vocab import Dtype, Predicate, Specialization, Variant
from ckspace.workloads.operands import OPERANDS, VECTOR_FIELDS
from ckspace.workloads.problem import PROBLEM_FIELDS, ConvProblem

_KERNEL = "ck_tile/ops/grouped_convolution/kernel/grouped_convolution_{}_kernel.hpp"
_FILE = {
    Variant.FORWARD: _KERNEL.format("forward"),
    Variant.BWD_DATA: _KERNEL.format("backward_data"),
    Variant.BWD_WEIGHT: _KERNEL.format("backward_weight"),
}
# IsSupportedArgument line ranges per check, in the targeted CK revision
_LINES = {
    Variant.FORWARD: {
        "k_batch": "596-608",
        "1x1_s1_p0": "614-629",
        "1x1_p0": "630-644",
        "3x3": "645-660",
        "vec_a": "664-678",
        "vec_b": "682-696",
        "vec_c": "699-713",
    },
    Variant.BWD_DATA: {
        "k_batch": "593-605",
        "gemm_count": "607-610",
        "1x1_s1_p0": "616-631",
        "1x1_p0": "632-646",
        "3x3": "647-662",
        "vec_a": "699-713",
        "vec_b": "666-680",
        "vec_c": "683-697",
    },
    Variant.BWD_WEIGHT: {
        "k_batch": "508-520",
        "1x1_s1_p0": "526-541",
        "1x1_p0": "542-556",
        "3x3": "557-572",
        "vec_a": "609-624",
        "vec_b": "576-591",
        "vec_c": "593-607",
        "groups_merge": "626-636",
    },
}
MAX_BWD_DATA_GEMMS = TableValue(_FILE[Variant.BWD_DATA], "MaxGroupedGemmGroupsNum", 128)
"""The most GEMMs the backward-data kernel splits a convolution into, a constant of its header."""
DEPTHWISE_SOURCE = (
    "ckspace: a depthwise kernel is specialised for one convolution shape "
    "(grouped_conv/grouped_config_rules_full.py DEPTHWISE_PARAMS)"
)


def _source(variant: Variant, check: str) -> str:
    return f"{_FILE[variant]}, IsSupportedArgument, lines {_LINES[variant][check]}"


P = Param
CHANNELS: dict[str, Expr] = {"Cg": P("C") // P("G"), "Kg": P("K") // P("G")}
"""Channels per group, the only derived quantities the checks read besides the filter taps."""
DIMS = ("d", "h", "w")
FILTER = {"d": "Z", "h": "Y", "w": "X"}


def dims(ndim: int) -> tuple[str, ...]:
    """The spatial dimensions of an ``ndim``-D problem, outermost first."""
    return DIMS[3 - ndim :]


@dataclass(frozen=True)
class ProblemRule:
    """A check over config fields and problem :class:`~ckspace.constraints.language.expr.Param` s, stated
    once: :meth:`bind` makes the :class:`Rule` for one problem (Python backends), the dispatcher
    generator renders :attr:`expr` to C as it stands.

    ``text`` is a :meth:`str.format` template over :func:`describe`'s values; ``vector_field`` names
    the vector width a vector-alignment check reads (the checks a narrower-vector variant of the
    same kernel family can pass)."""

    name: str
    expr: Expr
    text: str
    source: str
    reads: tuple[TableValue, ...] = ()
    vector_field: str | None = None

    @cached_property
    def check(self) -> Partial:
        """The check as a function of (problem values, config columns): see
        :func:`~ckspace.constraints.language.partial_eval.partial`."""
        return partial(self.expr)

    def bind(self, values: dict[str, int], words: dict[str, object]) -> Rule:
        return Rule(
            self.name,
            Predicate.PROBLEM,
            bind(self.expr, values),
            self.text.format(**words),
            self.source,
            reads=self.reads,
        )


def _gemm_count(ndim: int) -> Expr:
    """How many GEMMs backward data splits a convolution into: per dimension, the filter taps that
    fall on distinct output phases (stride / gcd(stride, dilation), at most the filter size)."""
    count: Expr = Const(1)
    for d in dims(ndim):
        stride = P(f"stride_{d}")
        count = count * minimum(stride // gcd(stride, P(f"dil_{d}")), P(FILTER[d]))
    return count


@cache
def gemm_problem_templates(variant: Variant, ndim: int, dtype: Dtype) -> tuple[ProblemRule, ...]:
    """The checks a GEMM config of cell (variant, ndim, dtype) must pass to run a problem."""
    F = Field
    out: list[ProblemRule] = []

    def add(name: str, check: str, expr: Expr, text: str, *reads: TableValue, vector_field: str | None = None) -> None:
        out.append(ProblemRule(name, expr, text, _source(variant, check) if check else "ckspace", reads, vector_field))

    ds = dims(ndim)
    unit = all_of(*(P(FILTER[d]).eq(1) for d in ds))
    no_pad = all_of(*(P(f"pad_{d}").eq(0) for d in ds))
    unit_stride = all_of(*(P(f"stride_{d}").eq(1) for d in ds))
    spec = F("specialization")
    add("problem_ndim", "", P("ndim").eq(ndim), f"the problem is {{ndim}}D, kernels of this cell are {ndim}D")
    add(
        "spec_filter1x1_stride1_pad0",
        "1x1_s1_p0",
        implies(spec.eq(Specialization.FILTER1X1_STRIDE1_PAD0.code), all_of(unit, no_pad, unit_stride)),
        "filter1x1_stride1_pad0 needs 1x1 filters, stride 1 and no padding (filter {filter}, stride {stride}, "
        "pad {pad})",
    )
    add(
        "spec_filter1x1_pad0",
        "1x1_p0",
        implies(spec.eq(Specialization.FILTER1X1_PAD0.code), all_of(unit, no_pad)),
        "filter1x1_pad0 needs 1x1 filters and no padding (filter {filter})",
    )
    add(
        "spec_filter3x3",
        "3x3",
        implies(
            spec.eq(Specialization.FILTER3X3.code), all_of(CHANNELS["Cg"].eq(1), *(P(FILTER[d]).eq(3) for d in ds))
        ),
        "filter3x3 needs one input channel per group and 3-wide filters (Cg={Cg}, filter {filter})",
    )
    gemm = OPERANDS[variant]
    for field in VECTOR_FIELDS:
        operand = gemm.operand(field)
        add(
            f"{field}_divides_{operand.channels.lower()}",
            field,
            (CHANNELS[operand.channels] % F(field)).eq(0),
            f"{field} divides the {operand.description}'s contiguous channels per group "
            f"({operand.channels}={{{operand.channels}}})",
            vector_field=field,
        )
    if variant is Variant.BWD_WEIGHT:
        if dtype in (Dtype.FP16, Dtype.BF16):
            add(
                "split_k_atomic_dtype",
                "k_batch",
                implies(P("k_batch") > 1, Not(all_of((F("vec_c") % 2).eq(1), F("two_stage").eq(0)))),
                f"split-K (k_batch={{k_batch}}) adds {dtype.value} results atomically, which needs an even vec_c "
                "unless the kernel is two-stage (fp32 workspace)",
            )
        add(
            "groups_to_merge_divides_g",
            "groups_merge",
            implies(F("num_groups_to_merge") > 1, (P("G") % F("num_groups_to_merge")).eq(0)),
            "merged groups divide G={G}",
        )
    else:
        add(
            "no_split_k",
            "k_batch",
            P("k_batch").eq(1),
            f"{variant.value} has no split-K: k_batch must be 1 (k_batch={{k_batch}})",
        )
    if variant is Variant.BWD_DATA:
        add(
            "bwd_data_gemm_count",
            "gemm_count",
            _gemm_count(ndim) <= MAX_BWD_DATA_GEMMS.value,
            f"backward data splits into {{gemm_count}} GEMMs (at most {MAX_BWD_DATA_GEMMS.value})",
            MAX_BWD_DATA_GEMMS,
        )
    return tuple(out)


def problem_values(problem: ConvProblem) -> dict[str, int]:
    """The :class:`~ckspace.constraints.language.expr.Param` values of ``problem``."""
    return {name: getattr(problem, name) for name in PARAMS}


PARAMS: tuple[str, ...] = ("ndim", *PROBLEM_FIELDS)
"""Every problem quantity a check may read: the fields of ``ckspace_conv_problem`` in the dispatcher C API."""


def describe(problem: ConvProblem, values: dict[str, int]) -> dict[str, object]:
    """The numbers the rules' texts quote."""
    ds = problem.dims
    words: dict[str, object] = dict(values)
    words.update(
        {
            "Cg": problem.Cg,
            "Kg": problem.Kg,
            "filter": [problem.filter_size(d) for d in ds],
            "stride": [getattr(problem, f"stride_{d}") for d in ds],
            "pad": [getattr(problem, f"pad_{d}") for d in ds],
            "gemm_count": bind(_gemm_count(problem.ndim), values).value,
        }
    )  # type: ignore[attr-defined]
    return words


def gemm_problem_rules(problem: ConvProblem, variant: Variant, ndim: int, dtype: Dtype) -> tuple[Rule, ...]:
    """Rules a GEMM config must satisfy to run ``problem`` in cell (variant, ndim, dtype)."""
    values = problem_values(problem)
    words = describe(problem, values)
    return tuple(t.bind(values, words) for t in gemm_problem_templates(variant, ndim, dtype))


def depthwise_problem_rules(problem: ConvProblem) -> tuple[Rule, ...]:
    """A depthwise config runs exactly the convolutions it is specialised for: one channel per
    group in and out, a square filter of its size, its strides and pads, and its dilation."""
    F = Field
    src = DEPTHWISE_SOURCE
    if problem.ndim != 2:
        return (
            Rule(
                "problem_ndim",
                Predicate.PROBLEM,
                Const(0),
                f"depthwise kernels are 2D, the problem is {problem.ndim}D",
                src,
            ),
        )
    return (
        Rule(
            "depthwise_channels",
            Predicate.PROBLEM,
            Const(int(problem.Cg == 1 and problem.Kg == 1)),
            f"a depthwise kernel needs one input and one output channel per group (Cg={problem.Cg}, Kg={problem.Kg})",
            src,
        ),
        Rule(
            "depthwise_filter",
            Predicate.PROBLEM,
            all_of(F("filter").eq(problem.Y), F("filter").eq(problem.X)),
            f"the kernel's filter size is the problem's ({problem.Y}x{problem.X})",
            src,
        ),
        Rule(
            "depthwise_stride",
            Predicate.PROBLEM,
            all_of(F("stride_h").eq(problem.stride_h), F("stride_w").eq(problem.stride_w)),
            f"the kernel's strides are the problem's ({problem.stride_h}, {problem.stride_w})",
            src,
        ),
        Rule(
            "depthwise_pad",
            Predicate.PROBLEM,
            all_of(F("pad_h").eq(problem.pad_h), F("pad_w").eq(problem.pad_w)),
            f"the kernel's pads are the problem's ({problem.pad_h}, {problem.pad_w})",
            src,
        ),
        Rule(
            "depthwise_dilation",
            Predicate.PROBLEM,
            all_of(F("dilation").eq(problem.dil_h), F("dilation").eq(problem.dil_w)),
            f"the kernel's dilation is the problem's ({problem.dil_h}, {problem.dil_w})",
            src,
        ),
    )
