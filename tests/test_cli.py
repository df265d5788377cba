"""The ``ckspace`` command as a user runs it: a separate process, stdout, stderr, exit status."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def run(*args: str, cache_dir: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if cache_dir:
        env["CKSPACE_CACHE_DIR"] = cache_dir
    return subprocess.run([sys.executable, "-m", "ckspace", *args], capture_output=True, text=True, env=env)


def test_count_is_one_integer_on_the_last_line() -> None:
    out = run("enumerate", "--arch", "gfx950", "--variant", "bwd_weight", "--count", "--rules-only")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "4464"  # the upstream rule space
    assert out.stderr.splitlines()[0].startswith("target: rules only")  # the target goes to stderr, not stdout
    target = run("enumerate", "--arch", "gfx950", "--variant", "bwd_weight", "--count")
    assert target.returncode == 0, target.stderr
    assert 0 < int(target.stdout.splitlines()[-1]) < 4464  # the CK headers found (always, in tests) narrow it
    assert target.stderr.splitlines()[0].startswith("target: CK ")


def test_list_names_sorted_and_matches_count() -> None:
    args = ("enumerate", "--arch", "gfx942", "--variant", "forward", "--ndim", "2", "--dtype", "bf16")
    names = run(*args, "--list").stdout.splitlines()
    assert names == sorted(names) and len(names) == len(set(names))
    assert int(run(*args, "--count").stdout.split()[-1]) == len(names)


def test_repeated_and_multi_value_options_are_equivalent() -> None:
    a = run("enumerate", "--arch", "gfx942", "--variant", "all", "--ndim", "2", "3", "--dtype", "fp16", "--list")
    b = run(
        "enumerate",
        "--arch",
        "gfx942",
        "--variant",
        "forward",
        "bwd_data",
        "--variant",
        "bwd_weight",
        "--ndim",
        "2",
        "--ndim",
        "3",
        "--dtype",
        "fp16",
        "--list",
    )
    assert a.returncode == b.returncode == 0
    assert a.stdout == b.stdout and a.stdout


@pytest.mark.parametrize("fmt", ["json", "jsonl", "csv"])
def test_structured_formats_carry_every_field(fmt: str) -> None:
    out = run(
        "enumerate",
        "--arch",
        "gfx950",
        "--variant",
        "forward",
        "--ndim",
        "2",
        "--dtype",
        "fp16",
        "--rule-set",
        "tiny",
        "--list",
        "--format",
        fmt,
    )
    assert out.returncode == 0, out.stderr
    if fmt == "json":
        records = json.loads(out.stdout)
    elif fmt == "jsonl":
        records = [json.loads(line) for line in out.stdout.splitlines()]
    else:
        header, *rows = out.stdout.splitlines()
        records = [dict(zip(header.split(","), row.split(","), strict=True)) for row in rows]
    assert records
    gemm = [r for r in records if r["kind"] == "gemm"]
    for key in (
        "name",
        "arch",
        "tile_m",
        "wave_k",
        "warp_tile_k",
        "vec_c",
        "pipeline",
        "scheduler",
        "epilogue",
        "double_smem_buffer",
        "num_groups_to_merge",
        "specialization",
        "streamk_enabled",
        "streamk_strategy",
        "streamk_persistent",
        "num_wave_groups",
    ):
        assert key in gemm[0], key


def test_raw_lists_rejected_proposals_too() -> None:
    base = ("enumerate", "--arch", "gfx942", "--variant", "bwd_data", "--rule-set", "full", "--rules-only")
    assert run(*base, "--count").stdout.split()[-1] == "0"  # quirk 14.1 (docs/rules.md): bwd_data is empty
    raw = run(*base, "--raw", "--list", "--format", "jsonl").stdout.splitlines()
    assert raw and not any(json.loads(line)["valid"] for line in raw)


@pytest.mark.parametrize(
    "args,bad",
    [
        (("--arch", "gfx999", "--variant", "forward"), "gfx999"),
        (("--arch", "gfx950", "--variant", "sideways"), "sideways"),
        (("--arch", "gfx950", "--variant", "forward", "--ndim", "4"), "'4'"),
        (("--arch", "gfx950", "--variant", "forward", "--dtype", "fp8"), "fp8"),
        (("--arch", "gfx950", "--variant", "forward", "--rule-set", "huge"), "huge"),
        (("--arch", "gfx950", "--variant", "forward", "--format", "xml", "--list"), "xml"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: tuple[str, ...], bad: str) -> None:
    out = run("enumerate", *args, *(() if "--list" in args else ("--count",)))
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and bad in lines[0] and "valid:" in lines[0]
    assert "Traceback" not in out.stderr


def test_missing_required_option_is_one_line() -> None:
    out = run("enumerate", "--arch", "gfx950", "--count")
    assert out.returncode == 2 and len(out.stderr.splitlines()) == 1 and "--variant" in out.stderr
