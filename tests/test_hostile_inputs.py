"""Hostile input, round 2: each class of break an audit of the readers found, as tests named for it, one
per reader.

Every file ckspace reads because a user named it or found it on disk (problems and data CSVs, kernel
lists, bench's resume file and kernel library, a model directory's files, a tree's manifest and
sources) goes through :func:`ckspace.environment.inputs.read_input`: a fifo is refused, not waited on; text
that is not UTF-8 says the offset of its first bad byte; JSON nested too deeply to parse is one
line. And an environment variable ckspace cannot parse is one line naming it. Each case is a real
command line run in this process and bounded in time (:func:`fuzz_world.run_cli`): a command that
waits on a fifo fails its test instead of hanging the suite; each must exit 2 with one
``ckspace: error:`` line naming the file, and no traceback.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
from pathlib import Path

import pytest
from conftest import c_compiler, fake_ck
from fuzz_world import DEEP, PROBLEM, contract_breaks, run_cli
from standin_library import build_standin

from ckspace.select.store import shipped_model_dir

LIMIT = 120.0
"""Seconds one command may take here: every refusal is immediate, so past this it waited."""

PROBLEMS = "N,C,K,G,Hi,Wi,Y,X,stride_h,stride_w,pad_h,pad_w\n2,16,16,1,6,6,3,3,1,1,1,1\n"
NOT_UTF8 = b"N,C\n\xff\xfe,1\n"
"""A CSV whose first bad byte (0xff) is at offset 4."""

CELL = ["--arch", "gfx950", "--variant", "forward", "--dtype", "bf16"]
SELECT = ["select", *CELL, "--problem", PROBLEM]


def refused(argv: list[str], *needles: str, env: dict[str, str] | None = None) -> str:
    """Run ``ckspace argv``: exit 2, one error line holding every needle, no traceback."""
    outcome = run_cli(argv, env, limit=LIMIT)
    assert outcome.status == 2, (argv, outcome.status, outcome.stderr)
    assert not contract_breaks(argv, outcome), outcome.stderr
    for needle in needles:
        assert needle in outcome.stderr, (needle, outcome.stderr)
    return outcome.stderr


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "input.csv"
    os.mkfifo(path)
    return path


@pytest.fixture
def not_utf8(tmp_path: Path) -> Path:
    path = tmp_path / "latin.csv"
    path.write_bytes(NOT_UTF8)
    return path


@pytest.fixture
def problems(tmp_path: Path) -> Path:
    path = tmp_path / "problems.csv"
    path.write_text(PROBLEMS)
    return path


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An emitted tree (fake CK headers) that tests copy before damaging it."""
    root = tmp_path_factory.mktemp("emitted")
    ck = fake_ck(root / "ck", explicit_gemm=True)
    out = root / "tree"
    outcome = run_cli(
        [
            "emit",
            "--arch",
            "gfx950",
            "--variant",
            "forward",
            "--ndim",
            "2",
            "--dtype",
            "fp16",
            "--rule-set",
            "full-tests",
            "--ck-root",
            str(ck),
            "--out",
            str(out),
        ],
        limit=LIMIT,
    )
    assert outcome.status == 0, outcome.stderr
    return out


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A built stand-in library (:mod:`standin_library`): bench gets past its first checks."""
    c_compiler()
    return build_standin(tmp_path_factory.mktemp("standin"))


def _bench(tree: Path, tmp_path: Path, *extra: str, problems: Path | None = None) -> list[str]:
    if problems is None:
        problems = tmp_path / "bench_problems.csv"
        problems.write_text(PROBLEMS)
    return ["bench", str(tree), "--problems", str(problems), "--backend", "host", *extra]


def _copy(tree: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "tree"
    shutil.copytree(tree, copy, symlinks=True)
    return copy


def _model(tmp_path: Path) -> Path:
    model = tmp_path / "model"
    shutil.copytree(shipped_model_dir("gfx950", "forward", "bf16"), model)
    return model


# -- problems CSV (plan and bench --problems: one reader) -------------------------------------------------
def test_a_fifo_as_problems_file_is_refused_not_waited_on(fifo: Path) -> None:
    refused(["plan", *CELL, "--problems", str(fifo), "--budget", "2"], str(fifo), "is a fifo, not a regular file")


def test_a_problems_file_that_is_not_utf8_names_the_byte_offset(not_utf8: Path) -> None:
    refused(
        ["plan", *CELL, "--problems", str(not_utf8), "--budget", "2"], str(not_utf8), "not UTF-8", "0xff at offset 4"
    )


@pytest.mark.parametrize("kind", ["a directory", "a character device", "a socket"])
def test_a_problems_file_that_is_no_regular_file_is_one_line_naming_its_kind(tmp_path: Path, kind: str) -> None:
    path = {"a directory": tmp_path, "a character device": Path("/dev/null"), "a socket": tmp_path / "socket"}[kind]
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "socket"))
        refused(["plan", *CELL, "--problems", str(path), "--budget", "2"], str(path), f"is {kind}, not a regular file")


def test_a_missing_candidates_file_is_one_line() -> None:
    refused([*SELECT, "--candidates", "no-such-file"], "'no-such-file' does not exist")


def test_a_problems_field_longer_than_the_csv_module_reads_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "long.csv"
    path.write_text("N,C,K,Hi,Wi,Y,X\n" + "1" * 200_000 + ",64,128,56,56,3,3\n")
    refused(["plan", *CELL, "--problems", str(path), "--budget", "2"], str(path), "not a CSV file")


def test_a_problems_file_with_a_byte_order_mark_is_read(problems: Path) -> None:
    """As the measurement CSVs always were: a spreadsheet's UTF-8 export starts with one."""
    from ckspace.core.vocab import Variant
    from ckspace.planning.workload import read_workload

    plain = read_workload(problems, Variant.FORWARD)
    problems.write_bytes(b"\xef\xbb\xbf" + problems.read_bytes())
    assert read_workload(problems, Variant.FORWARD).problems == plain.problems


# -- kernel lists: select and plan --candidates, emit and bench --kernels ---------------------------------
@pytest.mark.parametrize("command", ["select", "plan"])
def test_a_fifo_as_candidates_is_refused_not_waited_on(command: str, fifo: Path, problems: Path) -> None:
    head = SELECT if command == "select" else ["plan", *CELL, "--problems", str(problems), "--budget", "2"]
    refused([*head, "--candidates", str(fifo)], str(fifo), "is a fifo, not a regular file")


def test_candidates_that_are_not_utf8_name_the_byte_offset(not_utf8: Path) -> None:
    refused([*SELECT, "--candidates", str(not_utf8)], str(not_utf8), "0xff at offset 4")


@pytest.mark.parametrize("command", ["select", "plan"])
def test_deeply_nested_json_as_candidates_is_one_line(command: str, tmp_path: Path, problems: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_text('{"kernels": ' + DEEP + "}")
    head = SELECT if command == "select" else ["plan", *CELL, "--problems", str(problems), "--budget", "2"]
    refused([*head, "--candidates", str(path)], str(path), "nested too deeply")


def test_a_fifo_as_emit_kernels_is_refused_not_waited_on(fifo: Path, tmp_path: Path) -> None:
    refused(
        ["emit", *CELL, "--ndim", "2", "--kernels", str(fifo), "--out", str(tmp_path / "out")], str(fifo), "is a fifo"
    )
    assert not (tmp_path / "out").exists()


def test_emit_kernels_that_are_not_utf8_name_the_byte_offset(not_utf8: Path, tmp_path: Path) -> None:
    refused(
        ["emit", *CELL, "--ndim", "2", "--kernels", str(not_utf8), "--out", str(tmp_path / "out")],
        str(not_utf8),
        "0xff at offset 4",
    )


def test_a_fifo_as_bench_kernels_is_refused_not_waited_on(standin: Path, fifo: Path, tmp_path: Path) -> None:
    refused(
        _bench(standin, tmp_path, "--out", str(tmp_path / "out.csv"), "--kernels", str(fifo)), str(fifo), "is a fifo"
    )


def test_bench_kernels_that_are_not_utf8_name_the_byte_offset(standin: Path, not_utf8: Path, tmp_path: Path) -> None:
    refused(
        _bench(standin, tmp_path, "--out", str(tmp_path / "out.csv"), "--kernels", str(not_utf8)),
        str(not_utf8),
        "0xff at offset 4",
    )


def test_a_fifo_as_bench_problems_is_refused_not_waited_on(standin: Path, fifo: Path, tmp_path: Path) -> None:
    refused(_bench(standin, tmp_path, "--out", str(tmp_path / "out.csv"), problems=fifo), str(fifo), "is a fifo")
    assert not (tmp_path / "out.csv").exists()


# -- bench's resume file and kernel library ---------------------------------------------------------------
def test_a_fifo_as_bench_resume_file_is_refused_not_waited_on(standin: Path, fifo: Path, tmp_path: Path) -> None:
    refused(_bench(standin, tmp_path, "--out", str(fifo), "--resume"), str(fifo), "is a fifo")
    assert fifo.is_fifo()


def test_a_bench_resume_file_that_is_not_utf8_is_refused_untouched(
    standin: Path, not_utf8: Path, tmp_path: Path
) -> None:
    refused(_bench(standin, tmp_path, "--out", str(not_utf8), "--resume"), str(not_utf8), "not UTF-8")
    assert not_utf8.read_bytes() == NOT_UTF8


@pytest.mark.parametrize("damage", ["fifo", "truncated"])
def test_a_kernel_library_that_is_a_fifo_or_truncated_is_one_line(standin: Path, tmp_path: Path, damage: str) -> None:
    copy = _copy(standin, tmp_path)
    library = copy / "build" / "gfx950" / "libckspace_kernels_gfx950.so"
    data = library.read_bytes()
    library.unlink()
    if damage == "fifo":
        os.mkfifo(library)
    else:
        library.write_bytes(data[:200])
    refused(
        _bench(copy, tmp_path, "--out", str(tmp_path / "out.csv")),
        str(library),
        "is a fifo" if damage == "fifo" else "not a whole 64-bit",
    )


# -- a model directory's files (select, plan, emit --with-selector --model) -------------------------------
@pytest.mark.parametrize("name", ["card.json", "ranker.txt", "tflops.txt", "features.json"])
def test_a_fifo_in_a_model_directory_is_refused_not_waited_on(tmp_path: Path, name: str) -> None:
    model = _model(tmp_path)
    (model / name).unlink()
    os.mkfifo(model / name)
    refused([*SELECT, "--model", str(model)], str(model / name), "is a fifo")


def test_a_deeply_nested_model_card_is_one_line(tmp_path: Path) -> None:
    model = _model(tmp_path)
    (model / "card.json").write_text('{"arch": ' + DEEP + "}")
    refused([*SELECT, "--model", str(model)], str(model / "card.json"), "recursion limit")


def test_a_model_card_that_is_not_utf8_names_the_byte_offset(tmp_path: Path) -> None:
    model = _model(tmp_path)
    (model / "card.json").write_bytes(b'{"arch": "\xe9"}')
    refused([*SELECT, "--model", str(model)], str(model / "card.json"), "0xe9 at offset 10")


def test_a_deeply_nested_features_json_is_one_line(tmp_path: Path) -> None:
    """Its card's sha256 updated to match, so the file is parsed (a mismatch is refused first)."""
    model = _model(tmp_path)
    deep = DEEP.encode()
    (model / "features.json").write_bytes(deep)
    card = json.loads((model / "card.json").read_text())
    card["files"]["features.json"] = hashlib.sha256(deep).hexdigest()
    (model / "card.json").write_text(json.dumps(card))
    refused([*SELECT, "--model", str(model)], str(model / "features.json"), "nested too deeply")


# -- measurement CSVs: train and evaluate --data ----------------------------------------------------------
@pytest.mark.parametrize("command", ["train", "evaluate"])
def test_a_fifo_as_data_csv_is_refused_not_waited_on(command: str, fifo: Path, tmp_path: Path) -> None:
    out = ["--out", str(tmp_path / "model")] if command == "train" else []
    refused([command, "--data", str(fifo), "--arch", "gfx950", *out], str(fifo), "is a fifo")


@pytest.mark.parametrize("command", ["train", "evaluate"])
def test_a_data_csv_that_is_not_utf8_names_the_byte_offset(command: str, not_utf8: Path, tmp_path: Path) -> None:
    out = ["--out", str(tmp_path / "model")] if command == "train" else []
    refused([command, "--data", str(not_utf8), "--arch", "gfx950", *out], str(not_utf8), "0xff at offset 4")


# -- a tree's manifest (build, bench) and sources (build) -------------------------------------------------
def _manifest_line(command: str, tree: Path, tmp_path: Path) -> list[str]:
    return (
        ["build", str(tree), "--arch", "gfx950"]
        if command == "build"
        else _bench(tree, tmp_path, "--out", str(tmp_path / "out.csv"))
    )


@pytest.mark.parametrize("command", ["build", "bench"])
def test_a_fifo_as_manifest_is_refused_not_waited_on(command: str, tree: Path, tmp_path: Path) -> None:
    copy = _copy(tree, tmp_path)
    (copy / "manifest.json").unlink()
    os.mkfifo(copy / "manifest.json")
    refused(_manifest_line(command, copy, tmp_path), str(copy / "manifest.json"), "is a fifo")


@pytest.mark.parametrize("command", ["build", "bench"])
def test_a_deeply_nested_manifest_is_one_line(command: str, tree: Path, tmp_path: Path) -> None:
    copy = _copy(tree, tmp_path)
    (copy / "manifest.json").write_text('{"kernels": ' + DEEP + "}")
    refused(_manifest_line(command, copy, tmp_path), str(copy / "manifest.json"), "recursion limit")


@pytest.mark.parametrize("command", ["build", "bench"])
def test_a_manifest_that_is_not_utf8_names_the_byte_offset(command: str, tree: Path, tmp_path: Path) -> None:
    copy = _copy(tree, tmp_path)
    (copy / "manifest.json").write_bytes(b"{\xff}")
    refused(_manifest_line(command, copy, tmp_path), str(copy / "manifest.json"), "0xff at offset 1")


def test_a_fifo_as_a_tree_source_is_refused_not_waited_on(tree: Path, tmp_path: Path) -> None:
    copy = _copy(tree, tmp_path)
    source = min(copy.glob("grouped_conv_*.hpp"))
    source.unlink()
    os.mkfifo(source)
    refused(["build", str(copy), "--arch", "gfx950"], str(source), "is a fifo")


# -- environment variables --------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ['"-O2', "-O2 \\"])
def test_an_unbalanced_quote_in_ckspace_hip_flags_is_one_line(tree: Path, tmp_path: Path, value: str) -> None:
    copy = _copy(tree, tmp_path)
    ck = fake_ck(tmp_path / "ck", explicit_gemm=True)
    refused(
        ["build", str(copy), "--arch", "gfx950", "--ck-root", str(ck)],
        "CKSPACE_HIP_FLAGS",
        repr(value),
        env={"CKSPACE_HIP_FLAGS": value},
    )


@pytest.mark.parametrize("value", ["99999999999999999999", "3.5", "-1"])
def test_a_ready_fd_that_names_no_descriptor_is_one_line(value: str) -> None:
    refused(["info"], "CKSPACE_TEST_READY_FD", repr(value), env={"CKSPACE_TEST_READY_FD": value})


def test_cc_with_flags_in_it_is_one_line_naming_it(standin: Path) -> None:
    refused(["build", str(standin), "--host-only"], "CC is 'cc -O2'", "names no executable", env={"CC": "cc -O2"})
