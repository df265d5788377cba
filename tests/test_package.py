"""What ``ckspace build`` writes for the projects that adopt its library, used as they would use it:
a real CMake project finds the package and links the imported target, a C program compiles with
``pkg-config --cflags --libs``, find_package weighs the version file, and ``compile_commands.json``
holds each source's real compile command. Everything lies under a directory whose name holds a
space and a ``${x}``, which CMake, pkg-config, ninja and the shell each read as syntax unless escaped.
"""

from __future__ import annotations

import csv
import ctypes.util
import json
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from cmake_project import CONSUMER, configure, configure_and_build_consumer, without_library_path
from conftest import c_compiler, fake_ck, skip_without_compiler
from test_build import use_fake_toolchain

from ckspace import __version__
from ckspace.cli import main
from ckspace.compiling.builder import build
from ckspace.compiling.package import CONFIG, write_host_package
from ckspace.compiling.toolchain import Toolchain, discover
from ckspace.core.errors import NoKernelError
from ckspace.emit.dispatcher import STRUCT_FIELDS
from ckspace.emit.manifest import MANIFEST_NAME, Manifest
from ckspace.environment.ck_header_cache import find_revision
from ckspace.environment.files import sha256
from ckspace.run.library import ConvProblemC
from ckspace.select.compiled import FLAGS
from ckspace.select.selector import Selector
from ckspace.workloads.datasets import DATASETS
from ckspace.workloads.problem import ConvProblem

KEYS = ("N", "C", "K", "G", "Hi", "Wi", "Y", "X", "stride_h", "stride_w", "pad_h", "pad_w")
EMIT = ["emit", "--arch", "gfx950", "--variant", "forward", "--ndim", "2", "--dtype", "bf16", "--rule-set", "default"]


@dataclass(frozen=True)
class Emitted:
    """The module's tree (gfx950 forward bf16 2D, default rule set, with the dispatcher), built
    ``--host-only``, and the fake CK headers it was emitted against."""

    tree: Path
    ck: Path

    @property
    def manifest(self) -> Manifest:
        return Manifest.model_validate_json((self.tree / MANIFEST_NAME).read_bytes())

    @property
    def host_dir(self) -> Path:
        return self.tree / "build" / "host"


@pytest.fixture(scope="module")
def emitted(tmp_path_factory: pytest.TempPathFactory) -> Emitted:
    base = tmp_path_factory.mktemp("package") / "a dir ${x}"
    with pytest.MonkeyPatch.context() as patch:
        ck = fake_ck(base / "ck", explicit_gemm=False)
        patch.setenv("CK_ROOT", str(ck))
        assert main([*EMIT, "--with-selector", "--out", str(base / "tree")]) == 0
        assert main(["build", str(base / "tree"), "--host-only"]) == 0
    return Emitted(base / "tree", ck)


def real_problems() -> list[ConvProblem]:
    """The 230 distinct shapes of the measured forward bf16 data set."""
    with DATASETS["mi355x-forward-bf16"].path.open(newline="") as handle:
        shapes = sorted({tuple(int(row[k]) for k in KEYS) for row in csv.DictReader(handle)})
    return [ConvProblem.from_values(dict(zip(KEYS, shape, strict=True))) for shape in shapes]


def problem_line(problem: ConvProblem) -> str:
    """A problem as the consumer reads it: every field of ``ckspace_conv_problem``, by name."""
    struct = ConvProblemC.of(problem, "forward", "bf16")
    return " ".join(f"{name}={getattr(struct, name)}" for name in STRUCT_FIELDS)


def run(command: list[str]) -> str:
    """A program's output; its failure fails the test with what it said."""
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=without_library_path())
    assert done.returncode == 0, f"{command[0]} exited {done.returncode}: {done.stderr}"
    return done.stdout


@pytest.mark.slow
def test_a_cmake_project_links_the_host_library_and_picks_as_python(emitted: Emitted, tmp_path: Path) -> None:
    """The consumer found through CMAKE_PREFIX_PATH=build/host links ckspace::dispatch_host, reads
    the package's variables, and its ckspace_select picks on every real problem what the Python
    selector picks with the library's kernels as candidates and pool (as tests/test_dispatcher.py)."""
    manifest = emitted.manifest
    assert manifest.dispatcher is not None
    consumer = configure_and_build_consumer(emitted.host_dir, "ckspace::dispatch_host", tmp_path)
    problems = real_problems()
    (tmp_path / "problems.txt").write_text("".join(problem_line(p) + "\n" for p in problems))
    lines = run([str(consumer), str(tmp_path / "problems.txt")]).splitlines()
    manifest_sha256 = sha256((emitted.tree / MANIFEST_NAME).read_bytes())
    assert lines[:2] == [f"package {__version__} gfx950 {manifest_sha256}", f"kernels {len(manifest.kernels)}"]
    configs = [k.gemm_config() for k in manifest.kernels]
    selector = Selector.load("gfx950", "forward", "bf16", engine="lightgbm", ck=None)
    picked = set()
    for problem, line in zip(problems, lines[2:], strict=True):
        index, name, tflops = line.split()
        try:
            expected = selector.select(problem, configs, k=1, pool=configs)
        except NoKernelError:
            assert (index, name) == ("-1", "none"), problem.text()
            continue
        assert (int(index), name) == (manifest.dispatcher.kernels.index(expected.pick), expected.pick), problem.text()
        assert float(tflops) == pytest.approx(expected.top[0].predicted_tflops, rel=1e-5)
        picked.add(name)
    assert len(picked) > 1  # the problems tell the kernels apart


def pkg_config(build_dir: Path, *arguments: str) -> str:
    program = shutil.which("pkg-config")
    if program is None:
        skip_without_compiler("no pkg-config on PATH (Debian: apt-get install pkgconf)")
    done = subprocess.run(
        [program, *arguments], capture_output=True, text=True, check=False, env={"PKG_CONFIG_PATH": str(build_dir)}
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


PROGRAM = """\
#include <stdio.h>
#include "ckspace_dispatch.h"
int main(void) {
  if (ckspace_api_version() != CKSPACE_API_VERSION) return 3;
  printf("%d %s\\n", ckspace_kernel_count(), ckspace_kernel_name(0));
  return 0;
}
"""


def test_pkg_config_compiles_and_links_a_c_program(emitted: Emitted, tmp_path: Path) -> None:
    """``cc main.c $(pkg-config --cflags --libs ckspace_dispatch_host)`` (the shell's reading of
    pkg-config's escapes: shlex) finds the header and the library, and the program runs where its
    link says the library is; the module's variables hold the manifest's sha256 and the arch."""
    build_dir, module = emitted.host_dir, "ckspace_dispatch_host"
    flags = shlex.split(pkg_config(build_dir, "--cflags", "--libs", module))
    assert [f for f in flags if f.startswith(("-I", "-L", "-l"))] == [
        f"-I{emitted.tree}",
        f"-L{build_dir}",
        "-lckspace_dispatch",
    ]
    assert f"-Wl,-rpath,{build_dir}" in flags
    assert pkg_config(build_dir, "--modversion", module) == __version__
    assert pkg_config(build_dir, "--variable=arch", module) == "gfx950"
    assert pkg_config(build_dir, "--variable=manifest_sha256", module) == sha256(
        (emitted.tree / MANIFEST_NAME).read_bytes()
    )
    (tmp_path / "main.c").write_text(PROGRAM)
    run([c_compiler(), str(tmp_path / "main.c"), *flags, "-o", str(tmp_path / "program")])
    kernels = emitted.manifest.dispatcher.kernels  # type: ignore[union-attr]
    assert run([str(tmp_path / "program")]) == f"{len(kernels)} {kernels[0]}\n"


PROBE = """\
cmake_minimum_required(VERSION 3.19)
project(probe LANGUAGES NONE)
foreach(request IN LISTS REQUESTS)
  string(REPLACE " " ";" words "${request}")
  unset(ckspace_kernels_FOUND)
  set(ckspace_kernels_DIR "${PACKAGE_DIR}" CACHE PATH "" FORCE)  # a failed find_package unsets it
  find_package(ckspace_kernels ${words} CONFIG QUIET)
  message(STATUS "request '${request}': ${ckspace_kernels_FOUND}")
endforeach()
if(REQUIRE)
  set(ckspace_kernels_DIR "${PACKAGE_DIR}" CACHE PATH "" FORCE)
  find_package(ckspace_kernels ${REQUIRE} CONFIG REQUIRED)
  message(STATUS "vars ${ckspace_kernels_VERSION} ${ckspace_kernels_TARGET} ${ckspace_kernels_ARCH}")
endif()
"""
"""find_package asked, through ckspace_kernels_DIR, for each of ``REQUESTS`` in turn, then for
``REQUIRE`` as REQUIRED: a project of no language, so no compiler is involved."""


def probe(tmp_path: Path, package_dir: Path, requests: list[str], require: str) -> subprocess.CompletedProcess[str]:
    source = tmp_path / "probe"
    source.mkdir(exist_ok=True)
    (source / "CMakeLists.txt").write_text(PROBE)
    shutil.rmtree(tmp_path / "probe build", ignore_errors=True)
    return configure(
        source,
        tmp_path / "probe build",
        f"PACKAGE_DIR={package_dir}",
        f"REQUESTS={';'.join(requests)}",
        f"REQUIRE={require}",
    )


def test_the_version_file_takes_the_same_major_version_not_a_newer_one(emitted: Emitted, tmp_path: Path) -> None:
    """SameMajorVersion written out: any version, an older or equal one of the same major version
    and a range holding this version are met; a newer minor, another major, an EXACT other version
    or a range beside it are not, and a REQUIRED find of the next major version fails the configure.
    Found through ckspace_kernels_DIR; a package whose library is not there is not found."""
    major, minor = (int(p) for p in __version__.split(".")[:2])
    expected = {
        "": True,
        f"{major}": True,
        f"{__version__} EXACT": True,
        f"{major}.{minor + 1}": False,
        f"{major + 1}": False,
        f"{major}.{minor}.999 EXACT": False,
        f"{major}...<{major + 1}": True,
        f"{major + 1}...{major + 2}": False,
    }
    done = probe(tmp_path, emitted.host_dir, list(expected), __version__)
    assert done.returncode == 0, done.stdout + done.stderr
    for request, found in expected.items():
        assert f"request '{request}': {int(found)}" in done.stdout, request
    assert f"vars {__version__} ckspace::dispatch_host gfx950" in done.stdout
    newer = probe(tmp_path, emitted.host_dir, [], str(major + 1))
    assert newer.returncode != 0 and "ckspace_kernels" in newer.stderr and f"version: {__version__}" in newer.stderr
    elsewhere = tmp_path / "package of a library that is not there"
    write_host_package(emitted.tree, elsewhere, elsewhere / "libckspace_dispatch.so", emitted.manifest)
    gone = probe(tmp_path, elsewhere, [], __version__)
    assert gone.returncode != 0 and "libckspace_dispatch.so is missing" in gone.stderr


@dataclass(frozen=True)
class KernelBuild:
    """The module's tree built for gfx950 with the stand-in HIP compiler of tests/test_build.py."""

    build_dir: Path
    toolchain: Toolchain
    ck_include: str


@pytest.fixture(scope="module")
def kernel_build(emitted: Emitted, tmp_path_factory: pytest.TempPathFactory) -> KernelBuild:
    base = tmp_path_factory.mktemp("fake toolchain")
    with pytest.MonkeyPatch.context() as patch:
        use_fake_toolchain(base, patch, base / "bin dir" / "fake clang")
        patch.setenv("CK_ROOT", str(emitted.ck))
        report = build(emitted.tree, "gfx950", jobs=1, batch=4)
        assert report.failed == 0 and report.library is not None
        return KernelBuild(emitted.tree / "build" / "gfx950", discover("gfx950"), find_revision().include_dir)


@pytest.mark.slow
def test_compile_commands_hold_each_source_with_the_build_s_command(
    emitted: Emitted, kernel_build: KernelBuild
) -> None:
    """compile_commands.json (ninja -t compdb) lists each kernel's source and the run unit with the
    toolchain's command, and the dispatcher's host units with the host C compiler's, word for word
    as the shell reads them back (the tree's path holds a space and a ``${x}``); the package names the
    kernel library's target."""
    tree, manifest = emitted.tree, emitted.manifest
    assert manifest.dispatcher is not None
    entries = json.loads((kernel_build.build_dir / "compile_commands.json").read_text())
    by_file = {e["file"]: e for e in entries}
    hip = [k.source.path for k in manifest.kernels] + [manifest.dispatcher.run_unit]
    assert len(entries) == len(by_file) and set(by_file) == {*hip, *manifest.dispatcher.host_units}
    assert {e["directory"] for e in entries} == {str(tree)}
    for source in hip:
        words = shlex.split(by_file[source]["command"])
        output = by_file[source]["output"]
        assert words == kernel_build.toolchain.compile_command(source, output, (str(tree), kernel_build.ck_include))
        assert words[0] == kernel_build.toolchain.compiler and " " in words[0]  # the fake clang's "bin dir"
    for source in manifest.dispatcher.host_units:
        output = by_file[source]["output"]
        assert shlex.split(by_file[source]["command"]) == [
            c_compiler(),
            *FLAGS,
            f"-I{tree}",
            "-c",
            source,
            "-o",
            output,
        ]
    config = (kernel_build.build_dir / CONFIG).read_text()
    assert "add_library(ckspace::kernels_gfx950 SHARED IMPORTED)" in config
    assert "-lckspace_kernels_gfx950" in (kernel_build.build_dir / "ckspace_kernels_gfx950.pc").read_text()


@pytest.mark.slow
def test_the_host_units_compile_with_their_compile_commands(emitted: Emitted, tmp_path: Path) -> None:
    """Each command of the host build's compile_commands.json, run by the shell in its directory, compiles
    its unit: the file is the real commands, not a description of them."""
    entries = json.loads((emitted.host_dir / "compile_commands.json").read_text())
    assert {e["file"] for e in entries} == set(emitted.manifest.dispatcher.host_units)  # type: ignore[union-attr]
    for entry in entries:
        output = Path(entry["directory"]) / entry["output"]
        output.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(entry["command"], shell=True, cwd=entry["directory"], check=True)
        assert output.read_bytes().startswith(b"\x7fELF")


@pytest.mark.slow
def test_a_cmake_project_links_and_loads_a_library_that_needs_hip(
    emitted: Emitted, kernel_build: KernelBuild, tmp_path: Path
) -> None:
    """configure_and_build_consumer against build/gfx950 and ckspace::kernels_gfx950, whose library
    (here a stand-in: the host units and a ckspace_run calling HIP, linked with libamdhip64) needs
    HIP's runtime: the consumer links, loads it and answers with the library's kernels."""
    hip = ctypes.util.find_library("amdhip64")
    if hip is None:
        skip_without_compiler("no libamdhip64 (scripts/install-toolchain-gfx942.sh installs libamdhip64-dev)")
    manifest = emitted.manifest
    assert manifest.dispatcher is not None
    library = kernel_build.build_dir / "libckspace_kernels_gfx950.so"
    units = [str(emitted.tree / u) for u in manifest.dispatcher.host_units]
    standin = [c_compiler(), "-O2", "-shared", "-fPIC", f"-I{emitted.tree}", *units, str(CONSUMER / "hip_standin.c")]
    run([*standin, "-o", str(library), "-lamdhip64", "-lm"])
    consumer = configure_and_build_consumer(
        kernel_build.build_dir, "ckspace::kernels_gfx950", tmp_path, version=__version__
    )
    assert f"\nkernels {len(manifest.kernels)}\n" in run([str(consumer)])
    loaded = run(["ldd", str(consumer)])
    assert "libamdhip64" in loaded and "not found" not in loaded


def test_the_host_library_exports_exactly_the_c_api(emitted: Emitted) -> None:
    """The dynamic symbol table holds the functions ckspace_dispatch.h declares (less ckspace_run
    and ckspace_device_supported, the HIP half a host-only build lacks; ckspace_strided_run is there,
    answering that it cannot run) and nothing else: not the
    hidden helpers the HIP half calls, not the rankers TL2cgen generated, not the kernel table."""
    listed = subprocess.run(
        ["nm", "-D", "--defined-only", str(emitted.host_dir / "libckspace_dispatch.so")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    exported = {line.split()[-1] for line in listed.splitlines() if line.strip()}
    header = (emitted.tree / "ckspace_dispatch.h").read_text()
    declared = set(re.findall(r"^[\w ]+?\**\s*(ckspace_\w+)\(", header, flags=re.M))
    assert {"ckspace_run", "ckspace_device_supported", "ckspace_strided_run"} <= declared and len(declared) == 15
    assert exported == declared - {"ckspace_run", "ckspace_device_supported"}


def test_a_host_library_says_it_cannot_run_strided_tensors(emitted: Emitted) -> None:
    """ckspace_strided_run is host code over the HIP half's ckspace_run and conversion kernel (weak
    references): a host-only library loads and answers CKSPACE_UNSUPPORTED instead of running."""
    import ctypes

    from ckspace.emit.dispatcher import STATUSES
    from ckspace.run.library import ConvProblemC

    host = ctypes.CDLL(str(emitted.host_dir / "libckspace_dispatch.so"))
    problem = ConvProblemC(variant=0, dtype=1, ndim=2, N=1, G=1, C=8, K=8, Di=1, Hi=4, Wi=4, Z=1, Y=1, X=1)
    for field in ("stride_d", "stride_h", "stride_w", "dil_d", "dil_h", "dil_w", "k_batch"):
        setattr(problem, field, 1)
    unsupported = next(s.code for s in STATUSES if s.name == "UNSUPPORTED")
    answer = host.ckspace_strided_run(0, ctypes.byref(problem), None, None, None, None, None, None, 0, None)
    assert answer == unsupported


def test_issue_36_item_6_a_tree_without_the_dispatcher_says_how_to_get_its_c_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tree emitted without the dispatcher builds a library that exports
    nothing to call; build says so instead of the CMake adoption line, and find_package fails with
    what helps (re-emit with --with-selector), not 'rebuild it with ckspace build', which never
    gives the header."""
    base = tmp_path / "a dir ${x}"
    ck = use_fake_toolchain(base, monkeypatch, base / "bin dir" / "fake clang")
    tree = base / "tree"
    assert main([*EMIT, "--ck-root", str(ck), "--out", str(tree)]) == 0
    capsys.readouterr()
    assert main(["build", str(tree), "--arch", "gfx950", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "no ckspace_dispatch.h: the tree has no C API, re-emit it with ckspace emit --with-selector" in out
    assert "find_package" not in out
    done = probe(tmp_path, tree / "build" / "gfx950", [], __version__)
    assert done.returncode != 0
    message = " ".join(done.stderr.split())  # CMake wraps its message
    assert (
        "ckspace_dispatch.h is missing: the tree has no C API, re-emit it with ckspace emit --with-selector" in message
    )
    assert "rebuild it" not in message
