"""The caller's workspace: ``ckspace_workspace_size`` and ``ckspace_run``'s workspace argument, on the
stand-in library (tests/standin_library.py: the real generated host dispatcher and the checks
``ckspace_run`` makes before a launch, with a ``ckspace_run`` that computes on host memory) of the
full rule set's gfx950 bwd_weight bf16 2D kernels that the installed CK builds (23 of 99 two-stage).

A two-stage bwd_weight kernel accumulates in the caller's fp32 workspace and converts; split-K adds
each split's partial sums there; too small a workspace is a status; and nothing is allocated inside
a run (the stand-in is linked with ``--wrap`` around malloc, calloc and realloc and counts them)."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from standin_library import build_standin

from ckspace.run.library import KernelLibrary, RunError
from ckspace.verify import reference as ref
from ckspace.verify.comparison import tolerance, verify
from ckspace.workloads.problem import ConvProblem

WORKSPACE_TOO_SMALL = 6
PROBLEM = "N=2,G=2,C=16,K=32,Hi=9,Wi=7,Y=3,X=3,pad=1"


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> KernelLibrary:
    tree = build_standin(tmp_path_factory.mktemp("workspace"), rule_set="full", real_ck=True)
    return KernelLibrary(tree / "build" / "gfx950" / "libckspace_kernels_gfx950.so")


def allocations(library: KernelLibrary) -> int:
    counter = library._lib.standin_allocations
    counter.restype = ctypes.c_long
    return counter()


def kernel_of(library: KernelLibrary, problem: ConvProblem, two_stage: bool) -> int:
    """The first kernel that runs ``problem`` and is (or is not) two-stage, by its config."""
    for index, name in enumerate(library.names):
        if name.endswith("_2stage") == two_stage and library.is_supported(index, problem, "bwd_weight", "bf16"):
            return index
    raise AssertionError(f"no {'two' if two_stage else 'one'}-stage kernel of the stand-in runs {problem}")


def run(
    library: KernelLibrary, kernel: int, problem: ConvProblem, workspace: np.ndarray | None, size: int
) -> tuple[np.ndarray, np.ndarray]:
    """Run ``kernel`` on seeded operands; the output and the reference."""
    a, b = ref.random_operands(problem, "bwd_weight", "bf16", 7)
    c = np.full(ref.operand_shapes(problem, "bwd_weight").c, 3.0, dtype=ref.numpy_dtype("bf16"))
    pointer = workspace.ctypes.data if workspace is not None else None
    library.run(kernel, problem, "bwd_weight", "bf16", (a.ctypes.data, b.ctypes.data, c.ctypes.data), (pointer, size))
    return c, ref.reference(problem, "bwd_weight", a, b)


@pytest.mark.parametrize("k_batch", [1, 3])
def test_a_two_stage_kernel_runs_through_the_callers_workspace(library: KernelLibrary, k_batch: int) -> None:
    problem = ConvProblem.parse(f"{PROBLEM},k_batch={k_batch}")
    kernel = kernel_of(library, problem, two_stage=True)
    size = library.workspace_size(kernel, problem, "bwd_weight", "bf16")
    assert size == 4 * problem.G * (problem.K // problem.G) * (problem.C // problem.G) * 9  # fp32 weight gradient
    workspace = np.zeros(size // 4, dtype=np.float32)
    before = allocations(library)
    output, expected = run(library, kernel, problem, workspace, size)
    assert allocations(library) == before, "ckspace_run allocated"
    assert verify(output, expected, tolerance(problem, "bwd_weight", "bf16")).ok
    # the fp32 result went through the workspace: it holds the unrounded weight gradient
    np.testing.assert_allclose(workspace.reshape(expected.shape), expected, rtol=1e-5, atol=1e-4)


def test_split_k_on_a_one_stage_kernel_needs_no_workspace(library: KernelLibrary) -> None:
    problem = ConvProblem.parse(f"{PROBLEM},k_batch=3")
    kernel = kernel_of(library, problem, two_stage=False)
    assert library.workspace_size(kernel, problem, "bwd_weight", "bf16") == 0
    before = allocations(library)
    output, expected = run(library, kernel, problem, None, 0)
    assert allocations(library) == before, "ckspace_run allocated"
    assert verify(output, expected, tolerance(problem, "bwd_weight", "bf16")).ok


@pytest.mark.parametrize("shortfall", ["one byte", "no pointer"])
def test_too_small_a_workspace_is_a_status_and_nothing_is_written(library: KernelLibrary, shortfall: str) -> None:
    problem = ConvProblem.parse(PROBLEM)
    kernel = kernel_of(library, problem, two_stage=True)
    size = library.workspace_size(kernel, problem, "bwd_weight", "bf16")
    workspace = np.zeros(size // 4, dtype=np.float32)
    a, b = ref.random_operands(problem, "bwd_weight", "bf16", 7)
    c = np.full(ref.operand_shapes(problem, "bwd_weight").c, 3.0, dtype=ref.numpy_dtype("bf16"))
    given = (workspace.ctypes.data, size - 1) if shortfall == "one byte" else (None, size)
    with pytest.raises(RunError, match="smaller than ckspace_workspace_size") as error:
        library.run(kernel, problem, "bwd_weight", "bf16", (a.ctypes.data, b.ctypes.data, c.ctypes.data), given)
    assert error.value.status == WORKSPACE_TOO_SMALL
    assert (c == 3.0).all() and not workspace.any()


def test_the_allocation_counter_sees_allocations(library: KernelLibrary) -> None:
    """What makes 'nothing allocated' mean something: the dispatcher's own selection allocates one
    buffer per call, and the counter sees it."""
    before = allocations(library)
    library.select(ConvProblem.parse(PROBLEM), "bwd_weight", "bf16")
    assert allocations(library) == before + 1


def test_failures_leave_the_documented_outputs(library: KernelLibrary, tmp_path: Path) -> None:
    """``ckspace_select`` writes kernel -1 and 0 TFLOPS on every failure; ``ckspace_kernel_index``
    answers -1 for a name the library lacks; ``ckspace_workspace_size`` refuses a bad index."""
    from ckspace.run.library import ConvProblemC

    malformed = ConvProblemC.of(ConvProblem.parse(PROBLEM), "bwd_weight", "bf16")
    malformed.G = 3  # C and K are not multiples of G
    status, kernel, tflops = library.select_raw(malformed)
    assert (status, kernel, tflops) == (3, -1, 0.0)
    forward = ConvProblemC.of(ConvProblem.parse(PROBLEM), "forward", "bf16")  # a cell the library lacks
    assert library.select_raw(forward) == (1, -1, 0.0)
    assert library._lib.ckspace_kernel_index(b"no_such_kernel") == -1
    assert library._lib.ckspace_kernel_index(None) == -1
    assert [library.index(n) for n in library.names] == list(range(len(library.names)))
    assert library._lib.ckspace_workspace_size(len(library.names), ctypes.byref(malformed)) == -4
