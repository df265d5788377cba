"""One target from query to library: every command and entry point answers for the arch and the CK
headers ckspace finds, less the kernels upstream documents as wrong; ``--rules-only`` (``ck=None``)
is the upstream rule space. The target's listing (numpy, through the cell cache) is checked against
each cell's CP-SAT model and against a plain statement of the known-wrong rule written here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, fake_ck
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckspace.cli import main
from ckspace.core.config import GemmConfig
from ckspace.core.errors import CkspaceError
from ckspace.core.vocab import Dtype, Pipeline, Scheduler, Specialization, Variant
from ckspace.environment.ck_locate import locate_ck
from ckspace.environment.target import Target, resolve_target
from ckspace.space.space import Space
from ckspace.workloads.datasets import DATASETS

NO_CK = Target(None, rules_only=False, looked="nowhere (a test)")
"""The target when no CK headers are found: the rule space less the known-wrong kernels."""


def real_ck() -> str:
    """The CK headers the project installs (the toolchain script, or the amd-aiter wheel of the test
    extras: always there in a test install)."""
    return str(locate_ck(None))


def known_wrong(config: GemmConfig) -> bool:
    """Upstream's documented defect, stated plainly: bwd_weight in fp16/bf16, interwave compv1 or mem,
    default specialization, more than one wave along M and N."""
    return (
        config.variant is Variant.BWD_WEIGHT
        and config.dtype in (Dtype.FP16, Dtype.BF16)
        and config.scheduler is Scheduler.INTERWAVE
        and config.pipeline in (Pipeline.COMPV1, Pipeline.MEM)
        and config.specialization is Specialization.DEFAULT
        and config.wave_m * config.wave_n > 1
    )


@pytest.mark.parametrize("arch", ["gfx942", "gfx950", "gfx90a"])
@pytest.mark.slow
def test_without_ck_the_target_is_the_rule_space_less_the_known_wrong_kernels(arch: str) -> None:
    rule_space = Space(arch, "bwd_weight", ck=None)
    target = Space(arch, "bwd_weight", ck=NO_CK)
    expected = {c.name for c in rule_space if c.kind == "depthwise" or not known_wrong(c)}
    assert set(target.names()) == expected
    dropped = [c for c in rule_space if c.kind == "gemm" and known_wrong(c)]
    assert dropped, "the rule set proposes known-wrong kernels (quirk 14.15, docs/rules.md): the rule must bite"
    assert all(rule_space.contains(c) and not target.contains(c) for c in dropped[:5])  # CP-SAT agrees


@pytest.mark.parametrize("variant, dtype", [("forward", "bf16"), ("forward", "fp16"), ("bwd_weight", "fp32")])
def test_the_known_wrong_rule_touches_no_other_variant_or_dtype(variant: str, dtype: str) -> None:
    """Upstream documents the defect for bwd_weight in half precision only: forward kernels of the same
    shape (interwave mem with several waves exist there) and fp32 bwd_weight kernels stay."""
    rule_space = Space("gfx950", variant, dtype=dtype, ck=None)
    lookalikes = [
        c
        for c in rule_space
        if c.kind == "gemm"
        and c.scheduler is Scheduler.INTERWAVE
        and c.pipeline in (Pipeline.COMPV1, Pipeline.MEM)
        and c.wave_m * c.wave_n > 1
        and c.specialization is Specialization.DEFAULT
    ]
    assert lookalikes or variant == "bwd_weight"
    assert Space("gfx950", variant, dtype=dtype, ck=NO_CK).names() == rule_space.names()


def test_rules_only_is_the_upstream_count_whatever_is_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CK_ROOT", str(fake_ck(tmp_path / "ck", explicit_gemm=False)))
    assert Space("gfx950", "bwd_weight", ck=None).count() == 4464
    assert Space("gfx950", "bwd_weight", ck=None).target.rules_only
    narrowed = Space("gfx950", "bwd_weight")
    assert narrowed.target.ck is not None and narrowed.count() < 4464
    assert narrowed.for_ck(None).count() == 4464


def test_the_default_target_is_what_the_found_headers_build() -> None:
    root = real_ck()
    space = Space("gfx950", "bwd_weight", ndim=2, dtype="bf16")
    assert space.target.ck is not None and space.target.ck.include_dir == root
    rule_space = space.for_ck(None)
    members = set(space.names())
    assert members < set(rule_space.names())
    for config in rule_space.sample(60, seed=1):  # the listing (numpy) and the cell's CP-SAT model agree
        assert space.contains(config) == (config.name in members), config.name
        if config.name not in members:
            assert space.excluded_by(config), f"{config.name} is excluded by no named rule"


def test_a_target_listing_from_the_cache_equals_a_cold_one() -> None:
    cold = Space("gfx950", "bwd_weight", ck=NO_CK, use_cache=False).names()
    assert Space("gfx950", "bwd_weight", ck=NO_CK).names() == cold
    assert Space("gfx950", "bwd_weight", ck=NO_CK).names() == cold  # the second from the cache


def test_the_target_cache_key_names_the_ck_and_the_known_wrong_rules() -> None:
    assert resolve_target(None).cache_key is None
    assert NO_CK.cache_key == "known_wrong:1;ck:none"
    with pytest.raises(CkspaceError, match="ck 3"):
        resolve_target(3)


def test_an_explicit_ck_root_without_headers_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CkspaceError, match="holds no"):
        Space("gfx950", "forward", ck=str(tmp_path))


def test_a_ck_header_change_is_seen(tmp_path: Path) -> None:
    root = fake_ck(tmp_path / "ck", explicit_gemm=False)
    before = resolve_target(str(root)).ck
    utils = root / "include" / "ck_tile" / "ops" / "grouped_convolution" / "utils" / "grouped_convolution_utils.hpp"
    utils.write_text(
        utils.read_text().replace(
            "EnableSplitImage_ = false,", "EnableSplitImage_ = false, bool ExplicitGemm_ = false,"
        )
    )
    after = resolve_target(str(root)).ck
    assert before.fingerprint != after.fingerprint


def cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ckspace", *argv], capture_output=True, text=True, cwd=ROOT, check=False, timeout=300
    )


def test_enumerate_says_its_target_and_what_the_ck_leaves_out(tmp_path: Path) -> None:
    root = str(fake_ck(tmp_path / "ck", explicit_gemm=False))
    out = cli("enumerate", "--arch", "gfx950", "--variant", "bwd_weight", "--count", "--ck-root", root)
    assert out.returncode == 0, out.stderr
    count = int(out.stdout)
    assert out.stderr.splitlines()[0].startswith("target: CK unknown CK (")
    assert f"{4464 - count} of the rule set's 4464 kernels need a newer CK" in out.stderr
    whole = cli("enumerate", "--arch", "gfx950", "--variant", "bwd_weight", "--count", "--rules-only")
    assert whole.stdout == "4464\n" and "rules only (--rules-only)" in whole.stderr
    record = json.loads(
        cli(
            "enumerate", "--arch", "gfx950", "--variant", "bwd_weight", "--count", "--format", "json", "--ck-root", root
        ).stdout
    )
    assert record["count"] == count and record["target"]["ck_root"].startswith(root)
    both = cli("enumerate", "--arch", "gfx950", "--variant", "bwd_weight", "--count", "--rules-only", "--ck-root", root)
    assert both.returncode == 2 and "not allowed with argument" in both.stderr


KNOWN_WRONG = "grouped_conv_bwd_weight_bf16_nhwgc_2d_mem_cshuffle_interwave_64x16x64_2x1x1_16x16x32_vec8_2_2"
NOT_PROPOSED = "grouped_conv_fwd_bf16_nhwgc_2d_mem_cshuffle_interwave_32x64x64_1x2x1_32x32x16_vec1_1_8"


def test_explain_tells_member_not_proposed_and_invalid_apart(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", KNOWN_WRONG, "--arch", "gfx950", "--rules-only"]) == 0
    assert "VALID" in capsys.readouterr().out
    rules_only_count = Space("gfx950", "bwd_weight", ck=None).count()
    assert rules_only_count == 4464
    assert main(["explain", KNOWN_WRONG, "--arch", "gfx950", "--format", "json"]) == 1
    record = json.loads(capsys.readouterr().out)
    assert record["verdict"] == "invalid" and record["target"]["known_wrong_excluded"]
    blamed = {b["constraint"]: b["kind"] for c in record["cells"] for b in c["blame"]}
    assert blamed.get("bwd_weight_half_interwave_multiwave") == "known_wrong"
    assert main(["explain", NOT_PROPOSED, "--arch", "gfx950", "--rules-only"]) == 3
    text = capsys.readouterr().out
    assert "NOT PROPOSED" in text and "emit --kernels builds it" in text
    assert "rule set full does not propose it" in text
    real_ck()
    assert main(["explain", NOT_PROPOSED, "--arch", "gfx950"]) == 3  # the ResNet stem's pick, in the CK's target too


def test_explains_closest_proposals_are_kernels_of_the_target() -> None:
    space = Space("gfx950", "bwd_weight", ndim=2, dtype="bf16", ck=NO_CK)
    config = GemmConfig.from_name(KNOWN_WRONG, "gfx950")
    explanation = space.explain(config.model_copy(update={"vec_a": 4}))
    assert explanation.verdict == "invalid"
    named = [line.split()[0] for c in explanation.cells for line in c.closest if line.startswith("  grouped_conv")]
    assert named and all(space.contains(name) for name in named)


def test_emit_kernels_fails_naming_every_kernel_it_cannot_emit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(fake_ck(tmp_path / "ck", explicit_gemm=False))
    names = tmp_path / "kernels.txt"
    fine = "grouped_conv_fwd_bf16_nhwgc_2d_compv3_cshuffle_intrawave_64x64x64_2x2x1_32x32x16_vec8_8_8"
    broken = "grouped_conv_fwd_bf16_nhwgc_2d_mem_cshuffle_intrawave_16x16x64_1x1x1_16x16x32_vec8_8_4"
    names.write_text(f"# a plan\n{fine}\n{broken}\n{KNOWN_WRONG}\n")
    out = tmp_path / "tree"
    status = main(
        [
            "emit",
            "--arch",
            "gfx950",
            "--variant",
            "forward",
            "--ndim",
            "2",
            "--dtype",
            "bf16",
            "--kernels",
            str(names),
            "--out",
            str(out),
            "--ck-root",
            root,
        ]
    )
    err = capsys.readouterr().err
    assert status == 1 and not out.exists()
    assert f"{broken}: ck_pipeline" in err and f"{KNOWN_WRONG}: outside the requested cells" in err
    assert "2 of 3 kernels cannot be emitted" in err and fine + ":" not in err
    names.write_text(f"{fine}\n")
    assert (
        main(
            [
                "emit",
                "--arch",
                "gfx950",
                "--variant",
                "forward",
                "--ndim",
                "2",
                "--dtype",
                "bf16",
                "--kernels",
                str(names),
                "--out",
                str(out),
                "--ck-root",
                root,
            ]
        )
        == 0
    )
    assert json.loads((out / "manifest.json").read_text())["kernels"][0]["name"] == fine
    capsys.readouterr()
    assert (
        main(
            [
                "emit",
                "--arch",
                "gfx950",
                "--variant",
                "bwd_data",
                "--ndim",
                "2",
                "--dtype",
                "bf16",
                "--out",
                str(tmp_path / "empty"),
                "--ck-root",
                root,
            ]
        )
        == 2  # full holds no bwd_data kernel, default does: bad input naming it
    )
    assert "rule sets that do: default" in capsys.readouterr().err and not (tmp_path / "empty").exists()
    assert main(["emit", "--arch", "gfx950", "--variant", "forward", "--out", str(tmp_path / "r"), "--rules-only"]) == 2


@pytest.mark.slow
def test_select_prints_ckspace_names_for_benchmark_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    names = tmp_path / "names.txt"
    names.write_text("grouped_conv_forward_bf16_2d_64x64x64_compv3\ngrouped_conv_forward_bf16_2d_128x128x64_compv4\n")
    assert (
        main(
            [
                "select",
                "--arch",
                "gfx950",
                "--variant",
                "forward",
                "--dtype",
                "bf16",
                "--candidates",
                str(names),
                "--problem",
                "N=4,C=64,K=128,Hi=56,Wi=56,Y=3,X=3,pad=1",
                "--format",
                "json",
            ]
        )
        == 0
    )
    record = json.loads(capsys.readouterr().out)
    printed = [record["pick"], *(r["name"] for r in record["top"])]
    assert all(name.startswith("grouped_conv_fwd_bf16_nhwgc_2d_") for name in printed)
    assert record["target"]["known_wrong_excluded"]
    space = Space("gfx950", "forward", 2, "bf16", ck=None)
    for name in printed:  # the printed name is accepted where names are taken, and is the same config
        assert space.configs_from_name(name)[0].name == name


def test_vector_fallbacks_stay_inside_the_target() -> None:
    from ckspace.select.fallbacks import vector_variants

    family = GemmConfig.from_name(KNOWN_WRONG, "gfx950").model_copy(update={"scheduler": Scheduler.INTRAWAVE})
    wrong = family.model_copy(update={"scheduler": Scheduler.INTERWAVE})
    assert not known_wrong(family) and known_wrong(wrong)
    inside = vector_variants([wrong], NO_CK)[0]
    assert inside == [] and vector_variants([wrong])[0], "the rule space has variants the target must not offer"
    assert vector_variants([family], NO_CK)[0] == vector_variants([family])[0]


@pytest.mark.parametrize(
    "variant, problems, dtype",
    [("forward", "miopen-forward-300", "bf16"), ("bwd_weight", "validation-bwd-weight", "bf16")],
)
@pytest.mark.slow
def test_plan_emit_build_select_is_one_target(
    variant: str, problems: str, dtype: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """plan --budget 8 -> emit --kernels -> build --host-only: every planned kernel is emitted, and
    the library's compiled selection equals Selector.select with the library as pool on every
    problem of the workload."""
    from test_dispatcher import picked

    from ckspace.planning.workload import read_workload
    from ckspace.run.library import KernelLibrary
    from ckspace.select.selector import Selector

    real_ck()
    plan = tmp_path / "plan.txt"
    assert (
        main(
            [
                "plan",
                "--arch",
                "gfx950",
                "--variant",
                variant,
                "--dtype",
                dtype,
                "--problems",
                problems,
                "--budget",
                "8",
                "--time-limit",
                "5",
            ]
        )
        == 0
    )
    plan.write_text(capsys.readouterr().out)
    planned = [line for line in plan.read_text().splitlines() if line and not line.startswith("#")]
    assert 0 < len(planned) <= 8
    tree = tmp_path / "tree"
    assert (
        main(
            [
                "emit",
                "--arch",
                "gfx950",
                "--variant",
                variant,
                "--dtype",
                dtype,
                "--kernels",
                str(plan),
                "--out",
                str(tree),
                "--with-selector",
            ]
        )
        == 0
    )
    manifest = json.loads((tree / "manifest.json").read_text())
    assert sorted(k["name"] for k in manifest["kernels"]) == sorted(planned)
    assert main(["build", str(tree), "--host-only"]) == 0
    capsys.readouterr()
    dispatcher = KernelLibrary(tree / "build" / "host" / "libckspace_dispatch.so")
    configs = [GemmConfig.from_fields(k["config"]) for k in manifest["kernels"]]
    selector = Selector.load("gfx950", variant, dtype, engine="lightgbm")
    for problem in read_workload(DATASETS[problems].path, selector.variant).problems:
        cell = [c for c in configs if c.ndim == problem.ndim]
        choice = picked(dispatcher, problem, variant, dtype)
        try:
            expected = selector.select(problem, cell, k=1, pool=configs).pick if cell else None
        except CkspaceError:
            expected = None
        assert (choice.name if choice else None) == expected, problem.text()


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(st.sampled_from(["gfx942", "gfx950"]), st.sampled_from(list(Variant)), st.integers(0, 10_000))
def test_every_printed_name_is_accepted_and_means_the_same_config(arch: str, variant: Variant, seed: int) -> None:
    """Names enumerate prints (drawn), and the closest proposals explain offers for them with a vector
    changed, are accepted by explain and by ``emit --kernels`` (its name resolution, which writes
    nothing), as the same config."""
    from ckspace.workflow import named_kernels

    space = Space(arch, variant.value, ndim=2, dtype="bf16", ck=NO_CK)
    drawn = space.sample(1, seed=seed, stratify_by=())
    if not drawn:
        return
    config = drawn[0]
    assert space.explain(config.name).verdict == "member"
    assert space.configs_from_name(config.name) == [config]
    if config.kind == "depthwise":
        return
    names = [config.name]
    other = space.explain(config.model_copy(update={"vec_c": 1 if config.vec_c != 1 else 2}))
    for cell in other.cells:
        for line in cell.closest:
            if line.startswith("  grouped_conv"):
                name = line.split()[0]
                assert space.explain(name).verdict == "member"
                assert space.configs_from_name(name)[0].name == name
                names.append(name)
    emitted = {k.config().name: k.config() for k in named_kernels(space, names)}
    assert sorted(emitted) == sorted(set(names)) and emitted[config.name] == config


@pytest.mark.slow
def test_a_planned_library_compiles_for_gfx942_and_selects_as_python(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The product path for real, as CI runs it: plan -> emit --kernels -> build with the HIP
    toolchain for gfx942 (no GPU needed to compile); every planned kernel is compiled, and the built
    library's selection is the Python selector's over the library."""
    from test_build import _toolchain_or_skip
    from test_dispatcher import picked

    from ckspace.planning.workload import read_workload
    from ckspace.run.library import KernelLibrary
    from ckspace.select.selector import Selector

    _toolchain_or_skip()
    monkeypatch.setenv("CKSPACE_BUILD_CACHE", str(tmp_path / "objects"))
    plan = tmp_path / "plan.txt"
    assert (
        main(
            [
                "plan",
                "--arch",
                "gfx942",
                "--variant",
                "forward",
                "--dtype",
                "bf16",
                "--problems",
                "miopen-forward-300",
                "--budget",
                "2",
            ]
        )
        == 0
    )
    plan.write_text(capsys.readouterr().out)
    planned = sorted(line for line in plan.read_text().splitlines() if line and not line.startswith("#"))
    tree = tmp_path / "tree"
    assert (
        main(
            [
                "emit",
                "--arch",
                "gfx942",
                "--variant",
                "forward",
                "--dtype",
                "bf16",
                "--kernels",
                str(plan),
                "--out",
                str(tree),
                "--with-selector",
            ]
        )
        == 0
    )
    assert main(["build", str(tree), "--arch", "gfx942", "--jobs", "2", "--batch", str(len(planned))]) == 0
    report = json.loads(next((tree / "build").rglob("report.json")).read_text())
    assert sorted(k["name"] for k in report["kernels"] if k["status"] != "failed") == planned
    assert report["failed"] == 0 and report["link_error"] is None
    library = Path(report["library"])
    dispatcher = KernelLibrary(library)
    assert sorted(dispatcher.names) == planned
    configs = [GemmConfig.from_fields(k["config"]) for k in json.loads((tree / "manifest.json").read_text())["kernels"]]
    selector = Selector.load("gfx942", "forward", "bf16")
    for problem in read_workload(DATASETS["miopen-forward-300"].path, selector.variant).problems[:60]:
        choice = picked(dispatcher, problem, "forward", "bf16")
        try:
            expected = selector.select(problem, configs, k=1, pool=configs).pick
        except CkspaceError:
            expected = None
        assert (choice.name if choice else None) == expected, problem.text()


def test_a_revision_passed_in_is_used_as_it_is(tmp_path: Path) -> None:
    """``ck=revision`` (a CkRevision made elsewhere, its include_dir perhaps on another machine) is the
    revision the space's CK rules read: never read again from that directory."""
    from ckspace.environment.ck_headers import detect_revision

    revision = detect_revision(str(fake_ck(tmp_path / "ck", explicit_gemm=False) / "include"))
    moved = revision.model_copy(update={"include_dir": str(tmp_path / "elsewhere")})
    space = Space("gfx950", "forward", 2, "bf16", ck=moved)
    assert space.ck is moved
    assert space.count() == Space("gfx950", "forward", 2, "bf16", ck=revision).count() > 0
    with pytest.raises(CkspaceError, match="holds no"):
        detect_revision(str(tmp_path / "elsewhere"))
