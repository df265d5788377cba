"""Every program of ``examples/`` runs as its README says a user runs it: the Python scripts as
scripts in a directory of their own, the C++ project configured, built and run against a library
``ckspace build`` made (the host-only dispatcher: no GPU or HIP compiler here), with what each
prints checked."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cmake_project import cmake, configure, cxx_compiler, without_library_path

from ckspace import ConvProblem, Space, __version__, build_library, emit_tree

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
KERNEL = re.compile(r"grouped_conv_fwd_bf16_nhwgc_2d_\w+")


def run_script(name: str, *arguments: str, cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *arguments],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])},
    )
    assert done.returncode == 0, f"{name} {' '.join(arguments)}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_examples_readme_lists_every_example() -> None:
    listed = (EXAMPLES / "README.md").read_text()
    examples = {p.name for p in EXAMPLES.iterdir() if p.name != "README.md" and not p.name.startswith((".", "_"))}
    assert examples == {"select_kernel.py", "build_library.py", "cmake_consumer", "hipdnn_census.sh"}
    for name in examples:
        assert f"`{name}" in listed, name


@pytest.mark.slow
def test_select_kernel_picks_a_candidate_and_a_fallback(tmp_path: Path) -> None:
    printed = run_script("select_kernel.py", "N=8,C=256,K=256,Hi=56,Wi=56,Y=3,X=3,pad=1", cwd=tmp_path)
    candidates = set(Space("gfx950", "forward", 2, "bf16", rule_set="default").names())
    pick = re.search(r"^pick: (\S+)$", printed, re.M)
    assert pick and pick[1] in candidates, printed
    assert "estimate from: model\n" in printed
    assert len(re.findall(r"^ +[\d.]+ TFLOPS  ", printed, re.M)) == 3
    # C=100 is no multiple of the candidates' vector width 8: a narrower variant stands in
    printed = run_script("select_kernel.py", "N=8,C=100,K=256,Hi=56,Wi=56,Y=3,X=3,pad=1", "--top", "1", cwd=tmp_path)
    family = re.search(r"a narrower-vector variant of the candidate (\S+)", printed)
    assert family and family[1] in candidates, printed
    # no model ships for gfx942: the analytical model ranks
    printed = run_script("select_kernel.py", "N=1,C=64,K=64,Hi=28,Wi=28,Y=1,X=1", "--arch", "gfx942", cwd=tmp_path)
    assert "estimate from: analytical" in printed


@pytest.mark.slow
def test_build_library_plans_emits_builds_and_picks(tmp_path: Path) -> None:
    printed = run_script("build_library.py", "--out", "kernels", "--budget", "3", cwd=tmp_path)
    planned = re.findall(r"^  (grouped_conv\S+)$", printed, re.M)
    assert re.search(r"^plan: (\d+) kernels$", printed, re.M)[1] == str(len(planned))
    assert 0 < len(planned) <= 3
    assert f"emitted: {len(planned)} kernels to kernels" in printed
    library = tmp_path / "kernels" / "build" / "host" / "libckspace_dispatch.so"
    assert f"library: {library}" in printed and library.is_file()
    pick = re.search(r"^pick for \S+: (\S+) \(predicted [\d.]+ TFLOPS, an estimate\)$", printed, re.M)
    assert pick, printed
    # the pick is a kernel of the library: a planned one or a fallback variant emitted for it
    assert KERNEL.fullmatch(pick[1])
    assert (library.parent / "ckspace_kernelsConfig.cmake").is_file()  # what examples/cmake_consumer/ finds


@pytest.mark.slow
def test_the_cmake_consumer_links_a_library_through_its_package(tmp_path: Path) -> None:
    """The project is configured as its README line says, from a copy (it must stand alone)."""
    tree = tmp_path / "kernels"
    emit_tree(Space("gfx950", "forward", 2, "bf16", rule_set="default"), tree)
    library = build_library(tree, host_only=True)
    project = tmp_path / "my_project"
    project.mkdir()
    for name in ("CMakeLists.txt", "pick_kernel.cpp"):
        (project / name).write_bytes((EXAMPLES / "cmake_consumer" / name).read_bytes())
    build = tmp_path / "build"
    done = configure(
        project, build, f"CMAKE_PREFIX_PATH={tree / 'build' / 'host'}", f"CMAKE_CXX_COMPILER={cxx_compiler()}"
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert f"ckspace {__version__}: gfx950 library, target ckspace::dispatch_host" in done.stdout
    built = subprocess.run([cmake(), "--build", str(build)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, f"{built.stdout}\n{built.stderr}"
    ran = subprocess.run(
        [str(build / "pick_kernel")], capture_output=True, text=True, timeout=60, env=without_library_path()
    )
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert lines[0] == f"library: gfx950, {len(library.names)} kernels"
    expected = library.select(ConvProblem.parse("N=8,C=256,K=256,Hi=56,Wi=56,Y=3,X=3,pad=1"), "forward", "bf16")
    assert lines[1] == f"pick: {expected.name}"
    assert re.fullmatch(r"predicted TFLOPS: [\d.]+, workspace: 0 bytes", lines[2])


@pytest.mark.slow
def test_the_hipdnn_census_says_what_the_plugin_serves_and_routes_it(tmp_path: Path) -> None:
    """The script as a user runs it, on a CSV of their own with a bias column: the totals per
    direction agree with the JSON it writes, and the rule file routes every served forward graph."""
    (tmp_path / "layers.csv").write_text(
        "layer,N,C,K,Hi,Wi,Y,X,pad,bias\nstem,8,3,64,56,56,3,3,1,1\nbody,8,64,64,56,56,3,3,1,1\nproj,8,64,256,56,56,1,1,0,0\n"
    )
    done = subprocess.run(
        ["bash", str(EXAMPLES / "hipdnn_census.sh"), "layers.csv", "gfx942"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])},
    )
    assert done.returncode == 0, done.stderr
    census = json.loads((tmp_path / "census.json").read_text())
    for variant, counts in census["directions"].items():
        assert f"  {variant:<10}  {counts['served']} served, {counts['declined']} declined" in done.stdout
    assert census["directions"]["forward"] == {"served": 2, "declined": 1, "crashed": 0}  # C=3: no vector width
    assert [layer["bias"] for layer in census["layers"]] == [True, True, False]
    rules = json.loads((tmp_path / "rules.json").read_text())
    served = sum(counts["served"] for counts in census["directions"].values())
    assert 0 < len(rules["engine_overrides"]) <= served
