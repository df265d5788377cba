"""The implicit GEMM of each convolution direction: which tensor is operand A, B and C.

CK Tile runs a grouped convolution as one GEMM per group. Which tensor plays A, B and C, along which
channel count (per group) each is contiguous, how A and B are laid out, and what M, N and K are,
depends only on the variant. Every consumer reads it from :data:`OPERANDS`: the problem rules (a
vector width must divide its operand's contiguous channels), the selector's features, the CK
revision's load-pattern rules, the emitted C++ and :meth:`ckspace.workloads.problem.ConvProblem.gemm_mnk`.

GEMM sizes are stated as products of problem quantities: ``N`` images, ``Cg``/``Kg`` channels per
group, ``input``/``output``/``filter`` spatial volumes.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from ckspace.core.vocab import Variant

Tensor = Literal["In", "Wei", "Out"]
Channels = Literal["Cg", "Kg"]
Size = Literal["N", "Cg", "Kg", "input", "output", "filter"]

TENSOR_WORDS: dict[str, str] = {"In": "input", "Wei": "weight", "Out": "output"}

TENSOR_LAYOUTS: dict[int, dict[str, str]] = {
    1: {"In": "NWGC", "Wei": "GKXC", "Out": "NWGK"},
    2: {"In": "NHWGC", "Wei": "GKYXC", "Out": "NHWGK"},
    3: {"In": "NDHWGC", "Wei": "GKZYXC", "Out": "NDHWGK"},
}
"""Memory layout of each tensor per spatial rank (channels innermost, groups beside them)."""


class Operand(NamedTuple):
    """One GEMM operand: the convolution tensor it is, the per-group channel count it is
    contiguous along, and whether the variant reads or writes it as a gradient."""

    tensor: Tensor
    channels: Channels
    gradient: bool

    @property
    def description(self) -> str:
        """``input``, ``weight gradient``, ...: the tensor in words."""
        return TENSOR_WORDS[self.tensor] + (" gradient" if self.gradient else "")


class ImplicitGemm(NamedTuple):
    """A variant's implicit GEMM: operands, A/B layouts (``GroupedConvTraits`` As/BsLayout) and
    the factors of M, N and K."""

    a: Operand
    b: Operand
    c: Operand
    a_layout: Literal["row", "col"]
    b_layout: Literal["row", "col"]
    m: tuple[Size, ...]
    n: tuple[Size, ...]
    k: tuple[Size, ...]

    def operand(self, vector_field: str) -> Operand:
        """The operand a vector-width field (``vec_a``, ``vec_b``, ``vec_c``) loads or stores."""
        return {"vec_a": self.a, "vec_b": self.b, "vec_c": self.c}[vector_field]


OPERANDS: dict[Variant, ImplicitGemm] = {
    Variant.FORWARD: ImplicitGemm(
        a=Operand("In", "Cg", False),
        b=Operand("Wei", "Cg", False),
        c=Operand("Out", "Kg", False),
        a_layout="row",
        b_layout="col",
        m=("N", "output"),
        n=("Kg",),
        k=("Cg", "filter"),
    ),
    Variant.BWD_DATA: ImplicitGemm(
        a=Operand("Out", "Kg", True),
        b=Operand("Wei", "Cg", False),
        c=Operand("In", "Cg", True),
        a_layout="row",
        b_layout="row",
        m=("N", "input"),
        n=("Cg",),
        k=("Kg", "filter"),
    ),
    Variant.BWD_WEIGHT: ImplicitGemm(
        a=Operand("Out", "Kg", True),
        b=Operand("In", "Cg", False),
        c=Operand("Wei", "Cg", True),
        a_layout="col",
        b_layout="row",
        m=("Kg",),
        n=("filter", "Cg"),
        k=("N", "output"),
    ),
}
"""Per variant: CK Tile's grouped-convolution kernels and ``GroupedConvTraits`` (one group, no
groups-to-merge; backward data counts all its sub-GEMMs' rows in M)."""

VECTOR_FIELDS: tuple[str, ...] = ("vec_a", "vec_b", "vec_c")
