"""The generated C dispatcher against the Python selector and the Python problem rules.

Two implementations of one fact (which kernel runs a convolution, and whether a kernel can): the C
is rendered from the same rule expressions, feature formulas and models, the Python evaluates them
with numpy and LightGBM. They must agree on real problems and on drawn ones, pick for pick, with
predicted TFLOPS equal to float precision.
"""

from __future__ import annotations

import csv
import ctypes
import json
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from conftest import c_compiler
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from ckspace.cli import main
from ckspace.constraints.evaluators.classify import columns
from ckspace.constraints.language.expr import evaluate
from ckspace.constraints.rulebook.problem_rules import gemm_problem_rules
from ckspace.core.config import GemmConfig
from ckspace.core.errors import CkspaceError, NoKernelError
from ckspace.core.fields import GEMM_FIELD_NAMES
from ckspace.core.vocab import Dtype, Variant
from ckspace.emit.dispatcher import Library, dispatcher_sources, host_units
from ckspace.emit.rendering import template_environment
from ckspace.run.library import Choice, ConvProblemC, KernelLibrary
from ckspace.select.compiled import compile_library
from ckspace.select.selector import Selector
from ckspace.select.store import shipped_model_dir
from ckspace.space.benchmark_names import config_from_any_name
from ckspace.space.space import Space
from ckspace.workloads.datasets import DATASETS
from ckspace.workloads.problem import ConvProblem

DATA = DATASETS["mi355x-forward-bf16"].path
KEYS = ("N", "C", "K", "G", "Hi", "Wi", "Y", "X", "stride_h", "stride_w", "pad_h", "pad_w")


def compiled(library: Library, arch: str) -> KernelLibrary:
    """The host part of ``library``'s dispatcher, built with the host C compiler."""
    files = dispatcher_sources(library, arch, template_environment())
    sources = {path: data.decode() for path, data in files.items()}
    return KernelLibrary(compile_library(sources, host_units(list(sources)), c_compiler()))


@cache
def measured() -> tuple[Library, KernelLibrary, Selector]:
    """The 30 measured gfx950 kernels, their dispatcher and the Python selector (LightGBM engine:
    numpy features and LightGBM's trees, independent of the generated C). Rules only: the C knows
    no target, so the Python selector's fallbacks are the library's alone too."""
    selector = Selector.load("gfx950", "forward", "bf16", engine="lightgbm", ck=None)
    library = Library.build([config_from_any_name(n, "gfx950") for n in selector.default_candidates])
    return library, compiled(library, "gfx950"), selector


@cache
def whole_arch() -> tuple[Library, KernelLibrary]:
    """Every GEMM kernel of the default rule set on gfx950: all variants, 1-3D, every dtype, so
    that split-K, 3D and narrower-vector kernels are in the library (the upstream rule space: every
    cell has kernels)."""
    configs = [c for c in Space("gfx950", rule_set="default", ck=None) if c.kind == "gemm"]
    library = Library.build(configs)
    return library, compiled(library, "gfx950")


@cache
def python_selector(variant: Variant, dtype: Dtype) -> Selector:
    """Rules only, as the C: with a library as its pool, its fallbacks are the library's kernels."""
    return Selector.load("gfx950", variant, dtype, engine="lightgbm", ck=None)


def picked(library: KernelLibrary, problem: ConvProblem, variant: Variant | str, dtype: Dtype | str) -> Choice | None:
    """``library.select``, None where it raises NoKernelError as Selector.select does."""
    try:
        return library.select(problem, variant, dtype)
    except NoKernelError:
        return None


def agree(dispatcher: KernelLibrary, library: Library, selector: Selector, problem: ConvProblem) -> None:
    cell = [c for c in library.kernels if (c.variant, c.dtype) == (selector.variant, selector.dtype)]
    choice = picked(dispatcher, problem, selector.variant, selector.dtype)
    try:
        expected = selector.select(problem, cell, k=1, pool=list(library.kernels))
    except NoKernelError:
        assert choice is None, f"C picked {choice} where Python finds no kernel for {problem.text()}"
        return
    assert choice is not None and choice.name == expected.pick, problem.text()
    assert choice.predicted_tflops == pytest.approx(expected.top[0].predicted_tflops, rel=1e-5)


@pytest.mark.slow
def test_same_pick_on_every_real_problem() -> None:
    library, dispatcher, selector = measured()
    with DATA.open(newline="") as handle:
        shapes = {tuple(int(row[k]) for k in KEYS) for row in csv.DictReader(handle)}
    assert len(shapes) == 230
    for shape in sorted(shapes):
        agree(dispatcher, library, selector, ConvProblem.from_values(dict(zip(KEYS, shape, strict=True))))


@pytest.mark.slow
def test_same_pick_and_estimate_where_the_model_extrapolates() -> None:
    """A forward bf16 library of the full rule set and the measured kernels on gfx950: most are outside
    the shipped model's domain (vector widths, pipelines, schedulers it never saw), so C and Python
    both score them through their siblings (ckspace.select.support); they agree on every real
    shape, picks and estimates, and some picks are extrapolated ones."""
    selector = python_selector(Variant.FORWARD, Dtype.BF16)
    configs = [c for c in Space("gfx950", "forward", 2, "bf16", rule_set="full", ck=None) if c.kind == "gemm"]
    configs += [config_from_any_name(n, "gfx950") for n in selector.default_candidates]  # inside the domain
    library = Library.build(configs)
    dispatcher = compiled(library, "gfx950")
    outside = [c for c in configs if selector.outside(c) is not None]
    assert 0 < len(outside) < len(configs)
    with DATA.open(newline="") as handle:
        shapes = sorted({tuple(int(row[k]) for k in KEYS) for row in csv.DictReader(handle)})
    sources = set()
    for shape in shapes[::3]:
        problem = ConvProblem.from_values(dict(zip(KEYS, shape, strict=True)))
        agree(dispatcher, library, selector, problem)
        sources.add(selector.select(problem, configs, k=1, pool=configs).pick_source.partition(":")[0])  # runs all
    assert sources == {"model", "model, extrapolated"}


def wider(a, b) -> bool:
    """Vector widths ``a`` wider than ``b``: at least as wide for every operand, wider for one."""
    return all(x >= y for x, y in zip(a, b, strict=True)) and any(x > y for x, y in zip(a, b, strict=True))


@pytest.mark.slow
def test_the_vector_rule_binds_alike_in_c_and_python(tmp_path: Path) -> None:
    """A model whose card claims every vector width as seen (a copy of the shipped one) scores a
    kernel's vector variants alike -- it never saw them differ -- so the vector rule decides:
    each narrower variant is capped below the wider ones by the analytical ratio. Python and the C
    dispatcher built with that model pick alike, and never a narrower variant of a runnable wider one."""
    import shutil

    model = tmp_path / "model"
    shutil.copytree(shipped_model_dir("gfx950", "forward", "bf16"), model)
    card = json.loads((model / "card.json").read_text())
    for name in ("vec_a", "vec_b", "vec_c"):
        card["domain"]["categorical"][name] = [1, 2, 4, 8]
    (model / "card.json").write_text(json.dumps(card))
    selector = Selector.load("gfx950", "forward", "bf16", model_dir=model, engine="lightgbm", ck=None)
    configs = [c for c in Space("gfx950", "forward", 2, "bf16", rule_set="full", ck=None) if c.kind == "gemm"]
    library = Library.build(configs)
    files = dispatcher_sources(library, "gfx950", template_environment(), {(Variant.FORWARD, Dtype.BF16): model})
    sources = {path: data.decode() for path, data in files.items()}
    dispatcher = KernelLibrary(compile_library(sources, host_units(list(sources)), c_compiler()))
    prepared = selector.prepare(configs, configs)
    binds = 0
    for text in (
        "N=8,C=256,K=64,Hi=56,Wi=56,Y=1,X=1",
        "N=1,C=64,K=64,Hi=28,Wi=28,Y=3,X=3,pad=1",
        "N=32,C=512,K=512,Hi=7,Wi=7,Y=3,X=3,pad=1",
        "N=2,C=24,K=40,Hi=30,Wi=30,Y=1,X=1",
    ):
        problem = ConvProblem.parse(text)
        agree(dispatcher, library, selector, problem)
        rows = np.flatnonzero(selector.feasible(problem, prepared))
        table, support = prepared.table.take(rows), prepared.support.take(rows)
        scored = selector.score_table(problem, table, support)
        raw = selector.scores(scored.matrix)
        binds += int(np.sum(scored.scores < raw))
        for r in range(len(rows)):
            for w in range(len(rows)):
                if support.family[r] == support.family[w] and wider(support.vectors[w], support.vectors[r]):
                    assert scored.scores[r] < scored.scores[w], (table.configs[r].name, table.configs[w].name)
    assert binds > 0, "the rule never bound: the test no longer tests it"


@st.composite
def hard_problems(draw) -> tuple[ConvProblem, Variant, Dtype]:
    """Odd and even channels per group around the vector widths, groups, 1-3D, strides, pads,
    dilations and split-K."""
    ndim = draw(st.sampled_from([1, 2, 2, 3]))
    g = draw(st.sampled_from([1, 1, 2, 3, 4, 32]))
    per_group = st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 52, 64, 96, 156])
    values = {
        "ndim": ndim,
        "N": draw(st.sampled_from([1, 2, 3, 8])),
        "G": g,
        "C": g * draw(per_group),
        "K": g * draw(per_group),
    }
    variant = draw(st.sampled_from(list(Variant)))
    values["k_batch"] = draw(st.sampled_from([1, 2, 4])) if variant is Variant.BWD_WEIGHT else 1
    for d, (size, filt) in zip("dhw", (("Di", "Z"), ("Hi", "Y"), ("Wi", "X")), strict=True):
        if d not in "dhw"[3 - ndim :]:
            continue
        values[size] = draw(st.integers(1, 64))
        values[filt] = draw(st.sampled_from([1, 1, 3, 5, 7]))
        values[f"stride_{d}"] = draw(st.sampled_from([1, 1, 2, 3]))
        values[f"pad_{d}"] = draw(st.sampled_from([0, 0, 1, 3]))
        values[f"dil_{d}"] = draw(st.sampled_from([1, 1, 2]))
    try:
        problem = ConvProblem.from_values(values)
    except CkspaceError:
        assume(False)
        raise
    return problem, variant, draw(st.sampled_from([Dtype.BF16, Dtype.FP16, Dtype.FP32]))


_LOW_WORD_SET = ConvProblem.parse(  # a feature of 0.66796875 less one ulp: TL2cgen once read it as missing
    "N=2,G=32,C=3072,K=3072,Hi=50,Wi=57,Y=5,X=1,stride_h=3,stride_w=1,pad_h=0,pad_w=0"
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hard_problems())
@example((_LOW_WORD_SET, Variant.FORWARD, Dtype.BF16))
@pytest.mark.slow
def test_same_pick_on_drawn_problems(drawn: tuple[ConvProblem, Variant, Dtype]) -> None:
    problem, variant, dtype = drawn
    library, dispatcher = whole_arch()
    agree(dispatcher, library, python_selector(variant, dtype), problem)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hard_problems(), st.integers(0, 10_000))
@pytest.mark.slow
def test_is_supported_equals_the_python_rules(drawn: tuple[ConvProblem, Variant, Dtype], pick: int) -> None:
    problem, variant, dtype = drawn
    library, dispatcher = whole_arch()
    cell = [i for i, c in enumerate(library.kernels) if (c.variant, c.dtype) == (variant, dtype)]
    assume(cell)
    index = cell[pick % len(cell)]
    config: GemmConfig = library.kernels[index]
    cols = columns([config.row()], GEMM_FIELD_NAMES)
    expected = all(
        bool(np.asarray(evaluate(rule.expr, cols)).reshape(-1)[0])
        for rule in gemm_problem_rules(problem, variant, config.ndim, dtype)
    )
    assert dispatcher.is_supported(index, problem, variant, dtype) == expected
    other = Variant.FORWARD if variant is not Variant.FORWARD else Variant.BWD_DATA
    assert not dispatcher.is_supported(index, problem, other, dtype)  # another cell's kernel


_MALFORMED_FIELDS = (
    "N",
    "G",
    "C",
    "K",
    "Hi",
    "Wi",
    "Y",
    "X",
    "stride_h",
    "stride_w",
    "pad_h",
    "pad_w",
    "dil_h",
    "dil_w",
    "k_batch",
)
_INDEX = 2**31
_AROUND_INDEX = st.sampled_from(
    [_INDEX - 2, _INDEX - 1, _INDEX, _INDEX + 1, 2 * _INDEX, 2**62, 2**63 - 1, -_INDEX, -(2**63)]
)
_AROUND_ELEMENTS = {  # element counts around 2^63 - 1 (long_index_t), as factors within index_t
    2**63 - 2: (2, 3, 715827883, 2147483647),
    2**63 - 1: (7 * 7 * 73, 127 * 337, 92737, 649657),
    2**63: (2**20, 2**21, 2**22, 1),
    2**63 + 2: (2 * 5 * 5581, 8681, 49477, 384773),
}
_TENSOR_FIELDS = {"input": ("N", "C", "Hi", "Wi"), "output": ("N", "K", "Hi", "Wi"), "weight": ("K", "C", "Y", "X")}


@st.composite
def malformed_2d(draw) -> dict[str, int]:
    """Small values around the lower bounds, values around index_t's 2^31 (and int64's ends), and
    tensors of around 2^63 elements (long_index_t) in input, output (1x1 filter) or weight."""
    values = {
        name: draw(st.one_of(st.integers(-2, 9), st.integers(-2, 9), _AROUND_INDEX)) for name in _MALFORMED_FIELDS
    }
    if draw(st.booleans()):
        tensor = draw(st.sampled_from(sorted(_TENSOR_FIELDS)))
        factors = draw(st.permutations(_AROUND_ELEMENTS[draw(st.sampled_from(sorted(_AROUND_ELEMENTS)))]))
        values.update(dict(zip(_TENSOR_FIELDS[tensor], factors, strict=True)))
        if draw(st.booleans()):  # the other sizes of a valid problem, so that only the element count decides
            values.update(G=1, stride_h=1, stride_w=1, pad_h=0, pad_w=0, dil_h=1, dil_w=1, k_batch=1)
            values.update(
                {name: 1 for name in ("N", "C", "K", "Hi", "Wi", "Y", "X") if name not in _TENSOR_FIELDS[tensor]}
            )
            if tensor != "weight":
                values.update(Y=1, X=1)
    return values


@settings(max_examples=600, deadline=None)
@given(malformed_2d())
@pytest.mark.slow
def test_malformed_problems_are_refused_like_the_python_model(values: dict[str, int]) -> None:
    """C's problem check and ConvProblem's validation accept exactly the same 2D problems, over the
    whole int64 range: index_t bounds (2^31 - 1) per value, long_index_t (2^63 - 1) per tensor;
    what ConvProblem refuses is CKSPACE_INVALID_PROBLEM from ckspace_select and its negation from
    ckspace_is_supported."""
    _, dispatcher = whole_arch()
    try:
        ConvProblem.from_values({**values, "ndim": 2})
        valid = True
    except CkspaceError:
        valid = False
    raw = ConvProblemC(variant=0, dtype=Dtype.BF16.code, ndim=2, Di=1, Z=1, stride_d=1, pad_d=0, dil_d=1, **values)
    status, _, _ = dispatcher.select_raw(raw)
    assert (status != 3) == valid, (status, values)
    supported = dispatcher._lib.ckspace_is_supported(0, ctypes.byref(raw))
    assert (supported != -3) == valid, (supported, values)


def test_the_largest_valid_tensors_are_accepted_and_one_more_element_refused() -> None:
    """The edges themselves: 2^63 - 1 elements and sizes of 2^31 - 1 are valid, one more is not."""
    _, dispatcher = whole_arch()
    edge = {"N": 7 * 7 * 73, "C": 127 * 337, "K": 1, "Hi": 92737, "Wi": 649657, "Y": 1, "X": 1}
    for values, valid in (
        (edge, True),
        ({**edge, "Wi": 649658}, False),
        ({"N": 1, "C": 1, "K": 1, "Hi": 1, "Wi": 2**31 - 1, "Y": 1, "X": 1, "pad_w": 2**31 - 1}, True),
        ({"N": 1, "C": 1, "K": 1, "Hi": 1, "Wi": 2**31, "Y": 1, "X": 1}, False),
    ):
        if valid:
            ConvProblem.from_values(values)
        else:
            with pytest.raises(CkspaceError):
                ConvProblem.from_values(values)
        raw = ConvProblemC(
            variant=0,
            dtype=Dtype.BF16.code,
            ndim=2,
            Di=1,
            Z=1,
            stride_d=1,
            pad_d=0,
            dil_d=1,
            G=1,
            stride_h=1,
            stride_w=1,
            pad_h=0,
            dil_h=1,
            dil_w=1,
            k_batch=1,
            **{"pad_w": 0, **values},
        )
        assert (dispatcher.select_raw(raw)[0] != 3) == valid, values


@pytest.mark.slow
def test_fallback_only_kernels_serve_what_their_families_cannot() -> None:
    """A library whose candidates are the full rule set's vec-8 kernels and whose other kernels are
    fallbacks only: a problem with 4 channels per group runs on a narrower variant of the library,
    the same one the Python selector picks with the library as its pool."""
    configs = [c for c in Space("gfx950", "forward", 2, "bf16", "full", ck=None) if c.kind == "gemm"]
    wide = [c for c in configs if (c.vec_a, c.vec_b, c.vec_c) == (8, 8, 8)]
    library = Library.build(configs, fallback_only=frozenset(c.name for c in configs if c not in wide))
    dispatcher = compiled(library, "gfx950")
    problem = ConvProblem.parse("N=2,C=4,K=12,Hi=32,Wi=32,Y=3,X=3,pad=1")
    choice = dispatcher.select(problem, "forward", "bf16")
    chosen = library.kernels[choice.kernel]
    assert not library.candidate[choice.kernel] and (chosen.vec_a, chosen.vec_b, chosen.vec_c) == (4, 4, 4)
    assert dispatcher.is_supported(choice.kernel, problem, "forward", "bf16")
    expected = python_selector(Variant.FORWARD, Dtype.BF16).select(problem, wide, pool=configs)
    assert expected.pick == choice.name and expected.family in {c.name for c in wide}
    assert choice.predicted_tflops == pytest.approx(expected.top[0].predicted_tflops, rel=1e-5)
    assert picked(dispatcher, ConvProblem.parse("N=2,C=3,K=12,Hi=32,Wi=32,Y=3,X=3"), "forward", "bf16") is not None


@pytest.mark.slow
def test_emit_with_selector_and_host_only_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from conftest import fake_ck

    monkeypatch.setenv("CK_ROOT", str(fake_ck(tmp_path / "ck", explicit_gemm=False)))
    tree = tmp_path / "tree"
    assert (
        main(
            [
                "emit",
                "--arch",
                "gfx950",
                "--variant",
                "forward",
                "--ndim",
                "2",
                "--dtype",
                "bf16",
                "--rule-set",
                "default",
                "--with-selector",
                "--out",
                str(tree),
            ]
        )
        == 0
    )
    manifest = json.loads((tree / "manifest.json").read_text())
    configs = [GemmConfig.from_fields(e["config"]) for e in manifest["kernels"]]
    assert f"dispatcher: {len(configs)} kernels" in capsys.readouterr().out
    assert manifest["dispatcher"]["kernels"] == sorted(c.name for c in configs)
    header = (tree / "ckspace_dispatch.h").read_text()
    assert "do not edit" in header and "int ckspace_select(const ckspace_conv_problem* problem" in header
    assert main(["build", str(tree), "--host-only"]) == 0
    library = tree / "build" / "host" / "libckspace_dispatch.so"
    said = capsys.readouterr().out
    assert f"library: {library}" in said  # and how a build system finds it: its package, written beside it
    assert (
        f"find_package(ckspace_kernels CONFIG) with CMAKE_PREFIX_PATH={library.parent}, target ckspace::dispatch_host"
        in said
    )
    assert (library.parent / "ckspace_kernelsConfig.cmake").is_file()
    dispatcher = KernelLibrary(library)
    assert not dispatcher.has_run and list(dispatcher.names) == manifest["dispatcher"]["kernels"]
    selector = Selector.load("gfx950", "forward", "bf16")
    problem = ConvProblem.parse("N=4,C=64,K=128,Hi=56,Wi=56,Y=3,X=3,pad=1")
    assert dispatcher.select(problem, "forward", "bf16").name == selector.select(problem, configs, pool=configs).pick
    assert main(["build", str(tmp_path), "--host-only"]) == 2  # not an emitted tree
    assert "no manifest.json" in capsys.readouterr().err


def test_fallbacks_let_a_library_serve_every_channel_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``emit --fallbacks``: the default rule set's kernels all have (4, 8, 8) vectors; with their
    serving variants added as fallback-only kernels the library runs problems with odd channels,
    and the C pick is the Python selector's with the same candidates and the library as its pool."""
    from conftest import fake_ck

    monkeypatch.setenv("CK_ROOT", str(fake_ck(tmp_path / "ck", explicit_gemm=False)))
    tree = tmp_path / "tree"
    assert (
        main(
            [
                "emit",
                "--arch",
                "gfx950",
                "--variant",
                "forward",
                "--ndim",
                "2",
                "--dtype",
                "bf16",
                "--rule-set",
                "default",
                "--with-selector",
                "--fallbacks",
                "--out",
                str(tree),
            ]
        )
        == 0
    )
    assert main(["build", str(tree), "--host-only"]) == 0
    dispatcher = KernelLibrary(tree / "build" / "host" / "libckspace_dispatch.so")
    manifest = json.loads((tree / "manifest.json").read_text())
    configs = [GemmConfig.from_fields(e["config"]) for e in manifest["kernels"]]
    fallback_only = set(manifest["dispatcher"]["fallback_only"])
    assert fallback_only and all(c.name in fallback_only or (c.vec_a, c.vec_b, c.vec_c) == (4, 8, 8) for c in configs)
    families = [c for c in configs if c.name not in fallback_only]
    selector = python_selector(Variant.FORWARD, Dtype.BF16)
    for channels in [(3, 5), (52, 156), (6, 64), (64, 12), (1, 1)]:
        problem = ConvProblem.parse(f"N=2,C={channels[0]},K={channels[1]},Hi=32,Wi=32,Y=3,X=3,pad=1")
        choice = dispatcher.select(problem, "forward", "bf16")
        expected = selector.select(problem, families, pool=configs)
        assert choice is not None and choice.name == expected.pick and expected.family is not None
        assert choice.name in fallback_only and dispatcher.is_supported(choice.kernel, problem, "forward", "bf16")


def calibrated_copy(directory: Path, constants: dict[str, float]) -> Path:
    """The shipped forward bf16 model in ``directory`` with ``constants`` in its card (as ``learn``
    writes them: the analytical feature of its trees priced with constants measured on a GPU)."""
    import shutil

    shutil.copytree(shipped_model_dir("gfx950", "forward", "bf16"), directory)
    card = json.loads((directory / "card.json").read_text())
    card["calibrated"] = constants
    (directory / "card.json").write_text(json.dumps(card))
    return directory


@pytest.mark.slow
def test_a_calibrated_model_is_priced_alike_in_c_and_python(tmp_path: Path) -> None:
    """A model whose card carries measured constants: the C dispatcher prices its cell's features
    (the formulas and each kernel's and sibling's model columns) with them, as the Python selector
    does, pick for pick and estimate for estimate, inside the model's domain and outside it; and the
    constants change picks or estimates against the same trees on the shipped constants (else this
    would test nothing)."""
    from ckspace.features import performance

    shipped = {n: performance.constant(n) for n in ("memory_latency_cycles", "l2_reuse", "epilogue_cycles_per_byte")}
    constants = {"memory_latency_cycles": shipped["memory_latency_cycles"] * 2.5, "l2_reuse": 1.0}
    constants["epilogue_cycles_per_byte"] = shipped["epilogue_cycles_per_byte"] * 4
    model = calibrated_copy(tmp_path / "model", constants)
    selector = Selector.load("gfx950", "forward", "bf16", model_dir=model, engine="lightgbm", ck=None)
    assert selector.hw.calibrated == constants
    plain = python_selector(Variant.FORWARD, Dtype.BF16)
    configs = [c for c in Space("gfx950", "forward", 2, "bf16", rule_set="full", ck=None) if c.kind == "gemm"][::4]
    configs += [config_from_any_name(n, "gfx950") for n in selector.default_candidates]
    library = Library.build(configs)
    files = dispatcher_sources(library, "gfx950", template_environment(), {(Variant.FORWARD, Dtype.BF16): model})
    sources = {path: data.decode() for path, data in files.items()}
    dispatcher = KernelLibrary(compile_library(sources, host_units(list(sources)), c_compiler()))
    with DATA.open(newline="") as handle:
        shapes = sorted({tuple(int(row[k]) for k in KEYS) for row in csv.DictReader(handle)})
    moved = 0
    for shape in shapes[::4]:
        problem = ConvProblem.from_values(dict(zip(KEYS, shape, strict=True)))
        agree(dispatcher, library, selector, problem)
        try:
            ours, theirs = (s.select(problem, configs, k=1, pool=configs).top[0] for s in (selector, plain))
        except NoKernelError:
            continue
        moved += ours.name != theirs.name or ours.predicted_tflops != pytest.approx(theirs.predicted_tflops)
    assert moved > 0
