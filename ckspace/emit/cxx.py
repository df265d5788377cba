"""Config fields as CK Tile C++ spellings: the context the templates render from.

Everything C++-specific that depends on a config lives here, so the templates stay declarative and
the C++ spellings of variants, dtypes, specializations and schedulers are stated once.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ckspace.core.ck import PIPELINE_BASES, PIPELINE_CLASSES
from ckspace.core.config import GemmConfig
from ckspace.core.vocab import Dtype, Scheduler, Specialization, Variant
from ckspace.workloads.operands import OPERANDS, TENSOR_LAYOUTS

CK_DTYPES = {Dtype.FP16: "ck_tile::half_t", Dtype.BF16: "ck_tile::bf16_t", Dtype.FP32: "float"}

SPECIALIZATIONS = {
    Specialization.DEFAULT: "Default",
    Specialization.FILTER1X1_PAD0: "Filter1x1Pad0",
    Specialization.FILTER1X1_STRIDE1_PAD0: "Filter1x1Stride1Pad0",
    Specialization.FILTER3X3: "Filter3x3",
}

SCHEDULERS = {Scheduler.INTRAWAVE: "Intrawave", Scheduler.INTERWAVE: "Interwave"}


class VariantSpec(NamedTuple):
    """The CK Tile spellings of a variant's kernel; which tensor is A, B and C comes from
    :data:`ckspace.workloads.operands.OPERANDS`."""

    host_args: str
    kernel: str
    suffix: str  # of the traits' layout aliases, e.g. AsLayoutFwd
    selected: str  # the single-kernel-include alias of the launcher
    a: str
    b: str
    c: str


def _spec(variant: Variant, host_args: str, kernel: str, suffix: str, selected: str) -> VariantSpec:
    gemm = OPERANDS[variant]
    return VariantSpec(host_args, kernel, suffix, selected, gemm.a.tensor, gemm.b.tensor, gemm.c.tensor)


VARIANTS = {
    Variant.FORWARD: _spec(
        Variant.FORWARD,
        "ck_tile::GroupedConvFwdHostArgs<>",
        "GroupedConvolutionForwardKernel",
        "Fwd",
        "SelectedConvKernelLauncher",
    ),
    Variant.BWD_DATA: _spec(
        Variant.BWD_DATA,
        "ck_tile::GroupedConvBwdDataHostArgs",
        "GroupedConvolutionBackwardDataKernel",
        "BwdData",
        "SelectedConvBwdDataLauncher",
    ),
    Variant.BWD_WEIGHT: _spec(
        Variant.BWD_WEIGHT,
        "ck_tile::GroupedConvBwdWeightHostArgs",
        "GroupedConvolutionBackwardWeightKernel",
        "BwdWeight",
        "SelectedConvBwdWeightLauncher",
    ),
}


def _bool(value: bool) -> str:
    return "true" if value else "false"


def kernel_context(config: GemmConfig) -> dict[str, Any]:
    """Everything the kernel, wrapper and registration templates need for one config."""
    variant = VARIANTS[config.variant]
    layouts = TENSOR_LAYOUTS[config.ndim]
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
        "layouts": (layouts["In"], layouts["Wei"], layouts["Out"]),
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
