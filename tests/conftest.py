"""Shared fixtures: the upstream reference fixtures (``tests/fixtures``), an isolated cache, the
skips a missing compiler causes, and the skip policy CI holds the run to (:mod:`skip_policy`)."""

from __future__ import annotations

import csv
import io
import json
import lzma
import os
import sys
from pathlib import Path
from typing import NoReturn

import pytest
from hypothesis import Phase, settings

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
"""Upstream's outputs the tests compare with, xz-compressed (their provenance: fixtures/README.md)."""
ORACLE_REVISION = "7cd53015"
"""The rules revision the oracle fixtures and the independent statements of the rules in tests/
(reference_rules.py, nested_loop.py) pin."""

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(ROOT / "bench"))  # scripts whose functions tests reuse (bench/learning_study.py)

from skip_policy import (  # noqa: E402 - the hooks CI's skip policy needs, registered with this conftest
    NO_C_COMPILER,
    pytest_make_collect_report,  # noqa: F401
    pytest_runtest_makereport,  # noqa: F401
)

settings.register_profile(
    "mutation", derandomize=True, database=None, phases=[Phase.explicit, Phase.reuse, Phase.generate]
)
"""Fixed examples: scripts/mutation.py judges every mutant on the examples the unmutated run passed.
No shrinking: a mutant is killed by its first failing example, and shrinking it (compiling C for
each try, in the C backend's tests) can take longer than the whole run of the examples."""
if os.environ.get("CKSPACE_HYPOTHESIS_PROFILE"):
    settings.load_profile(os.environ["CKSPACE_HYPOTHESIS_PROFILE"])


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Never read or write the developer's real cache from tests. ``CKSPACE_TEST_CACHE_DIR`` names
    a cache shared by several runs instead: scripts/mutation.py sets it for the modules the cached
    cell listings do not depend on, so each mutant's run does not enumerate the cells again."""
    shared = os.environ.get("CKSPACE_TEST_CACHE_DIR")
    os.environ["CKSPACE_CACHE_DIR"] = shared or str(tmp_path_factory.mktemp("ckspace-cache"))


def _fixture_text(*parts: str) -> str:
    return lzma.decompress((FIXTURES.joinpath(*parts)).read_bytes()).decode()


def oracle_lines(name: str) -> list[dict]:
    """The cells of one oracle fixture (``fixtures/oracle/<name>.jsonl.xz``)."""
    return [json.loads(line) for line in _fixture_text("oracle", f"{name}.jsonl.xz").splitlines() if line.strip()]


def upstream_csv(name: str) -> list[dict[str, str]]:
    """The rows of an upstream CSV kept as a fixture (``fixtures/upstream/<name>.xz``)."""
    return list(csv.DictReader(io.StringIO(_fixture_text("upstream", f"{name}.xz"), newline="")))


def skip_without_compiler(reason: str) -> NoReturn:
    """Skip a test whose compiler is missing (``reason`` names the script that installs one); a
    failure instead under ``CKSPACE_REQUIRE_TOOLCHAIN=1``: .ci/run installs the toolchain, so there
    a missing compiler is a broken install, not a machine without one."""
    if os.environ.get("CKSPACE_REQUIRE_TOOLCHAIN") == "1":
        pytest.fail(f"CKSPACE_REQUIRE_TOOLCHAIN=1 but: {reason}")
    pytest.skip(reason)


def c_compiler() -> str:
    """The host C compiler the dispatcher's host part and the compiled trees are built with."""
    from ckspace.select.compiled import host_c_compiler

    compiler = host_c_compiler()
    if compiler is None:
        skip_without_compiler(NO_C_COMPILER)
    return compiler


def load_nested_loop():
    """The plain nested-loop enumerator of tests/ (an independent implementation of the rules)."""
    import nested_loop

    return nested_loop


FAKE_OBJECT = (
    b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00"
    b"\x01\x00\xe0\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
    b"\x00\x00\x00\x00\x00\x00\x00\x00@\x00\x00\x00\x00\x00\x00\x00"
    b"\x00\x00\x00\x00@\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
)
"""What the tests' stand-in compilers write as an object: the smallest whole ELF64 relocatable (a
header whose empty section table lies inside the file), so the object cache takes it as whole."""


HALF = ((4, 64, 16), (16, 16, 16), (16, 16, 32), (32, 32, 8), (32, 32, 16), (64, 4, 16))
"""The fp16/bf16 warp GEMMs of the fake CK tree."""


def fake_ck(root: Path, *, explicit_gemm: bool) -> Path:
    """A minimal CK include tree: one pipeline (compv3), the half-precision warp GEMMs, split-image
    forward, with or without the explicit-GEMM traits parameter."""
    include = root / "include" / "ck_tile"
    conv = include / "ops" / "grouped_convolution"
    (conv / "utils").mkdir(parents=True)
    (conv / "kernel").mkdir()
    (include / "ops" / "gemm" / "pipeline").mkdir(parents=True)
    (include / "ops" / "grouped_convolution.hpp").write_text("#pragma once\n")
    extra = "bool ExplicitGemm_ = false, " if explicit_gemm else ""
    (conv / "utils" / "grouped_convolution_utils.hpp").write_text(
        f"template <index_t N, bool EnableSplitImage_ = false, {extra}int X = 0>\nstruct GroupedConvTraits {{}};\n"
    )
    (conv / "kernel" / "grouped_convolution_forward_kernel.hpp").write_text("EnableSplitImage NumGroupsToMerge")
    (include / "ops" / "gemm" / "warp").mkdir(parents=True)
    (include / "ops" / "gemm" / "warp" / "warp_gemm_dispatcher.hpp").write_text(
        "".join(
            f"template<> struct WarpGemmDispatcher<ck_tile::{t}, ck_tile::{t}, float, {m}, {n}, {k}, false> {{}};\n"
            for t in ("half_t", "bf16_t")
            for m, n, k in HALF
        )
    )
    (include / "ops" / "gemm" / "pipeline" / "p.hpp").write_text(
        "struct BaseGemmPipelineAgBgCrCompV3 {};\nstruct GemmPipelineAgBgCrCompV3 {\n"
        "    CK_TILE_DEVICE auto operator()(const A& a_dram_block_window_tmp, const B& b_dram_block_window_tmp,\n"
        "                                   index_t num_loop, void* p_smem) const\n"
        "    { return operator()(ck_tile::make_tuple(a_dram_block_window_tmp), num_loop, p_smem); }\n};\n"
    )
    return root
