"""Kernel configs: immutable, hashable pydantic value types with their upstream names.

A config is identified by its field tuple; the name (RULES.md section 3) is output. Parsing a name
back into a config exists for user input only, and works because the name carries every field
except the arch and the dtype tag, which the caller supplies.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ckspace.errors import KernelNameError
from ckspace.space.fields import GEMM_FIELD_NAMES, Layout, Row, decode, encode
from ckspace.space.vocab import (
    Dtype,
    Epilogue,
    Pipeline,
    Scheduler,
    Specialization,
    StreamKStrategy,
    Variant,
)

_DEFAULT_VEC = (4, 8, 8)


class GemmConfig(BaseModel):
    """A GEMM-style grouped-convolution kernel config for one cell (arch, variant, ndim, dtype)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    arch: str
    variant: Variant
    ndim: int = Field(ge=1, le=3)
    dtype: Dtype
    tile_m: int = Field(gt=0)
    tile_n: int = Field(gt=0)
    tile_k: int = Field(gt=0)
    wave_m: int = Field(gt=0)
    wave_n: int = Field(gt=0)
    wave_k: int = Field(gt=0)
    warp_tile_m: int = Field(gt=0)
    warp_tile_n: int = Field(gt=0)
    warp_tile_k: int = Field(gt=0)
    vec_a: int = Field(default=4, gt=0)
    vec_b: int = Field(default=8, gt=0)
    vec_c: int = Field(default=8, gt=0)
    pipeline: Pipeline
    scheduler: Scheduler = Scheduler.INTRAWAVE
    epilogue: Epilogue = Epilogue.CSHUFFLE
    pad_m: bool = True
    pad_n: bool = True
    pad_k: bool = True
    double_smem_buffer: bool = False
    num_groups_to_merge: int = Field(default=1, gt=0)
    split_image: bool = False
    explicit_gemm: bool = False
    two_stage: bool = False
    specialization: Specialization = Specialization.DEFAULT
    streamk_enabled: bool = False
    streamk_strategy: StreamKStrategy = StreamKStrategy.NONE
    streamk_persistent: bool = False
    num_wave_groups: int = Field(default=1, gt=0)
    layout: Layout = Layout.NHWGC
    tagged: bool = True

    kind: str = Field(default="gemm", frozen=True, exclude=True, repr=False)

    @property
    def block_per_cu(self) -> int:
        """Min-blocks-per-CU hint, derived from the pipeline (RULES.md section 2)."""
        if self.pipeline in (Pipeline.COMPV4, Pipeline.COMP_ASYNC):
            return 1
        if self.pipeline in (Pipeline.COMPV1, Pipeline.COMPV2, Pipeline.BASIC_V1, Pipeline.BASIC_V2,
                             Pipeline.BASIC_ASYNC_V1, Pipeline.WAVELET):
            return 2
        return 1 if self.double_smem_buffer else 2

    @property
    def name(self) -> str:
        return gemm_name(self.variant, self.dtype, self.ndim, self.row())

    def row(self) -> Row:
        """The field tuple in :data:`~ckspace.space.fields.GEMM_FIELDS` order, enums as codes."""
        return tuple(encode(f, getattr(self, f)) for f in GEMM_FIELD_NAMES)

    @classmethod
    def from_row(cls, arch: str, variant: Variant, ndim: int, dtype: Dtype, row: Row) -> "GemmConfig":
        """Build from a trusted row (rows come from the rule sets and the cache): no validation."""
        values: dict[str, Any] = {f: decode(f, v) for f, v in zip(GEMM_FIELD_NAMES, row)}
        return cls.model_construct(arch=arch, variant=variant, ndim=ndim, dtype=dtype, **values)

    @classmethod
    def from_name(cls, name: str, arch: str, *, tagged: bool = True) -> "GemmConfig":
        """Parse an upstream kernel name; the arch and the dtype tag are not in names."""
        return cls(arch=arch, tagged=tagged, **parse_gemm_name(name))

    def fields(self) -> dict[str, Any]:
        """Every field as JSON-friendly values, plus the name."""
        data = self.model_dump(mode="json")
        data["name"] = self.name
        return data


class DepthwiseConfig(BaseModel):
    """A direct depthwise forward kernel config (the ``full`` rule set's depthwise block)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    arch: str
    variant: Variant = Variant.FORWARD
    ndim: int = 2
    dtype: Dtype
    layout: Layout = Layout.NGCHW
    tile_h: int = Field(gt=0)
    tile_w: int = Field(gt=0)
    filter: int = Field(gt=0)
    stride_h: int = Field(gt=0)
    stride_w: int = Field(gt=0)
    pad_h: int = Field(ge=0)
    pad_w: int = Field(ge=0)
    nbatch: int = Field(gt=0)
    sub_h: int = Field(gt=0)
    sub_w: int = Field(gt=0)
    in_vec: int = Field(gt=0)
    out_vec: int = Field(gt=0)
    block_size: int = 64
    dilation: int = 1

    kind: str = Field(default="depthwise", frozen=True, exclude=True, repr=False)

    @property
    def name(self) -> str:
        return (
            f"grouped_conv_fwd_depthwise_{self.dtype.value}_{self.layout.value}_{self.ndim}d_"
            f"{self.tile_h}x{self.tile_w}_f{self.filter}_s{self.stride_h}x{self.stride_w}_"
            f"p{self.pad_h}x{self.pad_w}_nb{self.nbatch}_sub{self.sub_h}x{self.sub_w}_"
            f"vec{self.in_vec}_{self.out_vec}"
        )

    @classmethod
    def from_name(cls, name: str, arch: str) -> "DepthwiseConfig":
        match = _DEPTHWISE_RE.fullmatch(name)
        if match is None:
            raise KernelNameError(f"not a depthwise kernel name: {name!r}")
        g = match.groupdict()
        ints = {k: int(v) for k, v in g.items() if k not in ("dtype", "layout")}
        return cls(arch=arch, dtype=Dtype.parse(g["dtype"]), layout=Layout.parse(g["layout"]), **ints)

    def fields(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        data["name"] = self.name
        return data


KernelConfig = GemmConfig | DepthwiseConfig

# --- names -------------------------------------------------------------------------------------

_I = {name: i for i, name in enumerate(GEMM_FIELD_NAMES)}
_PIPELINES = [p.value for p in Pipeline]
_SCHEDULERS = [s.value for s in Scheduler]
_EPILOGUES = [e.value for e in Epilogue]
_SPECS = [s.value for s in Specialization]
_STRATEGIES = [s.value for s in StreamKStrategy]
_LAYOUTS = [lay.value for lay in Layout]


def gemm_name(variant: Variant, dtype: Dtype, ndim: int, row: Row) -> str:
    """The upstream kernel name of a row (RULES.md section 3); suffixes in upstream order."""
    r = row
    tile = f"{r[_I['tile_m']]}x{r[_I['tile_n']]}x{r[_I['tile_k']]}"
    wave = f"{r[_I['wave_m']]}x{r[_I['wave_n']]}x{r[_I['wave_k']]}"
    warp = f"{r[_I['warp_tile_m']]}x{r[_I['warp_tile_n']]}x{r[_I['warp_tile_k']]}"
    parts = [
        f"grouped_conv_{variant.token}_{dtype.value}_{_LAYOUTS[r[_I['layout']]]}_{ndim}d",
        _PIPELINES[r[_I["pipeline"]]], _EPILOGUES[r[_I["epilogue"]]], _SCHEDULERS[r[_I["scheduler"]]],
        tile, wave, warp,
    ]
    vec = (r[_I["vec_a"]], r[_I["vec_b"]], r[_I["vec_c"]])
    if vec != _DEFAULT_VEC:
        parts.append(f"vec{vec[0]}_{vec[1]}_{vec[2]}")
    if r[_I["num_wave_groups"]] != 1:
        parts.append(f"wg{r[_I['num_wave_groups']]}")
    if r[_I["num_groups_to_merge"]] != 1:
        parts.append(f"gm{r[_I['num_groups_to_merge']]}")
    if r[_I["double_smem_buffer"]]:
        parts.append("dsb")
    if r[_I["two_stage"]]:
        parts.append("2stage")
    if _SPECS[r[_I["specialization"]]] != "default":
        parts.append(_SPECS[r[_I["specialization"]]])
    if r[_I["explicit_gemm"]]:
        parts.append("explicit_gemm")
    if r[_I["streamk_enabled"]]:
        parts.append(f"streamk_{_STRATEGIES[r[_I['streamk_strategy']]]}")
        if r[_I["streamk_persistent"]]:
            parts.append("persistent")
    if r[_I["split_image"]]:
        parts.append("large_tensor")
    pads = (r[_I["pad_m"]], r[_I["pad_n"]], r[_I["pad_k"]])
    if pads != (1, 1, 1):
        parts.append("pad" + "".join(str(p) for p in pads))
    return "_".join(parts)


def _alt(values: list[str]) -> str:
    return "|".join(sorted((re.escape(v) for v in values), key=len, reverse=True))


_GEMM_RE = re.compile(
    r"grouped_conv_(?P<variant>fwd|bwd_data|bwd_weight)_(?P<dtype>[a-z0-9]+)_(?P<layout>[a-z]+)_(?P<ndim>\d)d"
    rf"_(?P<pipeline>{_alt(_PIPELINES)})_(?P<epilogue>{_alt(_EPILOGUES)})_(?P<scheduler>{_alt(_SCHEDULERS)})"
    r"_(?P<tile_m>\d+)x(?P<tile_n>\d+)x(?P<tile_k>\d+)"
    r"_(?P<wave_m>\d+)x(?P<wave_n>\d+)x(?P<wave_k>\d+)"
    r"_(?P<warp_tile_m>\d+)x(?P<warp_tile_n>\d+)x(?P<warp_tile_k>\d+)"
    r"(?:_vec(?P<vec_a>\d+)_(?P<vec_b>\d+)_(?P<vec_c>\d+))?"
    r"(?:_wg(?P<num_wave_groups>\d+))?"
    r"(?:_gm(?P<num_groups_to_merge>\d+))?"
    r"(?P<dsb>_dsb)?"
    r"(?P<two_stage>_2stage)?"
    rf"(?:_(?P<specialization>{_alt([s for s in _SPECS if s != 'default'])}))?"
    r"(?P<explicit_gemm>_explicit_gemm)?"
    rf"(?:_streamk_(?P<streamk_strategy>{_alt(['tree', 'linear'])})(?P<persistent>_persistent)?)?"
    r"(?P<large_tensor>_large_tensor)?"
    r"(?:_pad(?P<pads>[01]{3}))?"
)

_DEPTHWISE_RE = re.compile(
    r"grouped_conv_fwd_depthwise_(?P<dtype>[a-z0-9]+)_(?P<layout>[a-z]+)_(?P<ndim>\d)d"
    r"_(?P<tile_h>\d+)x(?P<tile_w>\d+)_f(?P<filter>\d+)_s(?P<stride_h>\d+)x(?P<stride_w>\d+)"
    r"_p(?P<pad_h>\d+)x(?P<pad_w>\d+)_nb(?P<nbatch>\d+)_sub(?P<sub_h>\d+)x(?P<sub_w>\d+)"
    r"_vec(?P<in_vec>\d+)_(?P<out_vec>\d+)"
)

_VARIANT_BY_TOKEN = {v.token: v for v in Variant}


def parse_gemm_name(name: str) -> dict[str, Any]:
    """The fields a GEMM kernel name carries (everything but arch and tag)."""
    match = _GEMM_RE.fullmatch(name.strip())
    if match is None:
        raise KernelNameError(
            f"not a ckspace/upstream kernel name: {name!r} (expected grouped_conv_<variant>_<dtype>_"
            "<layout>_<n>d_<pipeline>_<epilogue>_<scheduler>_<tile>_<wave>_<warp tile>[_suffixes])"
        )
    g = match.groupdict()
    values: dict[str, Any] = {
        "variant": _VARIANT_BY_TOKEN[g["variant"]],
        "dtype": Dtype.parse(g["dtype"]),
        "layout": Layout.parse(g["layout"]),
        "ndim": int(g["ndim"]),
        "pipeline": Pipeline.parse(g["pipeline"]),
        "epilogue": Epilogue.parse(g["epilogue"]),
        "scheduler": Scheduler.parse(g["scheduler"]),
        "double_smem_buffer": g["dsb"] is not None,
        "two_stage": g["two_stage"] is not None,
        "specialization": Specialization.parse(g["specialization"] or "default"),
        "explicit_gemm": g["explicit_gemm"] is not None,
        "streamk_enabled": g["streamk_strategy"] is not None,
        "streamk_strategy": StreamKStrategy.parse(g["streamk_strategy"] or "none"),
        "streamk_persistent": g["persistent"] is not None,
        "split_image": g["large_tensor"] is not None,
    }
    for key in ("tile_m", "tile_n", "tile_k", "wave_m", "wave_n", "wave_k",
                "warp_tile_m", "warp_tile_n", "warp_tile_k"):
        values[key] = int(g[key])
    vec = (g["vec_a"], g["vec_b"], g["vec_c"])
    values["vec_a"], values["vec_b"], values["vec_c"] = (
        _DEFAULT_VEC if vec[0] is None else tuple(int(v) for v in vec)
    )
    values["num_wave_groups"] = int(g["num_wave_groups"] or 1)
    values["num_groups_to_merge"] = int(g["num_groups_to_merge"] or 1)
    pads = g["pads"] or "111"
    values["pad_m"], values["pad_n"], values["pad_k"] = (c == "1" for c in pads)
    return values


def is_depthwise_name(name: str) -> bool:
    return name.strip().startswith("grouped_conv_fwd_depthwise_")
