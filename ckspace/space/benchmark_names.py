"""Kernel names of the tile-engine benchmark CSVs, mapped once to full ckspace configs.

The benchmark names (``grouped_conv_forward_bf16_2d_16x64x64_compv3``; grammar in
:mod:`ckspace.core.naming`) carry only the variant, dtype, ndim, block tile and pipeline. The rest
of the config is the ``default`` rule set's, because those kernels come from upstream's
hand-curated tile list: :func:`~ckspace.constraints.generate.default_list.curated_row` builds it from
that rule set's tables. Only those tables give ONE (wave, warp tile) per tile (the ``full`` rule
set pairs a tile with several), and the ten benchmark tiles are exactly their tile list. The tile
of the name is used as is (the default rule set's compv4 tile_k doubling is already in it), and
the configs are untagged like the default rule set's.

The vector widths are the config defaults the default rule set keeps. Problems whose channels per
group are not multiples of them were run by upstream's runner through channel padding, so the
benchmark has rows for them although ckspace's problem rules
(:mod:`ckspace.constraints.rulebook.problem_rules`) call the unpadded kernel infeasible.

Some of these configs break ckspace's validity rules (e.g. compv5 is emitted by no rule set and
128x64x128 compv4 exceeds the arch-blind 32 KiB compv4 LDS budget although gfx950 has 160 KiB);
they were measured all the same, so the selector scores them as the registry gives them.
"""

from __future__ import annotations

from functools import cache

from ckspace.constraints.generate.default_list import curated_row
from ckspace.core.config import GemmConfig
from ckspace.core.errors import CkspaceError, InvalidChoiceError, KernelNameError
from ckspace.core.naming import is_benchmark_name, parse_benchmark_name


@cache
def config_from_benchmark_name(name: str, arch: str) -> GemmConfig:
    """The full config a tile-engine benchmark kernel name stands for (see the module doc)."""
    fields = parse_benchmark_name(name)
    tile = (fields["tile_m"], fields["tile_n"], fields["tile_k"])
    try:
        row = curated_row(fields["variant"], tile, fields["pipeline"])
    except InvalidChoiceError as exc:
        raise KernelNameError(
            f"{name!r}: tile {exc.value} is not in the default rule set's tile table "
            f"({', '.join(exc.choices)}), so its waves and warp tile are unknown"
        ) from None
    return GemmConfig.from_row(arch, fields["variant"], fields["ndim"], fields["dtype"], row)


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
        raise KernelNameError(
            f"{name!r} is neither a ckspace kernel name nor a tile-engine benchmark name: {exc}"
        ) from None
