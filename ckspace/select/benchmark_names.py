"""Kernel names of the tile-engine benchmark CSVs, mapped once to full ckspace configs.

The benchmark names (``grouped_conv_forward_bf16_2d_16x64x64_compv3``) carry only the variant,
dtype, ndim, block tile and pipeline. The rest of the config is fixed here, explicitly, from the
``default`` rule set's tables, because those kernels come from upstream's hand-curated tile list:

* the ten benchmark tiles are exactly the default rule set's tile list (``tiles_fwd_bwd_data``),
  and only that table gives ONE (wave, warp tile) per tile (``tile_to_wave``,
  ``tile_to_warp_tile``; the ``full`` rule set pairs a tile with several);
* wave_k is 1 (the default rule set forces it);
* vec_a/b/c are (4, 8, 8), the config default the default rule set keeps (its per-tile vector
  table is never read). Problems whose channels per group are not multiples of these widths were
  run by upstream's runner through channel padding, so the benchmark has rows for them although
  ckspace's problem rules (:mod:`ckspace.constraints.problem_rules`) call the unpadded kernel
  infeasible;
* scheduler intrawave and epilogue cshuffle (compv3/4/5 reject interwave; forward is cshuffle);
* double_smem_buffer is True exactly for compv4, which requires the LDS ping-pong; the tile_k of
  the name is used as is (the default rule set's compv4 tile_k doubling is already in the name);
* every other field keeps its config default (pads on, no group merging, no split image, default
  specialization), and configs are untagged like the default rule set's.

Some of these configs break ckspace's validity rules (e.g. compv5 is emitted by no rule set and
128x64x128 compv4 exceeds the arch-blind 32 KiB compv4 LDS budget although gfx950 has 160 KiB);
they were measured all the same, so the selector scores them as the registry gives them.
"""

from __future__ import annotations

import re
from functools import cache

from ckspace.core.config import GemmConfig
from ckspace.core.errors import CkspaceError, KernelNameError
from ckspace.core.tables import table
from ckspace.core.vocab import Dtype, Pipeline, Variant

_BENCH_NAME = re.compile(
    r"^grouped_conv_(?P<variant>forward|bwd_data|bwd_weight)_(?P<dtype>fp16|bf16|fp32)_(?P<ndim>[123])d_"
    r"(?P<tm>\d+)x(?P<tn>\d+)x(?P<tk>\d+)_(?P<pipeline>[a-z0-9_]+)$")


def is_benchmark_name(name: str) -> bool:
    """Whether ``name`` follows the tile-engine benchmark scheme (tile and pipeline only)."""
    return _BENCH_NAME.match(name) is not None


@cache
def config_from_benchmark_name(name: str, arch: str) -> GemmConfig:
    """The full config a tile-engine benchmark kernel name stands for (see the module doc)."""
    match = _BENCH_NAME.match(name)
    if match is None:
        raise KernelNameError(f"{name!r} is not a tile-engine benchmark kernel name "
                              "(grouped_conv_<variant>_<dtype>_<n>d_<M>x<N>x<K>_<pipeline>)")
    tile = f"{match['tm']}x{match['tn']}x{match['tk']}"
    default = table("default")
    if tile not in default["tile_to_wave"]:
        raise KernelNameError(f"{name!r}: tile {tile} is not in the default rule set's tile table "
                              f"({', '.join(default['tile_to_wave'])}), so its waves and warp tile are unknown")
    wave_m, wave_n, _ = default["tile_to_wave"][tile]
    warp_m, warp_n, warp_k = default["tile_to_warp_tile"][tile]
    pipeline = Pipeline.parse(match["pipeline"])
    return GemmConfig(
        arch=arch, variant=Variant.parse(match["variant"]), ndim=int(match["ndim"]), dtype=Dtype.parse(match["dtype"]),
        tile_m=int(match["tm"]), tile_n=int(match["tn"]), tile_k=int(match["tk"]),
        wave_m=wave_m, wave_n=wave_n, wave_k=default["forced_wave_k"],
        warp_tile_m=warp_m, warp_tile_n=warp_n, warp_tile_k=warp_k,
        vec_a=4, vec_b=8, vec_c=8, pipeline=pipeline, double_smem_buffer=pipeline is Pipeline.COMPV4,
        tagged=False,
    )


def config_from_any_name(name: str, arch: str) -> GemmConfig:
    """A ckspace kernel name or a tile-engine benchmark name, as a config of ``arch``."""
    name = name.strip()
    if is_benchmark_name(name):
        return config_from_benchmark_name(name, arch)
    try:
        return GemmConfig.from_name(name, arch, tagged=False)
    except KernelNameError:
        raise
    except (ValueError, CkspaceError) as exc:
        raise KernelNameError(f"{name!r} is neither a ckspace kernel name nor a tile-engine benchmark name: {exc}") \
            from None
