"""Stand-in kernel libraries: a real emitted gfx950 bwd_weight bf16 2D tree of the default rule set,
its generated host dispatcher linked with ``tests/standin/standin_run.c`` (a ``ckspace_run`` that
computes a naive convolution on host memory). Used by tests/test_bench.py and bench/sweep.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import fake_ck

from ckspace.cli import main
from ckspace.select.compiled import FLAGS, host_c_compiler

STANDIN = Path(__file__).parent / "standin" / "standin_run.c"


def build_standin(
    root: Path, *, wrong: int = -1, crash: int = -1, hang: int = -1, rule_set: str = "default", real_ck: bool = False
) -> Path:
    """Emit the tree under ``root`` and link ``build/gfx950/libckspace_kernels_gfx950.so``, kernel
    ``wrong`` returning wrong results, ``crash`` dereferencing NULL, ``hang`` never returning (-1:
    none); returns the tree. The kernels are ``rule_set``'s that the fake CK headers of conftest
    build, or with ``real_ck`` the CK headers installed (the test extras' wheel: the ``full`` rule
    set's two-stage kernels need them)."""
    tree = root / "tree"
    with pytest.MonkeyPatch.context() as patch:
        if not real_ck:
            patch.setenv("CK_ROOT", str(fake_ck(root / "ck", explicit_gemm=False)))
        assert (
            main(
                [
                    "emit",
                    "--arch",
                    "gfx950",
                    "--variant",
                    "bwd_weight",
                    "--ndim",
                    "2",
                    "--dtype",
                    "bf16",
                    "--rule-set",
                    rule_set,
                    "--with-selector",
                    "--out",
                    str(tree),
                ]
            )
            == 0
        )
    library = tree / "build" / "gfx950" / "libckspace_kernels_gfx950.so"
    library.parent.mkdir(parents=True)
    compiler = host_c_compiler()
    assert compiler is not None, "the stand-in libraries need a C compiler"
    subprocess.run(
        [
            compiler,
            "-O2",
            "-shared",
            "-fPIC",
            f"-I{tree}",
            str(tree / "ckspace_dispatch.c"),
            str(STANDIN),
            f"-DSTANDIN_WRONG={wrong}",
            f"-DSTANDIN_CRASH={crash}",
            f"-DSTANDIN_HANG={hang}",
            "-Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc",
            "-o",
            str(library),
            "-lm",
        ],
        check=True,
    )
    return tree


def build_standin_plugin(tree: Path) -> Path:
    """The hipDNN plugin of ``tree`` (emitted ``--hipdnn-plugin``) as ``ckspace build`` links it —
    the plugin's object compiled by ckspace, the dispatcher's host units, hipDNN's exports alone —
    but over the stand-in ``ckspace_run`` instead of HIP kernels, in the folder ``standin`` of the
    tree's build folder."""
    from ckspace.compiling import plugin_build
    from ckspace.emit.manifest import Manifest, plugin_library_name

    manifest = Manifest.model_validate_json((tree / "manifest.json").read_bytes())
    assert manifest.dispatcher is not None and manifest.hipdnn is not None
    build_dir = tree / "build" / "standin"
    build_dir.mkdir(parents=True, exist_ok=True)
    plugin = plugin_build.plugin_object(tree, build_dir)
    output = build_dir / plugin_library_name(manifest.label)
    objects = []
    for source in [*(tree / unit for unit in manifest.dispatcher.host_units), STANDIN]:
        objects.append(str(build_dir / f"{source.stem}.o"))
        compiler = host_c_compiler()
        assert compiler is not None, "the stand-in libraries need a C compiler"
        subprocess.run([compiler, *FLAGS, f"-I{tree}", "-c", str(source), "-o", objects[-1]], check=True)
    subprocess.run(
        [
            plugin_build.host_cxx_compiler(),
            "-shared",
            *objects,
            str(plugin),
            *plugin_build.export_flags(build_dir),
            "-Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc",
            "-o",
            str(output),
            "-lm",
        ],
        check=True,
    )
    return output
