"""ckspace build: batching, failure isolation, cache and report (with a stand-in compiler), the
toolchain-absent error, and the real CI compile of the sample for gfx942.

The real compile needs the toolchain of scripts/install-toolchain-gfx942.sh. Without it the test
is skipped with the reason, unless CKSPACE_REQUIRE_TOOLCHAIN=1 (set by .ci/run), which turns the
absence into a failure so CI cannot pass without compiling.
"""

from __future__ import annotations

import json
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cmake_project import configure_and_build_consumer
from compile_sample import sample_kernels, sample_request, tags
from conftest import FAKE_OBJECT, c_compiler, fake_ck, skip_without_compiler
from skip_policy import NO_HIP_COMPILER
from test_dispatcher import picked

from ckspace.cli import main
from ckspace.compiling.builder import build
from ckspace.compiling.toolchain import discover
from ckspace.compiling.units import Planner
from ckspace.core.config import GemmConfig
from ckspace.core.errors import CkspaceError
from ckspace.emit import hipdnn_plugin
from ckspace.emit.emitter import SelectorOptions, emit
from ckspace.environment.ck_header_cache import find_revision
from ckspace.environment.ck_locate import locate_ck
from ckspace.run.elf import exported_functions
from ckspace.run.library import KernelLibrary
from ckspace.space.space import Space
from ckspace.workloads.problem import ConvProblem

HARNESS = Path(__file__).parent / "hipdnn" / "harness.c"
FAKE_COMPILER = f"""#!{sys.executable}
# Stand-in for clang: fails a translation unit that includes a kernel marked BROKEN.
import sys, pathlib
args = sys.argv[1:]
if "--version" in args:
    print("fake clang version 1.0"); sys.exit(0)
out = pathlib.Path(args[args.index("-o") + 1])
if "-shared" in args or "-nogpulib" in args:
    out.write_text("lib") if "-shared" in args else None; sys.exit(0)
source = pathlib.Path(args[args.index("-c") + 1])
includes = [a[2:] for a in args if a.startswith("-I")]
for line in source.read_text().splitlines():
    name = line.split('"')[1]
    for folder in includes:
        path = pathlib.Path(folder) / name
        if path.is_file() and "BROKEN" in path.read_text():
            print(f"{{name}}:1:1: error: broken kernel", file=sys.stderr); sys.exit(1)
out.write_bytes({FAKE_OBJECT!r})
"""


def use_fake_toolchain(base: Path, monkeypatch: pytest.MonkeyPatch, compiler: Path) -> Path:
    """Point ckspace at the stand-in ``compiler`` (written here), a fake CK tree and an object cache,
    all under ``base``; returns the CK tree."""
    compiler.parent.mkdir(parents=True, exist_ok=True)
    compiler.write_text(FAKE_COMPILER)
    compiler.chmod(compiler.stat().st_mode | stat.S_IEXEC)
    ck = fake_ck(base / "ck root", explicit_gemm=False)
    monkeypatch.setenv("CKSPACE_CXX", str(compiler))
    monkeypatch.setenv("CKSPACE_DEVICE_LIBS", str(base))
    monkeypatch.setenv("CK_ROOT", str(ck))
    monkeypatch.setenv("CKSPACE_BUILD_CACHE", str(base / "object cache"))
    return ck


@pytest.fixture()
def fake_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_fake_toolchain(tmp_path, monkeypatch, tmp_path / "fakeclang")


def test_failure_is_isolated_and_cached(tmp_path: Path, fake_env: Path) -> None:
    revision = find_revision()
    kernels = [
        k
        for k in Space("gfx942", "forward", 2, "bf16", "default").kernels()
        if GemmConfig.from_row(k.arch, *k.cell, k.row).pipeline.value == "compv3"
    ][:5]
    tree = tmp_path / "tree"
    result = emit(kernels, tree, revision, arch="gfx942", request={})
    broken = result.manifest.kernels[1].name
    with (tree / f"{broken}.cpp").open("a") as handle:
        handle.write("// BROKEN\n")
    report = build(tree, "gfx942", jobs=2, batch=3, allow_edited=True)  # the edit is the point
    assert (report.ok, report.failed, report.units) == (4, 1, 2 + 3)
    failed = [k for k in report.kernels if k.status == "failed"]
    assert failed[0].name == broken and "broken kernel" in failed[0].error
    assert report.library and Path(report.library).is_file()
    saved = json.loads((tree / "build" / "gfx942" / "report.json").read_text())
    assert saved["failed"] == 1 and len(saved["kernels"]) == 5
    assert (tree / "build" / "gfx942" / failed[0].log).read_text().count("broken kernel") == 1
    again = build(tree, "gfx942", jobs=2, batch=3, allow_edited=True)
    assert again.cached == 4 and again.failed == 1  # the healthy kernels come from the cache


def test_planning_batches_keys_and_cache_hits(tmp_path: Path, fake_env: Path) -> None:
    """Build's pure step, with a stand-in object cache: kernels ``batch`` to a unit in manifest
    order, keys that follow the sources (not where the tree lies), the misses are the units the
    cache lacks, and a failed batch's kernels are planned one per unit (cached singles left out)."""
    revision = find_revision()
    tree = tmp_path / "tree"
    manifest = emit(
        Space("gfx942", "forward", 2, "bf16", "default").kernels()[:5], tree, revision, arch="gfx942", request={}
    ).manifest
    names = [k.name for k in manifest.kernels]
    cache: dict[str, Path] = {}
    planner = Planner(tree, discover("gfx942"), revision, lookup=cache.get)
    batches = planner.batches(names, 2)
    assert [(u.name, u.kernels) for u in batches.units] == [
        ("batch0000", names[:2]),
        ("batch0001", names[2:4]),
        ("batch0002", names[4:]),
    ]
    first = batches.units[0]
    assert first.text == f'#include "{names[0]}.cpp"\n#include "{names[1]}.cpp"\n'
    assert first.files == ["ckspace_registry.hpp", *(f"{n}{s}" for n in names[:2] for s in (".hpp", ".cpp"))]
    assert batches.misses == batches.units and len({u.key for u in batches.units}) == 3  # nothing cached yet

    for unit in (batches.units[0], batches.units[2]):
        cache[unit.key] = tmp_path / f"{unit.name}.o"  # the stand-in's objects are never read
    again = planner.batches(names, 2)
    assert again.units == batches.units and again.misses == [batches.units[1]]
    failed = planner.failed(again.units)  # after a compile that left batch0001 without an object
    assert failed == [batches.units[1]]
    alone = planner.batches(names[3:4], 1).units[0]  # a unit of that one kernel, under another name
    cache[alone.key] = tmp_path / "alone.o"
    singles = planner.singles(failed)
    assert [(u.name, u.kernels) for u in singles.units] == [
        ("single_batch0001_0000", [names[2]]),
        ("single_batch0001_0001", [names[3]]),
    ]
    assert singles.misses == singles.units[:1]  # the key is the content's, not the unit's name

    elsewhere = tmp_path / "moved tree"
    shutil.copytree(tree, elsewhere)
    assert Planner(elsewhere, planner.toolchain, revision, lookup=cache.get).batches(names, 2) == again
    with (elsewhere / f"{names[4]}.cpp").open("a") as handle:
        handle.write("// edited\n")
    edited = Planner(elsewhere, planner.toolchain, revision, lookup=cache.get).batches(names, 2)
    assert [u.key for u in edited.units][:2] == [u.key for u in batches.units][:2]
    assert edited.misses == edited.units[1:] and edited.units[2].key != batches.units[2].key


def test_paths_with_spaces_colons_and_dollars_reach_the_compiler_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """build.ninja escapes what ninja would read as syntax ($, space, colon), so a tree, a CK and a
    compiler under such a path build; without the escaping ninja expands ``$x`` to nothing."""
    base = tmp_path / "a dir $x: y"
    use_fake_toolchain(base, monkeypatch, base / "bin dir" / "fake clang")
    kernels = Space("gfx942", "forward", 2, "bf16", "default").kernels()[:3]
    tree = base / "emitted tree"
    emit(kernels, tree, find_revision(), arch="gfx942", request={})
    report = build(tree, "gfx942", jobs=1, batch=2)
    assert (report.ok, report.failed) == (3, 0), [k.error for k in report.kernels]
    assert report.library and Path(report.library).is_file()


def test_build_cli_exit_status(tmp_path: Path, fake_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = tmp_path / "tree"
    assert (
        main(
            [
                "emit",
                "--arch",
                "gfx942",
                "--variant",
                "bwd_data",
                "--ndim",
                "2",
                "--dtype",
                "fp16",
                "--rule-set",
                "default",
                "--out",
                str(tree),
            ]
        )
        == 0
    )
    assert main(["build", str(tree), "--arch", "gfx942", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert " 0 failed" in out and not out.startswith("0 ok")
    assert main(["build", str(tmp_path / "nothing"), "--arch", "gfx942"]) == 2
    assert "manifest.json" in capsys.readouterr().err


def test_no_toolchain_error_lists_what_was_looked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CKSPACE_CXX", raising=False)
    monkeypatch.delenv("CKSPACE_CLANG", raising=False)  # what older env.sh files export, read as a fallback
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "rocm"))
    with pytest.raises(CkspaceError) as error:
        discover("gfx942")
    message = str(error.value)
    assert "amdclang++" in message and "hipcc" in message and "clang++" in message
    assert "install-toolchain-gfx942.sh" in message
    with pytest.raises(CkspaceError) as error:  # the gfx942 script's clang-19 knows no gfx950
        discover("gfx950")
    assert "prepare-trixie-gfx950.sh" in str(error.value) and "install-toolchain-gfx942" not in str(error.value)
    with pytest.raises(CkspaceError, match="the project's scripts cover gfx942, gfx950"):
        discover("gfx1201")


def _toolchain_or_skip() -> None:
    """The gfx942 HIP compiler, or a skip naming the script that installs it (a failure under
    CKSPACE_REQUIRE_TOOLCHAIN=1). The CK headers come with the test extras (amd-aiter): without
    them the install is broken, which is an error, not a skip."""
    try:
        discover("gfx942")
    except CkspaceError as exc:
        skip_without_compiler(f"{NO_HIP_COMPILER}: {exc}")
    locate_ck()


@pytest.mark.slow
def test_compile_sample_for_gfx942(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every variant, 2D and 3D, every pipeline and scheduler and trait the CK supports: zero failures.

    With the 2025-11 CK, stream-K and explicit GEMM do not exist, forward does not merge groups and
    bwd_data/bwd_weight build the default specialization only: the manifest's ``not_covered`` says so."""
    _toolchain_or_skip()
    monkeypatch.setenv("CKSPACE_BUILD_CACHE", str(tmp_path / "cache"))
    revision = find_revision()
    kernels, probes = sample_kernels("gfx942", revision)
    request = sample_request("gfx942", revision, kernels, probes)
    selector = SelectorOptions(hipdnn_plugin=True)
    result = emit(kernels, tmp_path / "tree", revision, arch="gfx942", request=request, selector=selector)
    configs = [e.gemm_config() for e in result.manifest.kernels]
    assert len(configs) == len(kernels)  # nothing of the sample is excluded by a ck_revision rule
    covered = set().union(*(tags(c) for c in configs))
    assert {("variant", v) for v in ("forward", "bwd_data", "bwd_weight")} <= covered
    assert {("ndim", v, n) for v in ("forward", "bwd_data", "bwd_weight") for n in (2, 3)} <= covered
    assert {
        ("two_stage", "bwd_weight"),
        ("split_image", "forward"),
        ("groups_to_merge", "bwd_weight"),
        ("double_smem_buffer", "forward"),
    } <= covered
    assert {
        ("specialization", "forward", s) for s in ("default", "filter1x1_pad0", "filter1x1_stride1_pad0", "filter3x3")
    } <= covered
    callable_ = {*revision.single_lds_pipelines, *revision.double_lds_pipelines}
    assert callable_ == {c.pipeline.value for c in configs}  # every pipeline a kernel can call
    assert {("pipeline_scheduler", "mem", "interwave"), ("pipeline_scheduler", "mem", "intrawave")} <= covered
    missing = request["not_covered"]
    if not revision.streamk_conv:
        assert "stream-K" in missing
    if not revision.explicit_gemm:
        assert "explicit GEMM" in missing
    assert len(probes) <= 3

    report = build(tmp_path / "tree", "gfx942", jobs=1, batch=6)
    failures = {k.name: k.error for k in report.kernels if k.status == "failed"}
    assert not failures and report.link_error is None
    assert report.ok == len(kernels) and report.units == 2  # no failed batch to isolate

    library = KernelLibrary(report.library)
    assert library.names == tuple(sorted(k.name for k in result.manifest.kernels))
    assert not library.loaded  # listing never loads the HIP library

    # the dispatcher went in with the kernels: the whole C API is exported, and it answers
    exported = set(exported_functions(Path(report.library)))
    assert {
        "ckspace_kernel_count",
        "ckspace_kernel_name",
        "ckspace_is_supported",
        "ckspace_select",
        "ckspace_run",
    } <= exported
    dispatcher = KernelLibrary(report.library)
    assert dispatcher.has_run and dispatcher.names == tuple(result.manifest.dispatcher.kernels)
    forward = ConvProblem.parse("N=1,G=1,C=64,K=64,Hi=14,Wi=14,Y=3,X=3,pad=1")
    for variant, dtype in {(c.variant, c.dtype) for c in configs}:
        choice = picked(dispatcher, forward, variant, dtype)
        if choice is not None:
            assert dispatcher.is_supported(choice.kernel, forward, variant, dtype)
    _is_a_clean_library(Path(report.library), len(dispatcher.names), tmp_path)
    _is_a_hipdnn_plugin(report.plugin, report.plugin_error, tmp_path)


def _is_a_hipdnn_plugin(plugin: str | None, error: str | None, work: Path) -> None:
    """The hipDNN plugin linked with the HIP kernels: hipDNN's plugin API alone in its dynamic symbol
    table, no HIP allocator called, and tests/hipdnn/harness.c loads it as hipDNN does (RTLD_LOCAL,
    every required symbol, engine ids that are their names' hash)."""
    assert plugin is not None and error is None, error
    assert Path(plugin).name == "libckspace_hipdnn_gfx942.so"
    declared = set(
        re.findall(
            r"^(?:hipdnnPluginStatus_t|void) (hipdnn\w+)\(",
            (Path(plugin).parents[2] / hipdnn_plugin.API_HEADER).read_text(),
            flags=re.M,
        )
    )
    assert _dynamic_symbols(Path(plugin), "--defined-only") == declared and len(declared) == 20
    assert not {n for n in _dynamic_symbols(Path(plugin), "--undefined-only") if n.startswith(("hipMalloc", "hipFree"))}
    harness = work / "harness"
    subprocess.run([c_compiler(), "-O2", str(HARNESS), "-o", str(harness), "-ldl", "-lpthread"], check=True)
    done = subprocess.run([str(harness), plugin, "check"], capture_output=True, text=True, timeout=120, check=True)
    assert "plugin ckspace_hipdnn_gfx942" in done.stdout and done.stdout.count("\nengine ") == 3, done.stdout


def _dynamic_symbols(library: Path, which: str) -> set[str]:
    listed = subprocess.run(["nm", "-D", which, str(library)], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1].split("@")[0] for line in listed.splitlines() if line.strip()}  # less HIP's versions


def _is_a_clean_library(library: Path, kernels: int, work: Path) -> None:
    """What an integrator needs of the HIP library: its dynamic symbol table holds the C API and
    nothing else (weak ck_tile instantiations included); no HIP allocator is called from it (every
    workspace is the caller's, the two-stage kernels' too, which the sample holds); and a CMake
    project links it through the package ``ckspace build`` wrote, and loads and calls it."""
    exported = _dynamic_symbols(library, "--defined-only")
    assert exported and all(name.startswith("ckspace_") for name in exported), sorted(
        n for n in exported if not n.startswith("ckspace_")
    )[:10]
    called = _dynamic_symbols(library, "--undefined-only")
    assert "hipMemsetAsync" in called  # the launchers' zeroing: this listing sees HIP's calls
    assert not {n for n in called if n.startswith(("hipMalloc", "hipExtMalloc", "hipFree"))}
    consumer = configure_and_build_consumer(library.parent, "ckspace::kernels_gfx942", work / "consumer")
    done = subprocess.run([str(consumer)], capture_output=True, text=True, timeout=120, check=True)
    assert f"kernels {kernels}" in done.stdout.splitlines()
