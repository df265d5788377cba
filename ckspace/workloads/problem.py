"""Convolution problems: the shapes kernels are asked to run.

``ConvProblem`` holds TOTAL channel counts (C and K over all G groups, as frameworks state them);
CK itself works per group, so ``Cg = C / G`` and ``Kg = K / G`` are derived. Spatial dimensions are
(D, H, W) with the leading ones absent for 2D and 1D; pads are symmetric. ``parse`` reads the
compact text form used on the command line.
"""

from __future__ import annotations

import math
import re
from functools import cached_property

from pydantic import ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from ckspace.core.errors import InvalidChoiceError, InvalidInputError
from ckspace.core.validation import CheckedModel, invalid_input
from ckspace.core.vocab import Variant
from ckspace.workloads.operands import OPERANDS
from ckspace.workloads.problem_keys import (
    DIMS,
    PROBLEM_KEYS,
    SHORTHANDS,
    SIZE_FIELDS,
    lacking_per_dimension,
    problem_key,
)

_SPATIAL_IN = {"d": "Di", "h": "Hi", "w": "Wi"}
_FILTER = {"d": "Z", "h": "Y", "w": "X"}
PROBLEM_FIELDS: tuple[str, ...] = (*SIZE_FIELDS, "k_batch")
"""Every integer a problem is (its sizes and split-K's batch count): the order in which the
selector's features and CK's problem checks read them."""


_LACKING = "lacking_keys"
"""The validation error of a problem that does not give every size of its dimensions."""

INDEX_MAX = 2**31 - 1
"""Largest size along any one dimension (and of N, G, C, K): CK Tile's ``index_t`` is a 32-bit int."""
ELEMENTS_MAX = 2**63 - 1
"""Largest element count of any one tensor: CK Tile's ``long_index_t`` (64-bit) offsets. Tensors
beyond 2^31 elements are CK's split-image territory (the ``split_image`` field), not an error."""
TENSOR_ELEMENTS: dict[str, tuple[str, ...]] = {
    "input": ("N", "C", "input_volume"),
    "output": ("N", "K", "output_volume"),
    "weight": ("K", "Cg", "filter_volume"),
}
"""Each tensor's element count as a product of :class:`ConvProblem` attributes, at most
:data:`ELEMENTS_MAX` (the generated C dispatcher renders the same check from this table)."""


class ConvProblem(CheckedModel):
    """A grouped convolution: N images, G groups, C input and K output channels in total."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @classmethod
    def _bad_input(cls, exc: ValidationError) -> InvalidInputError:
        first = exc.errors()[0]
        if first.get("type") == _LACKING:  # every absent key at once: one fix, not one retry per key
            return InvalidInputError(_lacking(first["ctx"]["keys"], first["ctx"]["given"]))
        error = invalid_input(cls.__name__, exc)
        first = exc.errors()[0]
        if first.get("type") == "less_than_equal" and first.get("loc", ("",))[0] != "ndim":
            return InvalidInputError(f"{error} (CK Tile's index_t is a 32-bit int)")
        return error

    ndim: int = Field(ge=1, le=3)
    N: int = Field(ge=1, le=INDEX_MAX)
    G: int = Field(default=1, ge=1, le=INDEX_MAX)
    C: int = Field(ge=1, le=INDEX_MAX)
    K: int = Field(ge=1, le=INDEX_MAX)
    Di: int = Field(default=1, ge=1, le=INDEX_MAX)
    Hi: int = Field(default=1, ge=1, le=INDEX_MAX)
    Wi: int = Field(ge=1, le=INDEX_MAX)
    Z: int = Field(default=1, ge=1, le=INDEX_MAX)
    Y: int = Field(default=1, ge=1, le=INDEX_MAX)
    X: int = Field(ge=1, le=INDEX_MAX)
    stride_d: int = Field(default=1, ge=1, le=INDEX_MAX)
    stride_h: int = Field(default=1, ge=1, le=INDEX_MAX)
    stride_w: int = Field(default=1, ge=1, le=INDEX_MAX)
    pad_d: int = Field(default=0, ge=0, le=INDEX_MAX)
    pad_h: int = Field(default=0, ge=0, le=INDEX_MAX)
    pad_w: int = Field(default=0, ge=0, le=INDEX_MAX)
    dil_d: int = Field(default=1, ge=1, le=INDEX_MAX)
    dil_h: int = Field(default=1, ge=1, le=INDEX_MAX)
    dil_w: int = Field(default=1, ge=1, le=INDEX_MAX)
    k_batch: int = Field(default=1, ge=1, le=INDEX_MAX, description="split-K factor (bwd_weight)")

    @model_validator(mode="before")
    @classmethod
    def _ndim_from_keys(cls, data: object) -> object:
        """``ndim`` follows from the keys given, as in :meth:`parse`: ``ConvProblem(N=1, C=64, K=64,
        Hi=8, Wi=8, Y=3, X=3)`` is 2D without saying so. Every size of the problem's dimensions must
        be given: the neutral 1 of an absent dimension's ``Hi``/``Y`` is not a guess ckspace makes
        for a 2D problem (``Hi=8,Wi=8,X=3`` is not a 1x3 filter), and all absent keys are named at once."""
        if not isinstance(data, dict):
            return data
        if "ndim" not in data:
            data = {**data, "ndim": _ndim_of(data)}
        ndim = data["ndim"]
        dims = DIMS[3 - ndim :] if ndim in (1, 2, 3) else DIMS[2:]
        required = ["N", "C", "K", *(_SPATIAL_IN[d] for d in dims), *(_FILTER[d] for d in dims)]
        lacking = [key for key in required if key not in data]
        if lacking:
            raise PydanticCustomError(_LACKING, "lacks {keys}", {"keys": lacking, "given": dict(data)})
        return data

    @model_validator(mode="after")
    def _consistent(self) -> ConvProblem:
        if self.C % self.G or self.K % self.G:
            raise ValueError(f"C={self.C} and K={self.K} must be multiples of G={self.G} (they are totals)")
        absent = self.dims_absent
        for dim in absent:
            fields = (_SPATIAL_IN[dim], _FILTER[dim], f"stride_{dim}", f"pad_{dim}", f"dil_{dim}")
            defaults = (1, 1, 1, 0, 1)
            for name, default in zip(fields, defaults, strict=True):
                if getattr(self, name) != default:
                    raise ValueError(f"{name} is set but the problem is {self.ndim}D")
        for dim in self.dims:
            if self.output_size(dim) < 1:
                raise ValueError(f"the output is empty along {dim}: the filter does not fit the padded input")
        for tensor, factors in TENSOR_ELEMENTS.items():
            elements = math.prod(getattr(self, factor) for factor in factors)
            if elements > ELEMENTS_MAX:
                raise ValueError(
                    f"the {tensor} tensor has {elements} elements, beyond what CK Tile can index (2^63-1, long_index_t)"
                )
        return self

    # -- derived sizes --------------------------------------------------------------------------
    @property
    def dims(self) -> tuple[str, ...]:
        """The spatial dimensions present, outermost first: ('h', 'w') for 2D."""
        return DIMS[3 - self.ndim :]

    @property
    def dims_absent(self) -> tuple[str, ...]:
        return DIMS[: 3 - self.ndim]

    @property
    def Cg(self) -> int:
        return self.C // self.G

    @property
    def Kg(self) -> int:
        return self.K // self.G

    def input_size(self, dim: str) -> int:
        return getattr(self, _SPATIAL_IN[dim])

    def filter_size(self, dim: str) -> int:
        return getattr(self, _FILTER[dim])

    def output_size(self, dim: str) -> int:
        size, filt = self.input_size(dim), self.filter_size(dim)
        stride, pad, dil = (getattr(self, f"{p}_{dim}") for p in ("stride", "pad", "dil"))
        return (size + 2 * pad - dil * (filt - 1) - 1) // stride + 1

    @cached_property
    def filter_volume(self) -> int:
        return math.prod(self.filter_size(d) for d in self.dims)

    @cached_property
    def input_volume(self) -> int:
        return math.prod(self.input_size(d) for d in self.dims)

    @cached_property
    def output_volume(self) -> int:
        return math.prod(self.output_size(d) for d in self.dims)

    def gemm_mnk(self, variant: Variant | str) -> tuple[int, int, int]:
        """Per-group implicit GEMM sizes (M, N, K) of a variant, as CK forms them
        (:data:`ckspace.workloads.operands.OPERANDS`)."""
        gemm = OPERANDS[Variant.parse(variant)]
        sizes = {
            "N": self.N,
            "Cg": self.Cg,
            "Kg": self.Kg,
            "input": self.input_volume,
            "output": self.output_volume,
            "filter": self.filter_volume,
        }
        return tuple(math.prod(sizes[f] for f in factors) for factors in (gemm.m, gemm.n, gemm.k))  # type: ignore[return-value]

    @property
    def flops(self) -> int:
        """Multiply-adds x 2 of the convolution (the same for every variant)."""
        return 2 * self.G * self.N * self.output_volume * self.Kg * self.Cg * self.filter_volume

    def text(self) -> str:
        """The compact text form (round-trips through :meth:`parse`)."""
        parts = [f"N={self.N}", f"G={self.G}", f"C={self.C}", f"K={self.K}"]
        parts += [f"{_SPATIAL_IN[d]}={self.input_size(d)}" for d in self.dims]
        parts += [f"{_FILTER[d]}={self.filter_size(d)}" for d in self.dims]
        for prefix in ("stride", "pad", "dil"):
            parts += [f"{prefix}_{d}={getattr(self, f'{prefix}_{d}')}" for d in self.dims]
        if self.k_batch != 1:
            parts.append(f"k_batch={self.k_batch}")
        return ",".join(parts)

    @classmethod
    def parse(cls, text: str) -> ConvProblem:
        """Read ``N=1,G=1,C=64,K=128,Hi=56,Wi=56,Y=3,X=3,stride=1,pad=1``.

        Per-dimension keys (``stride_h``, ``pad_w``, ``dil_d``, ...) and the shorthands ``stride``,
        ``pad`` and ``dil`` (all dimensions; a per-dimension key overrides its dimension) are
        accepted; per-dimension keys of one kind give every dimension or come with the shorthand
        (:func:`lacking_per_dimension`). The dimension count follows from the keys (``Di``/``Z``
        make it 3D, ``Hi``/``Y`` 2D) or from ``ndim=``. Keys are case-insensitive, as a problems
        CSV's columns are (:mod:`ckspace.workloads.problem_columns`).
        """
        values: dict[str, int] = {}
        for item in filter(None, (p.strip() for p in re.split(r"[,\s]+", str(text).strip()))):
            key, sep, value = item.partition("=")
            name = problem_key(key)
            if not sep:
                raise InvalidInputError(f"problem {text!r}: {item!r} is not KEY=VALUE")
            if name is None:
                raise InvalidChoiceError("problem key", key.strip(), PROBLEM_KEYS)
            if name in values:
                raise InvalidInputError(f"problem {text!r}: {name} is given twice")
            try:
                values[name] = int(value.strip())
            except ValueError:
                raise InvalidInputError(f"problem {text!r}: {name}={value.strip()!r} is not an integer") from None
        ndim = values.get("ndim", _ndim_of(values))
        lacking = lacking_per_dimension(values, DIMS[3 - ndim :] if ndim in (1, 2, 3) else ())
        if lacking:
            raise InvalidInputError(f"problem {text!r}: {lacking}")
        return cls.from_values(values, text)

    @classmethod
    def from_values(cls, values: dict[str, int], text: str | None = None) -> ConvProblem:
        values = dict(values)
        values.setdefault("ndim", _ndim_of(values))
        ndim = values["ndim"]
        dims = DIMS[3 - ndim :] if ndim in (1, 2, 3) else ()
        for short in SHORTHANDS:
            if short in values:
                value = values.pop(short)
                for d in dims:
                    values.setdefault(f"{short}_{d}", value)
        try:
            return cls(**values)
        except InvalidInputError as exc:
            what, message = f"problem {text or values!r}", str(exc)
            if message.startswith("ConvProblem lacks "):  # "problem 'N=1' lacks K, ...": the text is the subject
                raise InvalidInputError(what + message.removeprefix("ConvProblem")) from None
            raise InvalidInputError(f"{what}: {message}") from None


def _ndim_of(keys) -> int:
    """The dimension count the keys imply: 3 with a depth key, else 2 with a height key, else 1."""
    keys = set(keys)
    if keys & {"Di", "Z", "stride_d", "pad_d", "dil_d"}:
        return 3
    if keys & {"Hi", "Y", "stride_h", "pad_h", "dil_h"}:
        return 2
    return 1


def _lacking(missing: list[str], given: object) -> str:
    """``ConvProblem lacks K, Wi, X (...)``: every required key absent, and the dimension count it
    was read as; with no depth or height key that is 1D, which may not be what was meant, so the
    keys of 2D and 3D are named too."""
    values = given if isinstance(given, dict) else {}
    ndim = values.get("ndim", 1)
    if ndim == 1 and not set(values) & {"Di", "Hi", "Z", "Y", *(f"{p}_{d}" for p in SHORTHANDS for d in "dh")}:
        return (
            f"ConvProblem lacks {', '.join(missing)} (read as 1D: no depth or height key; for 2D give Hi, Y too, "
            "for 3D Di, Hi, Z, Y)"
        )
    return f"ConvProblem lacks {', '.join(missing)} (a {ndim}D problem)"


def _field_bounds() -> dict[str, tuple[int, int]]:
    bounds = {}
    for name, info in ConvProblem.model_fields.items():
        low = [m.ge for m in info.metadata if hasattr(m, "ge")]
        high = [m.le for m in info.metadata if hasattr(m, "le")]
        bounds[name] = (low[0], high[0])
    return bounds


FIELD_BOUNDS: dict[str, tuple[int, int]] = _field_bounds()
"""Each :class:`ConvProblem` field's (least, greatest) value, read from its declaration above (the
generated C dispatcher refuses what lies outside them, as the model does)."""
