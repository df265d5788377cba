"""The analytical performance model, restated for one (problem, config) pair in plain Python.

Independent of ``ckspace.features.performance``'s code (``_config_terms``, ``config_columns``,
``cycles_formula``) and of ``ckspace.features.formula``: written from the model's description (the
module docstring of :mod:`ckspace.features.performance`) with its data tables and constants, in
Python ints and floats, with integer ceilings where CK's counts are integers. Every hardware fact
comes from the ``hw`` sheet the caller names (the model of "this kernel on this GPU").

How a launch is charged (cycles of the peak engine clock), as the model states it:

1. the per-group implicit GEMM (``M x N x K``) is cut into blocks, ``ceil(M/tile_m)`` x
   ``ceil(N*merged/tile_n)`` x ``ceil(G/merged)`` x ``k_batch``, each running
   ``ceil(K/(tile_k*k_batch))`` K-iterations;
2. blocks run in rounds of ``CUs x occupancy`` (stream-K: fractional rounds, no tail);
   ``c = min(occupancy, ceil(blocks/CUs))`` blocks share a CU;
3. a K-iteration costs its binding resource -- ``c x`` the block's MFMA/LDS cycles (with the overlap
   loss of its MFMA instructions' issue), the traffic of
   the active blocks at the L2-amplified bandwidth, the memory latency over the global buffers,
   ``c x`` the block's load-issue cycles -- plus the overlap loss of the other three;
4. a round adds the prologue (latency, then one iteration per further prefetch stage) and the
   epilogue (latency, output bytes, store instructions);
5. split-K adds the fp32 partials' reduction traffic, twice for two-stage kernels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ckspace.core.arch import arch_facts
from ckspace.core.config import GemmConfig
from ckspace.core.vocab import Dtype, Epilogue, Pipeline, Scheduler, Variant
from ckspace.features.hardware import HardwareFacts
from ckspace.features.performance import CONSTANTS, INDEX_INSTRUCTIONS, PIPELINES, mem_stages
from ckspace.workloads.problem import ConvProblem

ELEMENT_BYTES = {Dtype.FP16: 2, Dtype.BF16: 2, Dtype.FP32: 4}
ACCUMULATOR_BYTES = 4  # split-K partial results are fp32


def _c(name: str, hw: HardwareFacts) -> float:
    """A constant as the GPU of ``hw`` has it measured, else as shipped."""
    return hw.calibrated[name] if name in hw.calibrated else CONSTANTS[name].value


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Block:
    """What one block of a kernel costs, independent of the problem."""

    occupancy: int  # blocks resident per CU
    compute: float  # cycles of one K-iteration's MFMA and LDS work (and, without overlap, its loads)
    load_bytes: int  # global bytes one K-iteration loads (A and B tiles)
    issue: float  # cycles of the address unit per K-iteration (load instructions + index arithmetic)
    buffers: int  # global loads in flight
    stages: int  # prefetch stages the prologue fills
    epilogue: float  # cycles of the epilogue


def block_costs(config: GemmConfig, dtype: Dtype, hw: HardwareFacts) -> Block:
    c = config
    latency = _c("memory_latency_cycles", hw)
    elem = ELEMENT_BYTES[Dtype.parse(dtype)]
    lanes = arch_facts(hw.arch).warp_size
    waves = c.wave_m * c.wave_n * c.wave_k
    threads = waves * lanes
    pipe = PIPELINES[c.pipeline]
    staged_elements = (c.tile_m + c.tile_n) * c.tile_k  # one K-slice of A and B
    if c.pipeline is Pipeline.MEM:
        buffers = stages = mem_stages(c.tile_m, c.tile_n, c.tile_k, elem, threads, lanes)
    else:
        buffers, stages = pipe.buffers, pipe.stages

    # occupancy: the least of what LDS, the wave slots and the registers allow, at least one block
    wave_slots = hw.simds_per_cu * hw.waves_per_simd
    lds_per_block = staged_elements * elem * (2 if c.double_smem_buffer else 1)
    by_lds = hw.lds_bytes_per_cu // lds_per_block
    by_slots = wave_slots // waves
    vgprs = _c("registers_base", hw)
    vgprs += c.tile_m * c.tile_n / threads  # fp32 accumulators
    vgprs += (c.tile_m / c.wave_m + c.tile_n / c.wave_n) * c.tile_k * elem / (4 * lanes)  # MFMA fragments
    if not pipe.asynchronous:  # global loads staged through registers
        vgprs += buffers * staged_elements * elem / (4 * threads)
    waves_per_simd = max(1, int(hw.vgprs_per_lane // vgprs))
    by_registers = waves_per_simd * hw.simds_per_cu // waves
    occupancy = max(1, min(by_lds, by_slots, by_registers))

    # MFMA and LDS cycles of one K-iteration
    rate = hw.flops_per_clock_per_cu(dtype) * hw.mfma_rate(dtype, c.warp_tile_m, c.warp_tile_k)
    mfma = 2.0 * c.tile_m * c.tile_n * c.tile_k / rate
    lds_bytes = (c.wave_n * c.tile_m + c.wave_m * c.tile_n) * c.tile_k * elem  # every wave reads its rows/cols
    if not pipe.asynchronous:  # the waves write the staged tiles
        lds_bytes += staged_elements * elem
    lds = lds_bytes / hw.lds_bytes_per_clock
    # MFMA instructions a SIMD issues per K-iteration: a warp tile runs as instructions of at most
    # the full-rate K (a shape the sheet does not list runs as one instruction of its own K)
    full_k = hw.mfma_full_rate_k.get(Dtype.parse(dtype).value, {}).get(str(c.warp_tile_m), c.warp_tile_k)
    per_instruction = c.warp_tile_m * c.warp_tile_n * min(c.warp_tile_k, full_k)
    mfma_issue = c.tile_m * c.tile_n * c.tile_k / per_instruction / hw.simds_per_cu * _c("valu_cycles", hw)
    if c.scheduler is Scheduler.INTERWAVE:  # the other resident waves of a SIMD hide a wave's LDS reads
        others = max(1.0, occupancy * waves / hw.simds_per_cu)
        compute = mfma + lds / others + _c("overlap_loss", hw) * mfma_issue
    else:  # a wave interleaves its own LDS reads with its MFMAs
        compute = max(mfma, lds) + _c("overlap_loss", hw) * (min(mfma, lds) + mfma_issue)

    # load instructions per wave; those of the operand read through im2col (the input for forward
    # and bwd_weight: A, resp. B; the output gradient for bwd_data: A) with its index arithmetic
    a_loads = c.tile_m * c.tile_k / c.vec_a / threads
    b_loads = c.tile_n * c.tile_k / c.vec_b / threads
    gathered = b_loads if c.variant is Variant.BWD_WEIGHT else a_loads
    valu = 0.0 if c.explicit_gemm else INDEX_INSTRUCTIONS[c.specialization]
    issue = (a_loads + b_loads) * _c("vmem_issue_cycles", hw) + gathered * valu * _c("valu_cycles", hw)
    if not pipe.overlaps:
        compute += latency + issue
    # LDS barriers: two per K-iteration with one LDS buffer, three per two with a double buffer
    compute += _c("barrier_cycles", hw) * (1.5 if c.double_smem_buffer else 2.0)

    # epilogue: latency, bytes per thread, store instructions (cshuffle stores vec_c wide)
    per_thread = c.tile_m * c.tile_n / threads
    store_width = c.vec_c if c.epilogue is Epilogue.CSHUFFLE else 1
    epilogue = (
        latency
        + _c("epilogue_cycles_per_byte", hw) * per_thread * elem
        + per_thread / store_width * _c("vmem_issue_cycles", hw)
    )
    if c.double_smem_buffer:  # both LDS buffers filled before the loop: one more tile written
        epilogue += staged_elements * elem / hw.lds_bytes_per_clock
    return Block(occupancy, compute, staged_elements * elem, issue, buffers, stages, epilogue)


def reference_cycles(
    problem: ConvProblem, config: GemmConfig, variant: Variant, dtype: Dtype, hw: HardwareFacts
) -> float:
    """The launch's cycles of the model for ``config`` running ``problem`` on ``hw``."""
    b = block_costs(config, dtype, hw)
    c = config
    m, n, k = problem.gemm_mnk(variant)
    split = problem.k_batch
    merged = c.num_groups_to_merge
    latency = _c("memory_latency_cycles", hw)
    loss = _c("overlap_loss", hw)
    cus = hw.compute_units
    blocks = _ceil_div(m, c.tile_m) * _ceil_div(n * merged, c.tile_n) * _ceil_div(problem.G, merged) * split
    iterations = _ceil_div(k, c.tile_k * split)
    slots = cus * b.occupancy
    rounds = blocks / slots if c.streamk_enabled else _ceil_div(blocks, slots)
    sharing = min(b.occupancy, _ceil_div(blocks, cus))
    hbm_per_cycle = hw.memory_bandwidth_gbs * 1e9 / hw.clock_hz
    resources = [
        sharing * b.compute,
        b.load_bytes * min(blocks, slots) / (hbm_per_cycle * _c("l2_reuse", hw)),
        latency / b.buffers,
        sharing * b.issue,
    ]
    binding = max(resources)
    resources.remove(binding)
    iteration = binding + loss * math.fsum(resources)
    prologue = latency + (b.stages - 1) * iteration
    per_round = iterations * iteration + prologue + b.epilogue
    partials = (split - 1) * m * n * problem.G * ACCUMULATOR_BYTES * (2 if c.two_stage else 1)
    return rounds * per_round + partials / hbm_per_cycle


def reference_log2_tflops(
    problem: ConvProblem, config: GemmConfig, variant: Variant, dtype: Dtype, hw: HardwareFacts
) -> float:
    """log2 of the model's TFLOPS: the convolution's FLOPs over the launch's time."""
    seconds = reference_cycles(problem, config, variant, dtype, hw) / hw.clock_hz
    return math.log2(problem.flops / seconds / 1e12)
