"""Each identity stated once: which configs are one kernel (``kernel_key``), which compiler a
path is (:func:`ckspace.environment.compilers.identify`), where ROCm is looked for (``rocm_roots``).

Stand-in compilers are shell scripts in ``tmp_path`` that answer ``--version`` themselves and pass
everything else to the host C compiler, so they compile for real.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import c_compiler, fake_ck
from test_build import use_fake_toolchain

from ckspace.cli import main
from ckspace.compiling.builder import build
from ckspace.compiling.toolchain import discover
from ckspace.constraints.evaluators.classify import satisfies_all
from ckspace.constraints.rulebook.validity import gemm_rules
from ckspace.core.config import GemmConfig
from ckspace.core.fields import GEMM_FIELD_NAMES
from ckspace.core.vocab import Dtype, Variant
from ckspace.environment.ck_locate import locate_ck
from ckspace.environment.compilers import identify, rocm_roots
from ckspace.select.compiled import CACHE_FOLDER, cached_library
from ckspace.space.space import Space

# -- kernels -------------------------------------------------------------------------------------------


def test_a_listed_kernel_and_its_config_have_one_key() -> None:
    """The listing keys rows without building configs; the key is the config's, GEMM and depthwise."""
    kernels = Space("gfx942", "forward", 2, "fp16", "full", ck=None).kernels()
    assert {k.depthwise for k in kernels} == {False, True}
    for kernel in kernels[::50] + [k for k in kernels if k.depthwise][:5]:
        assert kernel.kernel_key == kernel.config().kernel_key()


def test_the_dtype_tag_is_part_of_a_kernel_though_not_of_its_name() -> None:
    """Two configs that differ only in ``tagged`` print one name, but upstream's WMMA rule (quirk
    14.3) holds only the tagged one to its warp_tile_k floor: one is valid, the other not, so they
    are two kernels."""
    name = "grouped_conv_fwd_fp16_nhwgc_2d_compv3_cshuffle_intrawave_64x64x64_4x2x1_16x16x16"
    untagged, tagged = (GemmConfig.from_name(name, "gfx1100", tagged=t) for t in (False, True))
    assert untagged.name == tagged.name == name
    assert untagged.kernel_key() != tagged.kernel_key()
    rules = gemm_rules("gfx1100", Variant.FORWARD, Dtype.FP16)
    assert list(satisfies_all(rules, [untagged.row(), tagged.row()], GEMM_FIELD_NAMES)) == [True, False]


# -- compilers -----------------------------------------------------------------------------------------


def stand_in(path: Path, version: str, comment: str = "", otherwise: str = "") -> str:
    """A compiler script at ``path`` printing ``version`` (a printf format) for ``--version`` and
    running ``otherwise`` (default: the host C compiler) for anything else; ``comment`` changes its
    text and nothing it does."""
    otherwise = otherwise or f'exec "{c_compiler()}" "$@"'
    path.write_text(
        f"#!/bin/sh\n# {comment}\nif [ \"$1\" = --version ]; then printf '{version}'; exit 0; fi\n{otherwise}\n"
    )
    path.chmod(0o755)
    return str(path)


def test_a_compiler_is_its_path_whole_version_and_script(tmp_path: Path) -> None:
    """Compilers whose ``--version`` first lines agree are told apart by the rest of it, by their
    script, and by where they are; the first line stays what people read."""
    first = stand_in(tmp_path / "a", "stand-in cc 1.0\\nbuilt for A\\n")
    other_output = stand_in(tmp_path / "b", "stand-in cc 1.0\\nbuilt for B\\n")
    other_script = stand_in(tmp_path / "c", "stand-in cc 1.0\\nbuilt for A\\n", comment="another wrapper")
    same_elsewhere = stand_in(tmp_path / "d", "stand-in cc 1.0\\nbuilt for A\\n")
    found = [identify(c) for c in (first, other_output, other_script, same_elsewhere)]
    assert {f.version for f in found} == {"stand-in cc 1.0"}
    assert len({f.digest for f in found}) == 4
    assert identify(first) == found[0]


def test_the_compiled_selector_cache_keys_on_the_whole_compiler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same C with two compilers whose first ``--version`` lines agree is two cache entries (the
    first line alone made it one: the second compiler got the first one's library)."""
    monkeypatch.setenv("CKSPACE_CACHE_DIR", str(tmp_path / "cache"))
    sources = {"unit.c": "int ckspace_identity_probe(void) { return 7; }\n"}
    compilers = [stand_in(tmp_path / name, f"stand-in cc 1.0\\nbuilt for {name}\\n") for name in ("a", "b")]
    for compiler in (*compilers, compilers[0]):
        found = cached_library(sources, ("unit.c",), compiler)
        assert found is not None and found[1].ckspace_identity_probe() == 7
    assert len(list((tmp_path / "cache" / CACHE_FOLDER).iterdir())) == 2


def test_the_host_object_cache_keys_on_the_whole_compiler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A build whose host C compiler differs from the last one's only after the first ``--version``
    line compiles the dispatcher's host part again, and takes the kernels from the cache."""
    use_fake_toolchain(tmp_path, monkeypatch, tmp_path / "fakeclang")
    monkeypatch.setenv("CKSPACE_CACHE_DIR", str(tmp_path / "cache"))
    tree = tmp_path / "tree"
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
                "default",
                "--with-selector",
                "--out",
                str(tree),
            ]
        )
        == 0
    )
    host_units = len(json.loads((tree / "manifest.json").read_text())["dispatcher"]["host_units"])
    compilers = [stand_in(tmp_path / f"cc-{name}", f"stand-in cc 1.0\\nbuilt for {name}\\n") for name in ("a", "b")]
    counts = []
    for compiler in (*compilers, compilers[0]):  # written before CC names one: each runs the real compiler
        monkeypatch.setenv("CC", compiler)
        report = build(tree, "gfx950", jobs=1, batch=8)
        assert (report.failed, report.link_error) == (0, None)
        counts.append(len(list((tmp_path / "object cache").glob("??/*.o"))))
    assert counts[1] - counts[0] == host_units and counts[2] == counts[1]
    assert report.cached == report.ok


# -- ROCm ----------------------------------------------------------------------------------------------


def test_the_toolchain_and_the_ck_headers_look_for_rocm_in_one_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``$ROCM_PATH``, then ``/opt/rocm``: its compiler is the toolchain's (with the one compiler
    identity) and its headers are the CK in use."""
    rocm = tmp_path / "rocm"
    fake_ck(rocm, explicit_gemm=False)
    (rocm / "bin").mkdir()
    compiler = stand_in(rocm / "bin" / "amdclang++", "stand-in amdclang 1.0\\n", otherwise="exit 0")
    for name in ("CKSPACE_CXX", "CKSPACE_CLANG", "CK_ROOT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ROCM_PATH", str(rocm))
    assert rocm_roots() == (str(rocm), "/opt/rocm")
    assert locate_ck() == (rocm / "include").resolve()
    toolchain = discover("gfx942")
    assert (toolchain.kind, toolchain.compiler) == ("rocm", compiler)
    assert (toolchain.version, toolchain.identity) == identify(compiler)
    monkeypatch.delenv("ROCM_PATH")
    assert rocm_roots() == ("/opt/rocm",)
