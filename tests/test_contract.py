"""Each example of the bad-input contract (docs/cli.md, *Bad input, outputs, caches and the
environment*), as a test: nothing lost, nothing silently wrong, no traceback for a
plausible mistake, cache entries that cannot break a run, names that pass between commands, and
docs that say what the code does."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import fake_ck
from fuzz_world import PROBLEM, contract_breaks, run_cli

import ckspace
from ckspace.core.errors import CkspaceError, InvalidInputError
from ckspace.environment.files import sha256
from ckspace.select.store import shipped_model_dir
from ckspace.workloads.datasets import DATASETS

ROOT = Path(__file__).resolve().parents[1]
DATA = DATASETS["mi355x-forward-bf16"].path
EXPLAIN = ["explain", "--arch", "gfx950", "--variant", "bwd_weight", "--ndim", "2", "--dtype", "bf16"]
TINY = ["--arch", "gfx950", "--variant", "forward", "--ndim", "2", "--dtype", "fp16", "--rule-set", "tiny"]
EMIT = [*TINY[:-1], "full-tests"]
"""A cell the fake CK can build kernels of (none of tiny's): emit refuses to write no kernel."""


def fails(argv: list[str], *needles: str, status: int = 2) -> str:
    """Run ``ckspace argv``; it must fail with ``status`` and one error line holding the needles."""
    outcome = run_cli(argv)
    assert outcome.status == status, (argv, outcome.status, outcome.stderr)
    assert not contract_breaks(argv, outcome), outcome.stderr
    for needle in needles:
        assert needle in outcome.stderr, (needle, outcome.stderr)
    return outcome.stderr


@pytest.fixture(scope="module")
def small_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "small.csv"  # no arch in the name: --arch is needed
    path.write_text("".join(DATA.read_text().splitlines(keepends=True)[:400]))
    return path


@pytest.fixture(scope="module")
def ck(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fake_ck(tmp_path_factory.mktemp("ck"), explicit_gemm=True)


# -- nothing lost -------------------------------------------------------------------------------
@pytest.mark.slow
def test_train_refuses_a_foreign_directory_and_with_force_changes_only_model_files(tmp_path, small_csv) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "precious.txt").write_text("mine")
    train = ["train", "--data", str(small_csv), "--arch", "gfx950", "--folds", "2", "--out", str(out)]
    fails(train, "precious.txt", "--force")
    assert sorted(p.name for p in out.iterdir()) == ["precious.txt"]
    assert run_cli([*train, "--force"]).status == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "card.json",
        "features.json",
        "precious.txt",
        "ranker.txt",
        "tflops.txt",
    ]
    assert (out / "precious.txt").read_text() == "mine"
    assert run_cli(train).status == 0  # a model directory is ckspace's: retraining needs no --force
    assert (out / "precious.txt").read_text() == "mine"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_train_never_replaces_a_file_a_device_or_a_link(tmp_path, small_csv) -> None:
    plain = tmp_path / "plain.txt"
    plain.write_text("keep")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    (tmp_path / "target").mkdir()
    train = ["train", "--data", str(small_csv), "--arch", "gfx950", "--folds", "2", "--out"]
    fails([*train, str(plain)], "not a directory")
    fails([*train, "/dev/null"], "not a directory")
    fails([*train, str(tmp_path / "link")], "symbolic link")
    fails([*train, ""], "empty")
    assert plain.read_text() == "keep" and Path("/dev/null").is_char_device()
    assert not list((tmp_path / "target").iterdir())


@pytest.mark.slow
def test_train_out_dot_writes_a_model_and_leaves_no_debris(tmp_path, small_csv) -> None:
    work = tmp_path / "work"
    work.mkdir()
    cwd = os.getcwd()
    os.chdir(work)
    try:
        assert (
            run_cli(["train", "--data", str(small_csv), "--arch", "gfx950", "--folds", "2", "--out", "."]).status == 0
        )
    finally:
        os.chdir(cwd)
    assert (work / "card.json").is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["work"]


@pytest.mark.slow
def test_evaluate_plot_never_replaces_a_device_and_writes_a_whole_png(tmp_path, small_csv) -> None:
    evaluate = ["evaluate", "--data", str(small_csv), "--arch", "gfx950", "--folds", "2", "--plot"]
    fails([*evaluate, "/dev/null"], "not a regular file")
    fails([*evaluate, str(tmp_path)], "directory")
    assert Path("/dev/null").is_char_device()
    assert run_cli([*evaluate, str(tmp_path / "plot.png")]).status == 0
    assert (tmp_path / "plot.png").read_bytes().startswith(b"\x89PNG")
    assert [p.name for p in tmp_path.iterdir()] == ["plot.png"]


def test_emit_out_empty_under_a_file_or_foreign_is_refused(tmp_path, ck) -> None:
    emit = ["emit", *EMIT, "--ck-root", str(ck), "--out"]
    (tmp_path / "file").write_text("x")
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("mine")
    fails([*emit, ""], "empty")
    fails([*emit, str(tmp_path / "file" / "tree")], "Not a directory")
    fails([*emit, str(tmp_path / "foreign")], "--force")
    assert [p.name for p in (tmp_path / "foreign").iterdir()] == ["notes.txt"]
    assert run_cli([*emit, str(tmp_path / "foreign"), "--force"]).status == 0
    assert (tmp_path / "foreign" / "notes.txt").read_text() == "mine"


def test_re_emit_removes_only_bannered_orphans(tmp_path, ck) -> None:
    tree = tmp_path / "tree"
    emit = [
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
        str(tree),
    ]
    assert run_cli(emit).status == 0
    kernel = sorted(tree.glob("grouped_conv_*.hpp"))[0]
    orphan = tree / "grouped_conv_orphan_of_an_interrupted_emit.hpp"  # bannered, in no manifest
    orphan.write_bytes(kernel.read_bytes())
    mine = tree / "mine.hpp"
    mine.write_text("// my own header, no banner\n")
    other = tree / "sub" / "other_tree_kernel.hpp"  # another tree below this one: not ours to sweep
    other.parent.mkdir()
    other.write_bytes(kernel.read_bytes())
    assert run_cli([*emit, "--where", "tile_m >= 64"]).status == 0
    assert not orphan.exists() and mine.exists() and other.exists()


def test_build_refuses_edited_missing_and_damaged_trees(tmp_path, ck) -> None:
    tree = tmp_path / "tree"
    assert (
        run_cli(
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
                str(tree),
            ]
        ).status
        == 0
    )
    build = ["build", str(tree), "--arch", "gfx950", "--ck-root", str(ck)]
    source = sorted(tree.glob("grouped_conv_*.hpp"))[0]
    source.write_text(source.read_text() + "// edited\n")
    fails(build, "--allow-edited", source.name)
    source.unlink()
    fails(build, "missing")
    manifest = tree / "manifest.json"
    whole = manifest.read_bytes()
    for damaged in (whole[:100], b"", bytes(range(256))):
        manifest.write_bytes(damaged)
        fails(build, "manifest")
    manifest.unlink()
    fails(build, "no manifest.json")


def test_build_refuses_an_object_cache_it_cannot_write_before_compiling(tmp_path, ck, monkeypatch) -> None:
    tree = tmp_path / "tree"
    assert run_cli(["emit", *EMIT, "--ck-root", str(ck), "--out", str(tree)]).status == 0
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("CKSPACE_BUILD_CACHE", str(tmp_path / "file" / "objects"))
    fails(["build", str(tree), "--arch", "gfx950", "--ck-root", str(ck)], "CKSPACE_BUILD_CACHE")


# -- silently wrong -> strict -------------------------------------------------------------------
def test_booleans_are_strict_and_false_is_false() -> None:
    fails([*EXPLAIN, "--set", "two_stage=no"], "two_stage", "true, false, 1, 0")
    false, zero = run_cli([*EXPLAIN, "--set", "two_stage=false"]), run_cli([*EXPLAIN, "--set", "two_stage=0"])
    true = run_cli([*EXPLAIN, "--set", "two_stage=TRUE"])
    assert false.stdout == zero.stdout and false.stdout != true.stdout and false.status == 0


def test_enums_list_their_values_and_integers_are_integers() -> None:
    fails([*EXPLAIN, "--set", "pipeline=compv99"], "compv99", "compv3", "mem")
    fails([*EXPLAIN, "--set", "tile_m=1.5"], "1.5", "integer")
    space = ckspace.Space("gfx950", "bwd_weight", 2, "bf16")
    for bad in ({"tile_m": 1.5}, {"tile_m": True}, {"two_stage": "no"}, {"pipeline": 3}):
        with pytest.raises(InvalidInputError):
            space.explain(bad)
    for n in (-1, 1.5, True):
        with pytest.raises(InvalidInputError):
            space.sample(n)


def test_repeated_single_valued_options_and_empty_values_are_errors() -> None:
    fails([*EXPLAIN, "--set", "tile_k=32", "--set", "tile_k=64"], "given twice")
    fails(["enumerate", "--arch", "gfx950", "--arch", "gfx942", "--variant", "forward", "--count"], "--arch", "twice")
    fails(["enumerate", "--arch", "gfx950", "--variant", "forward", "--problem", "", "--count"], "--problem", "empty")
    fails(["enumerate", "--arch", "gfx950", "--variant", "forward", "--where", " ", "--count"], "--where", "empty")


@pytest.mark.parametrize(
    "problem",
    [
        "N=100000000000000000000,G=1,C=64,K=128,Hi=56,Wi=56,Y=3,X=3",
        "N=1,G=1,C=1" + "0" * 42 + ",K=128,Hi=56,Wi=56,Y=3,X=3",
    ],
)
def test_problem_sizes_are_bounded_by_cks_index_types(problem: str) -> None:
    fails(
        ["enumerate", "--arch", "gfx950", "--variant", "forward", "--problem", problem, "--count"],
        "2147483647",
        "index_t",
    )
    fails(["select", "--arch", "gfx950", "--variant", "forward", "--dtype", "bf16", "--problem", problem], "index_t")
    with pytest.raises(InvalidInputError):
        ckspace.ConvProblem.parse(problem)


def test_tensors_beyond_64_bit_offsets_are_refused() -> None:
    big = "N=2000000000,G=1,C=2000000000,K=8,Hi=2000000000,Wi=2000000000,Y=1,X=1"
    with pytest.raises(InvalidInputError, match="long_index_t"):
        ckspace.ConvProblem.parse(big)


# -- tracebacks for plausible mistakes ----------------------------------------------------------
def test_a_name_with_tile_zero_is_a_name_error() -> None:
    fails(
        [
            "explain",
            "grouped_conv_bwd_weight_bf16_nhwgc_2d_mem_cshuffle_intrawave_0x16x32_1x1x1_16x16x32_vec1_1_1",
            "--arch",
            "gfx950",
        ],
        "tile_m",
    )


@pytest.mark.slow
def test_csv_files_that_are_not_utf8_are_one_line_and_a_bom_is_fine(tmp_path, small_csv) -> None:
    text = small_csv.read_text()
    (tmp_path / "binary.csv").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "utf16.csv").write_bytes(text.encode("utf-16"))
    (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbf" + text.encode())
    for name in ("binary.csv", "utf16.csv"):
        for command in ("train", "evaluate"):
            argv = [command, "--data", str(tmp_path / name), "--arch", "gfx950", "--folds", "2"]
            fails(argv + (["--out", str(tmp_path / "m")] if command == "train" else []), "UTF-8")
    assert run_cli(["evaluate", "--data", str(tmp_path / "bom.csv"), "--arch", "gfx950", "--folds", "2"]).status == 0


def test_seed_and_folds_out_of_range_and_arch_explicit(small_csv) -> None:
    evaluate = ["evaluate", "--data", str(small_csv)]
    fails([*evaluate, "--arch", "gfx950", "--seed", "-1"], "--seed", "2^31")
    fails([*evaluate, "--arch", "gfx950", "--folds", "1"], "--folds")
    fails(evaluate, "--arch")  # the file name does not say the arch


def test_select_model_that_is_a_file_or_damaged(tmp_path) -> None:
    select = ["select", "--arch", "gfx950", "--variant", "forward", "--dtype", "bf16", "--problem", PROBLEM, "--model"]
    (tmp_path / "file").write_text("x")
    fails([*select, str(tmp_path / "file")], "not a model directory")
    model = tmp_path / "model"
    shutil.copytree(shipped_model_dir("gfx950", "forward", "bf16"), model)
    card = json.loads((model / "card.json").read_text())
    ranker = (model / "ranker.txt").read_bytes()[:5000]  # truncated, but its card updated to match
    (model / "ranker.txt").write_bytes(ranker)
    card["files"]["ranker.txt"] = hashlib.sha256(ranker).hexdigest()
    (model / "card.json").write_text(json.dumps(card))
    fails([*select, str(model)], "not a whole LightGBM model")


@pytest.mark.slow
def test_candidates_that_are_binary_or_a_fifo(tmp_path) -> None:
    select = [
        "select",
        "--arch",
        "gfx950",
        "--variant",
        "forward",
        "--dtype",
        "bf16",
        "--problem",
        PROBLEM,
        "--candidates",
    ]
    (tmp_path / "binary").write_bytes(bytes(range(256)))
    os.mkfifo(tmp_path / "fifo")
    fails([*select, str(tmp_path / "binary")], "UTF-8")
    fails([*select, str(tmp_path / "fifo")], "not a regular file")


@pytest.mark.parametrize(
    "manifest",
    [
        '{"kernels": [{"config": [1]}]}',
        '{"kernels": [{"config": "tile_m=256"}]}',
        '{"kernels": 3}',
        '{"kernels": ["x"]}',
        '{"kernels": [{"config": {"tile_m": 1}}]}',
    ],
)
@pytest.mark.slow
def test_candidates_manifest_of_the_wrong_shape(tmp_path, manifest: str) -> None:
    (tmp_path / "manifest.json").write_text(manifest)
    fails(
        [
            "select",
            "--arch",
            "gfx950",
            "--variant",
            "forward",
            "--dtype",
            "bf16",
            "--problem",
            PROBLEM,
            "--candidates",
            str(tmp_path / "manifest.json"),
        ],
        "not a build manifest with a 'kernels' list of configs",
    )


@pytest.mark.parametrize("shell", ["1>&-", "> /dev/full"])
def test_stdout_closed_or_full_is_one_line(shell: str) -> None:
    command = f"{sys.executable} -m ckspace enumerate --arch gfx950 --variant forward --count"
    # enumerate states its target on stderr (stdout is data): the error is one line after those notes
    notes = subprocess.run(
        ["bash", "-c", f"{command} > /dev/null"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert notes.returncode == 0 and notes.stderr.startswith("target: "), notes.stderr
    done = subprocess.run(["bash", "-c", f"{command} {shell}"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(notes.stderr), done.stderr
    assert len(done.stderr.removeprefix(notes.stderr).splitlines()) == 1, done.stderr


# -- the cache ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "damage",
    [b"\xff\xfe\x00garbage", b"{not json", b'{"key": 1}', b"[]", b'{"key": null, "checksum": 3, "payload": 4}'],
)
def test_any_unreadable_cell_cache_entry_is_rebuilt(tmp_path, damage: bytes) -> None:
    argv = ["--cache-dir", str(tmp_path), "enumerate", *TINY[:-2], "--count"]
    first = run_cli(argv)
    entries = list((tmp_path / "cells").glob("*.json"))
    assert first.status == 0 and entries
    for entry in entries:
        entry.write_bytes(damage)
    again = run_cli(argv)
    assert again.status == 0 and again.stdout == first.stdout
    assert all(e.read_bytes() != damage for e in entries)  # rebuilt


def test_cell_cache_payload_of_the_wrong_shape_is_rebuilt(tmp_path) -> None:
    argv = ["--cache-dir", str(tmp_path), "enumerate", *TINY[:-2], "--count"]
    first = run_cli(argv)
    for entry in (tmp_path / "cells").glob("*.json"):
        data = json.loads(entry.read_text())
        payload = json.dumps({"gemm": [["x"]], "gemm_valid": [1], "depthwise": [], "depthwise_valid": []})
        entry.write_text(json.dumps({**data, "payload": payload, "checksum": sha256(payload.encode())}))
    assert run_cli(argv).stdout == first.stdout


def test_cache_info_clear_and_cache_dir_after_the_command(tmp_path) -> None:
    assert run_cli(["enumerate", *TINY[:-2], "--count", "--cache-dir", str(tmp_path)]).status == 0
    info = run_cli(["cache", "info", "--format", "json", "--cache-dir", str(tmp_path)])
    cells = json.loads(info.stdout)["cells"]
    assert cells["directory"] == str(tmp_path / "cells") and cells["entries"] > 0
    (tmp_path / "cells" / "notes.txt").write_text("not a cache entry")
    assert "removed" in run_cli(["cache", "clear", "--cache-dir", str(tmp_path)]).stdout
    assert [p.name for p in (tmp_path / "cells").iterdir()] == ["notes.txt"]
    fails(["cache", "purge"], "info, clear")


# -- names pass between commands ----------------------------------------------------------------
@pytest.mark.slow
def test_enumerate_list_with_depthwise_names_feeds_select(tmp_path) -> None:
    # the rule space: a CK target holds no depthwise kernel (CK Tile has none to build)
    names = run_cli(
        [
            "enumerate",
            "--arch",
            "gfx950",
            "--variant",
            "forward",
            "--ndim",
            "2",
            "--dtype",
            "bf16",
            "--rule-set",
            "tiny",
            "--list",
            "--rules-only",
        ]
    ).stdout
    assert "depthwise" in names
    (tmp_path / "names.txt").write_text(names)
    picked = run_cli(
        [
            "select",
            "--arch",
            "gfx950",
            "--variant",
            "forward",
            "--dtype",
            "bf16",
            "--problem",
            PROBLEM,
            "--candidates",
            str(tmp_path / "names.txt"),
            "--format",
            "json",
        ]
    )
    assert picked.status == 0, picked.stderr
    depthwise = "\n".join(n for n in names.splitlines() if "depthwise" in n)
    (tmp_path / "dw.txt").write_text(depthwise)
    fails(
        [
            "select",
            "--arch",
            "gfx950",
            "--variant",
            "forward",
            "--dtype",
            "bf16",
            "--problem",
            PROBLEM,
            "--candidates",
            str(tmp_path / "dw.txt"),
        ],
        "depthwise",
    )


@pytest.mark.slow
def test_select_picks_and_fallbacks_are_names_explain_takes() -> None:
    picked = run_cli(
        [
            "select",
            "--arch",
            "gfx950",
            "--variant",
            "forward",
            "--dtype",
            "bf16",
            "--rule-set",
            "full",
            "--problem",
            "N=1,G=3,C=3,K=3,Hi=56,Wi=56,Y=3,X=3,stride=1,pad=1",
            "--format",
            "json",
            "--top",
            "3",
        ]
    )
    data = json.loads(picked.stdout)
    names = {r["name"] for r in data["top"]} | {r["family"] for r in data["top"] if r["family"]}
    assert data["fallbacks"] and len(names) > 3
    for name in names:
        # a kernel of the target (0), or of it but not proposed by the rule set (3: a fallback variant)
        assert run_cli(["explain", name, "--arch", "gfx950"]).status in (0, 3), name


# -- docs and behaviour agree -------------------------------------------------------------------
def test_help_lists_commands_archs_rule_sets_formats_and_environment() -> None:
    bare = run_cli([])
    assert bare.status == 0 and all(c in bare.stdout for c in ("enumerate", "select", "info", "cache"))
    help_text = run_cli(["--help"]).stdout
    for needle in (
        "gfx950",
        "gfx1201",
        "full-tests",
        "jsonl",
        "markdown",
        "CKSPACE_CXX",
        "CKSPACE_BUILD_CACHE",
        "CKSPACE_DEVICE_LIBS",
        "CKSPACE_HIP_FLAGS",
        "CKSPACE_CACHE_DIR",
        "CK_ROOT",
        "CC",
    ):
        assert needle in help_text, needle
    info = json.loads(run_cli(["info", "--format", "json"]).stdout)
    assert info["archs"]["gfx950"]["lds_kb"] == 160 and info["fields"]["two_stage"]["domain"] == "true, false"


def test_verbose_anywhere_and_explain_exit_status() -> None:
    after = run_cli(["enumerate", *TINY[:-2], "--count", "-v"])
    assert after.status == 0 and after.stdout == run_cli(["-v", "enumerate", *TINY[:-2], "--count"]).stdout
    name = "grouped_conv_bwd_weight_bf16_nhwgc_2d_compv4_cshuffle_intrawave_16x16x32_1x1x1_16x16x32_vec1_1_1"
    assert run_cli(["explain", name, "--arch", "gfx950"]).status == 1
    valid = run_cli(
        ["enumerate", "--arch", "gfx950", "--variant", "bwd_weight", "--ndim", "2", "--dtype", "bf16", "--list"]
    ).stdout.split()[0]
    assert run_cli(["explain", valid, "--arch", "gfx950"]).status == 0


def test_api_gaps_of_the_issue() -> None:
    from ckspace import Selector  # noqa: F401 - importable from the package

    model = ckspace.Space("gfx950", "bwd_weight", 2, "bf16").model()
    assert model is not None
    with pytest.raises(CkspaceError):
        ckspace.Space("gfx950", "bwd_weight").model()


def test_toolchain_script_exports_the_variable_the_code_reads() -> None:
    script = (ROOT / "scripts" / "install-toolchain-gfx942.sh").read_text()
    assert "export CKSPACE_CXX=" in script and "CKSPACE_CLANG" not in script


def test_emit_into_a_directory_it_may_not_write_is_one_line(tmp_path, ck, monkeypatch) -> None:
    """A read-only directory (root ignores modes, so the refusal is the file system's, simulated:
    creating any file under it is refused)."""
    import os

    target = tmp_path / "ro"
    real_open = os.open

    def refuse(path, flags, *args, **kwargs):
        if flags & os.O_CREAT and str(path).startswith(str(target)):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    fails(["emit", *EMIT, "--ck-root", str(ck), "--out", str(target)], "Permission denied", "ro")


def test_constructing_a_model_with_a_bad_value_is_a_ckspace_error() -> None:
    """The API's models raise InvalidInputError (a CkspaceError and a ValueError) naming the field,
    not pydantic's ValidationError."""
    from ckspace.core.config import DepthwiseConfig, GemmConfig
    from ckspace.core.errors import InvalidInputError
    from ckspace.workloads.problem import ConvProblem

    gemm = {
        "arch": "gfx950",
        "variant": "forward",
        "ndim": 2,
        "dtype": "bf16",
        "tile_m": 64,
        "tile_n": 64,
        "tile_k": 32,
        "wave_m": 2,
        "wave_n": 2,
        "wave_k": 1,
        "warp_tile_m": 16,
        "warp_tile_n": 16,
        "warp_tile_k": 16,
        "pipeline": "mem",
    }
    assert GemmConfig(**gemm).tile_m == 64
    for bad, words in (
        (GemmConfig, {**gemm, "tile_m": 1.5}),
        (GemmConfig, {**gemm, "pipeline": "compv99"}),
        (ConvProblem, {"ndim": 2, "N": 0, "C": 3, "K": 4, "Hi": 8, "Wi": 8, "Y": 1, "X": 1}),
        (DepthwiseConfig, {"arch": "gfx950", "dtype": "bf16"}),
    ):
        with pytest.raises(InvalidInputError, match=bad.__name__) as caught:
            bad(**words)
        assert isinstance(caught.value, ValueError) and "\n" not in str(caught.value)


def test_a_global_option_given_before_and_after_the_command_is_repeated(capsys: pytest.CaptureFixture[str]) -> None:
    from ckspace.cli import main

    assert main(["--cache-dir", "/tmp/ckspace-a", "info", "--cache-dir", "/tmp/ckspace-b"]) == 2
    err = capsys.readouterr().err
    assert "--cache-dir is given twice" in err and len(err.strip().splitlines()) == 1
