"""Kernel configs: immutable, hashable pydantic value types with their upstream names.

A config is identified by :meth:`GemmConfig.kernel_key` (:class:`~ckspace.core.kernel_key.KernelKey`
says what is and is not part of a kernel's identity); the name (upstream
``GroupedConvKernelConfig.name``) is output. Parsing a name back into a config exists for user
input only, and works because a GEMM name carries every field except the arch and the dtype tag,
which the caller supplies.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator

from ckspace.core.cells import Cell
from ckspace.core.fields import (
    DEPTHWISE_BOUNDS,
    DEPTHWISE_DEFAULTS,
    DEPTHWISE_FIELDS,
    DEPTHWISE_LAYOUT,
    FIELD_KIND,
    GEMM_BOUNDS,
    GEMM_DEFAULTS,
    GEMM_FIELD_NAMES,
    Row,
    check_rows,
    decode,
    encode,
    int_domain,
)
from ckspace.core.kernel_key import KernelKey
from ckspace.core.naming import depthwise_name, gemm_name, parse_depthwise_name, parse_gemm_name
from ckspace.core.validation import CheckedModel
from ckspace.core.vocab import Dtype, Epilogue, Layout, Pipeline, Scheduler, Specialization, StreamKStrategy, Variant

D: dict[str, Any] = GEMM_DEFAULTS


def _in_domain(value: int, field: str, bounds: dict[str, tuple[int, int]]) -> int:
    """``value`` of the integer ``field`` if it lies in the field's domain (``bounds``, the domains
    the solver, the rules and the cache hold rows to); a ValueError that pydantic puts on one line
    with the field and value otherwise. A config outside them is no kernel anyone can build, and its
    numbers reach code that cannot take them (an int64 in the rules' evaluation overflows)."""
    low, high = bounds[field]
    if not low <= value <= high:
        raise ValueError(f"out of range; valid: {int_domain(low, high)}")
    return value


class GemmConfig(CheckedModel):
    """A GEMM-style grouped-convolution kernel config of one cell (arch, variant, ndim, dtype)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["gemm"] = "gemm"
    arch: str
    variant: Variant
    ndim: int = Field(ge=1, le=3)
    dtype: Dtype
    tile_m: int
    tile_n: int
    tile_k: int
    wave_m: int
    wave_n: int
    wave_k: int
    warp_tile_m: int
    warp_tile_n: int
    warp_tile_k: int
    vec_a: int = D["vec_a"]
    vec_b: int = D["vec_b"]
    vec_c: int = D["vec_c"]
    pipeline: Pipeline
    scheduler: Scheduler = D["scheduler"]
    epilogue: Epilogue = D["epilogue"]
    pad_m: bool = D["pad_m"]
    pad_n: bool = D["pad_n"]
    pad_k: bool = D["pad_k"]
    double_smem_buffer: bool = D["double_smem_buffer"]
    num_groups_to_merge: int = D["num_groups_to_merge"]
    split_image: bool = D["split_image"]
    explicit_gemm: bool = D["explicit_gemm"]
    two_stage: bool = D["two_stage"]
    specialization: Specialization = D["specialization"]
    streamk_enabled: bool = D["streamk_enabled"]
    streamk_strategy: StreamKStrategy = D["streamk_strategy"]
    streamk_persistent: bool = D["streamk_persistent"]
    num_wave_groups: int = D["num_wave_groups"]
    layout: Layout = D["layout"]
    tagged: bool = True
    """Whether the proposing rule set tagged the config with its dtype (upstream's WMMA rule reads
    the tag); a config a user writes down is tagged."""

    @field_validator(*(f for f in GEMM_FIELD_NAMES if FIELD_KIND[f] is int))
    @classmethod
    def _integer_in_domain(cls, value: int, info: ValidationInfo) -> int:
        """Every way to a validated config (the constructor, :meth:`replace`, :meth:`from_name`,
        :meth:`from_fields`) holds its integers to :data:`~ckspace.core.fields.GEMM_BOUNDS`; the
        enums and booleans are held to theirs by their types."""
        return _in_domain(value, str(info.field_name), GEMM_BOUNDS)

    @property
    def block_per_cu(self) -> int:
        """Min-blocks-per-CU hint, derived from the pipeline and the double LDS buffer (upstream
        ``deduce_block_per_cu``)."""
        if self.pipeline in (Pipeline.COMPV4, Pipeline.COMP_ASYNC):
            return 1
        if self.pipeline in (
            Pipeline.COMPV1,
            Pipeline.COMPV2,
            Pipeline.BASIC_V1,
            Pipeline.BASIC_V2,
            Pipeline.BASIC_ASYNC_V1,
            Pipeline.WAVELET,
        ):
            return 2
        return 1 if self.double_smem_buffer else 2

    @property
    def name(self) -> str:
        return gemm_name(self.variant, self.dtype, self.ndim, self.row())

    def row(self) -> Row:
        """The field tuple in :data:`~ckspace.core.fields.GEMM_FIELDS` order, enums as codes."""
        return tuple(encode(f, getattr(self, f)) for f in GEMM_FIELD_NAMES)

    def kernel_key(self) -> KernelKey:
        """Which kernel this config is: equal keys, same kernel (see :class:`KernelKey` for what is
        and is not part of it). Every consumer that asks whether two configs are one kernel asks this."""
        return KernelKey(self.arch, Cell(self.variant, self.ndim, self.dtype), False, self.row())

    @classmethod
    def from_row(cls, arch: str, variant: Variant, ndim: int, dtype: Dtype, row: Row) -> GemmConfig:
        """Build from a row of the rule sets, the cache or the solver: the row is checked against the
        fields' domains (a code outside them would decode to no member, or the wrong one) and
        pydantic's validation is skipped, which a listing of many configs cannot afford."""
        check_rows(GEMM_FIELD_NAMES, GEMM_BOUNDS, [row])
        values: dict[str, Any] = {f: decode(f, v) for f, v in zip(GEMM_FIELD_NAMES, row, strict=True)}
        return cls.model_construct(arch=arch, variant=variant, ndim=ndim, dtype=dtype, **values)

    @classmethod
    def from_name(cls, name: str, arch: str, *, tagged: bool = True) -> GemmConfig:
        """Parse an upstream kernel name; the arch and the dtype tag are not in names."""
        return cls(arch=arch, tagged=tagged, **parse_gemm_name(name))

    def fields(self) -> dict[str, Any]:
        """Every field as JSON-friendly values, plus the name."""
        return {**self.model_dump(mode="json"), "name": self.name}

    @classmethod
    def from_fields(cls, fields: dict[str, Any]) -> GemmConfig:
        """The inverse of :meth:`fields`, validated: the name it carries is output, never identity,
        so it is dropped (a manifest's configs are read back this way)."""
        return cls(**{f: v for f, v in fields.items() if f != "name"})


class DepthwiseConfig(CheckedModel):
    """A direct depthwise forward kernel config (the ``full`` rule set's depthwise block)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["depthwise"] = "depthwise"
    arch: str
    variant: Literal[Variant.FORWARD] = Variant.FORWARD
    ndim: Literal[2] = 2
    dtype: Dtype
    layout: Layout = DEPTHWISE_LAYOUT
    tile_h: int
    tile_w: int
    filter: int
    stride_h: int
    stride_w: int
    pad_h: int
    pad_w: int
    nbatch: int
    sub_h: int
    sub_w: int
    in_vec: int
    out_vec: int
    block_size: int = DEPTHWISE_DEFAULTS["block_size"]
    dilation: int = DEPTHWISE_DEFAULTS["dilation"]

    @field_validator(*DEPTHWISE_FIELDS)
    @classmethod
    def _integer_in_domain(cls, value: int, info: ValidationInfo) -> int:
        """The depthwise fields, all integers, held to :data:`~ckspace.core.fields.DEPTHWISE_BOUNDS`."""
        return _in_domain(value, str(info.field_name), DEPTHWISE_BOUNDS)

    @property
    def name(self) -> str:
        return depthwise_name(self.dtype, self.ndim, self.row(), self.layout)

    def row(self) -> Row:
        return tuple(int(getattr(self, f)) for f in DEPTHWISE_FIELDS)

    def kernel_key(self) -> KernelKey:
        """Which kernel this config is (see :meth:`GemmConfig.kernel_key`). The layout is not in
        the row: a depthwise kernel's is always NGCHW."""
        return KernelKey(self.arch, Cell(self.variant, self.ndim, self.dtype), True, self.row())

    @classmethod
    def from_row(cls, arch: str, dtype: Dtype, row: Row) -> DepthwiseConfig:
        """Build from a row, checked against the fields' domains (see :meth:`GemmConfig.from_row`)."""
        check_rows(DEPTHWISE_FIELDS, DEPTHWISE_BOUNDS, [row])
        return cls.model_construct(arch=arch, dtype=dtype, **dict(zip(DEPTHWISE_FIELDS, row, strict=True)))

    @classmethod
    def from_name(cls, name: str, arch: str) -> DepthwiseConfig:
        return cls(arch=arch, **parse_depthwise_name(name))

    def fields(self) -> dict[str, Any]:
        return {**self.model_dump(mode="json"), "name": self.name}


KernelConfig = GemmConfig | DepthwiseConfig
