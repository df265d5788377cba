"""The analytical performance model (ckspace.features.performance) against its plain-Python statement
(tests/reference_performance.py), and the properties the selector relies on: distinct kernels never
tie at the top, and a narrower vector never beats its family's wider one.

The property tests run over the target's kernels (``Space(arch, ..., rule_set="full")``, the CK
headers ckspace finds) of every cell of both archs with hardware facts, on the ResNet-50 layers and
on drawn problems.
"""

from __future__ import annotations

import math
from functools import cache
from itertools import product
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_performance import block_costs, reference_cycles, reference_log2_tflops
from strategies import boundary_problems, gemm_configs

from ckspace.core.ck import MEM_IN_FLIGHT_BYTES, PIPELINES, mem_stages
from ckspace.core.config import GemmConfig
from ckspace.core.errors import InvalidChoiceError
from ckspace.core.fields import GEMM_FIELD_NAMES
from ckspace.core.vocab import Dtype, Epilogue, Pipeline, Scheduler, Specialization, StreamKStrategy, Variant
from ckspace.features.hardware import hardware_facts
from ckspace.features.matrix import ANALYTICAL_FEATURE, FEATURE_NAMES, ConfigTable, feature_matrix
from ckspace.features.performance import CONSTANTS, calibrated_facts, constant
from ckspace.select.candidates import CandidateSet
from ckspace.select.fallbacks import vector_variants
from ckspace.select.selector import Selector
from ckspace.space.space import Space
from ckspace.workloads.datasets import DATASETS
from ckspace.workloads.operands import VECTOR_FIELDS
from ckspace.workloads.problem import ConvProblem

ARCHS = ("gfx942", "gfx950")
"""The archs with hardware facts (ckspace/data/hardware.json)."""
CELLS = tuple(
    (arch, variant, dtype)
    for arch in ARCHS
    for variant in Variant
    for dtype in Dtype
    if dtype.value in hardware_facts(arch).peak_dense_tflops
)
"""Every (arch, variant, dtype) with a peak rate on the sheet."""
ANALYTICAL = FEATURE_NAMES.index(ANALYTICAL_FEATURE)
MOST_KERNELS = 300
"""Kernels per cell the property tests take (every one today: the target's cells hold 0 to 208)."""

RESNET50 = (
    # N=32, 224x224 images; bottleneck blocks with the stride on the 3x3 (v1.5), one line per distinct layer
    "N=32,C=3,K=64,Hi=224,Wi=224,Y=7,X=7,stride=2,pad=3",  # conv1
    "N=32,C=64,K=64,Hi=56,Wi=56,Y=1,X=1",  # conv2_x
    "N=32,C=64,K=64,Hi=56,Wi=56,Y=3,X=3,pad=1",
    "N=32,C=64,K=256,Hi=56,Wi=56,Y=1,X=1",  # expansion and projection shortcut
    "N=32,C=256,K=64,Hi=56,Wi=56,Y=1,X=1",
    "N=32,C=256,K=128,Hi=56,Wi=56,Y=1,X=1",  # conv3_x
    "N=32,C=128,K=128,Hi=56,Wi=56,Y=3,X=3,stride=2,pad=1",
    "N=32,C=128,K=512,Hi=28,Wi=28,Y=1,X=1",
    "N=32,C=256,K=512,Hi=56,Wi=56,Y=1,X=1,stride=2",
    "N=32,C=512,K=128,Hi=28,Wi=28,Y=1,X=1",
    "N=32,C=128,K=128,Hi=28,Wi=28,Y=3,X=3,pad=1",
    "N=32,C=512,K=256,Hi=28,Wi=28,Y=1,X=1",  # conv4_x
    "N=32,C=256,K=256,Hi=28,Wi=28,Y=3,X=3,stride=2,pad=1",
    "N=32,C=256,K=1024,Hi=14,Wi=14,Y=1,X=1",
    "N=32,C=512,K=1024,Hi=28,Wi=28,Y=1,X=1,stride=2",
    "N=32,C=1024,K=256,Hi=14,Wi=14,Y=1,X=1",
    "N=32,C=256,K=256,Hi=14,Wi=14,Y=3,X=3,pad=1",
    "N=32,C=1024,K=512,Hi=14,Wi=14,Y=1,X=1",  # conv5_x
    "N=32,C=512,K=512,Hi=14,Wi=14,Y=3,X=3,stride=2,pad=1",
    "N=32,C=512,K=2048,Hi=7,Wi=7,Y=1,X=1",
    "N=32,C=1024,K=2048,Hi=14,Wi=14,Y=1,X=1,stride=2",
    "N=32,C=2048,K=512,Hi=7,Wi=7,Y=1,X=1",
    "N=32,C=512,K=512,Hi=7,Wi=7,Y=3,X=3,pad=1",
)
LAYERS = tuple(ConvProblem.parse(text) for text in RESNET50)


def cell_id(cell: tuple) -> str:
    arch, variant, dtype = cell
    return f"{arch}-{variant.value}-{dtype.value}"


# -- the target's kernels of a cell ----------------------------------------------------------------


@cache
def target_kernels(arch: str, variant: Variant, dtype: Dtype) -> tuple[GemmConfig, ...]:
    """The 2D kernels of the cell's target, at most :data:`MOST_KERNELS` of them (every k-th by name
    when there are more: deterministic)."""
    configs = sorted(
        (
            k.config()
            for k in Space(arch, variant=variant.value, dtype=dtype.value, ndim=2, rule_set="full").kernels()
            if not k.depthwise
        ),
        key=lambda c: c.name,
    )
    step = max(1, math.ceil(len(configs) / MOST_KERNELS))
    return tuple(configs[::step])


@cache
def selector(arch: str, variant: Variant, dtype: Dtype) -> Selector:
    return Selector.load(arch, variant, dtype)


@cache
def prepared(arch: str, variant: Variant, dtype: Dtype) -> CandidateSet:
    return selector(arch, variant, dtype).prepare(target_kernels(arch, variant, dtype))


@cache
def families(arch: str, variant: Variant, dtype: Dtype) -> tuple[CandidateSet, np.ndarray] | None:
    """Every narrower-vector variant of the cell's kernels the validity rules allow (the target's or
    not: the model must order any of them), and the kernel each one narrows."""
    configs = target_kernels(arch, variant, dtype)
    per_kernel = vector_variants(configs)
    flat = [v for family in per_kernel for v in family]
    if not flat:
        return None
    owner = np.repeat(np.arange(len(configs)), [len(f) for f in per_kernel])
    return selector(arch, variant, dtype).prepare(flat), owner


NONEMPTY = tuple(cell for cell in CELLS if target_kernels(*cell))
"""The cells the target has kernels in (today every bwd_data cell and every fp32 cell is empty: the
property tests cover them as soon as a target has kernels there)."""


def runnable(cell: tuple, problem: ConvProblem) -> tuple[tuple[GemmConfig, ...], np.ndarray]:
    """The cell's kernels and the mask of those that run ``problem`` (every problem rule holds)."""
    return target_kernels(*cell), selector(*cell).feasible(problem, prepared(*cell))


def analytical(cell: tuple, problem: ConvProblem, table: ConfigTable) -> np.ndarray:
    arch, variant, dtype = cell
    return feature_matrix(problem, variant, dtype, table, hardware_facts(arch))[:, ANALYTICAL]


def differing(a: GemmConfig, b: GemmConfig) -> dict[str, tuple]:
    return {f: (getattr(a, f), getattr(b, f)) for f in GEMM_FIELD_NAMES if getattr(a, f) != getattr(b, f)}


def wider(a: GemmConfig, b: GemmConfig) -> bool:
    """``a`` is ``b``'s family with vectors at least as wide in every field, and not ``b``."""
    same = {f: v for f, v in zip(GEMM_FIELD_NAMES, a.row(), strict=True) if f not in VECTOR_FIELDS} == {
        f: v for f, v in zip(GEMM_FIELD_NAMES, b.row(), strict=True) if f not in VECTOR_FIELDS
    }
    return (
        same
        and (a.arch, a.variant, a.ndim, a.dtype) == (b.arch, b.variant, b.ndim, b.dtype)
        and all(getattr(a, f) >= getattr(b, f) for f in VECTOR_FIELDS)
        and a.kernel_key() != b.kernel_key()
    )


# -- problems --------------------------------------------------------------------------------------


@st.composite
def layer_problems(draw, ndim: int = 2, split: bool = True) -> ConvProblem:
    """Problems the size of real layers: channels 3 to 2048 (per group, around powers of two),
    7 to 112 pixels, 1x1/3x3/5x5 filters, strides 1 and 2, a few groups, split-K."""
    g = draw(st.sampled_from([1, 1, 1, 2, 4, 32]))
    size = draw(st.sampled_from([7, 14, 28, 56, 112]))
    filt = draw(st.sampled_from([1, 1, 3, 3, 5]))
    stride = draw(st.sampled_from([1, 1, 2]))
    channels = st.sampled_from([3, 16, 24, 32, 64, 96, 128, 192, 256, 512, 1024, 2048])
    values = {
        "ndim": ndim,
        "N": draw(st.sampled_from([1, 2, 8, 32, 128])),
        "G": g,
        "C": g * draw(channels),
        "K": g * draw(channels),
        "k_batch": draw(st.sampled_from([1, 1, 1, 2, 4])) if split else 1,
    }
    for dim, (image, kernel) in zip(
        "dhw"[3 - ndim :], [("Di", "Z"), ("Hi", "Y"), ("Wi", "X")][3 - ndim :], strict=True
    ):
        values.update({image: size, kernel: filt, f"stride_{dim}": stride, f"pad_{dim}": filt // 2})
    return ConvProblem.from_values(values)


# -- (a) the model against its plain-Python statement -----------------------------------------------


def assert_matches(
    problem: ConvProblem, configs: list[GemmConfig], variant: Variant, dtype: Dtype, arch: str, measured=None
) -> None:
    """The model's column against the statement, with the arch's facts (carrying the constants
    ``measured`` on its GPU, if any)."""
    hw = hardware_facts(arch) if measured is None else calibrated_facts(hardware_facts(arch), measured)
    column = feature_matrix(problem, variant, dtype, ConfigTable.build(configs, hw), hw)[:, ANALYTICAL]
    for config, value in zip(configs, column, strict=True):
        expected = reference_log2_tflops(problem, config, variant, dtype, hw)
        # the TFLOPS to 1e-12 (log2 would hide a relative error below 1e-12 / ln 2 in the time)
        assert 2**value == pytest.approx(2**expected, rel=1e-12), (problem.text(), config)
        assert value == pytest.approx(expected, rel=1e-12, abs=1e-12), (problem.text(), config)


MEASURED = st.one_of(
    st.none(),
    st.dictionaries(st.sampled_from(sorted(CONSTANTS)), st.sampled_from([0.25, 0.55, 1.8, 4.0]), min_size=1).map(
        lambda factors: {name: CONSTANTS[name].value * f for name, f in factors.items()}
    ),
)
"""Constants measured on a GPU: none (the shipped ones), or some of them off by a factor."""


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(boundary_problems(), layer_problems(ndim=2), layer_problems(ndim=3)),
    st.lists(gemm_configs(consistent=True), min_size=1, max_size=4),
    st.sampled_from(CELLS),
    MEASURED,
)
@pytest.mark.slow
def test_model_matches_the_plain_python_statement(problem, configs, cell, measured) -> None:
    """Drawn problems (split-K among them) and configs with every field drawn from its raw domain --
    every pipeline, scheduler, epilogue, specialisation, vector width, groups-to-merge, two-stage,
    stream-K, tiles far beyond what LDS or the registers hold -- in every cell of both archs, with
    the shipped constants or some measured on the GPU."""
    arch, variant, dtype = cell
    configs = [c.model_copy(update={"arch": arch, "variant": variant, "dtype": dtype}) for c in configs]
    assert_matches(problem, configs, variant, dtype, arch, measured)


def test_constants_measured_on_a_gpu_price_with_its_facts_only() -> None:
    """calibrated_facts: the measured constants replace the shipped ones where the model prices with
    those facts (config columns and formulas alike, against the statement), on top of any the facts
    carry; the spec sheet's facts price as before, after as before (compiled programs are kept per
    facts); a name the model has not, a value not positive and finite, and configs of another arch
    are refused."""
    problem = ConvProblem.parse("N=4,C=256,K=256,Hi=28,Wi=28,Y=3,X=3,pad_h=1,pad_w=1")
    configs = list(target_kernels("gfx950", Variant.FORWARD, Dtype.BF16)[:12])
    sheet = hardware_facts("gfx950")
    before = feature_matrix(problem, Variant.FORWARD, Dtype.BF16, ConfigTable.build(configs), sheet)[:, ANALYTICAL]
    slower = {"memory_latency_cycles": 2000.0, "l2_reuse": 2.0}
    hw = calibrated_facts(calibrated_facts(sheet, {"memory_latency_cycles": 1.0}), slower)
    assert hw.calibrated == slower and sheet.calibrated == {}
    assert constant("l2_reuse", hw) == 2.0 and constant("l2_reuse", sheet) == constant("l2_reuse") == 5.2
    assert constant("epilogue_cycles_per_byte", hw) == CONSTANTS["epilogue_cycles_per_byte"].value
    calibrated = feature_matrix(problem, Variant.FORWARD, Dtype.BF16, ConfigTable.build(configs, hw), hw)
    assert np.all(calibrated[:, ANALYTICAL] < before)  # more latency, less reuse: every kernel slower
    assert_matches(problem, configs, Variant.FORWARD, Dtype.BF16, "gfx950", slower)
    after = feature_matrix(problem, Variant.FORWARD, Dtype.BF16, ConfigTable.build(configs), sheet)[:, ANALYTICAL]
    assert after.tolist() == before.tolist()
    with pytest.raises(InvalidChoiceError, match="unknown analytical model constant 'l2_reus'; valid: "):
        calibrated_facts(sheet, {"l2_reus": 2.0})
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="constant l2_reuse must be positive and finite"):
            calibrated_facts(sheet, {"l2_reuse": bad})
    with pytest.raises(ValueError, match="configs of another arch than the facts' gfx942"):
        ConfigTable.build(configs, hardware_facts("gfx942"))


EVERY_CHOICE = tuple(product(Pipeline, Scheduler, Epilogue, Specialization))
"""Every pipeline x scheduler x epilogue x specialisation."""
FLAGS = (
    {},
    {"two_stage": True, "num_groups_to_merge": 8},
    {"streamk_enabled": True, "streamk_strategy": StreamKStrategy.TREE, "streamk_persistent": True},
    {"explicit_gemm": True, "double_smem_buffer": True, "vec_a": 1, "vec_b": 2, "vec_c": 4},
)
"""The choices that change how a launch is charged besides the ones above: two-stage split-K,
merged groups, stream-K, explicit GEMM, double LDS buffer, narrow vectors."""
SHAPES = (
    {
        "tile_m": 128,
        "tile_n": 128,
        "tile_k": 64,
        "wave_m": 2,
        "wave_n": 2,
        "wave_k": 1,
        "warp_tile_m": 32,
        "warp_tile_n": 32,
        "warp_tile_k": 16,
        "vec_a": 8,
        "vec_b": 8,
        "vec_c": 8,
    },
    {
        "tile_m": 16,
        "tile_n": 64,
        "tile_k": 256,
        "wave_m": 1,
        "wave_n": 4,
        "wave_k": 1,
        "warp_tile_m": 16,
        "warp_tile_n": 16,
        "warp_tile_k": 16,
        "vec_a": 8,
        "vec_b": 8,
        "vec_c": 4,
    },
    {
        "tile_m": 256,
        "tile_n": 224,
        "tile_k": 64,
        "wave_m": 4,
        "wave_n": 1,
        "wave_k": 1,
        "warp_tile_m": 32,
        "warp_tile_n": 32,
        "warp_tile_k": 8,
        "vec_a": 4,
        "vec_b": 4,
        "vec_c": 2,
    },
)
"""A balanced tile, a skinny deep one (a 16-wide MFMA below full-rate K on gfx950), one whose
accumulators leave room for one wave per SIMD."""
SPLIT_K_PROBLEMS = (
    "N=2,G=4,C=256,K=128,Hi=28,Wi=28,Y=3,X=3,pad=1,k_batch=4",
    "N=128,C=64,K=64,Hi=7,Wi=7,Y=1,X=1,k_batch=1",
    "N=1,G=32,C=32,K=64,Hi=112,Wi=112,Y=3,X=3,stride=2,pad=1,k_batch=3",
)


@pytest.mark.parametrize("cell", CELLS, ids=cell_id)
@pytest.mark.slow
def test_every_choice_matches_the_plain_python_statement(cell) -> None:
    """Deterministically, each combination of pipeline, scheduler, epilogue and specialisation
    with each of the other charged choices, on three tile shapes and split-K problems."""
    arch, variant, dtype = cell
    base = GemmConfig(arch=arch, variant=variant, ndim=2, dtype=dtype, pipeline=Pipeline.COMPV3, **SHAPES[0])
    configs = [
        base.model_copy(update={"pipeline": p, "scheduler": s, "epilogue": e, "specialization": sp, **shape, **flags})
        for (p, s, e, sp), flags, shape in product(EVERY_CHOICE, FLAGS, SHAPES)
    ]
    for text in SPLIT_K_PROBLEMS:
        assert_matches(ConvProblem.parse(text), configs, variant, dtype, arch)


def test_a_hand_computed_launch() -> None:
    """One launch worked by hand on gfx950, so the reference itself is pinned to numbers (the fitted
    constants read from the table): a 128x128x64 compv3 bf16 kernel, 2x2 waves of 64 lanes, on
    M = 32*28*28, N = 128, K = 128*9."""
    hw = hardware_facts("gfx950")
    config = GemmConfig(
        arch="gfx950", variant=Variant.FORWARD, ndim=2, dtype=Dtype.BF16, **SHAPES[0], pipeline=Pipeline.COMPV3
    )
    problem = ConvProblem.parse("N=32,C=128,K=128,Hi=28,Wi=28,Y=3,X=3,pad=1")
    latency, l2, per_byte, loss = (
        CONSTANTS[name].value
        for name in ("memory_latency_cycles", "l2_reuse", "epilogue_cycles_per_byte", "overlap_loss")
    )
    vmem, valu = CONSTANTS["vmem_issue_cycles"].value, CONSTANTS["valu_cycles"].value
    # occupancy: LDS 160 KiB / 32 KiB = 5 blocks; 32 wave slots / 4 waves = 8; registers 64 accumulators
    # + (64+64)*64*2/256 = 64 fragments + 256*64*2/1024 = 32 staged + 32 = 192 -> 2 waves per SIMD -> 2
    assert CONSTANTS["registers_base"].value == 32
    mfma = 2 * 128 * 128 * 64 / (2516.6e12 / (256 * 2.4e9))  # 32x32x16 runs at the full rate
    lds = ((2 * 128 + 2 * 128) * 64 * 2 + 256 * 64 * 2) / 256  # each wave reads its A and B rows, waves write
    mfma_issue = 128 * 128 * 64 / (32 * 32 * 16) / 4 * valu  # 64 MFMAs over 4 SIMDs
    barrier = CONSTANTS["barrier_cycles"].value
    compute = max(mfma, lds) + loss * (min(mfma, lds) + mfma_issue) + 2 * barrier  # one LDS buffer: 2 barriers
    # 8 loads per wave, the 4 of A (the input, read through im2col) with the default index math
    issue = (128 * 64 / 8 + 128 * 64 / 8) / 256 * vmem + 128 * 64 / 8 / 256 * 6 * valu
    blocks = math.ceil(25088 / 128)  # 196 blocks: fewer than the 256 CUs, so one round, one block per CU
    parts = [compute, 256 * 64 * 2 * blocks / (8000e9 / 2.4e9 * l2), latency / 1, issue]
    iteration = max(parts) + loss * (sum(parts) - max(parts))
    epilogue = latency + per_byte * 128 * 128 * 2 / 256 + 128 * 128 / 8 / 256 * vmem
    cycles = math.ceil(1152 / 64) * iteration + latency + (2 - 1) * iteration + epilogue
    assert blocks == 196 and occupancy_of(config, hw) == 2
    assert reference_cycles(problem, config, Variant.FORWARD, Dtype.BF16, hw) == pytest.approx(cycles, rel=1e-12)
    model = feature_matrix(problem, Variant.FORWARD, Dtype.BF16, ConfigTable.build([config]), hw)[0, ANALYTICAL]
    assert 2**model == pytest.approx(problem.flops / (cycles / 2.4e9) / 1e12, rel=1e-12)


def occupancy_of(config: GemmConfig, hw) -> int:
    return block_costs(config, config.dtype, hw).occupancy


# -- (b) no ties at the top --------------------------------------------------------------------------

_PLAIN = (Specialization.FILTER1X1_STRIDE1_PAD0,)


def mirror_images(a: GemmConfig, b: GemmConfig) -> bool:
    """Whether ``a`` and ``b`` are a block tile and its transpose (tiles, waves and warp tiles
    swapped along M and N) of a plain GEMM -- both operands read without index arithmetic, equal
    vector widths: the one pair whose every cost is symmetric in M and N, so the physics the model
    states (and CK's loads, LDS traffic, MFMAs and stores) cannot tell them apart."""
    swapped = a.model_copy(
        update={
            "tile_m": a.tile_n,
            "tile_n": a.tile_m,
            "wave_m": a.wave_n,
            "wave_n": a.wave_m,
            "warp_tile_m": a.warp_tile_n,
            "warp_tile_n": a.warp_tile_m,
        }
    )
    plain = (a.explicit_gemm or a.specialization in _PLAIN) and a.vec_a == a.vec_b
    return plain and swapped.row() == b.row()


def top_ties(cell: tuple, problem: ConvProblem) -> list[str]:
    """The kernels sharing the best analytical score for ``problem``, with the fields they differ in."""
    configs, mask = runnable(cell, problem)
    index = np.flatnonzero(mask)
    if index.size < 2:
        return []
    scores = analytical(cell, problem, prepared(*cell).table.take(index))
    best = np.flatnonzero(scores == scores.max())
    if best.size == 1:
        return []
    first = configs[index[best[0]]]
    return [
        f"{problem.text()}: {first.name} ties {configs[index[j]].name} (differ in "
        f"{differing(first, configs[index[j]])})"
        for j in best[1:]
        if not mirror_images(first, configs[index[j]])
    ]


@pytest.mark.parametrize("cell", NONEMPTY, ids=cell_id)
def test_no_two_kernels_tie_at_the_top_on_resnet50(cell) -> None:
    """On every ResNet-50 layer, the analytical model's best kernel among the target's kernels that
    run it is one kernel: two distinct kernels with the same time mean the model lacks the physics
    that tells them apart, and the pick would be decided by list order. The one exception is a pair
    the physics itself cannot separate (:func:`mirror_images`)."""
    ties = [line for problem in LAYERS for line in top_ties(cell, problem)]
    assert not ties, f"{len(ties)} ties at the top:\n" + "\n".join(ties)


# -- (c) a narrower vector is slower ---------------------------------------------------------------


def vector_inversions(cell: tuple, problem: ConvProblem) -> tuple[list[str], int]:
    """Narrower-vector variants that run ``problem`` and are not strictly slower than their kernel
    (which runs it too), and how many pairs were compared."""
    family = families(*cell)
    if family is None:
        return [], 0
    variants, owner = family
    configs, mask = runnable(cell, problem)
    ok = selector(*cell).feasible(problem, variants) & mask[owner]
    if not ok.any():
        return [], 0
    narrow = analytical(cell, problem, variants.table.take(np.flatnonzero(ok)))
    kernels = owner[ok]
    own = analytical(cell, problem, prepared(*cell).table.take(kernels))
    return [
        f"{problem.text()}: {variants.names[j]} {n!r} >= {configs[i].name} {o!r}"
        for j, i, n, o in zip(np.flatnonzero(ok), kernels, narrow, own, strict=True)
        if not n < o
    ], int(ok.sum())


@pytest.mark.parametrize("cell", NONEMPTY, ids=cell_id)
@pytest.mark.slow
def test_a_narrower_vector_is_slower_on_resnet50(cell) -> None:
    """Every narrower-vector variant the validity rules allow (a fallback of the target or not) of
    every kernel: narrower loads take more issue slots, narrower stores a longer epilogue."""
    results = [vector_inversions(cell, problem) for problem in LAYERS]
    bad = [line for lines, _ in results for line in lines]
    assert sum(n for _, n in results) > 0, "no kernel of the cell has a narrower variant that runs a layer"
    assert not bad, f"{len(bad)} narrower variants not slower:\n" + "\n".join(bad[:20])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(layer_problems(), boundary_problems(ndim=2)), st.sampled_from(NONEMPTY))
@pytest.mark.slow
def test_a_narrower_vector_is_slower_on_drawn_problems(problem, cell) -> None:
    bad, _ = vector_inversions(cell, problem)
    assert not bad, f"{len(bad)} narrower variants not slower:\n" + "\n".join(bad[:20])


# -- (d) the selector's pick ------------------------------------------------------------------------


def selection(cell: tuple, problem: ConvProblem) -> tuple[list[GemmConfig], object | None]:
    """The cell's kernels that run ``problem`` and the selector's answer among them (None: none runs it)."""
    configs, mask = runnable(cell, problem)
    candidates = [configs[i] for i in np.flatnonzero(mask)]
    return candidates, selector(*cell).select(problem, candidates, k=2) if candidates else None


def top_tie(cell: tuple, problem: ConvProblem) -> list[str]:
    """The pick and the runner-up when their scores tie."""
    _, sel = selection(cell, problem)
    if sel is None or len(sel.top) < 2 or sel.top[0].score != sel.top[1].score:
        return []
    first, second = sel.top[0], sel.top[1]
    if mirror_images(first.config, second.config):
        return []
    return [
        (
            f"{problem.text()}: {first.name} [{first.source}] ties {second.name} [{second.source}] at "
            f"{first.score!r} (differ in {differing(first.config, second.config)})"
        )
    ]


def narrower_pick(cell: tuple, problem: ConvProblem) -> list[str]:
    """The pick when a wider-vector kernel of its family is among the candidates."""
    candidates, sel = selection(cell, problem)
    if sel is None:
        return []
    wide = [c.name for c in candidates if wider(c, sel.top[0].config)]
    return [f"{problem.text()}: picked {sel.pick} [{sel.pick_source}] over its wider {wide}"] if wide else []


@pytest.mark.parametrize("cell", NONEMPTY, ids=cell_id)
def test_the_selector_never_ties_at_the_top_on_resnet50(cell) -> None:
    """The selector's pick and runner-up never share a score. The shipped model's cell (gfx950
    forward bf16) ranks by the trained model, extrapolating through the analytical model outside its
    domain; every other cell by the analytical model."""
    ties = [line for problem in LAYERS for line in top_tie(cell, problem)]
    assert not ties, f"{len(ties)} ties:\n" + "\n".join(ties)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(layer_problems(), boundary_problems(ndim=2)), st.sampled_from(NONEMPTY))
def test_the_selector_never_ties_at_the_top_on_drawn_problems(problem, cell) -> None:
    """As on ResNet-50, on drawn problems in every cell, the trained model's among them."""
    ties = top_tie(cell, problem)
    assert not ties, "\n".join(ties)


@pytest.mark.parametrize("cell", NONEMPTY, ids=cell_id)
def test_the_selector_never_picks_a_narrower_vector_on_resnet50(cell) -> None:
    faults = [line for problem in LAYERS for line in narrower_pick(cell, problem)]
    assert not faults, f"{len(faults)} narrower picks:\n" + "\n".join(faults)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(layer_problems(), boundary_problems(ndim=2)), st.sampled_from(NONEMPTY))
def test_the_selector_never_picks_a_narrower_vector_on_drawn_problems(problem, cell) -> None:
    faults = narrower_pick(cell, problem)
    assert not faults, "\n".join(faults)


def test_the_model_cell_is_ranked_by_the_model() -> None:
    """gfx950 forward bf16 ships a trained model: its picks come from it (inside its domain or
    extrapolated), the other cells' from the analytical model."""
    cell = ("gfx950", Variant.FORWARD, Dtype.BF16)
    configs, mask = runnable(cell, LAYERS[10])
    sel = selector(*cell).select(LAYERS[10], [configs[i] for i in np.flatnonzero(mask)], k=3)
    assert sel.source == "model" and all(
        r.source == "model" or r.source.startswith("model, extrapolated: ") for r in sel.top
    )
    other = ("gfx942", Variant.FORWARD, Dtype.BF16)
    configs, mask = runnable(other, LAYERS[10])
    sel = selector(*other).select(LAYERS[10], [configs[i] for i in np.flatnonzero(mask)], k=3)
    assert sel.source == "analytical" and {r.source for r in sel.top} == {"analytical"}


# -- the tables, against their sources -----------------------------------------------------------

_PIPELINE_HEADERS = {
    Pipeline.COMPV3: "gemm_pipeline_ag_bg_cr_comp_v3.hpp",
    Pipeline.COMPV4: "gemm_pipeline_ag_bg_cr_comp_v4.hpp",
    Pipeline.COMPV5: "gemm_pipeline_ag_bg_cr_comp_v5.hpp",
    Pipeline.COMPV6: "gemm_pipeline_ag_bg_cr_comp_v6.hpp",
    Pipeline.COMP_ASYNC: "gemm_pipeline_ag_bg_cr_comp_async.hpp",
    Pipeline.WAVELET: "wp_pipeline_agmem_bgmem_creg_v2.hpp",
}


def test_the_pipeline_facts_are_ck_tiles() -> None:
    """Prefetch stages and global buffers of every pipeline whose CK Tile header states them, read
    from the CK headers ckspace finds (the amd-aiter wheel of the test extras); the pipelines CK
    states otherwise are pinned by what their headers do: agmem_bgmem_creg_v1 loads, stores to LDS
    and computes in turn (no overlap, one stage), v2 prefetches one tile ahead, the async ones load
    into LDS directly, and mem sizes its stages from the tile (:func:`mem_stages`). The facts are
    :mod:`ckspace.core.ck`'s, the one statement the emitter and the model both read."""
    import re

    from ckspace.environment.ck_locate import locate_ck

    try:
        include = locate_ck(None)
    except Exception as exc:
        pytest.fail(f"no CK headers to read the pipeline facts from: {exc}")
    folder = Path(include) / "ck_tile" / "ops" / "gemm" / "pipeline"
    for pipeline, header in _PIPELINE_HEADERS.items():
        text = (folder / header).read_text()
        stages = int(re.search(r"PrefetchStages\s*=\s*(\d+)\s*;", text).group(1))
        buffers = int(re.search(r"GlobalBufferNum\s*=\s*(\d+)\s*;", text).group(1))
        facts = PIPELINES[pipeline]
        assert (facts.stages, facts.buffers) == (stages, buffers), pipeline
        # the class the emitter instantiates is the one whose header states those numbers
        assert facts.class_name is None or re.search(rf"\bstruct {facts.class_name}\b", text), pipeline
        assert facts.overlaps
    assert "FullMemBandPrefetchStages" in (folder / "gemm_pipeline_ag_bg_cr_mem.hpp").read_text()

    def movement(pipeline: Pipeline) -> tuple[int, int, bool, bool]:
        facts = PIPELINES[pipeline]
        return facts.stages, facts.buffers, facts.overlaps, facts.asynchronous

    for pipeline in (Pipeline.COMPV1, Pipeline.BASIC_V1):
        assert movement(pipeline) == (1, 1, False, False)
    for pipeline in (Pipeline.COMPV2, Pipeline.BASIC_V2):
        assert movement(pipeline) == (2, 1, True, False)
    assert movement(Pipeline.BASIC_ASYNC_V1) == (1, 1, True, True)
    assert PIPELINES[Pipeline.COMP_ASYNC].asynchronous and not PIPELINES[Pipeline.COMPV3].asynchronous
    assert set(PIPELINES) == set(Pipeline)


@pytest.mark.parametrize(
    ("tile", "elem", "threads", "stages"),
    [
        ((16, 16, 64), 2, 64, 2),  # 4 blocks per CU: 8192 B each over 4096 B a stage = 2
        ((16, 64, 64), 2, 256, 4),  # 1 block per CU: 32768 / 10240 = 3.2 -> 4
        ((128, 128, 64), 2, 256, 2),  # one stage holds 32 KiB: at least 2
        ((16, 16, 32), 2, 256, 8),  # 32768 / 2048 = 16 wanted: at most 8
        ((16, 32, 64), 4, 128, 2),  # 2 blocks per CU: 16384 / 12288 -> 2
    ],
)
def test_mem_stages_follow_ck_tiles_formula(tile, elem, threads, stages) -> None:
    """CK Tile's mem pipeline keeps 32 KiB in flight per CU: ceil((32768 / blocks per CU) / bytes of
    one stage), blocks per CU = 4 * 64 lanes / threads (at least 1), clamped to 2..8; worked here."""
    tm, tn, tk = tile
    per_cu = max(1, 256 // threads)
    assert min(8, max(2, -(-(32768 // per_cu) // ((tm + tn) * elem * tk)))) == stages  # the worked rule
    assert mem_stages(tm, tn, tk, elem, threads, 64) == stages
    assert MEM_IN_FLIGHT_BYTES == 32768


def test_the_model_ranks_the_measured_kernels_as_documented() -> None:
    """The figures the module states for its constants, on the MI355X measurements (231 problems x
    30 kernels): mean 97.6 %, P10 92.1 % of the best measured kernel, no ties. A changed constant or
    term moves them; a deliberate change updates the docstring, docs/selection.md and this test."""
    from ckspace.training.dataset import load_measurements
    from ckspace.training.metrics import summarize

    data = load_measurements([DATASETS["mi355x-forward-bf16"].path], "gfx950", "forward", "bf16")
    table, hw = ConfigTable.build(data.configs), hardware_facts("gfx950")
    scores = np.vstack([feature_matrix(p, data.variant, data.dtype, table, hw)[:, ANALYTICAL] for p in data.problems])
    s = summarize(scores, data.tflops)
    assert (round(s.mean, 2), round(s.p10, 2), s.ties) == (97.59, 92.1, 0.0)


def test_index_arithmetic_shrinks_with_the_specialisation() -> None:
    """A plain GEMM (1x1, stride 1, no pads) computes no im2col index; each specialisation does no
    more index arithmetic per load than the more general kernel it narrows."""
    from ckspace.features.performance import INDEX_INSTRUCTIONS

    order = (
        Specialization.DEFAULT,
        Specialization.FILTER3X3,
        Specialization.FILTER1X1_PAD0,
        Specialization.FILTER1X1_STRIDE1_PAD0,
    )
    counts = [INDEX_INSTRUCTIONS[s] for s in order]
    assert counts == sorted(counts, reverse=True) and counts[-1] == 0.0 and counts[0] > counts[1] > counts[2] > 0
    assert set(INDEX_INSTRUCTIONS) == set(Specialization)


SHIPPED = {
    "memory_latency_cycles": 678.0,
    "l2_reuse": 5.2,
    "epilogue_cycles_per_byte": 9.5,
    "vmem_issue_cycles": 16.0,
    "valu_cycles": 4.0,
    "overlap_loss": 0.01,
    "barrier_cycles": 4.0,
    "analytical_level": 0.205,
    "registers_base": 32.0,
}
"""The shipped constants. Each is a deliberate change: the shipped model was trained on the features
they shape (retrain it after one), the golden dispatcher bakes them into its C, and docs/results.md
quotes the fits; the reference statement reads the same table, so only this pins them."""


def test_the_shipped_constants_are_the_stated_ones() -> None:
    import dataclasses

    from ckspace.features.performance import INDEX_INSTRUCTIONS, Constant

    assert {name: c.value for name, c in CONSTANTS.items()} == SHIPPED
    assert all(c.source for c in CONSTANTS.values())
    assert {s.name: v for s, v in INDEX_INSTRUCTIONS.items()} == {
        "DEFAULT": 6.0,
        "FILTER3X3": 4.0,
        "FILTER1X1_PAD0": 2.0,
        "FILTER1X1_STRIDE1_PAD0": 0.0,
    }
    with pytest.raises(dataclasses.FrozenInstanceError):
        CONSTANTS["l2_reuse"].value = 1.0  # a constant changes by a new table entry, never in place
    assert isinstance(CONSTANTS["l2_reuse"], Constant)


def test_the_shown_tflops_are_the_score_at_the_calibrated_level() -> None:
    from ckspace.features.performance import calibrated_tflops

    scores = np.array([0.0, 3.0, -1.5])
    assert calibrated_tflops(scores) == pytest.approx([0.205, 8 * 0.205, 0.205 / 2**1.5])
    assert calibrated_tflops(2.0) == pytest.approx(0.82)
