"""``ckspace learn --tree DIR``: the loop building and timing for real, on the CPU with a stand-in.

The tree is a real gfx950 forward bf16 tree emitted ``--with-selector`` against conftest's fake CK,
its generated host dispatcher linked with ``tests/standin/standin_run.c`` (a ``ckspace_run`` computing
a naive convolution on host memory; see tests/test_bench.py). ``--backend host`` then builds the
tree's host part with ``ckspace build``'s machinery and times pairs through bench's sweep, verified:
the record's rows are the stand-in's, a resumed run measures no pair twice, ``select`` loads the
model, a wrong result is no measurement, and bad input is one line."""

from __future__ import annotations

import csv
import subprocess
from pathlib import Path

import pytest
from conftest import fake_ck
from standin_library import STANDIN

from ckspace.cli import main
from ckspace.compiling.builder import build_host
from ckspace.core.vocab import Dtype, Variant
from ckspace.emit.manifest import Manifest
from ckspace.run.bench_measurer import UNSUPPORTED, BenchMeasurer
from ckspace.run.library import KernelLibrary
from ckspace.run.results import ResultsFile
from ckspace.run.sweep import SweepOptions
from ckspace.select.compiled import host_c_compiler
from ckspace.training.learning import RECORD_FILE, ROUND_FILE, measurement_row
from ckspace.workloads.problem import ConvProblem

CELL = ["--arch", "gfx950", "--variant", "forward", "--dtype", "bf16"]
PROBLEMS = """N,C,K,G,Hi,Wi,Y,X,stride_h,stride_w,pad_h,pad_w
2,16,16,1,6,6,3,3,1,1,1,1
1,32,16,2,5,7,3,3,2,2,1,1
2,16,32,1,8,8,1,1,1,1,0,0
1,64,64,1,7,7,3,3,1,1,1,1
4,32,64,1,4,4,1,1,1,1,0,0
"""
PROBLEM = "N=1,G=1,C=32,K=32,Hi=6,Wi=6,Y=3,X=3,stride=1,pad=1"


def standin_tree(root: Path) -> tuple[Path, str]:
    """The forward tree under ``root`` and its kernel that computes wrong results: its stand-in
    library is linked from every host unit of its dispatcher (a forward dispatcher's ranker is units
    of its own), the last kernel of its table that supports :data:`PROBLEM` made wrong (one the
    analytical model ranks low on :data:`PROBLEMS`, so the loop's runs here do not ask it)."""
    tree = root / "tree"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CK_ROOT", str(fake_ck(root / "ck", explicit_gemm=False)))
        emit = ["emit", *CELL, "--ndim", "2", "--with-selector", "--out", str(tree)]
        assert main(emit) == 0
    manifest = Manifest.model_validate_json((tree / "manifest.json").read_bytes())
    assert manifest.dispatcher is not None
    host = KernelLibrary(build_host(tree))  # the kernel table's order, which the stand-in's indices follow
    problem = ConvProblem.parse(PROBLEM)
    wrong = max(i for i in range(len(host.names)) if host.is_supported(i, problem, Variant.FORWARD, Dtype.BF16))
    library = tree / "build" / "gfx950" / "libckspace_kernels_gfx950.so"
    library.parent.mkdir(parents=True)
    compiler = host_c_compiler()
    assert compiler is not None, "the stand-in library needs a C compiler"
    units = [str(tree / unit) for unit in manifest.dispatcher.host_units]
    subprocess.run(
        [
            *(compiler, "-O2", "-shared", "-fPIC", f"-I{tree}", *units, str(STANDIN)),
            *(f"-DSTANDIN_WRONG={wrong}", "-DSTANDIN_CRASH=-1", "-DSTANDIN_HANG=-1"),
            *("-Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc", "-o", str(library), "-lm"),
        ],
        check=True,
    )
    return tree, host.names[wrong]


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return standin_tree(tmp_path_factory.mktemp("learn-bench"))


@pytest.fixture
def tree(standin: tuple[Path, str]) -> Path:
    return standin[0]


def learn_args(tree: Path, problems: Path, out: Path, kernels: int, pairs: int) -> list[str]:
    return [
        *("learn", *CELL, "--problems", str(problems), "--tree", str(tree), "--backend", "host"),
        *("--budget-kernels", str(kernels), "--budget-pairs", str(pairs), "--out", str(out), "--threads", "1"),
    ]


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_a_wrong_result_is_not_measured_and_its_row_says_why(standin: tuple[Path, str], tmp_path: Path) -> None:
    """Verification is on: one kernel of the stand-in computes wrong results, so its pair is no
    measurement and the record's row carries the check's status, errors and tolerance."""
    tree, wrong = standin
    measurer = BenchMeasurer(tree, "gfx950", "forward", "bf16", SweepOptions(backend="host", warmup=0, repeat=1))
    config = next(c for c in measurer.kernels() if c.name == wrong)
    problem = ConvProblem.parse(PROBLEM)
    measurer.build([config])
    path = tmp_path / RECORD_FILE
    record = ResultsFile.open(path, False, (problem,))
    try:
        [answer] = measurer.measure([(problem, config)])
        measurer.record(record).append(measurement_row(0, problem, config, answer, measurer))
    finally:
        record.close()
    assert answer is None
    [row] = _rows(path)
    assert row["status"] == "wrong" and "beyond tolerance" in row["detail"] and row["tolerance"]
    assert float(row["max_abs_error"]) > 1.0 and not row["tflops"]


@pytest.mark.slow
def test_learn_builds_and_benches_resumes_and_select_takes_its_model(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    problems = tmp_path / "problems.csv"
    problems.write_text(PROBLEMS)
    out = tmp_path / "learnt"
    assert main(learn_args(tree, problems, out, 3, 10)) == 0
    captured = capsys.readouterr()
    assert "built whole in" in captured.out and f"model (regression) written to {out}" in captured.out
    first = _rows(out / RECORD_FILE)
    assert len(first) == 10 and (out / ROUND_FILE).is_file()
    assert sorted(p.name for p in out.iterdir() if p.suffix == ".csv") == [RECORD_FILE]  # bench's CSV went away
    ok = [row for row in first if row["status"] == "ok"]
    assert ok, first
    for row in ok:  # the stand-in timed and verified it
        assert row["device_name"] == "host stand-in 0" and float(row["tflops"]) > 0
        assert row["tolerance"] and float(row["max_rel_error"]) < 0.05 and row["repeat"] == "10"
    for row in first:
        assert row["status"] in ("ok", "wrong", "failed") and (row["status"] == "ok") == bool(row["tflops"])
        assert row["status"] == "ok" or row["detail"]
        assert row["detail"] != UNSUPPORTED  # the loop asks no pair the dispatcher refuses

    assert main(learn_args(tree, problems, out, 4, 20)) == 0  # resumed with more budget
    stopped = capsys.readouterr().out
    rows = _rows(out / RECORD_FILE)
    assert rows[: len(first)] == first and len(first) < len(rows) <= 20
    # 20 is every pair of 4 kernels on the 5 problems: short of it only where CK's checks refuse pairs
    assert len(rows) == 20 or "stopped by kernels budget" in stopped, stopped
    assert all(row["detail"] != UNSUPPORTED for row in rows)
    pairs = [(row["kernel"], row["problem_idx"]) for row in rows]
    assert len(set(pairs)) == len(pairs)  # no pair twice
    assert len({row["kernel"] for row in rows}) <= 4
    capsys.readouterr()
    status = main(["select", *CELL, "--problem", PROBLEM, "--model", str(out), "--rules-only", "--top", "3"])
    captured = capsys.readouterr()
    assert status == 0 and "grouped_conv" in captured.out


@pytest.mark.slow
def test_learn_calibrates_through_build_and_bench(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--calibration on`` through the host stand-in: the design's pairs are built and benched like
    the rounds' (verified, each once, within the kernel budget), the constants they fit are the
    card's and the report's, and select prices the model's features with them."""
    import json

    from ckspace.select.selector import Selector
    from ckspace.training.calibration import FITTED

    problems = tmp_path / "problems.csv"
    problems.write_text(PROBLEMS)
    out = tmp_path / "learnt"
    assert main([*learn_args(tree, problems, out, 3, 12), "--calibration", "on", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    rows = _rows(out / RECORD_FILE)
    pairs = [(row["kernel"], row["problem_idx"]) for row in rows]
    assert 0 < len(pairs) == len(set(pairs)) <= 12 and len({row["kernel"] for row in rows}) <= 3
    assert all(row["status"] != "ok" or row["tolerance"] for row in rows)  # verified like every pair
    card = json.loads((out / "card.json").read_text())
    assert sorted(card["calibrated"]) == sorted(FITTED)
    assert report["calibrated"] and report["constants"] == card["calibrated"]
    assert f"--tree {tree} --backend host --executor local" in card["training_command"]  # this command resumes
    selector = Selector.load(*CELL[1::2], model_dir=out, engine="lightgbm")
    assert selector.hw.calibrated == card["calibrated"]


@pytest.mark.slow
def test_learn_runs_its_compiles_and_timed_batches_on_a_ray_cluster(tree: Path, tmp_path: Path) -> None:
    """``--executor ray``: a Ray cluster started here (two loopback nodes, one stand-in device each)
    runs the loop's compiles and timed batches; the record is a whole one (every pair once, timed and
    verified by the stand-in on a cluster node) and the model is written."""
    import sys

    from ray_loopback import loopback_cluster

    problems = tmp_path / "problems.csv"
    problems.write_text(PROBLEMS)
    out = tmp_path / "learnt"
    device = {"num_cpus": 1, "resources": {"ckspace_device": 1}}
    with loopback_cluster(device, device) as address:
        command = [sys.executable, "-m", "ckspace", *learn_args(tree, problems, out, 2, 6)]
        done = subprocess.run(
            [*command, "--executor", "ray", "--address", address], capture_output=True, text=True, timeout=900
        )
    assert done.returncode == 0, done.stderr
    assert f"written to {out}" in done.stdout
    rows = _rows(out / RECORD_FILE)
    pairs = [(row["kernel"], row["problem_idx"]) for row in rows]
    assert 0 < len(pairs) == len(set(pairs)) <= 6 and len({row["kernel"] for row in rows}) <= 2
    ok = [row for row in rows if row["status"] == "ok"]
    assert ok and all(row["device_name"] == "host stand-in 0" and row["tolerance"] for row in ok), rows
    assert all(row["device"].startswith("127.0.0.1:node-") for row in ok)  # a cluster node ran each batch


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (["--replay", "mi355x-forward-bf16"], "give one measurer"),
        (["--backend", "cuda"], "--backend"),
        (["--executor", "slurm"], "--executor"),
        (["--address", "head:6379"], "--address is for --executor ray"),
        (["--devices", "x"], "--devices 'x'"),
        (["--backend", "hip"], "no AMD GPU"),
    ],
)
def test_bad_measurer_input_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: list[str], named: str
) -> None:
    """Refused before the tree is read: no tree is needed."""
    problems = tmp_path / "problems.csv"
    problems.write_text(PROBLEMS)
    args = learn_args(tmp_path / "tree", problems, tmp_path / "out", 3, 10)
    option, value = change
    if option in args:
        args[args.index(option) + 1] = value
    else:
        args += change
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and named in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("tree_of", "named"),
    [(lambda tree, tmp: tmp, "has no manifest.json"), (lambda tree, tmp: tree, "no gfx950 forward fp16 kernels")],
    ids=["not_a_tree", "another_cell"],
)
def test_a_tree_that_cannot_serve_the_cell_is_one_line(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], tree_of, named: str
) -> None:
    problems = tmp_path / "problems.csv"
    problems.write_text(PROBLEMS)
    args = learn_args(tree_of(tree, tmp_path), problems, tmp_path / "out", 3, 10)
    args[args.index("--dtype") + 1] = "fp16" if "fp16" in named else "bf16"
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and named in err and "Traceback" not in err
