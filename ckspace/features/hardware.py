"""Per-arch hardware facts (CU count, peak rates, LDS, bandwidth) from ``ckspace/data/hardware.json``.

The rule tables say which kernels exist; choosing between them also needs how big and how fast the
GPU is. These numbers come from public spec sheets (each entry names its source) and feed the
selector's features and its analytical fallback. The LDS per compute unit is the one arch fact both
sides need, so it is read from the arch facts (:mod:`ckspace.core.arch`, newest rules revision), not
stated twice.
"""

from __future__ import annotations

from functools import cache

from pydantic import BaseModel, ConfigDict, Field

from ckspace.core.arch import arch_facts
from ckspace.core.errors import InvalidChoiceError
from ckspace.core.tables import hardware_table
from ckspace.core.vocab import Dtype, parse_arch


class HardwareFacts(BaseModel):
    """Spec-sheet facts of one arch's flagship product."""

    model_config = ConfigDict(frozen=True)

    arch: str
    product: str
    compute_units: int = Field(gt=0)
    peak_clock_mhz: int = Field(gt=0)
    memory_bandwidth_gbs: float = Field(gt=0)
    peak_dense_tflops: dict[str, float]
    source: str
    simds_per_cu: int = Field(gt=0)
    waves_per_simd: int = Field(gt=0)
    vgprs_per_lane: int = Field(gt=0)
    lds_bytes_per_clock: int = Field(gt=0)
    mfma_full_rate_k: dict[str, dict[str, int]]
    microarchitecture_source: str
    calibrated: dict[str, float] = Field(default_factory=dict)
    """The analytical model's constants as measured on this GPU, by name: where the model prices
    configs and problems with these facts, they replace the shipped values
    (``performance.CONSTANTS``; made by ``performance.calibrated_facts``, which checks the names).
    Empty for the spec sheets: the shipped constants."""

    @property
    def lds_bytes_per_cu(self) -> int:
        """LDS per compute unit: the arch facts' capacity (arch_specs.json as the newest rules revision
        has it)."""
        return arch_facts(self.arch).lds_capacity_kb * 1024

    @property
    def clock_hz(self) -> float:
        return self.peak_clock_mhz * 1e6

    def flops_per_clock_per_cu(self, dtype: Dtype | str) -> float:
        """The dense matrix peak of one CU in one clock: what the analytical model charges MFMA work."""
        return self.peak_tflops(dtype) * 1e12 / (self.compute_units * self.clock_hz)

    def mfma_rate(self, dtype: Dtype | str, warp_tile_m: int, warp_tile_k: int) -> float:
        """Share of the peak a warp tile's MFMA instruction runs at: 1, or K over the full-rate K
        for a shape whose K is below it (``mfma_full_rate_k``)."""
        full = self.mfma_full_rate_k.get(Dtype.parse(dtype).value, {}).get(str(warp_tile_m))
        return 1.0 if full is None else min(1.0, warp_tile_k / full)

    def peak_tflops(self, dtype: Dtype | str) -> float:
        """Dense matrix peak for ``dtype``; raises for a dtype the sheet does not list."""
        key = Dtype.parse(dtype).value
        if key not in self.peak_dense_tflops:
            raise InvalidChoiceError(f"dtype with a known peak rate on {self.arch}", key, self.peak_dense_tflops)
        return self.peak_dense_tflops[key]


@cache
def hardware_facts(arch: str) -> HardwareFacts:
    """The facts of ``arch``; :class:`InvalidChoiceError` when the arch is unknown or has none."""
    name = parse_arch(arch)
    archs = hardware_table()["archs"]
    if name not in archs:
        raise InvalidChoiceError("arch with hardware facts", name, archs)
    return HardwareFacts(arch=name, **archs[name])
