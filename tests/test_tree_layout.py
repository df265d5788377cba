"""The built tree's layout has one owner: :mod:`ckspace.emit.manifest` states every path of an
emitted and built tree (``DIR/build/<arch>/``, ``DIR/build/host/``, ``DIR/build/census/``, the logs and objects
folders, the libraries' names), and the modules that build, bench, survey or open a tree ask it.

A second spelling would let one command write where another no longer looks (``build`` linking
``build/<arch>/`` while ``bench`` globbed its own pattern). So the modules are read for layout
literals in path operations, and the owner is shown to be what they follow by patching it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import ROOT

from ckspace.core.vocab import Dtype, Variant
from ckspace.emit import manifest as tree_layout

ASKERS = sorted(
    [
        *(ROOT / "ckspace" / "compiling").glob("*.py"),
        *(ROOT / "ckspace" / "run").glob("*.py"),
        *(ROOT / "ckspace" / "census").glob("*.py"),
        *(ROOT / "ckspace" / "commands" / name for name in ("bench.py", "probe.py", "cache.py")),
        ROOT / "ckspace" / "workflow.py",
    ]
)
"""The modules that read or write inside a built tree."""
FOLDERS = {
    tree_layout.BUILD_FOLDER,
    tree_layout.HOST_LABEL,
    tree_layout.CENSUS_LABEL,
    tree_layout.LOGS_FOLDER,
    tree_layout.OBJECTS_FOLDER,
}


def layout_literals(source: str) -> list[str]:
    """The layout spelled in ``source``: a folder name of the layout joined with ``/`` to a path, a
    string starting ``libckspace_`` (a library's name, in an f-string too) and a path pattern holding
    ``/libckspace_`` or ``build/``. Docstrings and messages are prose, not paths, and pass."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            found.extend(
                f"line {node.lineno}: / {side.value!r}"
                for side in (node.left, node.right)
                if isinstance(side, ast.Constant) and side.value in FOLDERS
            )
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if text.startswith("libckspace_") or (" " not in text and ("/libckspace_" in text or "build/" in text)):
                found.append(f"line {node.lineno}: {text!r}")
    return found


@pytest.mark.parametrize("path", ASKERS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_modules_that_open_a_built_tree_ask_the_owner_for_its_paths(path: Path) -> None:
    assert layout_literals(path.read_text()) == []


def test_the_reader_finds_the_layout_spelled_in_each_way() -> None:
    """The check of the modules above fails on each way a path could be spelled again."""
    spelled = [
        'out = tree / "build" / arch',
        'log = build_dir / "logs" / "link.log"',
        'lib = build_dir / f"libckspace_kernels_{arch}.so"',
        'found = sorted(tree.glob("build/*/lib*.so"))',
        'found = sorted(root.glob("*/libckspace_kernels_*.so"))',
    ]
    for line in spelled:
        assert layout_literals(line), line
    assert layout_literals('"""Links ``build/<arch>/libckspace_kernels_<arch>.so``."""\nx = 1') == []


def test_every_path_follows_the_owner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Patch the owner's names and every path of a tree moves with them: the folders, the three
    libraries, and the built libraries a bench or ``info`` finds."""
    monkeypatch.setattr(tree_layout, "BUILD_FOLDER", "made")
    monkeypatch.setattr(tree_layout, "HOST_LABEL", "cpu")
    monkeypatch.setattr(tree_layout, "CENSUS_LABEL", "survey")
    monkeypatch.setattr(tree_layout, "HOST_LIBRARY_NAME", "libhost.so")
    tree = tmp_path / "tree"
    assert tree_layout.build_dir(tree, "gfx942") == tree / "made" / "gfx942"
    assert tree_layout.host_library(tree) == tree / "made" / "cpu" / "libhost.so"
    assert tree_layout.census_build_dir(tree) == tree / "made" / "survey"
    kernels = tree_layout.kernels_library(tree, "gfx942_gfx950")
    plugin = tree_layout.plugin_library(tree, "gfx942_gfx950")
    assert kernels == tree / "made" / "gfx942_gfx950" / "libckspace_kernels_gfx942_gfx950.so"
    assert plugin.parent == kernels.parent and plugin.name == "libckspace_hipdnn_gfx942_gfx950.so"
    for library in (kernels, plugin, tree_layout.host_library(tree)):
        library.parent.mkdir(parents=True, exist_ok=True)
        library.write_bytes(b"")
    (tree / "build" / "gfx90a").mkdir(parents=True)
    (tree / "build" / "gfx90a" / tree_layout.kernels_library_name("gfx90a")).write_bytes(b"")  # not the layout's
    assert tree_layout.built_kernel_libraries(tree) == [kernels]
    assert tree_layout.built_libraries(tree) == sorted([kernels, plugin, tree_layout.host_library(tree)])


def test_the_plugin_template_names_the_library_the_build_links() -> None:
    """The plugin's own record of its file name (the template's ``library``) is the name the build
    links it under."""
    from ckspace.emit.hipdnn_plugin import plugin_sources
    from ckspace.emit.rendering import template_environment

    two_archs = {"gfx942": [Variant.FORWARD], "gfx950": [Variant.FORWARD]}
    for label, fleet in (("gfx942", None), ("gfx942_gfx950", two_archs)):
        files = plugin_sources(label, [Variant.FORWARD], [Dtype.BF16], template_environment(), fleet)
        text = "".join(data.decode() for data in files.values())
        assert tree_layout.plugin_library_name(label) in text


@pytest.mark.slow
def test_build_and_bench_follow_the_owner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With the owner's folder names patched, ``build --host-only`` links where the owner now says,
    its report and package beside it, and ``bench`` looks for the kernels' library there too."""
    from conftest import fake_ck

    from ckspace.cli import main
    from ckspace.commands.bench import _library

    monkeypatch.setenv("CK_ROOT", str(fake_ck(tmp_path / "ck", explicit_gemm=False)))
    monkeypatch.setattr(tree_layout, "BUILD_FOLDER", "made")
    monkeypatch.setattr(tree_layout, "HOST_LABEL", "cpu")
    tree = tmp_path / "tree"
    emit = ["emit", "--arch", "gfx950", "--variant", "forward", "--ndim", "2", "--dtype", "bf16"]
    assert main([*emit, "--rule-set", "default", "--with-selector", "--out", str(tree)]) == 0
    assert main(["build", str(tree), "--host-only"]) == 0
    library = tree / "made" / "cpu" / "libckspace_dispatch.so"
    assert f"library: {library}" in capsys.readouterr().out
    assert library.is_file() and (library.parent / "ckspace_kernelsConfig.cmake").is_file()
    assert not (tree / "build").exists()
    kernels = tree_layout.kernels_library(tree.resolve(), "gfx950")
    kernels.parent.mkdir(parents=True)
    kernels.write_bytes(b"")  # bench only looks here; nothing is loaded
    assert _library(tree)[0] == tree / "made" / "gfx950" / "libckspace_kernels_gfx950.so"
