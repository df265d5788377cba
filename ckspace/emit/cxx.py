"""Config fields as CK Tile C++ spellings: the context the templates render from.

Everything C++-specific that depends on a config lives here, so the templates stay declarative and
the mapping (EMIT.md's per-variant table, layouts per ndim, pipeline classes) is stated once.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ckspace.emit.ck_revision import PIPELINE_BASES, PIPELINE_CLASSES
from ckspace.space.config import GemmConfig
from ckspace.space.vocab import Dtype, Scheduler, Specialization, Variant

CK_DTYPES = {Dtype.FP16: "ck_tile::half_t", Dtype.BF16: "ck_tile::bf16_t", Dtype.FP32: "float"}

CONV_LAYOUTS = {
    1: ("NWGC", "GKXC", "NWGK"),
    2: ("NHWGC", "GKYXC", "NHWGK"),
    3: ("NDHWGC", "GKZYXC", "NDHWGK"),
}

SPECIALIZATIONS = {
    Specialization.DEFAULT: "Default",
    Specialization.FILTER1X1_PAD0: "Filter1x1Pad0",
    Specialization.FILTER1X1_STRIDE1_PAD0: "Filter1x1Stride1Pad0",
    Specialization.FILTER3X3: "Filter3x3",
}

SCHEDULERS = {Scheduler.INTRAWAVE: "Intrawave", Scheduler.INTERWAVE: "Interwave"}


class VariantSpec(NamedTuple):
    """EMIT.md's per-variant mapping of the implicit GEMM."""

    host_args: str
    kernel: str
    suffix: str  # of the traits' layout aliases, e.g. AsLayoutFwd
    a: str  # which conv tensor is GEMM operand A, B, C
    b: str
    c: str
    conv_type: str
    selected: str  # the single-kernel-include alias of the launcher


VARIANTS = {
    Variant.FORWARD: VariantSpec("ck_tile::GroupedConvFwdHostArgs<>", "GroupedConvolutionForwardKernel",
                                 "Fwd", "In", "Wei", "Out", "forward",
                                 "SelectedConvKernelLauncher"),
    Variant.BWD_DATA: VariantSpec("ck_tile::GroupedConvBwdDataHostArgs", "GroupedConvolutionBackwardDataKernel",
                                  "BwdData", "Out", "Wei", "In", "bwd_data",
                                  "SelectedConvBwdDataLauncher"),
    Variant.BWD_WEIGHT: VariantSpec("ck_tile::GroupedConvBwdWeightHostArgs",
                                    "GroupedConvolutionBackwardWeightKernel",
                                    "BwdWeight", "Out", "In", "Wei", "bwd_weight",
                                    "SelectedConvBwdWeightLauncher"),
}


def _bool(value: bool) -> str:
    return "true" if value else "false"


def kernel_context(config: GemmConfig) -> dict[str, Any]:
    """Everything the kernel, wrapper and registration templates need for one config."""
    variant = VARIANTS[config.variant]
    in_layout, wei_layout, out_layout = CONV_LAYOUTS[config.ndim]
    name = config.name
    return {
        "name": name,
        "namespace": f"ckspace_kernel_{name}",
        "variant": config.variant.value,
        "spec": variant,
        "arch": config.arch,
        "ndim": config.ndim,
        "dtype": config.dtype.value,
        "ck_dtype": CK_DTYPES[config.dtype],
        "layouts": (in_layout, wei_layout, out_layout),
        "tile": (config.tile_m, config.tile_n, config.tile_k),
        "wave": (config.wave_m, config.wave_n, config.wave_k),
        "warp_tile": (config.warp_tile_m, config.warp_tile_n, config.warp_tile_k),
        "vec": (config.vec_a, config.vec_b, config.vec_c),
        "pad": tuple(_bool(p) for p in (config.pad_m, config.pad_n, config.pad_k)),
        "pipeline": config.pipeline.value,
        "pipeline_class": PIPELINE_CLASSES[config.pipeline],
        "pipeline_base": PIPELINE_BASES[config.pipeline],
        "scheduler": config.scheduler.value,
        "ck_scheduler": SCHEDULERS[config.scheduler],
        "epilogue": config.epilogue.value,
        "double_smem_buffer": _bool(config.double_smem_buffer),
        "block_per_cu": config.block_per_cu,
        "num_wave_groups": config.num_wave_groups,
        "num_groups_to_merge": config.num_groups_to_merge,
        "split_image": config.split_image,
        "explicit_gemm": _bool(config.explicit_gemm),
        "two_stage": config.two_stage,
        "specialization": SPECIALIZATIONS[config.specialization],
    }
