"""Fuzzing the command line against its contract.

Random argument lists over every subcommand (its own options, global options anywhere, values
valid, plausible and hostile, the hostile files of :mod:`fuzz_world`, now and then a hostile
environment variable) must each end with exit status 0, 1 or 2, no traceback, a failure as one
line on stderr, and nothing that existed before lost or changed but ckspace's own outputs. A
bounded run is part of every test run; the long run is opt-in: ``pytest -m fuzz_long`` (examples:
``CKSPACE_FUZZ_EXAMPLES``, default 3000). Ctrl-C and SIGTERM are sent to real processes at moments
of an emit, timed from the process's report that its handlers are installed (never from its start:
see :func:`fuzz_world.start_ready`).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import ClassVar

import pytest
from conftest import fake_ck
from fuzz_world import (
    HOSTILE_ENVIRONMENT,
    PROBLEM,
    build_world,
    contract_breaks,
    finish,
    lost,
    run_cli,
    snapshot,
    start_ready,
)
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ckspace.cli import _parser

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = tuple(_parser()[1])

_VALUES = [
    "gfx950",
    "gfx942",
    "gfx1201",
    "GFX950",
    "gfx000",
    "forward",
    "bwd_weight",
    "bwd_data",
    "all",
    "sideways",
    "1",
    "2",
    "3",
    "4",
    "0",
    "-1",
    "1.5",
    "1e309",
    "nan",
    "99999999999999999999999",
    "bf16",
    "fp16",
    "fp32",
    "int8",
    "tiny",
    "full",
    "default",
    "full-tests",
    "nope",
    "text",
    "json",
    "jsonl",
    "csv",
    "names",
    "markdown",
    "xml",
    "info",
    "clear",
    "pr12173",
    "7cd53015",
    "",
    " ",
    "\t",
    "ü",
    "x" * 300,
    "--",
    "-",
    "-x",
    "tile_m=64",
    "two_stage=no",
    "two_stage=true",
    "pipeline=compv99",
    "pipeline=compv3",
    "tile_m=1.5",
    "tile_q=3",
    "=",
    "tile_m=",
    "tile_m * tile_n >= 8192",
    "pipeline in [compv3, mem] and not two_stage",
    "__import__('os')",
    "tile_m >",
    "(" * 60 + "1" + ")" * 60,
    PROBLEM,
    "N=100000000000000000000,C=64,K=128,Hi=56,Wi=56,Y=3,X=3",
    "N=1,C=1" + "0" * 42 + ",K=128,Hi=56,Wi=56,Y=3,X=3",
    "N=1,G=1,C=64",
    "N=1,,C=64,K=1,Wi=3,X=3",
    "N=x",
    "grouped_conv_fwd_bf16_nhwgc_2d_compv3_cshuffle_intrawave_128x128x32_2x2x1_32x32x16_vec8_8_8",
    "grouped_conv_bwd_weight_bf16_nhwgc_2d_mem_cshuffle_intrawave_0x16x32_1x1x1_16x16x32_vec1_1_1",
    "grouped_conv_fwd_depthwise_bf16_ngchw_2d_16x16_f3_s2x2_p1x1_nb1_sub2x2_vec8_8",
    "grouped_conv_forward_bf16_2d_16x64x128_compv5",
    "not_a_kernel",
]
"""Values any option may get: valid ones (so commands get past the first check), near misses and
hostile ones. Paths of the hostile world are added per run."""
CACHES = ["small_gfx950.csv/cache", "/proc/ckspace-no-cache", "damaged_cache"]
"""Cache directories nobody can write (under a file; in /proc, which root cannot write either) and
one whose entries are damaged (:func:`fuzz_world.build_world`): a command answers without them."""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("world")
    paths = build_world(root)
    cwd = os.getcwd()
    os.chdir(root)
    saved = dict(os.environ)
    os.environ["HOME"] = str(root / "home")
    os.environ.pop("XDG_CACHE_HOME", None)
    os.environ["CKSPACE_CXX"] = str(root / "no-compiler")  # build never compiles for minutes
    try:
        yield root, paths
    finally:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(saved)


def _options(command: str) -> list[str]:
    parser = _parser()[0]
    return [s for a in parser.subcommands[command].arguments for s in a.option_strings if s not in ("-h", "--help")]


@st.composite
def command_lines(draw, paths: dict[str, str]) -> list[str]:
    command = draw(st.sampled_from(COMMANDS))
    values = st.sampled_from(_VALUES + list(paths.values()))
    options = _options(command)
    argv: list[str] = [command]
    if command == "emit":
        argv += ["--rule-set", "tiny"]  # bound the work: a second --rule-set is an error, as it should be
    if command in ("enumerate", "emit", "diff", "select", "explain") and draw(st.booleans()):
        argv += ["--arch", draw(st.sampled_from(["gfx950", "gfx942"]))]
    if command in ("enumerate", "emit", "diff", "select") and draw(st.booleans()):
        argv += [
            "--variant",
            draw(st.sampled_from(["forward", "bwd_weight"])),
            "--ndim",
            "2",
            "--dtype",
            draw(st.sampled_from(["bf16", "fp16"])),
        ]
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.integers(0, 9))
        if kind <= 5 and options:
            option = draw(st.sampled_from(options))
            argv.append(option)
            if draw(st.integers(0, 4)):
                argv.append(draw(values))
        elif kind <= 7:
            argv.append(draw(values))
        elif kind == 8:
            argv.insert(draw(st.integers(0, len(argv))), draw(st.sampled_from(["-v", "-vv", "--version"])))
        else:
            argv += ["--cache-dir", draw(st.sampled_from(["cache2", "", "small_gfx950.csv", "/dev/null", *CACHES]))]
    return argv


_SPACE = ["--arch", "gfx950", "--variant", "forward", "--ndim", "2", "--dtype", "bf16", "--rule-set", "tiny"]
_CELL = ["--arch", "gfx950", "--variant", "forward", "--dtype", "bf16"]
VALID_LINES = [
    ["enumerate", *_SPACE, "--list", "--format", "json"],
    ["enumerate", *_SPACE, "--count", "--where", "tile_m >= 64", "--problem", PROBLEM],
    [
        "explain",
        "grouped_conv_fwd_bf16_nhwgc_2d_compv3_cshuffle_intrawave_128x128x32_2x2x1_32x32x16_vec8_8_8",
        "--arch",
        "gfx950",
    ],
    [
        "explain",
        "--arch",
        "gfx950",
        "--variant",
        "bwd_weight",
        "--ndim",
        "2",
        "--dtype",
        "bf16",
        "--set",
        "pipeline=mem",
        "--set",
        "tile_k=32",
    ],
    ["lint", "--arch", "gfx950", "--rule-set", "tiny"],
    ["rules", "--arch", "gfx950", "--variant", "forward", "--dtype", "bf16", "--format", "json"],
    ["diff", *_SPACE, "--against-rule-set", "default"],
    ["emit", *_SPACE[:-2], "--rule-set", "tiny", "--ck-root", "ck", "--out", "new_output"],
    ["build", "tree", "--arch", "gfx950", "--ck-root", "ck"],
    ["build", "tree", "--host-only"],
    ["build", "tree", "--arch", "gfx942", "--ck-root", "ck"],  # a gfx950 tree: refused before any work
    ["emit", "--arch", "gfx942", "--kernels", "names.txt", "--ck-root", "ck", "--out", "new_output"],  # gfx950 names
    ["plan", *_CELL, "--problems", "problems.csv", "--weights", "w", "--budget", "2", "--rule-set", "tiny"],
    ["plan", *_CELL, "--problems", "problems_stride_x.csv", "--budget", "2", "--rules-only"],
    ["bench", "tree", "--problems", "small_gfx950.csv", "--out", "new_results.csv", "--backend", "host"],
    ["train", "--data", "small_gfx950.csv", "--folds", "2", "--out", "new_model"],
    ["evaluate", "--data", "small_gfx950.csv", "--folds", "2", "--format", "json"],
    ["select", *_CELL, "--problem", PROBLEM, "--candidates", "names.txt"],
    ["select", *_CELL, "--problem", PROBLEM, "--model", "model", "--top", "3"],
    ["info", "--format", "json"],
    ["cache", "info"],
    ["cache", "clear", "--cache-dir", "cache2"],
]
"""A working command line per use of every subcommand: mutated, they reach past the first check."""


@st.composite
def mutated_lines(draw, paths: dict[str, str]) -> list[str]:
    """A working command line with a few mutations: a value replaced by a drawn one, a token
    dropped, an option repeated, a global option inserted anywhere."""
    argv = list(draw(st.sampled_from(VALID_LINES)))
    values = st.sampled_from(_VALUES + list(paths.values()))
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2, 3]))):
        kind = draw(st.integers(0, 4))
        at = draw(st.integers(1, len(argv) - 1)) if len(argv) > 1 else 1
        if kind <= 1 and len(argv) > 1:
            argv[at] = draw(values)
        elif kind == 2 and len(argv) > 2:
            del argv[at]
        elif kind == 3 and argv[at - 1].startswith("--"):
            argv += [argv[at - 1], argv[at]]
        else:
            argv.insert(at, draw(st.sampled_from(["-v", "--cache-dir", "--force", "--allow-edited", "--raw"])))
    return argv


_SETTINGS = [(name, value) for name, values in HOSTILE_ENVIRONMENT.items() for value in values]

environments = st.one_of(
    st.just({}), st.just({}), st.just({}), st.lists(st.sampled_from(_SETTINGS), min_size=1, max_size=2).map(dict)
)
"""Mostly the world's environment; else one or two variables set to a hostile value for the run."""


class Tally:
    """Command lines run and their exit statuses (reported by the fuzz tests)."""

    runs = 0
    statuses: ClassVar[dict[int, int]] = {}


def _fuzz(world, examples: int) -> None:
    root, paths = world
    before = snapshot(root)
    repo_before = _repo_state()

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=examples <= 400,
        suppress_health_check=list(HealthCheck),
    )
    @given(argv=st.one_of(command_lines(paths), mutated_lines(paths)), env=environments)
    def one(argv: list[str], env: dict[str, str]) -> None:
        outcome = run_cli(argv, env)
        Tally.runs += 1
        Tally.statuses[outcome.status] = Tally.statuses.get(outcome.status, 0) + 1
        broken = contract_breaks(argv, outcome)
        assert not broken, f"{env or ''} ckspace {argv!r}: {broken}; stderr: {outcome.stderr[-500:]}"
        assert os.getcwd() == str(root)

    one()
    gone = lost(before, snapshot(root), root)
    assert not gone, f"changed or lost: {gone}"
    assert (root / "foreign" / "precious.txt").read_text() == "not ckspace's\n"
    assert _repo_state() == repo_before, "a command touched the package"
    assert not (root / "home" / ".cache").exists(), "a command wrote to the home cache"
    print(
        f"fuzz: {Tally.runs} command lines (exit statuses {dict(sorted(Tally.statuses.items()))}), contract breaks: 0"
    )


def _repo_state() -> dict:
    """The package's files (code, shipped models and tables): what a command must never write."""
    return {path: entry for path, entry in snapshot(ROOT / "ckspace").items() if "__pycache__" not in path}


@pytest.mark.slow
def test_fuzz_command_lines_keep_the_contract(world) -> None:
    """The bounded run of every test run (about 30 s on 2 cores)."""
    _fuzz(world, int(os.environ.get("CKSPACE_FUZZ_CI_EXAMPLES", "300")))


@pytest.mark.fuzz_long
@pytest.mark.slow
def test_fuzz_long(world) -> None:
    _fuzz(world, int(os.environ.get("CKSPACE_FUZZ_EXAMPLES", "3000")))


@st.composite
def misspelt_lines(draw) -> tuple[list[str], str]:
    """A working command line with a misspelling of one of its command's long options (a letter
    dropped, doubled, or swapped with the next) inserted anywhere after the command; and the typo."""
    argv = list(draw(st.sampled_from(VALID_LINES)))
    options = _options(argv[0])
    name = draw(st.sampled_from([o for o in options if o.startswith("--")]))[2:]
    at = draw(st.integers(0, len(name) - 2))
    typo = "--" + draw(
        st.sampled_from(
            [
                name[:at] + name[at + 1 :],
                name[:at] + name[at] + name[at:],
                name[:at] + name[at + 1] + name[at] + name[at + 2 :],
            ]
        )
    )
    assume(typo not in options)
    argv.insert(draw(st.integers(1, len(argv))), typo)
    return argv, typo


@pytest.mark.slow
def test_a_misspelt_option_is_named_in_one_line(world) -> None:
    """Wherever it stands (before a required option, between an option and its value), the typo is
    what the one line names, with a real option as the hint when one is close."""

    @settings(max_examples=150, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(case=misspelt_lines())
    def one(case: tuple[list[str], str]) -> None:
        argv, typo = case
        outcome = run_cli(argv)
        lines = outcome.stderr.splitlines()
        assert outcome.status == 2 and len(lines) == 1, (argv, outcome.stderr)
        assert lines[0].startswith(f"ckspace: error: unknown option {typo} of ckspace {argv[0]}"), (argv, lines)
        hint = re.search(r"did you mean (\S+)\?", lines[0])
        assert hint is None or hint[1] in _options(argv[0]), lines[0]

    one()


@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
@pytest.mark.parametrize("delay", [0.0, 0.6, 1.5])
@pytest.mark.slow
def test_signals_end_quietly_and_leave_whole_files(tmp_path: Path, signum: int, status: int, delay: float) -> None:
    """A real process, signalled ``delay`` seconds after it reported its handlers installed: at
    some moment of an emit (0: while its modules load; later: enumerating or writing)."""
    ck = fake_ck(tmp_path / "ck", explicit_gemm=True)
    out = tmp_path / "tree"
    process = start_ready(
        [
            "emit",
            "--arch",
            "gfx950",
            "--variant",
            "all",
            "--rule-set",
            "full",
            "--no-cache",
            "--ck-root",
            str(ck),
            "--out",
            str(out),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    time.sleep(delay)
    process.send_signal(signum)
    stderr = finish(process)
    # the signal may come after the emit is done (its manifest is written last): exit 0, or death by
    # the signal while the interpreter shuts down, which is Python's (see ckspace.cli)
    done = (out / "manifest.json").is_file()
    assert process.returncode == status or (done and process.returncode in (0, -signum)), stderr
    assert "Traceback" not in stderr
    if process.returncode == status:
        assert stderr.strip().splitlines() in ([], [f"ckspace: {'interrupted' if status == 130 else 'terminated'}"])
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp") or ".old." in p.name]


@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_in_the_middle_of_writing_leaves_only_whole_files(
    tmp_path: Path, monkeypatch, signum: int, status: int
) -> None:
    """Deterministic: the signal arrives at the 40th file of an emit; every file left is whole
    (equal to what a complete emit writes), no temporary file is left, and the exit is quiet."""
    import ckspace.environment.files as files

    ck = fake_ck(tmp_path / "ck", explicit_gemm=True)
    emit = ["emit", "--arch", "gfx950", "--variant", "all", "--rule-set", "full-tests", "--ck-root", str(ck), "--out"]
    assert run_cli([*emit, str(tmp_path / "complete")]).status == 0
    real, calls = files.write_atomic, []

    def interrupted(path, data, what="output"):
        calls.append(path)
        if len(calls) == 40:
            os.kill(os.getpid(), signum)
        return real(path, data, what)

    monkeypatch.setattr(files, "write_atomic", interrupted)
    outcome = run_cli([*emit, str(tmp_path / "cut")])
    assert outcome.status == status and "Traceback" not in outcome.stderr
    left = [p for p in (tmp_path / "cut").rglob("*") if p.is_file()]
    assert 0 < len(left) < len(calls) + 1 and not (tmp_path / "cut" / "manifest.json").exists()
    for path in left:
        assert path.read_bytes() == (tmp_path / "complete" / path.relative_to(tmp_path / "cut")).read_bytes(), path
