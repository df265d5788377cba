"""Kernel names (RULES.md section 3): rows to names, and names back to fields for user input.

Pure Python on purpose: listing names from the cache must not pay for pydantic or numpy.
"""

from __future__ import annotations

import re
from typing import Any

from ckspace.errors import KernelNameError
from ckspace.space.fields import DEPTHWISE_FIELDS, GEMM_FIELD_NAMES, Layout, Row
from ckspace.space.vocab import (
    Dtype,
    Epilogue,
    Pipeline,
    Scheduler,
    Specialization,
    StreamKStrategy,
    Variant,
)

DEFAULT_VEC = (4, 8, 8)


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
    if vec != DEFAULT_VEC:
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
        DEFAULT_VEC if vec[0] is None else tuple(int(v) for v in vec)
    )
    values["num_wave_groups"] = int(g["num_wave_groups"] or 1)
    values["num_groups_to_merge"] = int(g["num_groups_to_merge"] or 1)
    pads = g["pads"] or "111"
    values["pad_m"], values["pad_n"], values["pad_k"] = (c == "1" for c in pads)
    return values


def is_depthwise_name(name: str) -> bool:
    return name.strip().startswith("grouped_conv_fwd_depthwise_")


def depthwise_name(dtype: Dtype, ndim: int, row: Row, layout: Layout = Layout.NGCHW) -> str:
    """Name of a depthwise config given as a row in DEPTHWISE_FIELDS order."""
    p = dict(zip(DEPTHWISE_FIELDS, row))
    return (
        f"grouped_conv_fwd_depthwise_{dtype.value}_{layout.value}_{ndim}d_"
        f"{p['tile_h']}x{p['tile_w']}_f{p['filter']}_s{p['stride_h']}x{p['stride_w']}_"
        f"p{p['pad_h']}x{p['pad_w']}_nb{p['nbatch']}_sub{p['sub_h']}x{p['sub_w']}_"
        f"vec{p['in_vec']}_{p['out_vec']}"
    )


def parse_depthwise_name(name: str) -> dict[str, Any]:
    """The fields a depthwise kernel name carries (block size and dilation are not in it)."""
    match = _DEPTHWISE_RE.fullmatch(name.strip())
    if match is None:
        raise KernelNameError(f"not a depthwise kernel name: {name!r}")
    g = match.groupdict()
    values: dict[str, Any] = {k: int(v) for k, v in g.items() if k not in ("dtype", "layout")}
    values["dtype"] = Dtype.parse(g["dtype"])
    values["layout"] = Layout.parse(g["layout"])
    return values
