"""A tree's kernels are the selection pool, for Python, the CLI and C alike.

``select --candidates TREE`` ranks the tree's kernels, and a candidate that fails only on vector
alignment falls back to a narrower variant only when the tree holds it -- what the tree's generated
C dispatcher (``ckspace_select``) does. The target (the CK headers) has no say over a tree's pool:
the pool is what was emitted and built.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import c_compiler, fake_ck
from hypothesis import HealthCheck, given, settings
from test_dispatcher import compiled, picked
from test_problem import problems

from ckspace.cli import main
from ckspace.commands.select import read_registry
from ckspace.core.errors import NoKernelError
from ckspace.emit.dispatcher import Library
from ckspace.run.library import KernelLibrary
from ckspace.select.fallbacks import in_target
from ckspace.select.selector import Selector
from ckspace.space.benchmark_names import config_from_any_name
from ckspace.workloads.problem import ConvProblem

ARCH = "gfx942"
CELL = ("--variant", "forward", "--dtype", "bf16")
GROUPED = "N=1,G=32,C=64,K=64,Hi=56,Wi=56,Y=3,X=3,stride=1,pad=1"
"""Two channels per group: every kernel of the default rule set (vectors 4, 8, 8) needs a variant."""


def _tree(root: Path, ck: Path, *extra: str) -> tuple[Path, KernelLibrary]:
    """A gfx942 forward bf16 tree of the default rule set, emitted --with-selector for the fake CK
    ``ck``, and its dispatcher's host part."""
    c_compiler()  # skips without a C compiler
    tree = root / "tree"
    emit = ["emit", "--arch", ARCH, *CELL, "--ndim", "2", "--rule-set", "default", "--ck-root", str(ck)]
    assert main([*emit, "--with-selector", *extra, "--out", str(tree)]) == 0
    assert main(["build", str(tree), "--host-only"]) == 0
    return tree, KernelLibrary(tree / "build" / "host" / "libckspace_dispatch.so")


@pytest.fixture(scope="module")
def ck(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fake_ck(tmp_path_factory.mktemp("ck"), explicit_gemm=False)


@pytest.fixture(scope="module", params=["plain", "--fallbacks"])
def tree(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, ck: Path):
    extra = () if request.param == "plain" else (request.param,)
    return _tree(tmp_path_factory.mktemp("tree"), ck, *extra)


@pytest.fixture(scope="module")
def selector(ck: Path) -> Selector:
    """The CLI's selector for --ck-root ck (no model for gfx942 forward bf16: analytical)."""
    return Selector.load(ARCH, "forward", "bf16", ck=ck)


def test_issue_36_item_2_select_on_a_tree_answers_as_its_dispatcher(
    tmp_path: Path, ck: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reported case: no kernel of the tree, nor a variant it holds, runs two channels per group;
    the CLI picked a ``_vec2_2_2`` variant the tree does not hold, the dispatcher answers no kernel."""
    tree, dispatcher = _tree(tmp_path, ck)
    capsys.readouterr()
    assert picked(dispatcher, ConvProblem.parse(GROUPED), "forward", "bf16") is None
    select = ["select", "--arch", ARCH, *CELL, "--problem", GROUPED, "--candidates", str(tree), "--ck-root", str(ck)]
    assert main([*select, "--format", "json"]) == 1
    answer = json.loads(capsys.readouterr().out)
    assert answer["pick"] is None and answer["candidates"] == len(dispatcher.names)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(problem=problems().filter(lambda p: p.ndim == 2))  # the tree's kernels are 2D
@pytest.mark.slow
def test_issue_36_item_2_python_picks_a_kernel_of_the_tree_as_c_does(tree, selector: Selector, problem) -> None:
    """Over drawn problems, the pick on the registry ``--candidates TREE`` reads (its candidates,
    its kernels as the pool) is a kernel of the tree and the C dispatcher's pick; with
    ``--fallbacks`` the fallback-only kernels are the pool's, not candidates, as in C."""
    path, dispatcher = tree
    candidates, pool = read_registry(path, ARCH)
    assert {c.name for c in pool} == set(dispatcher.names)
    choice = picked(dispatcher, problem, "forward", "bf16")
    try:
        pick = selector.select(problem, candidates, k=1, pool=pool).pick
    except NoKernelError:
        pick = None
    assert pick is None or pick in dispatcher.names
    assert pick == (choice.name if choice else None), problem.text()


def test_issue_36_item_2_a_pool_is_not_narrowed_by_the_target(tmp_path: Path, ck: Path) -> None:
    """A library holding a vector variant its target's CK refuses (vec_c 1 under a 128-wide epilogue
    store) still falls back to it, in C and so in Python: the pool is what was built."""
    kernel = config_from_any_name(
        "grouped_conv_fwd_bf16_nhwgc_2d_compv3_cshuffle_intrawave_32x128x64_1x4x1_32x32x16", ARCH
    )
    variant = kernel.model_copy(update={"vec_c": 1})
    selector = Selector.load(ARCH, "forward", "bf16", ck=ck)
    assert not in_target(selector.target, [variant])[variant.kernel_key()]
    library = Library.build([kernel, variant], fallback_only=frozenset({variant.name}))
    problem = ConvProblem.parse("N=1,C=64,K=63,Hi=16,Wi=16,Y=3,X=3,pad=1")  # Kg 63: only vec_c 1 divides it
    choice = compiled(library, ARCH).select(problem, "forward", "bf16")
    selection = selector.select(problem, [kernel], k=1, pool=list(library.kernels))
    assert choice.name == selection.pick == variant.name and selection.family == kernel.name
