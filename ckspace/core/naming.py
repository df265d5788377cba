"""Kernel names (RULES.md section 3): rows to names, and names back to fields for user input.

Pure Python on purpose: listing names from the cache must not pay for pydantic or numpy.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from ckspace.core.errors import KernelNameError
from ckspace.core.fields import DEPTHWISE_FIELDS, Layout, Row
from ckspace.core.vocab import (
    Dtype,
    Epilogue,
    Pipeline,
    Scheduler,
    Specialization,
    StreamKStrategy,
    Variant,
)

DEFAULT_VEC = (4, 8, 8)


_PIPELINES = [p.value for p in Pipeline]
_SCHEDULERS = [s.value for s in Scheduler]
_EPILOGUES = [e.value for e in Epilogue]
_SPECS = [s.value for s in Specialization]
_STRATEGIES = [s.value for s in StreamKStrategy]
_LAYOUTS = [lay.value for lay in Layout]


@cache
def _prefix(variant: Variant, dtype: Dtype, ndim: int, layout: int) -> str:
    return f"grouped_conv_{variant.token}_{dtype.value}_{_LAYOUTS[layout]}_{ndim}d_"


def gemm_name(variant: Variant, dtype: Dtype, ndim: int, row: Row) -> str:
    """The upstream kernel name of a row (RULES.md section 3); suffixes in upstream order."""
    (tm, tn, tk, wm, wn, wk, xm, xn, xk, va, vb, vc, pipeline, scheduler, epilogue, pad_m, pad_n, pad_k,
     dsb, gm, split_image, explicit_gemm, two_stage, spec, streamk, strategy, persistent, wg, layout,
     _tagged) = row
    name = (f"{_prefix(variant, dtype, ndim, layout)}{_PIPELINES[pipeline]}_{_EPILOGUES[epilogue]}_"
            f"{_SCHEDULERS[scheduler]}_{tm}x{tn}x{tk}_{wm}x{wn}x{wk}_{xm}x{xn}x{xk}")
    if (va, vb, vc) != DEFAULT_VEC:
        name += f"_vec{va}_{vb}_{vc}"
    if wg != 1:
        name += f"_wg{wg}"
    if gm != 1:
        name += f"_gm{gm}"
    if dsb:
        name += "_dsb"
    if two_stage:
        name += "_2stage"
    if _SPECS[spec] != "default":
        name += "_" + _SPECS[spec]
    if explicit_gemm:
        name += "_explicit_gemm"
    if streamk:
        name += "_streamk_" + _STRATEGIES[strategy] + ("_persistent" if persistent else "")
    if split_image:
        name += "_large_tensor"
    if (pad_m, pad_n, pad_k) != (1, 1, 1):
        name += f"_pad{pad_m}{pad_n}{pad_k}"
    return name


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
