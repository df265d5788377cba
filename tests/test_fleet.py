"""A library of several archs (one tree, one library, each arch's kernels and model): its C API
answers for the current device's arch, as Python's Selector with that arch's kernels as the pool.

The dispatcher of a gfx942 + gfx950 library is linked with the host stand-in of the HIP half
(tests/standin/standin_run.c: its current device is of the arch CKSPACE_STANDIN_DEVICE_ARCH names),
and a C program asks it on a stand-in device of each arch.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
from functools import cache
from pathlib import Path

import pytest
from conftest import c_compiler, fake_ck
from standin_library import STANDIN

from ckspace.cli import main
from ckspace.compiling.toolchain import export_flags
from ckspace.core.errors import NoKernelError
from ckspace.core.vocab import Dtype, Variant
from ckspace.emit.dispatcher import (
    API_VERSION,
    HEADER,
    ONE_ARCH_API_VERSION,
    STATUSES,
    STRUCT_FIELDS,
    Library,
    dispatcher_sources,
    fleet_dispatcher_sources,
    host_units,
)
from ckspace.emit.manifest import Manifest
from ckspace.emit.rendering import template_environment
from ckspace.run.library import ConvProblemC, KernelLibrary
from ckspace.select.compiled import FLAGS
from ckspace.select.selector import Selector
from ckspace.space.space import Space
from ckspace.workloads.datasets import DATASETS
from ckspace.workloads.problem import ConvProblem

ARCHS = ("gfx942", "gfx950")
CELLS = ((Variant.FORWARD, Dtype.BF16), (Variant.FORWARD, Dtype.FP16), (Variant.BWD_WEIGHT, Dtype.BF16))
STATUS = {s.name: s.code for s in STATUSES}
KEYS = ("N", "C", "K", "G", "Hi", "Wi", "Y", "X", "stride_h", "stride_w", "pad_h", "pad_w")

DRIVER = r"""
/* Reads problems (the fields of ckspace_conv_problem in order, one problem a line) and prints, per
   problem, ckspace_select's status, kernel index, kernel name and estimate source. */
#include <stdio.h>
#include <string.h>
#include "ckspace_dispatch.h"

int main(void) {
  printf("arch %s api %d\n", ckspace_arch(), ckspace_api_version());
  int64_t v[sizeof(ckspace_conv_problem) / sizeof(int64_t)];
  const int n = (int)(sizeof v / sizeof v[0]);
  for (;;) {
    for (int i = 0; i < n; ++i)
      if (scanf("%ld", &v[i]) != 1) return 0;
    ckspace_conv_problem p;
    memcpy(&p, v, sizeof p);
    int kernel = -2, estimate = -2;
    float tflops = -2.0f;
    const int status = ckspace_select_explained(&p, &kernel, &tflops, &estimate);
    const char* name = ckspace_kernel_name(kernel);
    printf("%d %d %s %d %.9g\n", status, kernel, name ? name : "-", estimate, tflops);
  }
}
"""


@cache
def libraries() -> dict[str, Library]:
    """Each arch's kernels as its own rule space lists them (the default rule set: gfx950's hold
    kernels gfx942's rules refuse)."""
    out = {}
    for arch in ARCHS:
        configs = [
            c
            for c in Space(arch, ["forward", "bwd_weight"], 2, ["bf16", "fp16"], rule_set="default", ck=None)
            if c.kind == "gemm" and (c.variant, c.dtype) in CELLS
        ]
        out[arch] = Library.build(configs)
    return out


def write(files: dict[str, bytes], root: Path) -> Path:
    for path, data in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    return root


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The fleet tree's dispatcher linked with the stand-in HIP half as ``ckspace build`` links a
    library (its exports the C API alone), and the C driver linked to it."""
    root = tmp_path_factory.mktemp("fleet")
    tree = write(fleet_dispatcher_sources(libraries(), template_environment()), root / "tree")
    compiler = c_compiler()
    objects = []
    for source in [*(tree / unit for unit in host_units([str(p.relative_to(tree)) for p in tree.rglob("*")])), STANDIN]:
        objects.append(str(root / f"{source.stem}.o"))
        strict = ["-Werror=implicit-function-declaration", "-Werror=incompatible-pointer-types"]
        subprocess.run([compiler, *FLAGS, *strict, f"-I{tree}", "-c", str(source), "-o", objects[-1]], check=True)
    library = root / "libckspace_kernels_gfx942_gfx950.so"
    wrap = "-Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc"
    subprocess.run([compiler, "-shared", *objects, *export_flags(root), wrap, "-o", str(library), "-lm"], check=True)
    (root / "driver.c").write_text(DRIVER)
    driver = root / "driver"
    subprocess.run(
        [compiler, f"-I{tree}", str(root / "driver.c"), str(library), f"-Wl,-rpath,{root}", "-o", str(driver)],
        check=True,
    )
    return library, driver


def problems() -> list[tuple[ConvProblem, Variant, Dtype]]:
    """Real forward shapes (the measured gfx950 set, every fourth) in each cell, and odd ones."""
    with DATASETS["mi355x-forward-bf16"].path.open(newline="") as handle:
        shapes = sorted({tuple(int(row[k]) for k in KEYS) for row in csv.DictReader(handle)})
    real = [ConvProblem.from_values(dict(zip(KEYS, shape, strict=True))) for shape in shapes[::4]]
    odd = [
        ConvProblem.parse("N=1,C=3,K=64,Hi=224,Wi=224,Y=7,X=7,stride=2,pad=3"),
        ConvProblem.parse("N=2,C=6,K=10,Hi=9,Wi=9,Y=3,X=3"),
        ConvProblem.parse("N=4,G=4,C=64,K=64,Hi=28,Wi=28,Y=3,X=3,pad=1"),
    ]
    return [(p, variant, dtype) for variant, dtype in CELLS for p in real + odd]


def ask(driver: Path, device: str, asked: list[tuple[ConvProblem, Variant, Dtype]]) -> tuple[str, list[list[str]]]:
    lines = []
    for problem, variant, dtype in asked:
        c = ConvProblemC.of(problem, variant, dtype)
        lines.append(" ".join(str(getattr(c, f)) for f in STRUCT_FIELDS))
    done = subprocess.run(
        [str(driver)],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        check=True,
        env={"CKSPACE_STANDIN_DEVICE_ARCH": device, "PATH": "/usr/bin:/bin"},
    )
    head, *rows = done.stdout.splitlines()
    return head, [row.split() for row in rows]


@pytest.mark.slow
def test_each_arch_picks_as_python_with_that_arch_s_kernels(fleet: tuple[Path, Path]) -> None:
    """On a stand-in gfx942 device the C program's picks are Python's Selector's for gfx942 with
    gfx942's kernels as the pool; on a gfx950 device gfx950's (another model, more kernels). Some
    problems get different picks on the two archs, and a gfx950-only kernel is picked there."""
    _, driver = fleet
    asked = problems()
    picks: dict[str, list[str]] = {}
    for arch in ARCHS:
        head, rows = ask(driver, f"{arch}:sramecc+:xnack-", asked)
        assert head == f"arch gfx942,gfx950 api {API_VERSION}"
        library = libraries()[arch]
        pool = list(library.kernels)
        picks[arch] = []
        for (problem, variant, dtype), (status, _, name, _, tflops) in zip(asked, rows, strict=True):
            selector = Selector.load(arch, variant, dtype, engine="lightgbm", ck=None)
            cell = [c for c in pool if (c.variant, c.dtype) == (variant, dtype)]
            try:
                expected = selector.select(problem, cell, k=1, pool=pool)
            except NoKernelError:
                assert int(status) == STATUS["NO_KERNEL"], (arch, problem.text())
                picks[arch].append("-")
                continue
            assert int(status) == STATUS["OK"], (arch, problem.text())
            assert name == expected.pick, (arch, variant.value, dtype.value, problem.text())
            assert float(tflops) == pytest.approx(expected.top[0].predicted_tflops, rel=1e-5)
            picks[arch].append(name)
    differ = [i for i, (a, b) in enumerate(zip(picks["gfx942"], picks["gfx950"], strict=True)) if a != b]
    assert differ, "the two archs pick alike everywhere: the test would not see a wrong arch"
    only_950 = {c.name for c in libraries()["gfx950"].kernels} - {c.name for c in libraries()["gfx942"].kernels}
    assert only_950 and any(name in only_950 for name in picks["gfx950"])
    assert not any(name in only_950 for name in picks["gfx942"])


@pytest.mark.slow
def test_a_device_the_library_lacks_is_refused(fleet: tuple[Path, Path]) -> None:
    """A device of another arch gets CKSPACE_NO_ARCH, no device CKSPACE_NO_DEVICE; kernel -1."""
    _, driver = fleet
    asked = problems()[:2]
    for device, status in (("gfx90a:sramecc+:xnack-", "NO_ARCH"), ("gfx9420", "NO_ARCH"), ("", "NO_DEVICE")):
        _, rows = ask(driver, device, asked)
        assert [row[:2] for row in rows] == [[str(STATUS[status]), "-1"]] * len(asked), device


@pytest.mark.slow
def test_the_library_api_maps_kernel_indices_between_archs(
    fleet: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kernel indices are the library's (every kernel once, name order); a gfx950-only kernel is
    unsupported on a gfx942 device and supported on a gfx950 one; workspace needs no device; run
    on the wrong arch is refused before anything runs."""
    library_path, _ = fleet
    library = KernelLibrary(library_path)
    by_arch = libraries()
    names = sorted({c.name for lib in by_arch.values() for c in lib.kernels})
    assert library.names == tuple(names)
    assert library.archs == ARCHS
    assert library.runs_on("gfx942:xnack-") and library.runs_on("gfx950") and not library.runs_on("gfx90a")
    only = sorted({c.name for c in by_arch["gfx950"].kernels} - {c.name for c in by_arch["gfx942"].kernels})
    config = next(c for c in by_arch["gfx950"].kernels if c.name == only[0])
    problem = ConvProblem.parse("N=2,C=256,K=256,Hi=28,Wi=28,Y=3,X=3,pad=1")
    monkeypatch.setenv("CKSPACE_STANDIN_DEVICE_ARCH", "gfx950:sramecc+:xnack-")
    assert library.is_supported(only[0], problem, config.variant, config.dtype)
    assert library.workspace_size(only[0], problem, config.variant, config.dtype) == 0
    monkeypatch.setenv("CKSPACE_STANDIN_DEVICE_ARCH", "gfx942:sramecc+:xnack-")
    assert not library.is_supported(only[0], problem, config.variant, config.dtype)
    problem_c = ConvProblemC.of(problem, config.variant, config.dtype)
    index = library.index(only[0])
    assert library.run_status(index, problem_c, 0, 0, 0, None, 0, None) == STATUS["UNSUPPORTED"]
    monkeypatch.setenv("CKSPACE_STANDIN_DEVICE_ARCH", "gfx1100")
    assert library.run_status(index, problem_c, 0, 0, 0, None, 0, None) == STATUS["NO_ARCH"]


@pytest.mark.slow
def test_only_the_c_api_is_exported(fleet: tuple[Path, Path]) -> None:
    """The arch units' functions are hidden: the library's symbols are the one-arch library's."""
    library_path, _ = fleet
    symbols = subprocess.run(
        ["nm", "-D", "--defined-only", str(library_path)], capture_output=True, text=True, check=True
    ).stdout
    exported = {line.split()[-1] for line in symbols.splitlines() if line.split()[1] in "TD"}
    assert all(name.startswith("ckspace_") for name in exported), sorted(exported)
    assert {"ckspace_select", "ckspace_arch", "ckspace_is_supported", "ckspace_strided_run"} <= exported


@pytest.mark.slow
def test_one_arch_headers_are_as_before() -> None:
    """A one-arch library's header says API 4 and has no CKSPACE_NO_ARCH; a fleet's says 5 and has it."""
    one = dispatcher_sources(libraries()["gfx942"], "gfx942", template_environment())[HEADER].decode()
    many = fleet_dispatcher_sources(libraries(), template_environment())[HEADER].decode()
    assert f"#define CKSPACE_API_VERSION {ONE_ARCH_API_VERSION}\n" in one and "NO_ARCH" not in one
    assert f"#define CKSPACE_API_VERSION {API_VERSION}\n" in many and "#define CKSPACE_NO_ARCH 9" in many


def emit_fleet(root: Path, archs: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> dict:
    """``ckspace emit --arch ARCHS`` of forward bf16 2D (default rule set) on the fake CK headers."""
    monkeypatch.setenv("CK_ROOT", str(fake_ck(root / "ck", explicit_gemm=False)))
    tree = root / "tree"
    arguments = ["emit", "--arch", *archs, "--variant", "forward", "--ndim", "2", "--dtype", "bf16"]
    assert main([*arguments, "--rule-set", "default", "--with-selector", "--out", str(tree)]) == 0
    return json.loads((tree / "manifest.json").read_text())


def test_emit_of_two_archs_writes_each_kernel_once_and_says_its_archs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One tree: a kernel both archs list is emitted once (its header names both archs), the
    manifest says which archs each kernel serves and each arch's dispatcher kernels are that arch's
    own listing; a one-arch tree's manifest has no such fields (its bytes as before)."""
    fleet_manifest = emit_fleet(tmp_path / "fleet", ARCHS, monkeypatch)
    singles = {arch: emit_fleet(tmp_path / arch, (arch,), monkeypatch) for arch in ARCHS}
    assert fleet_manifest["arch"] == "gfx942,gfx950" and fleet_manifest["archs"] == list(ARCHS)
    listed = {arch: {k["name"] for k in singles[arch]["kernels"]} for arch in ARCHS}
    assert {k["name"] for k in fleet_manifest["kernels"]} == listed["gfx942"] | listed["gfx950"]
    for kernel in fleet_manifest["kernels"]:
        assert kernel["archs"] == [arch for arch in ARCHS if kernel["name"] in listed[arch]]
    assert any(len(k["archs"]) == 2 for k in fleet_manifest["kernels"])
    assert fleet_manifest["dispatcher"]["archs"] == {arch: sorted(listed[arch]) for arch in ARCHS}
    shared = next(k for k in fleet_manifest["kernels"] if len(k["archs"]) == 2)
    header = (tmp_path / "fleet" / "tree" / shared["header"]["path"]).read_text()
    assert 'TargetArch = "gfx942 gfx950"' in header
    for manifest in singles.values():
        assert "archs" not in manifest and "archs" not in manifest["dispatcher"]
        assert all("archs" not in k for k in manifest["kernels"])
    assert "ckspace_dispatch_gfx942.c" in fleet_manifest["dispatcher"]["host_units"]


def test_bad_arch_lists_are_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CK_ROOT", str(fake_ck(tmp_path / "ck", explicit_gemm=False)))
    plan = tmp_path / "plan.txt"
    plan.write_text("grouped_conv_fwd_bf16_nhwgc_2d_compv3_cshuffle_intrawave_16x64x64_1x4x1_16x16x16\n")
    arguments = ["--variant", "forward", "--ndim", "2", "--dtype", "bf16", "--out", str(tmp_path / "t")]
    for argv, expected in (
        (["--arch", "gfx942", "gfx1", *arguments], "unknown arch 'gfx1'"),
        (
            ["--arch", "gfx942", "gfx950", "--kernels", str(plan), *arguments],
            "one arch's plan, not for --arch gfx942 gfx950",
        ),
    ):
        capsys.readouterr()
        assert main(["emit", *argv]) == 2
        error = capsys.readouterr().err
        assert error.count("\n") == 1 and expected in error, error
    emit_fleet(tmp_path / "fleet", ARCHS, monkeypatch)
    tree = str(tmp_path / "fleet" / "tree")
    for argv, expected in (  # the tree may follow --arch's words
        (
            ["--arch", "gfx942", tree],
            f"{tree} was emitted for gfx942 gfx950, not gfx942: build it with --arch gfx942 gfx950",
        ),
        ([tree, "--arch", "gfx942", "gfx1"], "unknown arch 'gfx1'"),
        (["--arch", "gfx942", "gfx950"], "the tree to build is missing: ckspace build DIR --arch ARCH [ARCH ...]"),
    ):
        capsys.readouterr()
        assert main(["build", *argv]) == 2
        error = capsys.readouterr().err
        assert error.count("\n") == 1 and expected in error, error


def test_a_two_arch_build_compiles_each_set_of_archs_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernels of both archs compile together for both (the dispatcher with them, last); a kernel
    of gfx950 alone compiles for gfx950 alone."""
    from ckspace.compiling.builder import _compile_groups
    from ckspace.compiling.toolchain import Toolchain

    emit_fleet(tmp_path, ARCHS, monkeypatch)
    manifest = Manifest.model_validate_json((tmp_path / "tree" / "manifest.json").read_bytes())
    flags = ("-x", "hip", "--offload-arch=gfx942", "--offload-arch=gfx950", "-O3")
    toolchain = Toolchain(
        kind="clang", compiler="cc", version="v", identity="i", arch="gfx942_gfx950", compile_flags=flags, link_flags=()
    )
    groups = _compile_groups(manifest, toolchain, list(ARCHS))
    assert [(t.arch, prefix) for t, prefix, _ in groups] == [
        ("gfx950", "batch_gfx950_"),
        ("gfx942_gfx950", "batch_gfx942_gfx950_"),
    ]
    assert groups[0][0].compile_flags == ("-x", "hip", "--offload-arch=gfx950", "-O3")
    assert groups[1][0] is toolchain
    archs_of = {k.name: k.archs for k in manifest.kernels}
    assert all(archs_of[name] == ["gfx950"] for name in groups[0][2]) and groups[0][2]
    assert all(archs_of[name] == list(ARCHS) for name in groups[1][2]) and groups[1][2]


@pytest.mark.slow
def test_a_two_arch_library_compiles_for_real(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gfx90a and gfx942 (the archs this machine's clang knows; gfx950 needs clang-22): three
    kernels emitted once, compiled in one unit for both archs (one code object per arch in the
    library's fat binary), linked, loaded; the dynamic symbol table holds the C API alone. Emitted
    without the dispatcher: the selector knows no hardware facts of gfx90a."""
    from conftest import skip_without_compiler
    from skip_policy import NO_HIP_COMPILER

    from ckspace.compiling.builder import build
    from ckspace.compiling.toolchain import discover
    from ckspace.core.errors import CkspaceError
    from ckspace.run.elf import exported_functions

    try:
        discover("gfx90a"), discover("gfx942")
    except CkspaceError as exc:
        skip_without_compiler(f"{NO_HIP_COMPILER}: {exc}")
    monkeypatch.setenv("CKSPACE_BUILD_CACHE", str(tmp_path / "cache"))
    tree = tmp_path / "tree"
    where = "tile_m == 16 and tile_n == 64"
    arguments = ["--variant", "forward", "--ndim", "2", "--dtype", "bf16", "--rule-set", "default"]
    assert main(["emit", "--arch", "gfx90a", "gfx942", *arguments, "--where", where, "--out", str(tree)]) == 0
    manifest = Manifest.model_validate_json((tree / "manifest.json").read_bytes())
    assert len(manifest.kernels) == 3 and all(k.archs == ["gfx90a", "gfx942"] for k in manifest.kernels)

    report = build(tree, "gfx942,gfx90a", jobs=1, batch=8)
    assert report.ok == 3 and report.failed == 0 and report.link_error is None, report.kernels
    assert report.arch == "gfx90a_gfx942" and report.units == 1
    library = Path(report.library)
    assert library == tree / "build" / "gfx90a_gfx942" / "libckspace_kernels_gfx90a_gfx942.so"
    data = library.read_bytes()
    assert b"amdgcn-amd-amdhsa--gfx90a" in data and b"amdgcn-amd-amdhsa--gfx942" in data
    exported = set(exported_functions(library))
    assert {f"ckspace_run_{k.name}" for k in manifest.kernels} <= exported  # each kernel once
    assert all(name.startswith("ckspace_") for name in exported), sorted(exported)  # the C API alone
    handle = KernelLibrary(library)
    assert handle.names == tuple(k.name for k in manifest.kernels)
    import ctypes

    ctypes.CDLL(str(library))  # loads beside the HIP runtime
    package = (library.parent / "ckspace_kernelsConfig.cmake").read_text()
    assert 'set(ckspace_kernels_ARCH "gfx90a,gfx942")' in package
    assert 'set(ckspace_kernels_TARGET "ckspace::kernels_gfx90a_gfx942")' in package


def standin_fleet(root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A gfx942 + gfx950 tree (fake CK headers) whose library is its host dispatcher linked with
    the stand-in HIP half, where ``ckspace build`` would put it."""
    emit_fleet(root, ARCHS, monkeypatch)
    tree = root / "tree"
    manifest = Manifest.model_validate_json((tree / "manifest.json").read_bytes())
    assert manifest.dispatcher is not None
    build_dir = tree / "build" / "gfx942_gfx950"
    build_dir.mkdir(parents=True)
    sources = [str(tree / unit) for unit in manifest.dispatcher.host_units]
    output = build_dir / "libckspace_kernels_gfx942_gfx950.so"
    compiler = [c_compiler(), "-O2", "-shared", "-fPIC", f"-I{tree}"]
    wrap = "-Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc"  # the stand-in counts allocations
    subprocess.run([*compiler, *sources, str(STANDIN), wrap, "-o", str(output), "-lm"], check=True)
    return tree


@pytest.mark.slow
def test_bench_runs_the_device_arch_s_kernels_and_refuses_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a stand-in gfx942 device, bench plans and runs gfx942's kernels only (rows say gfx942);
    on gfx950, gfx950's (some gfx942 lacks); a gfx90a device is refused in one line."""
    import sys

    tree = standin_fleet(tmp_path, monkeypatch)
    manifest = Manifest.model_validate_json((tree / "manifest.json").read_bytes())
    assert manifest.dispatcher is not None and manifest.dispatcher.archs is not None
    own = {arch: set(manifest.dispatcher.archs[arch]) for arch in ARCHS}
    assert own["gfx950"] - own["gfx942"], "the fake CK gives both archs the same kernels: nothing to tell apart"
    problems = tmp_path / "problems.csv"
    problems.write_text("N,C,K,G,Hi,Wi,Y,X,stride_h,stride_w,pad_h,pad_w\n2,64,64,1,6,6,3,3,1,1,1,1\n")
    for device in (*ARCHS, "gfx90a"):
        out = tmp_path / f"{device}.csv"
        bench = ["bench", str(tree), "--problems", str(problems), "--out", str(out), "--backend", "host"]
        done = subprocess.run(
            [sys.executable, "-m", "ckspace", *bench, "--warmup", "0", "--repeat", "1", "--timeout", "30"],
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "CKSPACE_STANDIN_DEVICE_ARCH": f"{device}:sramecc+:xnack-"},
        )
        if device == "gfx90a":
            assert done.returncode == 2
            assert done.stderr.strip() == (
                "ckspace: error: GPU 0 is gfx90a; libckspace_kernels_gfx942_gfx950.so holds kernels for gfx942, gfx950"
            )
            continue
        assert done.returncode == 0, done.stderr
        with out.open(newline="") as handle:
            rows = list(csv.DictReader(handle))
        assert rows and {row["status"] for row in rows} == {"ok"}
        assert {row["kernel"] for row in rows} <= own[device] and {row["arch"] for row in rows} == {device}
        if device == "gfx950":
            assert {row["kernel"] for row in rows} & (own["gfx950"] - own["gfx942"])


@pytest.mark.slow
def test_one_cmake_package_serves_each_arch_with_its_own_picks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The package ``ckspace build`` writes beside a library of two archs (one package, one
    target): a C++ program found through it picks, on a stand-in device of each arch, what Python's
    Selector of that arch picks with that arch's kernels as its pool."""
    from cmake_project import configure_and_build_consumer, without_library_path

    from ckspace import __version__
    from ckspace.compiling.package import write_kernels_package
    from ckspace.compiling.toolchain import Toolchain
    from ckspace.environment.files import sha256

    tree = standin_fleet(tmp_path, monkeypatch)
    manifest = Manifest.model_validate_json((tree / "manifest.json").read_bytes())
    assert manifest.dispatcher is not None and manifest.dispatcher.archs is not None
    build_dir = tree / "build" / "gfx942_gfx950"
    toolchain = Toolchain(
        kind="clang", compiler="c++", version="v", identity="i", arch="gfx942_gfx950", compile_flags=(), link_flags=()
    )
    write_kernels_package(tree, build_dir, build_dir / "libckspace_kernels_gfx942_gfx950.so", manifest, toolchain, "ck")
    consumer = configure_and_build_consumer(build_dir, "ckspace::kernels_gfx942_gfx950", tmp_path)
    pc = (build_dir / "ckspace_kernels_gfx942_gfx950.pc").read_text()
    assert "arch=gfx942,gfx950\n" in pc and "-lckspace_kernels_gfx942_gfx950" in pc
    asked = [p for p, variant, dtype in problems() if (variant, dtype) == (Variant.FORWARD, Dtype.BF16)]
    lines = []
    for problem in asked:
        struct = ConvProblemC.of(problem, "forward", "bf16")
        lines.append(" ".join(f"{name}={getattr(struct, name)}" for name in STRUCT_FIELDS))
    (tmp_path / "problems.txt").write_text("\n".join(lines) + "\n")
    configs = {k.name: k.gemm_config() for k in manifest.kernels}
    picks = {}
    for arch in ARCHS:
        done = subprocess.run(
            [str(consumer), str(tmp_path / "problems.txt")],
            capture_output=True,
            text=True,
            check=True,
            env={**without_library_path(), "CKSPACE_STANDIN_DEVICE_ARCH": arch},
        )
        head, count, *answers = done.stdout.splitlines()
        assert head == f"package {__version__} gfx942,gfx950 {sha256((tree / 'manifest.json').read_bytes())}"
        assert count == f"kernels {len(manifest.kernels)}"
        pool = [configs[name].model_copy(update={"arch": arch}) for name in manifest.dispatcher.archs[arch]]
        selector = Selector.load(arch, "forward", "bf16", engine="lightgbm", ck=None)
        picks[arch] = []
        for problem, answer in zip(asked, answers, strict=True):
            index, name, tflops = answer.split()
            try:
                expected = selector.select(problem, pool, k=1, pool=pool)
            except NoKernelError:
                assert (index, name) == ("-1", "none"), problem.text()
                continue
            assert name == expected.pick and manifest.dispatcher.kernels[int(index)] == name, (arch, problem.text())
            assert float(tflops) == pytest.approx(expected.top[0].predicted_tflops, rel=1e-5)
            picks[arch].append(name)
    assert picks["gfx942"] != picks["gfx950"]


@pytest.mark.slow
def test_a_host_only_library_of_two_archs_answers_for_the_arch_it_is_told(tmp_path: Path) -> None:
    """No HIP half, no device: NO_DEVICE until ckspace_use_arch names one of its archs; then it
    picks as that arch's Selector; another arch is refused in one line."""
    from ckspace.core.errors import InvalidInputError
    from ckspace.select.compiled import compile_library

    files = fleet_dispatcher_sources(libraries(), template_environment())
    sources = {path: data.decode() for path, data in files.items()}
    library = KernelLibrary(compile_library(sources, host_units(list(sources)), c_compiler()))
    problem = ConvProblem.parse("N=8,C=256,K=256,Hi=56,Wi=56,Y=3,X=3,pad=1")
    with pytest.raises(InvalidInputError, match=r"^ckspace_select: HIP reports no current device$"):
        library.select(problem, "forward", "bf16")
    with pytest.raises(InvalidInputError, match=r"holds kernels for gfx942, gfx950, not 'gfx90a'$"):
        library.use_arch("gfx90a")
    for arch in ARCHS:
        library.use_arch(arch)
        pool = list(libraries()[arch].kernels)
        cell = [c for c in pool if (c.variant, c.dtype) == (Variant.FORWARD, Dtype.BF16)]
        expected = Selector.load(arch, "forward", "bf16", engine="lightgbm", ck=None).select(problem, cell, pool=pool)
        assert library.select(problem, "forward", "bf16").name == expected.pick


@pytest.mark.slow
def test_one_hipdnn_plugin_serves_each_arch_s_device_with_that_arch_s_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plugin over a gfx942 + gfx950 library (over the stand-in HIP half): each arch's engines,
    named and hashed as its one-arch plugin's; a graph on a gfx942 device is offered the gfx942
    engine, on gfx950 the gfx950 one, on a gfx90a device none, naming the archs it serves."""
    from standin_library import build_standin_plugin
    from test_hipdnn import HARNESS, P2, Plugin, applicability, flatc, graph, harness

    from ckspace.emit import hipdnn_plugin

    monkeypatch.setenv("CK_ROOT", str(fake_ck(tmp_path / "ck", explicit_gemm=False)))
    tree = tmp_path / "tree"
    arguments = ["--variant", "forward", "--ndim", "2", "--dtype", "bf16", "--rule-set", "default"]
    assert main(["emit", "--arch", *ARCHS, *arguments, "--hipdnn-plugin", "--out", str(tree)]) == 0
    manifest = Manifest.model_validate_json((tree / "manifest.json").read_bytes())
    assert manifest.hipdnn is not None and manifest.hipdnn.plugin == "ckspace_hipdnn_gfx942_gfx950"
    assert manifest.hipdnn.engines == {
        e.name: e.id for arch in ARCHS for e in hipdnn_plugin.engines(arch, [Variant.FORWARD])
    }  # the one-arch plugins' names and ids: stable as archs come and go
    runner = tmp_path / "harness"
    subprocess.run([c_compiler(), "-O2", str(HARNESS), "-o", str(runner), "-ldl", "-lpthread"], check=True)
    plugin = Plugin(tree, manifest, build_standin_plugin(tree), runner, tmp_path)
    assert plugin.library.name == "libckspace_hipdnn_gfx942_gfx950.so"
    listed = {int(line.split()[1]): line.split()[2] for line in harness(plugin, "check") if line.startswith("engine ")}
    assert listed == {v: k for k, v in manifest.hipdnn.engines.items()}
    graphs = [flatc(plugin, "fwd", graph(P2, "forward", "bf16"))]
    for arch in ARCHS:
        expected = manifest.hipdnn.engines[f"CKSPACE_{arch.upper()}_CONV_FWD"]
        assert applicability(plugin, graphs, device=f"{arch}:sramecc+:xnack-") == [str(expected)]
    refused = "not applicable: the device is gfx90a:xnack-; this plugin's kernels are for gfx942,gfx950"
    assert applicability(plugin, graphs, device="gfx90a:xnack-") == [f"none: {refused}"]


@pytest.mark.slow
def test_a_strided_run_reaches_the_library_s_kernel_through_its_arch(
    fleet: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ckspace_strided_run of a gfx942 kernel whose index among gfx942's kernels is not its index in
    the library runs that kernel on a gfx942 device (the arch's unit calls the library's ckspace_run
    with the library's index, not its own): with the stand-in making that one kernel wrong, the
    strided run's output is ckspace_run's of the same index, and another kernel's is not; a
    gfx950-only kernel is refused there."""
    import ctypes

    import numpy as np

    library_path, _ = fleet
    names = KernelLibrary(library_path).names
    by_arch = libraries()
    only = sorted({c.name for c in by_arch["gfx950"].kernels} - {c.name for c in by_arch["gfx942"].kernels})
    problem = ConvProblem.parse("N=1,C=64,K=64,Hi=8,Wi=8,Y=3,X=3,pad=1")
    monkeypatch.setenv("CKSPACE_STANDIN_DEVICE_ARCH", "gfx950")
    probe = KernelLibrary(library_path)
    chosen = next(
        n for n in only if n.startswith("grouped_conv_fwd_bf16") and probe.is_supported(n, problem, "forward", "bf16")
    )
    other = next(n for n in names if n != chosen and probe.is_supported(n, problem, "forward", "bf16"))
    wrong = names.index(chosen)
    tree = library_path.parent / "tree"
    objects = [
        str(library_path.parent / f"{Path(unit).stem}.o")
        for unit in host_units([str(p.relative_to(tree)) for p in tree.rglob("*")])
    ]
    marked = tmp_path / "libwrong.so"
    subprocess.run(
        [
            c_compiler(),
            *FLAGS,
            f"-I{tree}",
            "-c",
            str(STANDIN),
            f"-DSTANDIN_WRONG={wrong}",
            "-o",
            str(tmp_path / "s.o"),
        ],
        check=True,
    )
    wrap = "-Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc"
    subprocess.run(
        [c_compiler(), "-shared", *objects, str(tmp_path / "s.o"), wrap, "-o", str(marked), "-lm"], check=True
    )
    lib = ctypes.CDLL(str(marked))
    c = ConvProblemC.of(problem, "forward", "bf16")
    rng = np.random.default_rng(0)
    x = rng.integers(0x3E00, 0x3F80, size=64 * 64, dtype=np.uint16)
    w = rng.integers(0x3E00, 0x3F80, size=64 * 64 * 9, dtype=np.uint16)

    def output(run) -> tuple[int, np.ndarray]:
        y = np.zeros(64 * 64, dtype=np.uint16)
        status = run(x.ctypes.data, w.ctypes.data, y.ctypes.data)
        return status, y

    def strided(index: int):
        return lambda a, b, y: lib.ckspace_strided_run(
            index,
            ctypes.byref(c),
            None,
            None,
            ctypes.c_void_p(a),
            ctypes.c_void_p(b),
            ctypes.c_void_p(y),
            None,
            ctypes.c_size_t(0),
            None,
        )

    def direct(index: int):
        return lambda a, b, y: lib.ckspace_run(
            index,
            ctypes.byref(c),
            ctypes.c_void_p(a),
            ctypes.c_void_p(b),
            ctypes.c_void_p(y),
            None,
            ctypes.c_size_t(0),
            None,
        )

    status, through = output(strided(wrong))
    assert status == STATUS["OK"]
    status, straight = output(direct(wrong))
    assert status == STATUS["OK"] and np.array_equal(straight, through)
    status, right = output(direct(names.index(other)))
    assert status == STATUS["OK"] and not np.array_equal(right, through)  # the marked kernel ran, not another
    assert output(strided(names.index(only[0])))[0] == STATUS["UNSUPPORTED"]
