"""``ckspace_strided_run``: the C API on tensors as frameworks lay them out, with an epilogue.

A C or C++ caller without hipDNN gets what the plugin gets: any strides >= 0 for the tensors read,
any non-overlapping strides for the tensor written, a per-channel bias and an activation. The
library is a real emitted tree's host dispatcher linked with the stand-in ``ckspace_run`` and
conversion launcher of ``tests/standin/standin_run.c``, whose conversions run the generated
``ckspace_layout.h`` element function, the one the GPU's conversion kernel runs. Drawn problems and
layouts are checked against the naive convolution, the workspace against an independent statement
of what is staged, and the library against allocating anything.
"""

from __future__ import annotations

import ctypes
import subprocess
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from naive_conv import NAIVE
from standin_library import STANDIN
from strided_tensors import (
    ACTIVATIONS,
    channels_last,
    from_naive,
    gathered,
    padded,
    placed,
    row_major,
    span,
    to_naive,
    width_outermost,
)

from ckspace.cli import main
from ckspace.core.vocab import Dtype, Variant
from ckspace.emit.dispatcher import ACTIVATIONS as C_ACTIVATIONS
from ckspace.emit.dispatcher import STATUSES, STRUCT_FIELDS
from ckspace.emit.manifest import Manifest
from ckspace.select.compiled import FLAGS, host_c_compiler

NUMPY = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "fp32": np.float32}
DTYPE_CODE = {d.value: d.code for d in Dtype}
VARIANT_CODE = {v.value: v.code for v in Variant}
WRITTEN = {"forward": "output", "bwd_data": "input", "bwd_weight": "weight"}
READS = {"forward": ("input", "weight"), "bwd_data": ("output", "weight"), "bwd_weight": ("output", "input")}
STATUS = {s.name: s.code for s in STATUSES}
ALIGNMENT = 256
IMAGE, FILTER, DIMS = ("Di", "Hi", "Wi"), ("Z", "Y", "X"), ("d", "h", "w")
ACTIVATION_MODE = {"RELU": "RELU_FWD", "SIGMOID": "SIGMOID_FWD", "TANH": "TANH_FWD", "ELU": "ELU_FWD"}


class Problem(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int64) for name in STRUCT_FIELDS]


class Strides(ctypes.Structure):
    _fields_ = [(role, ctypes.c_int64 * 5) for role in ("input", "weight", "output")]


class Epilogue(ctypes.Structure):
    _fields_ = [
        ("bias", ctypes.c_void_p),
        ("bias_stride", ctypes.c_int64),
        ("activation", ctypes.c_int64),
        ("upper", ctypes.c_float),
        ("slope", ctypes.c_float),
        ("alpha", ctypes.c_float),
    ]


@dataclass(frozen=True)
class Library:
    lib: ctypes.CDLL

    def allocations(self) -> int:
        return self.lib.standin_allocations()


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    """Every direction, dtype and 1-3D of gfx950's default rule set, the host dispatcher linked over
    the stand-in."""
    base = tmp_path_factory.mktemp("strided")
    tree = base / "tree"
    argv = ["emit", "--arch", "gfx950", "--rule-set", "default", "--variant", "forward", "bwd_data", "bwd_weight"]
    assert (
        main([*argv, "--ndim", "1", "2", "3", "--dtype", "fp16", "bf16", "fp32", "--with-selector", "--out", str(tree)])
        == 0
    )
    manifest = Manifest.model_validate_json((tree / "manifest.json").read_bytes())
    assert manifest.dispatcher is not None
    compiler = host_c_compiler()
    assert compiler is not None
    output = base / "libstrided.so"
    sources = [*(str(tree / u) for u in manifest.dispatcher.host_units), str(STANDIN)]
    command = [compiler, *FLAGS, "-shared", f"-I{tree}", *sources, "-o", str(output), "-lm"]
    subprocess.run([*command, "-Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc"], check=True)
    lib = ctypes.CDLL(str(output))
    pointer, problem, strides, epilogue = (
        ctypes.c_void_p,
        ctypes.POINTER(Problem),
        ctypes.POINTER(Strides),
        ctypes.c_void_p,
    )
    lib.ckspace_strided_run.argtypes = [
        ctypes.c_int,
        problem,
        strides,
        epilogue,
        *[pointer] * 4,
        ctypes.c_size_t,
        pointer,
    ]
    lib.ckspace_strided_workspace_size.argtypes = [ctypes.c_int, problem, strides, epilogue]
    lib.ckspace_check_layout.argtypes = [problem, strides, epilogue, ctypes.POINTER(ctypes.c_int)]
    lib.ckspace_strided_workspace_size.restype = ctypes.c_int64
    lib.ckspace_workspace_size.restype = ctypes.c_int64
    lib.standin_allocations.restype = ctypes.c_long
    return Library(lib)


def logical(p: dict) -> dict[str, list[int]]:
    ds = DIMS[3 - p["ndim"] :]
    out = []
    for d in ds:
        i = DIMS.index(d)
        span_ = p[IMAGE[i]] + 2 * p[f"pad_{d}"] - p[f"dil_{d}"] * (p[FILTER[i]] - 1) - 1
        out.append(span_ // p[f"stride_{d}"] + 1)
    return {
        "input": [p["N"], p["C"], *(p[IMAGE[DIMS.index(d)]] for d in ds)],
        "weight": [p["K"], p["C"] // p["G"], *(p[FILTER[DIMS.index(d)]] for d in ds)],
        "output": [p["N"], p["K"], *out],
    }


def c_problem(p: dict, variant: str, dtype: str) -> Problem:
    values = {"variant": VARIANT_CODE[variant], "dtype": DTYPE_CODE[dtype], "k_batch": 1}
    for name in STRUCT_FIELDS[2:]:
        if name not in values:
            values[name] = p.get(name, 0 if name.startswith("pad") else 1)
    return Problem(**values)


def broadcast_read(dims: list[int]) -> list[int]:
    """Row-major with the batch repeated (stride 0): a read tensor may repeat its elements."""
    return [0 if d == 0 else s for d, s in enumerate(row_major(dims))]


LAYOUTS = {
    "contiguous": row_major,
    "channels_last": channels_last,
    "padded": padded,
    "width_outermost": width_outermost,
    "broadcast": broadcast_read,
}


@st.composite
def cases(draw) -> tuple:
    ndim = draw(st.sampled_from([1, 2, 3]))
    g = draw(st.sampled_from([1, 2]))
    p = {"ndim": ndim, "N": draw(st.integers(1, 2)), "G": g}
    p["C"] = g * draw(st.sampled_from([8, 16, 3]))
    p["K"] = g * draw(st.sampled_from([8, 16, 5]))
    for d in DIMS[3 - ndim :]:
        i = DIMS.index(d)
        p[FILTER[i]] = draw(st.integers(1, 3))
        p[f"dil_{d}"] = draw(st.integers(1, 2))
        p[IMAGE[i]] = (p[FILTER[i]] - 1) * p[f"dil_{d}"] + 1 + draw(st.integers(0, 4))
        p[f"stride_{d}"] = draw(st.integers(1, 2))
        p[f"pad_{d}"] = draw(st.integers(0, 1))
    variant = draw(st.sampled_from(list(VARIANT_CODE)))
    dtype = draw(st.sampled_from(list(NUMPY)))
    layouts = {}
    for role in ("input", "weight", "output"):
        allowed = [name for name in LAYOUTS if name != "broadcast" or role != WRITTEN[variant]]
        layouts[role] = draw(st.sampled_from(allowed))
    epilogue = None
    if variant != "bwd_weight" and draw(st.booleans()):
        activation = draw(st.sampled_from([name for name, _ in C_ACTIVATIONS]))
        epilogue = {"bias": draw(st.booleans()), "activation": activation}
    return p, variant, dtype, layouts, epilogue


def staged_bytes(p: dict, variant: str, dtype: str, layouts: dict, kernel_bytes: int) -> int:
    """What the workspace must hold, stated apart from the C: the kernel's own bytes, then each
    tensor not packed channels-last, each part aligned."""
    dims = logical(p)
    itemsize = np.dtype(NUMPY[dtype]).itemsize
    staged = []
    for role in ("input", "weight", "output"):
        strides = LAYOUTS[layouts[role]](dims[role])
        packed = channels_last(dims[role])
        if any(d != 1 and s != q for d, s, q in zip(dims[role], strides, packed, strict=True)):
            staged.append(int(np.prod(dims[role])) * itemsize)
    if not staged:
        return kernel_bytes
    aligned = -(-kernel_bytes // ALIGNMENT) * ALIGNMENT
    return aligned + sum(-(-b // ALIGNMENT) * ALIGNMENT for b in staged)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases())
def test_a_strided_run_equals_the_naive_convolution_with_its_epilogue(library: Library, case: tuple) -> None:
    p, variant, dtype, layouts, epilogue_case = case
    lib = library.lib
    problem = c_problem(p, variant, dtype)
    kernel, tflops = ctypes.c_int(-1), ctypes.c_float(0)
    status = lib.ckspace_select(ctypes.byref(problem), ctypes.byref(kernel), ctypes.byref(tflops))
    assume(status == 0)
    dims = logical(p)
    rng = np.random.default_rng(11)
    arrays = {role: (rng.integers(-4, 5, size=dims[role]) / 4).astype(NUMPY[dtype]) for role in READS[variant]}
    strides = {role: LAYOUTS[layouts[role]](dims[role]) for role in ("input", "weight", "output")}
    c_strides = Strides(**{role: (ctypes.c_int64 * 5)(*strides[role]) for role in strides})
    buffers = {role: placed(arrays[role], strides[role]) for role in READS[variant]}
    arrays = {role: gathered(buffers[role], dims[role], strides[role]) for role in arrays}  # as repeated in memory
    written = WRITTEN[variant]
    buffers[written] = np.zeros(span(dims[written], strides[written]), dtype=NUMPY[dtype])
    epilogue = None
    bias = None
    if epilogue_case is not None:
        epilogue = Epilogue(activation=[n for n, _ in C_ACTIVATIONS].index(epilogue_case["activation"]))
        epilogue.upper, epilogue.slope, epilogue.alpha = 0.75, 0.125, 0.5
        if epilogue_case["bias"]:
            bias = (rng.integers(-4, 5, size=dims[written][1]) / 8).astype(NUMPY[dtype])
            spread = placed(bias, [3])  # every third element: a bias stride of 3
            buffers["bias"] = spread
            epilogue.bias, epilogue.bias_stride = spread.ctypes.data, 3
    e = ctypes.byref(epilogue) if epilogue is not None else None
    culprit = ctypes.c_int(9)
    assert lib.ckspace_check_layout(ctypes.byref(problem), ctypes.byref(c_strides), e, ctypes.byref(culprit)) == 0
    assert culprit.value == -1
    asked = lib.ckspace_strided_workspace_size(kernel, ctypes.byref(problem), ctypes.byref(c_strides), e)
    own = lib.ckspace_workspace_size(kernel, ctypes.byref(problem))
    assert asked == staged_bytes(p, variant, dtype, layouts, own)
    workspace = np.full(asked + ALIGNMENT, 0xA5, dtype=np.uint8)
    if asked:
        too_small = lib.ckspace_strided_run(
            kernel,
            ctypes.byref(problem),
            ctypes.byref(c_strides),
            e,
            *(buffers[r].ctypes.data for r in ("input", "weight", "output")),
            workspace.ctypes.data,
            ctypes.c_size_t(asked - 1),
            None,
        )
        assert too_small == STATUS["WORKSPACE_TOO_SMALL"]
    before = library.allocations()
    status = lib.ckspace_strided_run(
        kernel,
        ctypes.byref(problem),
        ctypes.byref(c_strides),
        e,
        *(buffers[r].ctypes.data for r in ("input", "weight", "output")),
        workspace.ctypes.data if asked else None,
        ctypes.c_size_t(asked),
        None,
    )
    assert status == 0
    assert library.allocations() == before, "ckspace_strided_run allocated"
    assert (workspace[asked:] == 0xA5).all(), "the run wrote past the workspace it asked for"
    got = gathered(buffers[written], dims[written], strides[written]).astype(np.float64)
    a, b = (to_naive(p, role, arrays[role]) for role in READS[variant])
    expected = from_naive(p, written, NAIVE[variant](p, a, b))
    if epilogue_case is not None:
        expected = expected.astype(NUMPY[dtype]).astype(np.float64)  # the kernel stores its result first
        if bias is not None:
            expected = expected + bias.astype(np.float64).reshape(1, -1, *[1] * p["ndim"])
        mode = ACTIVATION_MODE.get(epilogue_case["activation"])
        if mode is not None:
            options = {"relu_upper_clip": 0.75, "relu_lower_clip_slope": 0.125, "elu_alpha": 0.5}
            expected = ACTIVATIONS[mode](expected, options)
    tolerance = {"fp32": 1e-5, "fp16": 2e-3, "bf16": 1e-2}[dtype]
    np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance)
    event(f"{variant} staged" if asked > own else f"{variant} in place")


def test_strides_and_epilogues_the_library_does_not_serve_are_named(library: Library) -> None:
    """A negative stride, a written tensor that overlaps itself, an epilogue on a weight gradient,
    an unknown activation and a negative bias stride: CKSPACE_INVALID_LAYOUT with the culprit, from
    every entry point. The bias stride is a layout: checked without the bias pointer (a caller checks
    before its buffers exist, as the hipDNN plugin does), any with one channel."""
    lib = library.lib
    p = {"ndim": 2, "N": 2, "G": 1, "C": 8, "K": 8, "Hi": 4, "Wi": 4, "Y": 3, "X": 3, "pad_h": 1, "pad_w": 1}
    p |= {"stride_h": 1, "stride_w": 1, "dil_h": 1, "dil_w": 1}
    dims = logical(p)
    good = {role: row_major(dims[role]) for role in dims}

    def check(variant: str, strides: dict, epilogue: Epilogue | None, q: dict = p) -> tuple[int, int]:
        culprit = ctypes.c_int(9)
        c_strides = Strides(**{role: (ctypes.c_int64 * 5)(*strides[role]) for role in strides})
        problem = c_problem(q, variant, "bf16")
        e = ctypes.byref(epilogue) if epilogue is not None else None
        status = lib.ckspace_check_layout(ctypes.byref(problem), ctypes.byref(c_strides), e, ctypes.byref(culprit))
        asked = lib.ckspace_strided_workspace_size(0, ctypes.byref(problem), ctypes.byref(c_strides), e)
        if status == STATUS["INVALID_LAYOUT"]:
            assert asked == -STATUS["INVALID_LAYOUT"]
        return status, culprit.value

    assert check("forward", good, None) == (0, -1)
    assert check("forward", {**good, "weight": [*good["weight"][:-1], -1]}, None) == (STATUS["INVALID_LAYOUT"], 1)
    overlapping = [*good["output"][:-1], 0]
    assert check("forward", {**good, "output": overlapping}, None) == (STATUS["INVALID_LAYOUT"], 2)
    assert check("bwd_data", {**good, "output": overlapping}, None) == (0, -1)  # read: repeating is fine
    assert check("bwd_data", {**good, "input": [*good["input"][:-2], 1, 1]}, None) == (STATUS["INVALID_LAYOUT"], 0)
    assert check("bwd_weight", good, Epilogue(activation=1)) == (STATUS["INVALID_LAYOUT"], 3)
    assert check("forward", good, Epilogue(activation=len(C_ACTIVATIONS))) == (STATUS["INVALID_LAYOUT"], 3)
    assert check("forward", good, Epilogue(activation=0)) == (0, -1)
    bias = (ctypes.c_uint16 * 8)()
    for pointer in (None, ctypes.addressof(bias)):  # the bias stride checked with and without the data
        assert check("forward", good, Epilogue(bias=pointer, bias_stride=-1)) == (STATUS["INVALID_LAYOUT"], 4)
        assert check("bwd_data", good, Epilogue(bias=pointer, bias_stride=-2)) == (STATUS["INVALID_LAYOUT"], 4)
        assert check("forward", good, Epilogue(bias=pointer, bias_stride=0)) == (0, -1)  # one value repeated
    one = {**p, "K": 1}
    one_channel = {role: row_major(dims) for role, dims in logical(one).items()}
    assert check("forward", one_channel, Epilogue(bias=ctypes.addressof(bias), bias_stride=-1), one) == (0, -1)


def test_the_layout_element_is_one_source_for_the_gpu_and_the_stand_in() -> None:
    """The conversion kernel and the stand-in both run ckspace_layout.h's element function, which is
    compiled __host__ __device__ under HIP: neither restates the index arithmetic."""
    stand_in = Path(STANDIN).read_text()
    assert '#include "ckspace_layout.h"' in stand_in and "cks_copy_element(job, i)" in stand_in
    templates = Path(__file__).resolve().parents[1] / "ckspace" / "emit" / "templates"
    run = (templates / "ckspace_dispatch_run.cpp.j2").read_text()
    assert '#include "ckspace_layout.h"' in run and "cks_copy_element(&job, i)" in run
    layout = (templates / "ckspace_layout.h.j2").read_text()
    assert "#define CKS_HD __host__ __device__" in layout
