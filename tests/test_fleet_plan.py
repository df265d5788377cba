"""``ckspace plan`` for a fleet of archs: one workload, each arch's plan from its own target and
scorer, with a budget per arch (each arch's plan is its one-arch plan) or in all (one solve over
every arch's candidates, the kernels going where they raise the mean of the archs' efficiencies
most); its ``names`` output is what ``ckspace emit --arch A B --kernels`` takes, and ``ckspace info``
on the emitted tree says what each arch holds."""

from __future__ import annotations

import json
from itertools import combinations, product
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_plan import PLAN_ARGS, WORKLOAD

from ckspace.cli import main
from ckspace.commands.plan import planned_sections
from ckspace.core.errors import CkspaceError
from ckspace.planning.fleet import joint_instance, solve_total
from ckspace.planning.plan import PlanInfeasibleError, PlanInstance

ARCHS = ("gfx942", "gfx950")
FLEET_ARGS = [a if a != "gfx950" else "gfx942" for a in PLAN_ARGS]
FLEET_ARGS.insert(FLEET_ARGS.index("--arch") + 2, "gfx950")
"""The plan of tests/test_plan.py (its workload, rule set and filter) for gfx942 and gfx950."""


@st.composite
def instances(draw: st.DrawFn) -> PlanInstance:
    """A small arch's instance: a few items, problems each run by a random subset (maybe none), random
    efficiencies in (0, 1] with the best first and weights."""
    items = draw(st.integers(1, 4))
    problems = draw(st.integers(1, 4))
    order, value = [], []
    for _ in range(problems):
        runs = draw(st.lists(st.integers(0, items - 1), unique=True, max_size=items))
        values = sorted(draw(st.lists(st.floats(0.05, 1.0), min_size=len(runs), max_size=len(runs))), reverse=True)
        order.append(np.asarray(runs, dtype=np.int64))
        value.append(np.asarray(values) / values[0] if values else np.empty(0))
    weights = draw(st.lists(st.integers(1, 50), min_size=problems, max_size=problems))
    return PlanInstance(items, tuple(order), tuple(value), np.asarray(weights, dtype=float))


def best_of_arch(part: PlanInstance, size: int) -> float | None:
    """The best value of at most ``size`` of the arch's items that cover its runnable problems, by
    trying every subset (None: no such subset)."""
    best = None
    for k in range(min(size, part.items) + 1):
        for chosen in combinations(range(part.items), k):
            if part.covers(chosen):
                value = part.value_of(chosen)
                best = value if best is None else max(best, value)
    return best


def best_split(parts: list[PlanInstance], budget: int) -> float | None:
    """The best mean over the archs that run something of their values, over every way of
    splitting ``budget`` among the archs (None: no split covers every arch)."""
    counted = [p for p in parts if p.runnable.any()]
    best = None
    for split in product(range(budget + 1), repeat=len(parts)):
        if sum(split) > budget:
            continue
        values = [best_of_arch(part, k) for part, k in zip(parts, split, strict=True)]
        if any(v is None for v in values):
            continue
        mean = sum(v for part, v in zip(parts, values, strict=True) if part.runnable.any()) / max(len(counted), 1)
        best = mean if best is None else max(best, mean)
    return best


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(instances(), min_size=2, max_size=3), st.integers(1, 6))
def test_a_total_budget_goes_where_it_raises_the_mean_efficiency_most(parts: list[PlanInstance], budget: int) -> None:
    """Against every split of the budget, each arch's best subset for its share found by trying
    them all: the joint solve reaches the best mean, within the budget, covering each arch."""
    expected = best_split(parts, budget)
    if expected is None:
        with pytest.raises(PlanInfeasibleError):
            solve_total(parts, budget)
        return
    joint, shares = solve_total(parts, budget)
    assert sum(len(s.chosen) for s in shares) == len(joint.chosen) <= budget
    counted = [(part, share) for part, share in zip(parts, shares, strict=True) if part.runnable.any()]
    for part, share in zip(parts, shares, strict=True):
        assert part.covers(share.chosen) and all(0 <= c < part.items for c in share.chosen)
        assert share.status == joint.status
    mean = sum(part.value_of(share.chosen) for part, share in counted) / max(len(counted), 1)
    assert mean == pytest.approx(expected, abs=1e-5)  # the objective is integral, scaled by 10^6


def test_the_joint_instance_weighs_each_arch_the_same() -> None:
    """Each arch's runnable problems weigh 1 in all, whatever its weights; items are laid side by
    side and split back into each arch's own numbers."""
    one = PlanInstance(
        2,
        (np.array([0, 1]), np.array([1]), np.empty(0, np.int64)),
        (np.array([1.0, 0.5]), np.array([1.0]), np.empty(0)),
        np.array([3.0, 1.0, 9.0]),
    )
    two = PlanInstance(1, (np.array([0]),), (np.array([1.0]),), np.array([100.0]))
    laid = joint_instance([one, two])
    assert laid.joint.items == 3 and laid.starts == (0, 2)
    assert laid.joint.weights.tolist() == [0.75, 0.25, 0.0, 1.0]
    assert [o.tolist() for o in laid.joint.order] == [[0, 1], [1], [], [2]]
    assert laid.split((1, 2)) == ((1,), (0,))
    assert laid.joint.value_of((1, 2)) == pytest.approx((0.75 * 0.5 + 0.25 * 1.0 + 1.0) / 2)


def test_an_arch_of_heavy_weights_counts_no_more_than_another() -> None:
    """Both archs need kernel 0 to run their second problem; the spare kernel 1 lifts the first
    problem of the heavy arch (a hundred times the weight) from 90 to 100 %, of the light one from
    50 to 100 %. It goes to the light arch, whose efficiency it lifts most (mean 97.5 % against
    87.5 %), not where the weights are largest: each arch's machines run the whole workload."""

    def arch(weight: float, second_best: float) -> PlanInstance:
        order = (np.array([1, 0]), np.array([0]))
        return PlanInstance(2, order, (np.array([1.0, second_best]), np.array([1.0])), np.array([weight, weight]))

    heavy, light = arch(100.0, 0.9), arch(1.0, 0.5)
    joint, shares = solve_total([heavy, light], 3)
    assert [s.chosen for s in shares] == [(0,), (0, 1)] and joint.status == "optimal"
    _, shares = solve_total([heavy, light], 4)
    assert [s.chosen for s in shares] == [(0, 1), (0, 1)]


ONE_PLAN = """# ckspace plan gfx950 forward bf16, budget 2: optimal
# a comment
kernel_a
kernel_b
"""


def test_a_plan_is_read_as_its_archs_sections() -> None:
    assert planned_sections(ONE_PLAN) == {"gfx950": ["kernel_a", "kernel_b"]}
    fleet = (
        "# ckspace fleet plan gfx942 gfx950 forward bf16, budget 2 per arch\n# x\n"
        + ONE_PLAN.replace("gfx950", "gfx942").replace("kernel_", "k942_")
        + ONE_PLAN
    )
    assert planned_sections(fleet) == {"gfx942": ["k942_a", "k942_b"], "gfx950": ["kernel_a", "kernel_b"]}
    assert planned_sections("kernel_a\n# kernel_b\n\n") is None  # a list of names: no arch said
    with pytest.raises(CkspaceError, match=r"line 1 names a kernel before any plan's header \(stray\)"):
        planned_sections("stray\n" + ONE_PLAN)


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str], status: int = 2) -> str:
    """Run ``argv``: it must fail with ``status``, print nothing and one line of error, no traceback."""
    capsys.readouterr()
    assert main(argv) == status
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "Traceback" not in captured.err, captured.err
    return captured.err


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        (["--arch", "gfx942", "gfx950", "gfx942", "--budget", "2"], ("gfx942 named twice", "gfx90a, gfx942, gfx950")),
        (["--arch", "gfx942", "GFX942", "--budget", "2"], ("--arch gfx942 GFX942: gfx942 named twice", "at most once")),
        (["--arch", "gfx942", "gfx1", "--budget", "2"], ("unknown arch 'gfx1'", "valid: gfx908")),
        (["--arch", "gfx942", "gfx1100", "--budget", "2"], ("arch with hardware facts 'gfx1100'", "valid: gfx942")),
        (["--arch", "gfx942", "gfx950", "--budget", "0"], ("--budget 0", "at least 1")),
        (["--arch", "gfx942", "gfx950", "--total-budget", "0"], ("--total-budget 0", "at least 1")),
        (["--arch", "gfx942", "gfx950", "--budget", "2", "--total-budget", "4"], ("not allowed with",)),
    ],
)
def test_a_bad_fleet_is_one_line_naming_it(
    arguments: list[str], words: tuple[str, ...], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    workload = tmp_path / "w.csv"
    workload.write_text(WORKLOAD)
    argv = ["plan", "--variant", "forward", "--dtype", "bf16", "--problems", str(workload), *arguments]
    error = one_line_error(capsys, argv)
    assert all(w in error for w in words), error


def test_a_model_of_none_of_the_archs_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """``--model`` is the model of the arch its card names; one of none of the fleet's archs is bad
    input, before the workload is read."""
    import shutil

    from ckspace.select.store import shipped_model_dir

    model = tmp_path / "model"
    shutil.copytree(shipped_model_dir("gfx950", "forward", "bf16"), model)
    card = json.loads((model / "card.json").read_text())
    (model / "card.json").write_text(json.dumps({**card, "arch": "gfx90a"}))
    broken = tmp_path / "broken.csv"
    broken.write_text("N,C,K\n1,2,3\n")  # missing columns: an error too, were it read first
    argv = [*FLEET_ARGS, "--problems", str(broken), "--budget", "2", "--model", str(model)]
    error = one_line_error(capsys, argv)
    assert f"--model {model} is a gfx90a model, for none of the archs gfx942 gfx950" in error


def test_emit_takes_its_archs_sections_and_names_the_plan_s(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A plan's sections are refused for an arch they lack, naming the archs planned; a list of
    names (no arch said) is refused for several archs."""
    plan = tmp_path / "plan.txt"
    plan.write_text(
        "# ckspace fleet plan gfx942 gfx950 forward bf16, budget 2 per arch\n"
        + ONE_PLAN.replace("gfx950", "gfx942")
        + ONE_PLAN
    )
    emit = ["emit", "--variant", "forward", "--out", str(tmp_path / "t"), "--kernels", str(plan)]
    error = one_line_error(capsys, [*emit[:1], "--arch", "gfx942", "gfx90a", *emit[1:]])
    assert f"--kernels {plan} is a plan for gfx942 gfx950, not for gfx90a" in error
    plan.write_text(ONE_PLAN)
    error = one_line_error(capsys, [*emit[:1], "--arch", "gfx942", *emit[1:]])
    assert f"--kernels {plan} is a plan for gfx950, not --arch gfx942: emit it with --arch gfx950" in error
    plan.write_text("kernel_a\n")
    error = one_line_error(capsys, [*emit[:1], "--arch", "gfx942", "gfx950", *emit[1:]])
    assert "one arch's plan, not for --arch gfx942 gfx950" in error


def run_plan(capsys: pytest.CaptureFixture[str], arguments: list[str], *more: str) -> str:
    capsys.readouterr()
    assert main([*arguments, "--weights", "runs", *more]) == 0
    return capsys.readouterr().out


@pytest.mark.slow
def test_a_fleet_plan_per_arch_is_each_arch_s_own_plan(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """With a budget per arch, each arch's section is its one-arch plan, byte for byte (its own
    target's candidates, its own scorer); the summary says each arch's kernels, efficiency and
    estimates, and which kernels both archs hold, by config."""
    workload = tmp_path / "w.csv"
    workload.write_text(WORKLOAD)
    fleet = run_plan(capsys, FLEET_ARGS, "--problems", str(workload), "--budget", "2")
    singles = {}
    for arch in ARCHS:
        one = [a if a != "gfx950" else arch for a in PLAN_ARGS]
        singles[arch] = run_plan(capsys, one, "--problems", str(workload), "--budget", "2")
    summary, _, sections = fleet.partition("# ckspace plan ")
    assert "# ckspace plan " + sections == singles["gfx942"] + singles["gfx950"]
    assert summary.startswith("# ckspace fleet plan gfx942 gfx950 forward bf16, budget 2 per arch\n")
    assert "gfx942: 2 kernels" in summary and "the analytical performance model (no model for gfx942" in summary
    assert "estimated by the shipped model of gfx950 forward bf16" in summary
    report = json.loads(run_plan(capsys, FLEET_ARGS, "--problems", str(workload), "--budget", "2", "--format", "json"))
    for arch in ARCHS:
        one = [a if a != "gfx950" else arch for a in PLAN_ARGS]
        alone = json.loads(run_plan(capsys, one, "--problems", str(workload), "--budget", "2", "--format", "json"))
        assert report["plans"][arch] == alone
        assert report["per_arch"][arch]["efficiency"] == alone["efficiency"]
    both = set(report["plans"]["gfx942"]["kernels"]) & set(report["plans"]["gfx950"]["kernels"])
    assert set(report["shared"]) == both and all(v == list(ARCHS) for v in report["shared"].values())
    assert report["per_arch"]["gfx942"]["source"] == "analytical" and report["per_arch"]["gfx950"]["source"] == "model"
    from ckspace.select.store import shipped_model_dir

    model = shipped_model_dir("gfx950", "forward", "bf16")  # --model: the model of the arch its card names
    arguments = [*FLEET_ARGS, "--problems", str(workload), "--budget", "2", "--format", "json", "--model", str(model)]
    given = json.loads(run_plan(capsys, arguments))
    assert given["per_arch"]["gfx950"]["estimates"] == f"the model at {model} (gfx950 forward bf16)"
    assert given["plans"] == report["plans"]  # the shipped model, named: the same plans


@pytest.mark.slow
def test_a_total_budget_is_kept_and_emit_and_info_follow_the_plan(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A total budget of 5 over two archs that need 2 each to cover the workload: 5 kernels at
    most, none of the archs worse than its plan with 2; too small a total is a negative answer
    (exit 1). The plan's names emit one library whose archs hold their sections' kernels, and
    ``ckspace info`` on the tree says so."""
    workload = tmp_path / "w.csv"
    workload.write_text(WORKLOAD)
    per_arch = json.loads(
        run_plan(capsys, FLEET_ARGS, "--problems", str(workload), "--budget", "2", "--format", "json")
    )
    arguments = [*FLEET_ARGS, "--problems", str(workload), "--total-budget", "5"]
    report = json.loads(run_plan(capsys, arguments, "--format", "json"))
    assert report["kernels"] == sum(len(p["kernels"]) for p in report["plans"].values()) <= 5
    assert report["status"] == "optimal"
    assert report["mean_efficiency"] >= per_arch["mean_efficiency"] - 1e-4  # 2 + 2 is one of the splits of 5
    for arch in ARCHS:  # each arch's share is as good as its one-arch plan of that many kernels
        assert report["plans"][arch]["total_budget"] == 5
        one = [a if a != "gfx950" else arch for a in PLAN_ARGS]
        size = str(len(report["plans"][arch]["kernels"]))
        alone = json.loads(run_plan(capsys, one, "--problems", str(workload), "--budget", size, "--format", "json"))
        assert report["plans"][arch]["efficiency"] == pytest.approx(alone["efficiency"], abs=1e-3)
    capsys.readouterr()  # a negative answer after the workload's warnings: its last line
    assert main([*FLEET_ARGS, "--problems", str(workload), "--weights", "runs", "--total-budget", "3"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    assert (
        "gfx942 + gfx950 together: no set of 3 kernel(s) runs every problem some candidate can run"
        in (captured.err.splitlines()[-1])
    )

    plan = tmp_path / "plan.txt"
    plan.write_text(run_plan(capsys, arguments))
    tree = tmp_path / "tree"
    capsys.readouterr()
    assert main(["emit", "--arch", *ARCHS, "--kernels", str(plan), "--out", str(tree)]) == 0
    manifest = json.loads((tree / "manifest.json").read_text())
    assert manifest["dispatcher"]["archs"] == {arch: report["plans"][arch]["kernels"] for arch in ARCHS}
    one = tmp_path / "gfx950"  # one arch of the plan: its section alone, a one-arch tree
    assert main(["emit", "--arch", "gfx950", "--kernels", str(plan), "--out", str(one)]) == 0
    alone = json.loads((one / "manifest.json").read_text())
    assert alone["arch"] == "gfx950" and alone["dispatcher"]["kernels"] == report["plans"]["gfx950"]["kernels"]
    capsys.readouterr()
    assert main(["info", str(tree), "--format", "json"]) == 0
    info = json.loads(capsys.readouterr().out)
    for arch in ARCHS:
        assert info["archs"][arch]["kernels"] == len(report["plans"][arch]["kernels"])
    assert info["archs"]["gfx942"]["models"]["forward bf16"] == {
        "ranked_by": "analytical",
        "shipped_model": False,
        "is_the_shipped_model": False,
    }
    assert info["archs"]["gfx950"]["models"]["forward bf16"]["shipped_model"] is True
    assert info["shared"] == report["shared"]
    assert main(["info", str(tree)]) == 0
    text = capsys.readouterr().out
    assert f"{len(report['shared'])} kernels serve several archs" in text or not report["shared"]
    assert "forward bf16 ranked by the analytical performance model (ckspace ships no model for it)" in text


def test_a_fleet_tree_as_candidates_gives_each_arch_its_kernels(tmp_path: Path) -> None:
    """``--candidates`` of a library of several archs (plan, select): an arch's candidates are the
    kernels whose records name it, as that arch's configs; an arch the library lacks is one line."""
    from ckspace.commands.select import read_registry
    from ckspace.space.benchmark_names import config_from_any_name

    names = (
        "grouped_conv_fwd_bf16_nhwgc_2d_compv3_cshuffle_intrawave_64x128x64_2x2x1_32x32x16",
        "grouped_conv_fwd_bf16_nhwgc_2d_compv3_cshuffle_intrawave_128x128x64_2x2x1_32x32x16_vec4_4_4",
    )
    held = ({"gfx942", "gfx950"}, {"gfx950"})
    kernels = [
        {"name": name, "config": config_from_any_name(name, sorted(archs)[0]).fields(), "archs": sorted(archs)}
        for name, archs in zip(names, held, strict=True)
    ]
    (tmp_path / "manifest.json").write_text(json.dumps({"archs": list(ARCHS), "kernels": kernels}))
    for arch in ARCHS:
        candidates, pool = read_registry(tmp_path, arch)
        assert [c.name for c in candidates] == [n for n, a in zip(names, held, strict=True) if arch in a]
        assert {c.arch for c in pool} == {arch}
    with pytest.raises(CkspaceError, match="a library of gfx942 gfx950, with no gfx90a kernel"):
        read_registry(tmp_path, "gfx90a")
