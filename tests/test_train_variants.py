"""Training and evaluation on ckspace bench's measurement CSVs, for every variant.

The CSVs are made up by ``tests/synthetic_measurements.py`` (real kernels and problem shapes, a
cost model of its own, rows ending wrong/crash/timeout among the ok ones), so a model's picks can
be judged against a known truth on problems it never saw. LightGBM runs 20 rounds here
(``boosters.NUM_ROUNDS``) to keep each training to seconds.
"""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import synthetic_measurements as sm
from conftest import fake_ck
from fuzz_world import contract_breaks, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ckspace.training.boosters as boosters
from ckspace.core.errors import CkspaceError, NoKernelError
from ckspace.select.selector import Selector
from ckspace.training.dataset import load_cells
from ckspace.workloads.problem import ConvProblem

BAD = {"wrong": 0.04, "crash": 0.02, "timeout": 0.02, "failed": 0.01}


@pytest.fixture(autouse=True)
def _few_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(boosters, "NUM_ROUNDS", 20)


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("train-variants")


@pytest.fixture(scope="module")
def bwd_weight(work: Path) -> tuple[sm.Sweep, Path]:
    """A bwd_weight sweep over 36 listed 2D problems and 12 drawn 1D/2D/3D ones (dilations, groups,
    split-K), with bad rows among the good."""
    problems = sm.listed_problems("bwd_weight", 36) + sm.drawn_problems("bwd_weight", 12, seed=1)
    sweep = sm.sweep({"bwd_weight": problems}, seed=2, bad=BAD)
    return sweep, sweep.write(work / "sweep_bwd_weight.csv")


@pytest.fixture(scope="module")
def all_variants(work: Path) -> tuple[sm.Sweep, Path]:
    """A sweep of a ``--variant all`` library: three cells in one file."""
    problems = {v: sm.listed_problems(v, 8, offset=3) for v in ("forward", "bwd_data", "bwd_weight")}
    sweep = sm.sweep(problems, seed=3, bad=BAD)
    return sweep, sweep.write(work / "sweep_all.csv")


def ok(argv: list[str]) -> str:
    outcome = run_cli(argv)
    assert outcome.status == 0, outcome.stderr
    return outcome.stdout


def fails(argv: list[str], *needles: str) -> str:
    outcome = run_cli(argv)
    assert outcome.status == 2 and not contract_breaks(argv, outcome), outcome.stderr
    for needle in needles:
        assert needle in outcome.stderr, (needle, outcome.stderr)
    return outcome.stderr


# -- reading ------------------------------------------------------------------------------------
@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    seed=st.integers(0, 2**16),
    wrong=st.floats(0.0, 0.5),
    crash=st.floats(0.0, 0.3),
    variants=st.sets(st.sampled_from(["forward", "bwd_data", "bwd_weight"]), min_size=1),
)
@pytest.mark.slow
def test_rows_are_read_by_their_config_and_only_ok_rows_are_measurements(
    tmp_path_factory: pytest.TempPathFactory, seed: int, wrong: float, crash: float, variants: set[str]
) -> None:
    """Kernel labels that name nothing: the kernels still come out right (identity is the config).
    Each cell's statuses, kept rows and matrix equal a restatement from the rows written."""
    problems = {v: sm.drawn_problems(v, 4, seed=seed) for v in sorted(variants)}
    sweep = sm.sweep(problems, seed=seed, bad={"wrong": wrong, "crash": crash}, label="garbage")
    path = sweep.write(tmp_path_factory.mktemp("read") / "sweep.csv")
    for variant in sorted(variants):
        known = {(tuple(sm.config_cells(c).values()), c.ndim): c.name for c in sweep.configs[variant]}
        rows = [r for r in sweep.rows if r["variant"] == variant]
        good: dict[str, dict[str, float]] = {}
        for r in rows:
            if r["status"] == "ok":
                name = known[tuple(r[k] for k in sm.config_cells(sweep.configs[variant][0])), int(r["ndim"])]
                good.setdefault(r["problem_idx"], {})[name] = float(r["tflops"])
        kept = {idx: by for idx, by in good.items() if len(by) >= 2}
        if not kept:
            with pytest.raises(CkspaceError, match=f"no usable gfx950 {variant} bf16"):
                load_cells([path], variant=variant)
            continue
        [data] = load_cells([path], variant=variant)
        assert data.report.statuses == dict(Counter(r["status"] for r in rows))
        assert data.report.rows_other_cells == len(sweep.rows) - len(rows)
        assert data.report.problems == len(kept) and data.report.rows_kept == sum(map(len, kept.values()))
        measured = {
            (p.text(), data.kernel_names[k]): data.tflops[i, k]
            for i, p in enumerate(data.problems)
            for k in np.flatnonzero(~np.isnan(data.tflops[i]))
        }
        assert measured == {(sweep.problems[idx].text(), name): t for idx, by in kept.items() for name, t in by.items()}


# -- a bwd_weight model, end to end ---------------------------------------------------------------
@pytest.fixture(scope="module")
def bwd_weight_model(bwd_weight: tuple[sm.Sweep, Path], work: Path) -> Path:
    _, path = bwd_weight
    out = work / "model_bwd_weight"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(boosters, "NUM_ROUNDS", 20)
        text = ok(["train", "--data", str(path), "--out", str(out)])
    assert f"model written to {out}" in text and text.startswith("gfx950 bwd_weight bf16: ")
    return out


@pytest.mark.slow
def test_the_card_records_the_cell_and_the_data(bwd_weight: tuple[sm.Sweep, Path], bwd_weight_model: Path) -> None:
    sweep, path = bwd_weight
    card = json.loads((bwd_weight_model / "card.json").read_text())
    assert (card["arch"], card["variant"], card["dtype"]) == ("gfx950", "bwd_weight", "bf16")
    assert card["data"] == {path.name: hashlib.sha256(path.read_bytes()).hexdigest()}
    statuses = Counter(r["status"] for r in sweep.rows)
    assert card["rows_by_status"] == dict(statuses) and {"wrong", "crash", "timeout"} <= set(statuses)
    ok_kernels = Counter(r["problem_idx"] for r in sweep.rows if r["status"] == "ok")
    assert card["rows"] == statuses["ok"] and card["problems"] == sum(n >= 2 for n in ok_kernels.values()) >= 46
    assert card["cross_validation"]["folds"] == 5 and "--variant bwd_weight" in card["training_command"]
    assert set(card["kernels"]) <= {c.name for c in sweep.configs["bwd_weight"]}
    assert {int(name.split("_nhwgc_")[1][0]) for name in card["kernels"]} == {1, 2, 3}


def held_out() -> list[ConvProblem]:
    """Problems of the cost model none of which the training sweep holds."""
    return sm.listed_problems("bwd_weight", 30, offset=1) + sm.drawn_problems("bwd_weight", 10, seed=99)


def test_the_bwd_weight_model_picks_better_than_chance_on_held_out_problems(
    bwd_weight: tuple[sm.Sweep, Path], bwd_weight_model: Path
) -> None:
    """Judged against the cost model's noise-free truth: the trained selector's mean efficiency
    beats a random pick's by a wide margin; the compiled trees and LightGBM give the same scores."""
    sweep, _ = bwd_weight
    seen = {p.text() for p in sweep.problems.values()}
    problems = [p for p in held_out() if p.text() not in seen]
    assert len(problems) >= 30
    # rules only, as the sweep's kernels: a family's fallbacks are variants of the rule space too
    selector = Selector.load("gfx950", "bwd_weight", "bf16", model_dir=bwd_weight_model, ck=None)
    lightgbm = Selector.load("gfx950", "bwd_weight", "bf16", model_dir=bwd_weight_model, engine="lightgbm", ck=None)
    assert selector.source == "model" and selector.engine == "compiled" and lightgbm.engine == "lightgbm"
    configs = sweep.configs["bwd_weight"]
    picked, chance = [], []
    for problem in problems:
        runnable = [c for c in configs if c.ndim == problem.ndim]
        truth = {c.name: sm.true_latency_ms(problem, c) for c in runnable}
        best = min(truth.values())
        try:
            result = selector.select(problem, runnable, k=3)
        except NoKernelError:
            continue
        other = lightgbm.select(problem, runnable, k=3)
        assert [r.name for r in other.top] == [r.name for r in result.top]
        assert [r.score for r in other.top] == pytest.approx([r.score for r in result.top], rel=1e-6)
        picked.append(best / truth[result.family or result.pick])
        chance.append(np.mean([best / t for t in truth.values()]))
    assert len(picked) >= 30
    assert np.mean(picked) > np.mean(chance) + 0.10, (np.mean(picked), np.mean(chance))
    assert np.mean(picked) > 0.85


def test_emit_with_selector_takes_the_bwd_weight_model(
    bwd_weight_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model goes into a bwd_weight library's C dispatcher, whose pick equals the Python one."""
    from ckspace.run.library import KernelLibrary

    monkeypatch.setenv("CK_ROOT", str(fake_ck(tmp_path / "ck", explicit_gemm=False)))
    tree = tmp_path / "tree"
    out = ok(
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
            "--model",
            str(bwd_weight_model),
            "--out",
            str(tree),
        ]
    )
    assert "bwd_weight bf16: model" in out
    manifest = json.loads((tree / "manifest.json").read_text())
    from ckspace.core.config import GemmConfig

    configs = [GemmConfig.from_fields(e["config"]) for e in manifest["kernels"]]
    ok(["build", str(tree), "--host-only"])
    shutil.rmtree(tree / "build")  # again, with every object in the object cache
    ok(["build", str(tree), "--host-only"])
    dispatcher = KernelLibrary(tree / "build" / "host" / "libckspace_dispatch.so")
    selector = Selector.load("gfx950", "bwd_weight", "bf16", model_dir=bwd_weight_model)
    problems = [p for p in held_out() if p.ndim == 2][:12]
    for problem in problems:
        choice = dispatcher.select(problem, "bwd_weight", "bf16")
        expected = selector.select(problem, configs, pool=configs)
        assert choice.name == expected.pick
        assert choice.predicted_tflops == pytest.approx(expected.top[0].predicted_tflops, rel=1e-5)


# -- several cells --------------------------------------------------------------------------------
@pytest.mark.slow
def test_several_cells_train_into_the_models_layout(all_variants: tuple[sm.Sweep, Path], tmp_path: Path) -> None:
    _, path = all_variants
    text = ok(["train", "--data", str(path), "--folds", "2", "--out", str(tmp_path / "models")])
    for variant in ("bwd_data", "bwd_weight", "forward"):
        directory = tmp_path / "models" / "gfx950" / f"{variant}_bf16"
        assert f"model written to {directory}" in text
        assert Selector.load("gfx950", variant, "bf16", model_dir=directory, engine="lightgbm").source == "model"
    card = json.loads((tmp_path / "models" / "gfx950" / "bwd_data_bf16" / "card.json").read_text())
    assert card["variant"] == "bwd_data" and set(card["rows_by_status"]) >= {"ok"}
    one = tmp_path / "one"
    ok(["train", "--data", str(path), "--variant", "bwd_data", "--folds", "2", "--out", str(one)])
    assert json.loads((one / "card.json").read_text())["variant"] == "bwd_data"
    fails(
        ["train", "--data", str(path), "--folds", "2", "--out", str(one)],
        "model directory of one cell",
        "3 cells",
        "--variant",
    )
    fails(
        ["train", "--data", str(path), "--arch", "gfx942", "--out", str(tmp_path / "x")],
        "--arch gfx942",
        "gfx950 bwd_weight bf16",
    )
    fails(
        ["evaluate", "--data", str(path), "--variant", "bwd_weight", "--dtype", "fp16"],
        "--variant bwd_weight --dtype fp16",
        "gfx950 bwd_weight bf16",
    )
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_evaluate_reports_every_cell(all_variants: tuple[sm.Sweep, Path], tmp_path: Path) -> None:
    _, path = all_variants
    lines = ok(["evaluate", "--data", str(path), "--folds", "2", "--format", "json"]).splitlines()
    results = [json.loads(line) for line in lines]
    assert [(r["arch"], r["variant"], r["dtype"]) for r in results] == [
        ("gfx950", v, "bf16") for v in ("bwd_data", "bwd_weight", "forward")
    ]
    assert all(r["folds"] == 2 and r["cleaning"]["statuses"]["ok"] > 0 for r in results)
    text = ok(["evaluate", "--data", str(path), "--folds", "2"])
    assert all(f"gfx950 {v} bf16: read" in text for v in ("forward", "bwd_data", "bwd_weight"))
    fails(["evaluate", "--data", str(path), "--plot", str(tmp_path / "p.png")], "--plot draws one cell", "--variant")


# -- small sweeps ---------------------------------------------------------------------------------
def small(tmp_path: Path, count: int, edit=None) -> Path:
    sweep = sm.sweep({"bwd_weight": sm.listed_problems("bwd_weight", count, offset=5)}, seed=4)
    if edit is not None:
        sweep.rows = edit(sweep.rows)
    return sweep.write(tmp_path / f"small{count}.csv")


def test_a_sweep_of_three_shapes_trains_with_three_folds(tmp_path: Path) -> None:
    path = small(tmp_path, 3)
    ok(["train", "--data", str(path), "--out", str(tmp_path / "m")])
    assert json.loads((tmp_path / "m" / "card.json").read_text())["cross_validation"]["folds"] == 3
    fails(
        ["train", "--data", str(path), "--folds", "5", "--out", str(tmp_path / "n")],
        "--folds 5",
        "only 3 distinct problem shapes",
        "--folds 3",
    )
    fails(["evaluate", "--data", str(small(tmp_path, 1))], "1 distinct problem shape", "at least 2")
    assert not (tmp_path / "n").exists()


def test_problems_with_one_ok_kernel_are_dropped_and_counted(tmp_path: Path) -> None:
    def one_ok_on_first_two(rows: list[dict[str, str]]) -> list[dict[str, str]]:
        seen: Counter[str] = Counter()
        for row in rows:
            seen[row["problem_idx"]] += 1
            if row["problem_idx"] in ("0", "1") and seen[row["problem_idx"]] > 1:
                row.update(status="crash", latency_ms="", tflops="", non_zero="")
        return rows

    path = small(tmp_path, 4, one_ok_on_first_two)
    data = load_cells([path])[0]
    assert data.report.problems == 2 and data.report.problems_dropped == 2
    assert data.report.dropped["problem_with_fewer_than_2_kernels"] == 2
    none = small(tmp_path, 2, lambda rows: [r for r in rows if r["problem_idx"] == "0"][:1])
    fails(
        ["train", "--data", str(none), "--out", str(tmp_path / "m")],
        "no usable gfx950 bwd_weight bf16",
        "at least 2 kernels",
    )


def test_all_kernels_tied_still_trains_and_selects(tmp_path: Path) -> None:
    def tied(rows: list[dict[str, str]]) -> list[dict[str, str]]:
        first: dict[str, dict[str, str]] = {}
        for row in rows:
            same = first.setdefault(row["problem_idx"], row)
            row.update(latency_ms=same["latency_ms"], tflops=same["tflops"])
        return rows

    path = small(tmp_path, 6, tied)
    ok(["train", "--data", str(path), "--out", str(tmp_path / "m")])
    card = json.loads((tmp_path / "m" / "card.json").read_text())
    assert card["cross_validation"]["model"]["mean"] == pytest.approx(100.0)
    selector = Selector.load("gfx950", "bwd_weight", "bf16", model_dir=tmp_path / "m", engine="lightgbm")
    assert selector.select(sm.listed_problems("bwd_weight", 1)[0], card["kernels"]).pick in card["kernels"]


def test_a_damaged_cell_column_is_one_line(tmp_path: Path) -> None:
    path = small(tmp_path, 2)
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    rows[3]["variant"] = "sideways"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    fails(["evaluate", "--data", str(path)], f"{path} line 5", "sideways", "bwd_weight")
