"""The analytical performance model: a kernel's time for a problem, from how the kernel works.

The trained ranker knows the kernels it was measured on. Everything else -- an arch, variant or dtype
with no measurements, a pipeline, scheduler, epilogue, specialisation or vector width no model has
seen -- is ranked by this model, or by the trained model's estimate of the nearest kernel it has
seen scaled by this model's ratio of the two (:mod:`ckspace.select.support`). It is stated once:

* the **config-only** quantities (per K-iteration cycles of a block's MFMA and LDS work, its global
  load instructions, its occupancy, prologue depth, epilogue) are computed here in numpy from each
  config and the arch's hardware facts (:func:`config_columns`), once per candidate list; the C
  dispatcher receives them as data;
* the **problem-dependent** part is a :class:`~ckspace.features.formula.Formula`
  (:func:`cycles_formula`), evaluated by the Python selector and rendered to C for the dispatcher
  from the same statement, like the features (it is one of them: ``log2_model_tflops``).

How a launch is charged (cycles of the arch's peak engine clock):

1. the implicit GEMM is cut into blocks: ``ceil(M/tile_m) x ceil(N*merged/tile_n) x ceil(G/merged)
   x k_batch``; each runs ``ceil(K/(tile_k*k_batch))`` K-iterations, padded work included (tile
   quantisation along M, N and K is in the counts);
2. blocks run in rounds of ``CUs x occupancy``, occupancy from LDS, wave slots and registers;
   ``c`` blocks share a CU in a round;
3. one K-iteration costs the largest of its shared resources -- the CU's matrix cores and LDS
   (``c x`` the block's own, with its LDS barriers: two per iteration with one LDS buffer, three
   per two with a double buffer), the global traffic of every active block at the arch's
   bandwidth (times the L2 reuse constant), the memory latency over the pipeline's global
   buffers, and the CU's address unit (``c x`` the block's load instructions, so narrow vectors
   cost issue slots, plus the im2col index arithmetic of the gathered operand's loads) -- plus
   the overlap loss of the others and of the MFMA instructions' issue: overlap is never
   perfect, and two kernels that differ in any resource never tie;
4. a round adds its prologue (the memory latency, then one iteration per further prefetch stage)
   and its epilogue (the latency and the output tile's stores; a double LDS buffer also fills its
   second buffer before the loop);
5. split-K (``k_batch > 1``) adds the partial results' reduction traffic, twice over for the
   two-stage kernels (workspace written, then read back).

What the model cannot tell apart, because its physics is the same: a block tile and its transpose
(tiles, waves and warp tiles swapped along M and N) of a plain GEMM (1x1 filter, stride 1, no
pads, or an explicit GEMM) with equal A and B vector widths: every cost it charges is symmetric in
M and N then. Such a pair ties, and the selector keeps candidate order.

A config is priced with its own arch's facts (:func:`config_columns`); the selector, the
dispatcher and training only ever evaluate configs of the arch whose facts they hold.

:data:`CONSTANTS` lists every number not read from a config, the arch's facts
(``ckspace/data/hardware.json``) or CK Tile's pipeline definitions (:data:`~ckspace.core.ck.PIPELINES`), with its
value and where it came from. Three were fit once, by coordinate search on mean + P10/2
efficiency, on the shared MI355X measurements (``benchmark_forward_300_bf16_gfx950.csv``: 231
problems x 30 kernels): mean 97.6 %, P10 92.1 % of the best measured kernel, no ties; fit inside
grouped 5-fold cross-validation instead, the held-out figures are 97.3 % and 91.2 %
(``bench/analytical_fit.py`` repeats both), so three constants learn little beyond the physics.
Hardware facts may carry constants measured on their GPU (:func:`calibrated_facts`): wherever the
model prices with those facts, they replace the shipped values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ckspace.core.arch import arch_facts, element_size
from ckspace.core.ck import PIPELINES, PipelineFacts, mem_stages
from ckspace.core.config import GemmConfig
from ckspace.core.errors import InvalidChoiceError
from ckspace.core.vocab import Epilogue, Pipeline, Scheduler, Specialization, Variant
from ckspace.features.formula import Formula, ceil, config, maximum, minimum, problem
from ckspace.features.hardware import HardwareFacts, hardware_facts


@dataclass(frozen=True)
class Constant:
    value: float
    source: str


CONSTANTS: dict[str, Constant] = {
    "memory_latency_cycles": Constant(
        678.0,
        "fit once on the shared gfx950 forward bf16 measurements (the latency a block waits for a global "
        "load it could not prefetch; ~280 ns at 2.4 GHz); bench/analytical_fit.py",
    ),
    "l2_reuse": Constant(
        5.2,
        "fit once on the same measurements: tile-level global traffic served at this multiple of the HBM "
        "bandwidth (neighbouring blocks share A and B tiles in L2)",
    ),
    "epilogue_cycles_per_byte": Constant(
        9.5,
        "fit once on the same measurements: cycles per output byte each thread of a block stores in the "
        "epilogue (through LDS for cshuffle); the least determined of the three (folds fit 7.7 to 19)",
    ),
    "vmem_issue_cycles": Constant(
        16.0,
        "assumed, not fit (no measurement has narrow vectors): a wave's vector memory instruction holds the "
        "CU's address unit for its 64 lanes at 4 per clock, whatever its width",
    ),
    "valu_cycles": Constant(
        4.0,
        "CDNA ISA: a 64-lane wave issues one VALU instruction over 4 clocks on a 16-lane SIMD (the index "
        "arithmetic of a load; also charged per MFMA instruction issued, inside the overlap loss)",
    ),
    "overlap_loss": Constant(
        0.01,
        "assumed: the share of the non-binding resources that overlap fails to hide; it keeps kernels that "
        "differ in any resource apart (fits equally from 0.001 to 0.02)",
    ),
    "barrier_cycles": Constant(
        4.0,
        "assumed: what one LDS barrier costs a block whose waves arrive in step (a larger cost fits the "
        "measurements worse: bench/analytical_fit.py)",
    ),
    "analytical_level": Constant(
        0.205,
        "fit on the shared gfx950 forward bf16 measurements (ckspace/training/calibration.py): measured over "
        "modelled TFLOPS at the model's picks, median; the model's cycles are ideal hardware's at the peak "
        "clock. Held out (grouped 5-fold, seeds 0-2) predicted/measured: median 1.00, P10 0.72-0.73, P90 "
        "1.33-1.35; uncalibrated 4.88 / 3.57 / 6.59. Assumed to carry to other CDNA archs and dtypes (what it "
        "lumps -- clock under load, overheads the model omits -- is the software's and the clock's, not the "
        "tile's); unchecked there. One factor: it never changes a pick, and the feature stays uncalibrated",
    ),
    "registers_base": Constant(
        32.0,
        "assumed: VGPRs per lane a kernel needs beside its accumulators, fragments and prefetch buffers "
        "(addresses, loop state)",
    ),
}


def constant(name: str, hw: HardwareFacts | None = None) -> float:
    """The value of constant ``name``: as measured on the GPU of ``hw`` when its facts carry it
    (:func:`calibrated_facts`), else the shipped one."""
    if hw is not None and name in hw.calibrated:
        return hw.calibrated[name]
    return CONSTANTS[name].value


def calibrated_facts(hw: HardwareFacts, values: dict[str, float]) -> HardwareFacts:
    """``hw`` with the model's constants ``values`` (names of :data:`CONSTANTS`, positive) measured
    on its GPU, on top of any it carries: the facts every price the model makes from them reads
    (config columns, feature formulas, the C dispatcher's). An unknown name or a value that is not
    positive and finite is refused, naming the choices (:func:`check_constants`)."""
    check_constants(values)
    return hw.model_copy(update={"calibrated": {**hw.calibrated, **{k: float(v) for k, v in values.items()}}})


def check_constants(values: dict[str, float]) -> None:
    """Refuse a name that is not one of :data:`CONSTANTS` (naming the choices) or a value that is not
    positive and finite: what measured constants must be, whatever GPU's facts they join."""
    for name, value in values.items():
        if name not in CONSTANTS:
            raise InvalidChoiceError("analytical model constant", name, sorted(CONSTANTS))
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"constant {name} must be positive and finite, got {value!r}")


def calibrated_tflops(log2_model_tflops: np.ndarray | float) -> np.ndarray | float:
    """The TFLOPS the model predicts from its score (the ``log2_model_tflops`` feature, which
    stays at the ideal hardware's level the trained models learned it at), calibrated to measured
    TFLOPS by ``analytical_level``: the one conversion Python and the C dispatcher both state."""
    return np.exp2(log2_model_tflops) * constant("analytical_level")


INDEX_INSTRUCTIONS: dict[Specialization, float] = {
    Specialization.DEFAULT: 6.0,
    Specialization.FILTER3X3: 4.0,
    Specialization.FILTER1X1_PAD0: 2.0,
    Specialization.FILTER1X1_STRIDE1_PAD0: 0.0,
}
"""Assumed VALU instructions of im2col index arithmetic per global load instruction: the general
kernel maps each row to (image, output position, filter tap) with pads; a 3x3 specialisation fixes
the taps; a 1x1 filter without pads needs only the stride; 1x1, stride 1, no pads is a plain GEMM
(as is an explicit-GEMM kernel)."""

COLUMNS: tuple[str, ...] = (
    "perf_occupancy",
    "perf_compute_cycles",
    "perf_load_bytes",
    "perf_issue_cycles",
    "perf_buffers",
    "perf_stages",
    "perf_epilogue_cycles",
    "perf_merged",
    "perf_streamk",
    "perf_two_stage",
)
"""The config-only columns the cycle formula reads (:func:`config_columns`)."""


def config_columns(configs: Sequence[GemmConfig], hw: HardwareFacts | None = None) -> dict[str, np.ndarray]:
    """The config-only quantities of the model, one value per config (see the module docstring),
    each priced with ``hw`` (the facts of the configs' arch, perhaps carrying constants measured on
    its GPU) or, without it, its own arch's spec sheet."""
    if hw is not None and any(c.arch != hw.arch for c in configs):
        raise ValueError(f"configs of another arch than the facts' {hw.arch}")
    rows = [_config_terms(c, hw if hw is not None else hardware_facts(c.arch)) for c in configs]
    return {name: np.asarray([r[i] for r in rows], dtype=np.float64) for i, name in enumerate(COLUMNS)}


@dataclass(frozen=True)
class _Block:
    """What every step of :func:`_config_terms` reads of one config besides its fields: the lanes
    of a wave, the bytes of an element, the block's waves and threads, the bytes of one K-slice of
    A and B, and its pipeline's facts (one place derives them, so no step restates a shape)."""

    warp: int
    elem: int
    waves: int
    threads: int
    load_bytes: int
    facts: PipelineFacts


def _block(c: GemmConfig) -> _Block:
    warp = arch_facts(c.arch).warp_size
    waves = c.wave_m * c.wave_n * c.wave_k
    elem = element_size(c.dtype)
    load_bytes = (c.tile_m + c.tile_n) * c.tile_k * elem  # one K-slice of A and B
    return _Block(warp, elem, waves, warp * waves, load_bytes, PIPELINES[c.pipeline])


def _config_terms(c: GemmConfig, hw: HardwareFacts) -> tuple[float, ...]:
    """One config's :data:`COLUMNS`, step by step: the pipeline's depth, the occupancy it leaves,
    the address unit's cycles, a K-iteration's cycles and the epilogue's."""
    b = _block(c)
    stages, buffers = _prefetch_depth(c, b)
    occupancy = _occupancy(c, hw, b, buffers)
    issue = _issue_cycles(c, hw, b)
    compute = _iteration_cycles(c, hw, b, occupancy, issue)
    epilogue = _epilogue_cycles(c, hw, b)
    return (
        float(occupancy),
        compute,
        float(b.load_bytes),
        issue,
        float(buffers),
        float(stages),
        epilogue,
        float(c.num_groups_to_merge),
        float(bool(c.streamk_enabled)),
        float(bool(c.two_stage)),
    )


def _prefetch_depth(c: GemmConfig, b: _Block) -> tuple[int, int]:
    """Prefetch stages and global buffers: the pipeline's own, but the mem pipeline sizes both from
    the tile (how many bytes it keeps in flight), so they are a step of their own."""
    if c.pipeline is Pipeline.MEM:
        stages = mem_stages(c.tile_m, c.tile_n, c.tile_k, b.elem, b.threads, b.warp)
        return stages, stages
    return b.facts.stages, b.facts.buffers


def _occupancy(c: GemmConfig, hw: HardwareFacts, b: _Block, buffers: int) -> int:
    """Blocks resident per CU: the least that LDS, the wave slots and the registers allow (whole
    waves per SIMD), at least one. The registers count the fp32 accumulators, the MFMA fragments and,
    unless the pipeline loads into LDS directly, the global loads staged in its buffers: a deeper
    pipeline buys latency hiding with occupancy, which is why the depth comes first."""
    lds = b.load_bytes * (2 if c.double_smem_buffer else 1)
    by_lds = hw.lds_bytes_per_cu // lds  # every tile stages at least one element
    by_waves = hw.simds_per_cu * hw.waves_per_simd // b.waves
    accumulators = c.tile_m * c.tile_n / b.threads  # fp32, one VGPR each
    fragments = (c.tile_m / c.wave_m + c.tile_n / c.wave_n) * c.tile_k * b.elem / (4 * b.warp)
    staging = 0.0 if b.facts.asynchronous else buffers * b.load_bytes / (4 * b.threads)
    registers = accumulators + fragments + staging + constant("registers_base", hw)
    waves_per_simd = max(1, int(hw.vgprs_per_lane // registers))
    by_registers = waves_per_simd * hw.simds_per_cu // b.waves
    return max(1, min(by_lds, by_waves, by_registers))


def _issue_cycles(c: GemmConfig, hw: HardwareFacts, b: _Block) -> float:
    """The CU's address unit per K-iteration: each wave's load instructions (narrow vectors take
    more of them) and the im2col index arithmetic of the gathered operand's loads (none for a plain
    GEMM). Its own step because the iteration charges it twice: as a resource of its own, and
    inside the work of a pipeline that does not overlap loads with MFMA."""
    loads_a = c.tile_m * c.tile_k / c.vec_a / b.threads  # per wave
    loads_b = c.tile_n * c.tile_k / c.vec_b / b.threads
    gathered = loads_b if c.variant is Variant.BWD_WEIGHT else loads_a  # the im2col operand
    index = 0.0 if c.explicit_gemm else INDEX_INSTRUCTIONS[c.specialization]
    return (loads_a + loads_b) * constant("vmem_issue_cycles", hw) + gathered * index * constant("valu_cycles", hw)


def _iteration_cycles(c: GemmConfig, hw: HardwareFacts, b: _Block, occupancy: int, issue: float) -> float:
    """One K-iteration of one block: its MFMA and LDS work as the scheduler overlaps them (which
    needs the occupancy: other resident waves hide a wave's LDS reads under interwave), then the
    serial latency and issue of a pipeline without overlap, then the LDS barriers."""
    compute = _mfma_lds_cycles(c, hw, b, occupancy)
    if not b.facts.overlaps:  # loads, LDS and MFMA in turn: the latency and the issue add to the work
        compute += constant("memory_latency_cycles", hw) + issue
    # LDS synchronisation: a single buffer waits twice per K-iteration (before it is overwritten,
    # after it is written); a double buffer three times per two iterations
    compute += constant("barrier_cycles", hw) * (1.5 if c.double_smem_buffer else 2.0)
    return compute


def _mfma_lds_cycles(c: GemmConfig, hw: HardwareFacts, b: _Block, occupancy: int) -> float:
    """The matrix cores' and LDS's cycles of one K-iteration, overlapped as the scheduler does, plus
    the overlap loss of the MFMA instructions' issue. A warp tile runs as instructions of at most the
    full-rate K, so smaller shapes take more issue slots for the same work: why two kernels of
    equal FLOPs and bytes still differ here."""
    mfma = (
        2.0
        * c.tile_m
        * c.tile_n
        * c.tile_k
        / (hw.flops_per_clock_per_cu(c.dtype) * hw.mfma_rate(c.dtype, c.warp_tile_m, c.warp_tile_k))
    )
    lds_reads = (c.wave_n * c.tile_m + c.wave_m * c.tile_n) * c.tile_k * b.elem
    lds_writes = 0.0 if b.facts.asynchronous else b.load_bytes
    lds_cycles = (lds_reads + lds_writes) / hw.lds_bytes_per_clock
    full_k = hw.mfma_full_rate_k.get(c.dtype.value, {}).get(str(c.warp_tile_m), c.warp_tile_k)
    instructions = c.tile_m * c.tile_n * c.tile_k / (c.warp_tile_m * c.warp_tile_n * min(c.warp_tile_k, full_k))
    issue_mfma = instructions / hw.simds_per_cu * constant("valu_cycles", hw)
    if c.scheduler is Scheduler.INTERWAVE:  # other waves of the SIMD hide a wave's LDS reads
        resident = max(1.0, occupancy * b.waves / hw.simds_per_cu)
        return mfma + lds_cycles / resident + constant("overlap_loss", hw) * issue_mfma
    # the wave interleaves its own LDS reads with its MFMAs
    return max(mfma, lds_cycles) + constant("overlap_loss", hw) * (min(mfma, lds_cycles) + issue_mfma)


def _epilogue_cycles(c: GemmConfig, hw: HardwareFacts, b: _Block) -> float:
    """Once per round, after the loop: the latency, then the output tile through LDS (cshuffle,
    ``vec_c`` wide) or straight from the accumulators (one element per lane along N); a double LDS
    buffer also fills its second buffer before the loop, charged here because it too is paid once
    per round, not per iteration."""
    out_bytes = c.tile_m * c.tile_n * b.elem / b.threads
    width = c.vec_c if c.epilogue is Epilogue.CSHUFFLE else 1
    stores = c.tile_m * c.tile_n / width / b.threads
    epilogue = (
        constant("memory_latency_cycles", hw)
        + constant("epilogue_cycles_per_byte", hw) * out_bytes
        + stores * constant("vmem_issue_cycles", hw)
    )
    prefill = b.load_bytes / hw.lds_bytes_per_clock if c.double_smem_buffer else 0.0
    return epilogue + prefill


def cycles_formula(m: Formula, n: Formula, k: Formula, hw: HardwareFacts) -> Formula:
    """The launch's cycles for a problem whose per-group GEMM is ``m x n x k`` (formulas of the
    problem), over the config columns of :func:`config_columns` and the tile sizes."""
    p, c = problem, config
    cus = float(hw.compute_units)
    latency = constant("memory_latency_cycles", hw)
    merged = c("perf_merged")
    k_batch = p("k_batch")
    blocks = ceil(m / c("tile_m")) * ceil(n * merged / c("tile_n")) * ceil(p("G") / merged) * k_batch
    k_loop = ceil(k / (c("tile_k") * k_batch))
    slots = cus * c("perf_occupancy")
    streamk = c("perf_streamk")
    rounds = streamk * (blocks / slots) + (1.0 - streamk) * ceil(blocks / slots)
    sharing = minimum(c("perf_occupancy"), ceil(blocks / cus))
    hbm_per_cycle = hw.memory_bandwidth_gbs * 1e9 / hw.clock_hz
    bytes_per_cycle = hbm_per_cycle * constant("l2_reuse", hw)
    parts = (
        sharing * c("perf_compute_cycles"),
        c("perf_load_bytes") * minimum(blocks, slots) / bytes_per_cycle,
        latency / c("perf_buffers"),
        sharing * c("perf_issue_cycles"),
    )
    binding = maximum(maximum(parts[0], parts[1]), maximum(parts[2], parts[3]))
    iteration = binding + constant("overlap_loss", hw) * (parts[0] + parts[1] + parts[2] + parts[3] - binding)
    prologue = latency + (c("perf_stages") - 1.0) * iteration
    round_cycles = k_loop * iteration + prologue + c("perf_epilogue_cycles")
    reduction = (k_batch - 1.0) * m * n * p("G") * 4.0 * (1.0 + c("perf_two_stage")) / hbm_per_cycle
    return rounds * round_cycles + reduction
