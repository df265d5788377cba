"""Rule set ``rdna`` and rules revision ``pr12289``: upstream's open PR #12289.

The PR proposes a forward catalog for the warp-size-32 archs (``grouped_config_rules_rdna.py`` at
eaf6d8bc): per cell one 16x16x16 config for each wave split of the arch, fp16/bf16, 2D/3D, and a
raise for any call it does not support. Under the merged rules (the default revision) the WMMA
warp_tile_k floor of ``is_valid_for_arch`` (32) rejects all of them; the PR's later state
(qiangpan2/rocm-libraries@288a69ab, revision ``pr12289``) lowers the floor to 16. The expectations
here are stated from upstream's rules file, its arch facts and its arch check, not from ckspace's
tables.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from ckspace import Space
from ckspace.cli import main
from ckspace.constraints.enumeration import cellcache
from ckspace.constraints.rulebook.validity import gemm_rules
from ckspace.constraints.rulesets import get_rule_set, rule_set_names
from ckspace.constraints.rulesets.base import RuleSetRefusal
from ckspace.core.arch import arch_table
from ckspace.core.cells import Cell, Request
from ckspace.core.config import GemmConfig
from ckspace.core.revisions import default_rules_revision, rules_revision_names
from ckspace.core.vocab import Dtype, Predicate, Variant, arch_names

MERGED = "pr12173"
"""The newest merged revision: the default, and the rules the catalog was proposed against."""
PR = "pr12289"
CATALOG_ARCHS = ("gfx1100", "gfx1200", "gfx1201")
WAVES = ((2, 4, 1), (1, 8, 1), (8, 1, 1), (4, 2, 1))
"""The wave splits of gfx1100, gfx1200 and gfx1201 in their list order (upstream's arch specs), which
is also the catalog's order (upstream's own test asserts it)."""


def upstream_refusal(arch: str, cell: Cell) -> str | None:
    """Words of the check upstream's ``get_configs`` raises at for a call holding only ``cell``, in
    the order it checks (None: it answers): the warp size (gfx9 archs run 64), the variant, the
    ndim, whether the arch lists 16x16x16 for fp16 or bf16 (gfx1250 lists 16x16x32 only), the dtype."""
    if arch.startswith("gfx9"):
        return "warp-size-32"
    if cell.variant is not Variant.FORWARD:
        return "variant forward, not"
    if cell.ndim not in (2, 3):
        return "ndim 2, 3, not 1"
    if arch == "gfx1250":
        return "16x16x16 for none of fp16, bf16"
    if cell.dtype is Dtype.FP32:
        return "dtype fp16, bf16 on .*, not fp32"
    return None


def catalog(cell: Cell) -> list[str]:
    """The catalog's names for an answered cell, in its order: tile (16 x wave_m) x (16 x wave_n) x
    32, compv3, vectors (2, 2, 8), and layout ``ndhwgc`` in 3D (``nhwgc`` in 2D)."""
    layout = "ndhwgc" if cell.ndim == 3 else "nhwgc"
    return [
        f"grouped_conv_fwd_{cell.dtype.value}_{layout}_{cell.ndim}d_compv3_cshuffle_intrawave_"
        f"{16 * m}x{16 * n}x32_{m}x{n}x{k}_16x16x16_vec2_2_8"
        for m, n, k in WAVES
    ]


@pytest.mark.parametrize("revision", [MERGED, PR])
@pytest.mark.parametrize("arch", arch_names())
def test_every_cell_is_upstreams_answer(arch: str, revision: str) -> None:
    """Each of the 27 cells of each arch, asked alone: refused where upstream raises, else the
    catalog in upstream's order, none of it valid under the merged rules and all of it under pr12289."""
    rdna = get_rule_set("rdna")
    for cell in Request.build(arch, "rdna").cells:
        expected = upstream_refusal(arch, cell)
        space = Space(arch, cell.variant, cell.ndim, cell.dtype, "rdna", rules_revision=revision, ck=None)
        if expected is not None:
            assert rdna.refusal(arch, cell) is not None, cell
            with pytest.raises(RuleSetRefusal, match=expected):
                space.count()
            continue
        assert rdna.refusal(arch, cell) is None
        assert [k.name for k in space.kernels(raw=True)] == catalog(cell), cell
        assert space.names() == (sorted(catalog(cell)) if revision == PR else []), cell
        assert all(c.tagged for c in space.raw())  # the dtype tag the WMMA rule reads


def test_a_request_is_refused_as_a_whole_and_the_cache_cannot_hide_it() -> None:
    """Upstream raises for a call with any unsupported part, at the first of its checks that fails
    (so asking gfx1100 for every cell names the variant, not ndim 1 or fp32). A request is refused
    exactly when one of its cells is: answered cells are cached, refused ones never are."""
    with pytest.raises(RuleSetRefusal, match="variant forward, not bwd_data, bwd_weight") as refused:
        Space("gfx1100", rule_set="rdna", ck=None).count()
    assert isinstance(refused.value, ValueError) and refused.value.rule_set == "rdna"
    assert Space("gfx1100", "forward", 2, "fp16", "rdna", rules_revision=PR, ck=None).count() == 4  # now cached
    with pytest.raises(RuleSetRefusal, match="ndim 2, 3, not 1"):
        Space("gfx1100", "forward", [2, 1], "fp16", "rdna", rules_revision=PR, ck=None).count()
    every = Space("gfx1201", "forward", [2, 3], ["fp16", "bf16"], "rdna", rules_revision=PR, ck=None)
    assert every.count() == 16 and len(every.kernels(raw=True)) == 16
    for name in rule_set_names():  # the other rule sets refuse nothing
        if name != "rdna":
            assert all(get_rule_set(name).refusal("gfx942", c) is None for c in Request.build("gfx942", name).cells)


def test_revisions_are_cached_apart_without_a_format_bump() -> None:
    """The cell key holds the rules revision (and the tables' hash, which revisions.json and
    rdna.json are part of): a warm merged answer is never served for pr12289."""
    request = Request.build("gfx1200", "rdna", ["forward"], [3], ["bf16"], MERGED)
    (cell,) = request.cells
    assert cellcache.cell_key(request, cell) != cellcache.cell_key(replace(request, rules_revision=PR), cell)
    counts = [
        Space("gfx1200", "forward", 3, "bf16", "rdna", rules_revision=r, ck=None).count() for r in (MERGED, PR) * 2
    ]
    assert counts == [0, 4, 0, 4]


def test_explain_names_the_wmma_rule(capsys: pytest.CaptureFixture[str]) -> None:
    """``explain`` blames the one rule that rejects the catalog under the merged rules, accepts it
    under pr12289, and says in one line (exit 2) that a name of a refused cell is refused."""
    name = catalog(Cell(Variant.FORWARD, 3, Dtype.FP16))[0]
    base = ["explain", name, "--arch", "gfx1100", "--rule-set", "rdna", "--rules-only"]
    assert main(base) == 1
    out = capsys.readouterr().out
    assert "NOT VALID; it breaks 1 constraint(s)" in out and "wmma_warp_tile_k" in out and "warp_tile_k >= 32" in out
    assert main([*base, "--rules-revision", PR]) == 0
    assert f"(rdna, rules {PR}): VALID" in capsys.readouterr().out
    bwd = name.replace("_fwd_", "_bwd_data_")
    assert main(["explain", bwd, "--arch", "gfx1100", "--rule-set", "rdna", "--rules-only"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refuses this request on gfx1100" in err


def test_upstreams_arch_filter_test_and_the_lowered_floor() -> None:
    """Upstream's test asserts, on gfx1100, fp16, forward, tile 32x64x32, waves 2x4x1, compv3, that
    warp tile 16x16x16 passes "the arch filter" and 16x16x32 fails it. That filter is
    ``ArchFilter.is_kernel_valid`` (ckspace's ``is_config_valid``), which has no WMMA check: its
    verdicts hold under every revision, and 16x16x32 fails by the warp-tile list (gfx1100 lists only
    16x16x16), not by WMMA rule (b) or (c). Read against ``is_valid_for_arch`` with the lowered
    floor, 16x16x32 would pass: 32 >= 16, 1 x 32 <= tile_k 32, warp_tile_m 16. The WMMA floor alone
    decides 16x16x16 there: rejected under the merged rules, accepted under pr12289."""
    k16 = GemmConfig.from_name(catalog(Cell(Variant.FORWARD, 2, Dtype.FP16))[0], "gfx1100")
    k32 = k16.model_copy(update={"warp_tile_k": 32})
    predicate = {r.name: r.predicate for r in gemm_rules("gfx1100", Variant.FORWARD, Dtype.FP16, PR)}
    verdicts = {
        (revision, config.warp_tile_k): Space("gfx1100", rules_revision=revision, ck=None).violated_rules(config)
        for revision in (MERGED, PR)
        for config in (k16, k32)
    }
    assert verdicts == {
        (MERGED, 16): ["wmma_warp_tile_k"],
        (MERGED, 32): ["warp_tile_list"],
        (PR, 16): [],
        (PR, 32): ["warp_tile_list"],
    }
    assert predicate["wmma_warp_tile_k"] is Predicate.IS_VALID_FOR_ARCH
    assert predicate["warp_tile_list"] is Predicate.IS_CONFIG_VALID


def test_the_strict_arch_filter_would_change_no_answer() -> None:
    """The PR's strict arch filter raises for an unknown arch and makes a missing wave list or
    warp-tile table an error (a dtype missing from a table stays a warning). Every arch ckspace
    covers, in every revision, has both, and only fp32 is missing, only on warp-size-32 archs, which
    stays a pass; an unknown arch is refused before any rule runs."""
    for revision in rules_revision_names():
        archs = arch_table(revision)["archs"]
        assert sorted(archs) == sorted(arch_names())
        for arch, entry in archs.items():
            assert entry["wave_combos"] and entry["warp_tiles"], (revision, arch)
            missing = {d for d in Dtype if d.key not in entry["warp_tiles"]}
            assert missing == (set() if arch.startswith("gfx9") else {Dtype.FP32}), (revision, arch)
    (rule,) = [r for r in gemm_rules("gfx1100", Variant.FORWARD, Dtype.FP32, PR) if r.name == "warp_tile_list"]
    assert rule.vacuous and "warning" in rule.text


def test_only_the_pr_revision_is_opt_in(capsys: pytest.CaptureFixture[str]) -> None:
    """An open pull request is not upstream's rules: pr12289 is the newest revision, yet the default
    stays the newest merged one, and ``--help`` and ``ckspace rules`` mark it."""
    assert rules_revision_names()[-1] == PR and default_rules_revision() == MERGED
    with pytest.raises(SystemExit):
        main(["--help"])
    assert f"{PR} (unmerged upstream, opt-in) (default {MERGED}" in capsys.readouterr().out
    assert main(["rules", "--rules-only", "--format", "json", "--rules-revision", PR]) == 0
    revisions = {r["name"]: r for r in json.loads(capsys.readouterr().out)["revisions"]}
    assert not revisions[PR]["merged"] and revisions[MERGED]["merged"] and revisions[MERGED]["default"]
    assert revisions[PR]["tables"] == {
        "validity": {"is_valid_for_arch": {"wmma": {"min_warp_tile_k_unless_float": 16}}}
    }
    assert main(["rules", "--rules-only", "--rules-revision", PR, "--arch", "gfx1100", "--dtype", "fp16"]) == 0
    markdown = capsys.readouterr().out
    assert f"### `{PR}` (unmerged upstream, opt-in)" in markdown
    assert "warp_tile_k >= 16 unless" in markdown and f"rules revision {PR}: ROCm/rocm-libraries PR #12289" in markdown


PR_CHANGES = {
    **{("full", a): (18, 0) for a in CATALOG_ARCHS},
    **{("full-tests", a): (4, 0) for a in CATALOG_ARCHS},
    ("full-tests", "gfx1250"): (1496, 1482),
    ("tiny", "gfx1250"): (0, 6),
}
"""(added, removed) valid kernels per (rule set, arch) over every cell, pr12289 against the merged
rules; every other pair is unchanged."""


@pytest.mark.parametrize("rule_set", ["default", "full", "full-tests", "tiny"])
@pytest.mark.slow
def test_what_the_pr_changes_in_every_table_rule_set(rule_set: str) -> None:
    """Over every cell of every arch. ``full`` gains, on gfx1100, gfx1200 and gfx1201, its 9
    forward 2D configs per half dtype whose derived warp tile is 16x16x16 (tile_k 16): the floor
    rejected them before the rule set's own arch check, and the arch's warp-tile list accepts them.
    Its fp32 cells there do not change: ``full`` pairs tiles with the arch's fp32 warp tiles, which
    warp-size-32 archs do not list, so it proposes no GEMM config in them, only the 20 depthwise ones
    no GEMM rule reads (were there fp32-tagged proposals, the 'float' comparison, quirk 14.3, would
    hold them to the floor, now 16). On gfx1250 no valid ``full`` kernel changes, but configs with
    warp_tile_k 16 now pass its arch check and then fail the warp-tile list (16x16x32 only): its raw
    list grows, so the samples of ``full-tests`` and ``tiny`` move there. ``default`` is untagged,
    hence exempt from the floor under every revision, and does not change."""
    for arch in arch_names():
        old = set(Space(arch, rule_set=rule_set, ck=None).names())
        new = set(Space(arch, rule_set=rule_set, rules_revision=PR, ck=None).names())
        assert (len(new - old), len(old - new)) == PR_CHANGES.get((rule_set, arch), (0, 0)), arch
        if rule_set == "full" and arch in CATALOG_ARCHS:
            added = [GemmConfig.from_name(n, arch) for n in new - old]
            assert {(c.variant, c.ndim, c.tile_k) for c in added} == {(Variant.FORWARD, 2, 16)}
            assert {(c.warp_tile_m, c.warp_tile_n, c.warp_tile_k) for c in added} == {(16, 16, 16)}
            assert sorted(c.dtype.value for c in added) == ["bf16"] * 9 + ["fp16"] * 9
            fp32 = Space(arch, dtype="fp32", rule_set=rule_set, rules_revision=PR, ck=None)
            assert fp32.count() == 20 and all(k.depthwise for k in fp32.kernels(raw=True))


@pytest.mark.parametrize(
    "rule_set, arch, cells, added, removed",
    [
        ("full", "gfx1100", ["all"], 18, 0),
        pytest.param("tiny", "gfx1250", ["all"], 0, 6, marks=pytest.mark.slow),
        ("default", "gfx1250", ["all"], 0, 0),
        ("rdna", "gfx1201", ["forward", "--ndim", "2", "3", "--dtype", "fp16", "bf16"], 16, 0),
    ],
)
def test_diff_against_the_pr_revision(
    capsys: pytest.CaptureFixture[str], rule_set: str, arch: str, cells: list[str], added: int, removed: int
) -> None:
    """The command a user runs to see what the PR would change, on the upstream rule space."""
    argv = ["diff", "--arch", arch, "--rule-set", rule_set, "--rules-only", "--format", "json", "--variant", *cells]
    assert main([*argv, "--against-rules-revision", PR]) == 0
    report = json.loads(capsys.readouterr().out)
    assert f"(rules {MERGED})" in report["left"] and f"(rules {PR})" in report["right"]
    assert (len(report["only_right"]), len(report["only_left"])) == (added, removed)
    assert report["right_count"] - report["left_count"] == added - removed
    if rule_set == "rdna":
        expected = [n for nd in (2, 3) for d in (Dtype.FP16, Dtype.BF16) for n in catalog(Cell(Variant.FORWARD, nd, d))]
        assert report["only_right"] == sorted(expected) and report["left_count"] == 0


@pytest.mark.slow
def test_open_gains_the_wave32_16x16x16_space() -> None:
    """Rule set ``open`` cannot be listed, so its counts say what changes: on gfx1100, gfx1200 and
    gfx1201 the only warp tile the lists allow is 16x16x16, which the floor of 32 rejected for every
    tagged config, so no GEMM kernel was valid; with the floor at 16 every valid kernel is one of
    them. fp32 gains too, unchecked, because those archs list no fp32 warp tiles (quirk 14.4). The
    warp-size-64 archs and gfx1250 (16x16x32) do not change."""
    for arch in (*CATALOG_ARCHS, "gfx942", "gfx1250"):
        for dtype in ("fp16", "fp32"):
            old = Space(arch, "forward", 2, dtype, "open", ck=None).count()
            new = Space(arch, "forward", 2, dtype, "open", rules_revision=PR, ck=None)
            if arch in CATALOG_ARCHS:
                assert old == 0 and new.count() > 0 and new.where("warp_tile_k == 16").count() == new.count()
            else:
                assert new.count() == old > 0, (arch, dtype)
