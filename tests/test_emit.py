"""ckspace emit: golden sources, determinism, unique names, CK-revision exclusions, CLI."""

from __future__ import annotations

import filecmp
import json
import os
from pathlib import Path

import pytest
from conftest import HALF, fake_ck

from ckspace.cli import main
from ckspace.constraints.rulebook.ck_rules import ck_rules
from ckspace.core.cells import Cell
from ckspace.core.ck import CkRevision
from ckspace.core.config import GemmConfig
from ckspace.core.errors import CkspaceError
from ckspace.core.vocab import Dtype, Variant
from ckspace.emit.emitter import BANNER_MARK, SelectorOptions, emit
from ckspace.emit.rendering import buildable, render_tree
from ckspace.environment.ck_header_cache import find_revision
from ckspace.environment.ck_locate import locate_ck
from ckspace.environment.files import generated, sha256
from ckspace.space.listing import Kernel
from ckspace.space.space import Space

GOLDEN = Path(__file__).parent / "golden"

# The features of the amd-aiter 0.1.7.post2.dev18 CK, so these tests need no CK headers.
AITER = CkRevision(
    include_dir="/ck/include",
    fingerprint="0" * 64,
    label="amd-aiter 0.1.7.post2.dev18 (CK 2025-11-18)",
    verified=True,
    pipelines=("compv3", "compv4", "compv5", "compv6", "mem", "comp_async"),
    streamk_conv=False,
    explicit_gemm=False,
    split_image_variants=("forward",),
    merge_groups_variants=("bwd_weight",),
    two_stage=True,
    instance_string=False,
    depthwise=False,
    warp_gemms={"fp16": HALF, "bf16": HALF, "fp32": ((16, 16, 4), (16, 16, 16))},
    single_lds_pipelines=("compv3", "compv5", "mem"),
    double_lds_pipelines=("compv4",),
    shuffle_always=("compv1", "compv5", "basic_v1"),
    shuffle_without_load_tr=("compv3", "compv4", "compv6", "mem"),
    load_tr_archs=("gfx950",),
    shuffle_auto_vector=True,
    broken_specialization_variants=("bwd_data", "bwd_weight"),
    bwd_data_double_lds_broken=True,
    compv5_ping_pong=True,
    bwd_weight_1d_transposed=True,
)

GOLDEN_NAMES = (
    "grouped_conv_fwd_bf16_nhwgc_2d_compv3_cshuffle_intrawave_128x128x64_2x2x1_16x16x32_vec8_8_1",
    "grouped_conv_fwd_fp16_nhwgc_3d_mem_cshuffle_interwave_16x16x64_1x1x1_16x16x32_vec8_8_4_filter1x1_pad0",
    "grouped_conv_fwd_bf16_nhwgc_2d_compv4_cshuffle_intrawave_128x128x32_1x2x1_32x32x16_vec1_1_8_dsb",
    "grouped_conv_bwd_data_bf16_nhwgc_2d_compv3_cshuffle_intrawave_16x64x64_1x4x1_16x16x16",
    "grouped_conv_bwd_data_fp16_nhwgc_3d_mem_cshuffle_intrawave_16x64x64_1x4x1_16x16x16",
    "grouped_conv_bwd_weight_bf16_nhwgc_2d_mem_cshuffle_intrawave_128x32x32_1x1x1_32x32x16_vec8_8_1_gm8_2stage",
    "grouped_conv_bwd_weight_fp16_nhwgc_3d_compv3_cshuffle_intrawave_128x128x64_2x2x1_32x32x16_vec8_8_4",
)
PROBE = (
    "grouped_conv_fwd_fp16_nhwgc_2d_mem_cshuffle_intrawave_16x16x64_1x1x1_16x16x32_vec8_8_4",
    {"split_image": True},
)  # a split-image kernel the CK can build (the space has none)


def kernel_of(config: GemmConfig) -> Kernel:
    return Kernel(config.arch, Cell(config.variant, config.ndim, config.dtype), False, config.row(), True)


def golden_configs() -> list[GemmConfig]:
    configs = [GemmConfig.from_name(name, "gfx942") for name in GOLDEN_NAMES]
    return [*configs, GemmConfig.from_name(PROBE[0], "gfx942").model_copy(update=PROBE[1])]


def test_golden_sources(tmp_path: Path) -> None:
    """Emitted header, compilation unit and wrapper of a few configs per variant, byte for byte.
    CKSPACE_UPDATE_GOLDEN=1 rewrites the expected files after a deliberate template change."""
    configs = golden_configs()
    result = emit([kernel_of(c) for c in configs], tmp_path, AITER, arch="gfx942", request={})
    assert len(result.manifest.kernels) == len(configs)
    for kernel in result.manifest.kernels:
        for record in (kernel.header, kernel.source, kernel.wrapper):
            produced = (tmp_path / record.path).read_text()
            expected = GOLDEN / Path(record.path).name
            if os.environ.get("CKSPACE_UPDATE_GOLDEN"):
                expected.write_text(produced)
            assert expected.is_file(), f"missing golden file {expected.name}"
            assert produced == expected.read_text(), f"{record.path} differs from {expected}"


def test_golden_dispatcher(tmp_path: Path) -> None:
    """The dispatcher of the golden configs (gfx942 has no shipped model: analytical ranking, so no
    TL2cgen output here): header, host C, the layout conversion's element and ckspace_run, and the
    hipDNN plugin over it (its schema, hipDNN's ABI as it implements it, its C++), byte for byte."""
    configs = golden_configs()
    selector = SelectorOptions(hipdnn_plugin=True)
    result = emit([kernel_of(c) for c in configs], tmp_path, AITER, arch="gfx942", request={}, selector=selector)
    assert result.manifest.dispatcher is not None
    assert set(result.manifest.dispatcher.models.values()) == {"analytical"}
    plugin = ("ckspace_hipdnn.fbs", "ckspace_hipdnn_api.h", "ckspace_hipdnn_plugin.cpp")
    dispatcher = ("ckspace_dispatch.h", "ckspace_dispatch.c", "ckspace_layout.h", "ckspace_dispatch_run.cpp")
    for name in (*dispatcher, *plugin):
        produced = (tmp_path / name).read_text()
        expected = GOLDEN / name
        if os.environ.get("CKSPACE_UPDATE_GOLDEN"):
            expected.write_text(produced)
        assert produced == expected.read_text(), f"{name} differs from {expected}"


def test_rendering_alone_gives_the_golden_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pure step of emit: rendering the golden configs in memory, nothing written, gives the
    golden files byte for byte, every file the manifest records with its sha256, and the manifest
    emit then writes."""
    monkeypatch.chdir(tmp_path)
    kernels = [kernel_of(c) for c in golden_configs()]
    tree = render_tree(kernels, AITER, arch="gfx942", request={"x": 1}, selector=SelectorOptions())
    assert not any(tmp_path.iterdir())
    per_kernel = [p for k in tree.manifest.kernels for p in (k.header.path, k.source.path, k.wrapper.path)]
    assert list(tree.files)[: len(per_kernel)] == per_kernel  # the kernels' files first, in name order
    assert sorted(tree.files) == sorted(tree.manifest.files())
    records = [*tree.manifest.shared, *(r for k in tree.manifest.kernels for r in (k.header, k.source, k.wrapper))]
    assert all(sha256(tree.files[r.path]) == r.sha256 for r in records)
    golden = {p: tree.files[p] for p in tree.files if (GOLDEN / Path(p).name).is_file()}
    assert len(golden) == 3 * len(kernels) + 4  # each kernel's three files and the dispatcher's four
    for path, data in golden.items():
        assert data == (GOLDEN / Path(path).name).read_bytes(), f"{path} differs from the golden file"
    result = emit(kernels, tmp_path / "out", AITER, arch="gfx942", request={"x": 1}, selector=SelectorOptions())
    assert result.manifest == tree.manifest
    assert (tmp_path / "out" / "manifest.json").read_bytes() == tree.manifest.to_bytes()


def test_banner_and_traits(tmp_path: Path) -> None:
    configs = golden_configs()
    emit([kernel_of(c) for c in configs], tmp_path, AITER, arch="gfx942", request={})
    for config in configs:
        header = (tmp_path / f"{config.name}.hpp").read_text()
        assert header.startswith("// SPDX-License-Identifier: MIT\n// Generated by ckspace")
        assert "do not edit" in header.splitlines()[1]
        assert ("ck_tile/ops/elementwise.hpp" in header) == config.two_stage
        assert ("UnaryConvert" in header) == config.two_stage
        assert ("set_split_image" in header) == config.split_image
        assert f"NumGroupsToMerge = {config.num_groups_to_merge};" in header


def test_every_generated_file_carries_the_one_banner() -> None:
    """Every file of a tree with the dispatcher, a shipped model's TL2cgen regressor and the hipDNN
    plugin opens with ckspace's one banner (:func:`ckspace.environment.files.banner`) in its first
    two lines -- the emitter deletes only files that carry it; the rankers' QuickScorer C included."""
    config = GemmConfig.from_name(GOLDEN_NAMES[0], "gfx950")
    selector = SelectorOptions(hipdnn_plugin=True)
    tree = render_tree([kernel_of(config)], AITER, arch="gfx950", request={}, selector=selector)
    assert any(path.startswith("ckspace_model/") and path.endswith(".h") for path in tree.files)  # TL2cgen's
    words = generated("ckspace emit").split("`")[0]
    for path, data in tree.files.items():
        head = data[:512]
        assert BANNER_MARK in head, path
        assert any(line.startswith("// " + words) for line in data.decode().splitlines()[:2]), path


def _full(arch: str = "gfx942") -> list[Kernel]:
    # the upstream rule space: what the AITER revision's own rules exclude is the subject here
    return (
        Space(arch, rule_set="full", ck=None).kernels() + Space(arch, "bwd_data", rule_set="default", ck=None).kernels()
    )


def test_emit_twice_gives_identical_trees(tmp_path: Path) -> None:
    kernels = Space("gfx942", ["forward", "bwd_weight"], 2, rule_set="full").kernels()
    first = emit(kernels, tmp_path / "a", AITER, arch="gfx942", request={"x": 1})
    emit(kernels, tmp_path / "b", AITER, arch="gfx942", request={"x": 1})
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert len(files) == 3 * len(first.manifest.kernels) + 5 + 1
    _, mismatch, errors = filecmp.cmpfiles(tmp_path / "a", tmp_path / "b", [str(f) for f in files], shallow=False)
    assert not mismatch and not errors
    again = emit(kernels, tmp_path / "a", AITER, arch="gfx942", request={"x": 1})
    assert again.written == [] and again.removed == []


def test_re_emit_rewrites_only_changes_and_removes_stale(tmp_path: Path) -> None:
    big = Space("gfx942", "forward", 2, rule_set="default").kernels()
    emit(big, tmp_path, AITER, arch="gfx942", request={})
    small = big[:3]
    result = emit(small, tmp_path, AITER, arch="gfx942", request={})
    assert result.removed and all(not (tmp_path / p).exists() for p in result.removed)
    kept = {k.name for k in result.manifest.kernels}
    assert all(f"{n}.hpp" not in result.written for n in kept)  # unchanged kernel files stay untouched
    assert "manifest.json" in result.written


def test_full_names_unique_and_ck_rules_hold() -> None:
    kernels = _full()
    configs, excluded, depthwise = buildable(kernels, AITER)
    names = [c.name for c in configs]
    assert len(names) == len(set(names)) > 1000
    assert depthwise == 60
    assert not {e.name for e in excluded} & set(names)
    assert all(c.pipeline.value in AITER.pipelines and not c.streamk_enabled and not c.explicit_gemm for c in configs)
    reasons = {r for e in excluded for r in e.rules}
    assert {"ck_pipeline", "ck_streamk", "ck_explicit_gemm", "ck_warp_gemm"} <= reasons


def test_ck_rules_are_named_and_fold_where_supported() -> None:
    rules = ck_rules(AITER, Variant.FORWARD, Dtype.BF16)
    assert all(r.predicate == "ck_revision" for r in rules)
    by_name = {r.name: r for r in rules}
    assert by_name["ck_split_image"].vacuous and not by_name["ck_groups_to_merge"].vacuous
    assert {r.name: r for r in ck_rules(AITER, Variant.BWD_WEIGHT, Dtype.BF16)}["ck_groups_to_merge"].vacuous
    assert not by_name["ck_streamk"].vacuous
    assert not ck_rules(AITER, Variant.BWD_DATA, Dtype.BF16)[3].vacuous  # no split-image for bwd_data


# Configs compiled one by one (clang-19, gfx942, the amd-aiter CK; device-only syntax check) while
# finding the conditions: the rule that excludes each failing one, and none for those that compiled.
COMPILED = {
    "grouped_conv_bwd_data_fp32_nhwgc_2d_compv3_cshuffle_intrawave_16x64x64_1x4x1_16x16x16_vec4_4_4": None,
    "grouped_conv_fwd_bf16_nhwgc_2d_compv5_cshuffle_intrawave_128x128x64_2x2x1_16x16x32_vec8_8_1": None,
    # vec_b 16 > tile_n x tile_k / threads = 8 = the policy's own vector size: same distribution
    "grouped_conv_bwd_data_bf16_nhwgc_2d_compv3_cshuffle_intrawave_16x64x32_1x4x1_16x16x16_vec4_16_8": None,
    # grouped_convolution_forward_kernel.hpp:887 / backward_data 883 / backward_weight 812: no operator()
    "grouped_conv_fwd_bf16_nhwgc_2d_compv6_cshuffle_intrawave_128x128x64_2x2x1_16x16x32_vec8_8_1": "ck_pipeline_call",
    "grouped_conv_bwd_data_bf16_nhwgc_2d_compv6_cshuffle_intrawave_16x64x64_1x4x1_16x16x16": "ck_pipeline_call",
    "grouped_conv_bwd_weight_bf16_nhwgc_2d_compv6_cshuffle_intrawave_32x32x32_1x1x1_32x32x16_vec8_8_4_gm2_2stage": (
        "ck_pipeline_call"
    ),
    # forward_kernel.hpp:944
    "grouped_conv_fwd_bf16_nhwgc_2d_compv3_cshuffle_intrawave_128x128x64_2x2x1_16x16x32_vec8_8_1_dsb": (
        "ck_pipeline_call"
    ),
    # comp_async.hpp:552
    "grouped_conv_fwd_bf16_nhwgc_2d_comp_async_cshuffle_intrawave_128x128x64_2x2x1_16x16x32_vec8_8_1_dsb": (
        "ck_pipeline_call"
    ),
    # backward_data_kernel.hpp:510 NDimSpatial_
    "grouped_conv_bwd_data_bf16_nhwgc_2d_compv3_cshuffle_intrawave_16x64x64_1x4x1_16x16x16_filter1x1_pad0": (
        "ck_specialization"
    ),
    # transpose_tile.hpp:228
    "grouped_conv_bwd_data_fp32_nhwgc_1d_compv3_cshuffle_intrawave_16x64x64_1x4x1_16x16x16": "ck_shuffle_vector_b",
    "grouped_conv_bwd_data_fp32_nhwgc_2d_compv3_cshuffle_intrawave_16x64x64_1x4x1_16x16x16_vec4_8_4": (
        "ck_shuffle_vector_b"
    ),
    "grouped_conv_bwd_data_bf16_nhwgc_2d_compv3_cshuffle_intrawave_16x64x64_1x4x1_16x16x16_vec4_16_8": (
        "ck_shuffle_vector_b"
    ),
    "grouped_conv_bwd_weight_bf16_nhwgc_2d_mem_cshuffle_intrawave_32x32x32_1x1x1_32x32x16_vec8_4_8_gm2_2stage": (
        "ck_shuffle_vector_b"
    ),
    "grouped_conv_bwd_weight_bf16_nhwgc_2d_mem_cshuffle_intrawave_32x32x32_1x1x1_32x32x16_vec1_1_1_gm2_2stage": (
        "ck_shuffle_vector_a"
    ),
    # amd_buffer_addressing.hpp:2277 (float atomic of 8)
    "grouped_conv_bwd_weight_bf16_nhwgc_2d_mem_cshuffle_intrawave_32x32x32_1x1x1_32x32x16_vec8_8_8_gm2_2stage": (
        "ck_atomic_vector"
    ),
    # backward_data_kernel.hpp:927 get_length on a tile window
    "grouped_conv_bwd_data_bf16_nhwgc_2d_comp_async_cshuffle_intrawave_16x64x64_1x4x1_16x16x16_dsb": (
        "ck_bwd_data_double_lds"
    ),
    # comp_v5.hpp:159 (one wave: division by zero)
    "grouped_conv_bwd_weight_bf16_nhwgc_2d_compv5_cshuffle_intrawave_32x32x32_1x1x1_32x32x16_vec8_8_4_gm2_2stage": (
        "ck_compv5_ping_pong"
    ),
}


@pytest.mark.parametrize("name", sorted(COMPILED))
def test_ck_rules_match_targeted_compiles(name: str) -> None:
    config = GemmConfig.from_name(name, "gfx942")
    configs, excluded, _ = buildable([kernel_of(config)], AITER)
    broken = {r for e in excluded for r in e.rules}
    if COMPILED[name] is None:
        assert configs and not broken
    else:
        assert COMPILED[name] in broken


def test_manifest_lists_everything(tmp_path: Path) -> None:
    kernels = Space("gfx942", "forward", 2, "bf16", "full", ck=None).kernels()
    result = emit(kernels, tmp_path, AITER, arch="gfx942", request={"rule_set": "full"})
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["ck_revision"]["label"] == AITER.label and manifest["ckspace_version"]
    entry = manifest["kernels"][0]
    assert {"name", "config", "header", "source", "wrapper"} <= set(entry)
    assert entry["config"]["tile_m"] > 0 and len(entry["header"]["sha256"]) == 64
    assert manifest["excluded"] and all(e["rules"] for e in manifest["excluded"])
    assert manifest["depthwise_skipped"] == 20 and "depthwise" in manifest["depthwise_note"]
    register = (tmp_path / "register_all_grouped_conv_kernels.hpp").read_text()
    assert f"grouped_conv_forward_kernel_count = {len(result.manifest.kernels)};" in register


def test_revision_detection_from_headers(tmp_path: Path) -> None:
    old = find_revision(fake_ck(tmp_path / "old", explicit_gemm=False))
    new = find_revision(fake_ck(tmp_path / "new", explicit_gemm=True))
    assert old.pipelines == ("compv3",) and not old.explicit_gemm and new.explicit_gemm
    assert old.split_image_variants == ("forward",) and not old.streamk_conv and not old.verified
    assert old.fingerprint != new.fingerprint and old.label.startswith("unknown CK")
    assert old.warp_gemms["bf16"] == HALF and old.warp_gemms["fp32"] == ()


def test_locate_order_and_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ck = fake_ck(tmp_path / "ck", explicit_gemm=False)
    monkeypatch.setenv("CK_ROOT", str(ck))
    assert locate_ck() == (ck / "include").resolve()
    with pytest.raises(CkspaceError, match="--ck-root"):
        locate_ck(tmp_path / "nothing")
    monkeypatch.setenv("CK_ROOT", str(tmp_path / "nothing"))
    with pytest.raises(CkspaceError, match="CK_ROOT"):
        locate_ck()


def test_cli_emit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ck = fake_ck(tmp_path / "ck", explicit_gemm=False)
    status = main(
        [
            "emit",
            "--arch",
            "gfx942",
            "--variant",
            "forward",
            "--ndim",
            "2",
            "--dtype",
            "bf16",
            "--rule-set",
            "default",
            "--out",
            str(tmp_path / "out"),
            "--ck-root",
            str(ck),
        ]
    )
    out = capsys.readouterr().out
    assert status == 0 and "kernels emitted" in out and "(unverified)" in out
    assert (tmp_path / "out" / "manifest.json").is_file()
    assert (
        main(
            [
                "emit",
                "--arch",
                "gfx942",
                "--variant",
                "forward",
                "--out",
                str(tmp_path / "o"),
                "--ck-root",
                str(tmp_path / "missing"),
            ]
        )
        == 2
    )
    assert "holds no" in capsys.readouterr().err
