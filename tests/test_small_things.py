"""Small things a new user tripped on, each stated as the behaviour that is right."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import ROOT

import ckspace
from ckspace import GemmConfig, Space
from ckspace.core.errors import InvalidChoiceError, InvalidInputError


def test_dir_lists_the_lazy_exports_and_no_kernel_error_is_one() -> None:
    names = dir(ckspace)
    assert {"Space", "Selector", "NoKernelError", "Target", "GemmConfig"} <= set(names)
    assert "import_module" not in names and "Any" not in names
    assert issubclass(ckspace.NoKernelError, ckspace.CkspaceError)


def test_a_kernel_record_shows_its_name() -> None:
    kernel = Space("gfx950", "forward", 2, "bf16", ck=None).kernels()[0]
    assert repr(kernel) == f"Kernel({kernel.name!r}, arch='gfx950')"


def test_replace_validates_where_model_copy_does_not() -> None:
    config = next(iter(Space("gfx950", "bwd_weight", 2, "bf16", ck=None)))
    assert config.replace(pipeline="compv4").pipeline.value == "compv4"
    assert config.model_copy(update={"pipline": "mem"}) is not None  # pydantic's own: no check at all
    with pytest.raises(InvalidChoiceError, match="unknown GemmConfig field 'pipline'; valid: kind, arch"):
        config.replace(pipline="mem")
    with pytest.raises(InvalidInputError, match="tile_m=0"):
        config.replace(tile_m=0)
    with pytest.raises(InvalidInputError, match="pipeline='nope'"):
        config.replace(pipeline="nope")
    assert isinstance(config.replace(), GemmConfig) and config.replace() == config


def test_a_filter_written_with_an_object_prefix_gets_the_field_name_as_a_hint() -> None:
    with pytest.raises(ckspace.CkspaceError, match=r"name the field alone \('tile_n', not c.tile_n\)"):
        Space("gfx950", "forward", 2, "bf16", ck=None).where("c.tile_n >= 64")


def test_an_excluded_table_reads_as_words() -> None:
    from ckspace.constraints.language.expr import Field, Not
    from ckspace.constraints.language.render import why

    big = Not(Field("tile_m").isin(range(10, 22)))
    assert why(big, {"tile_m": 12}) == "tile_m = 12 is one of the 12 excluded"
    small = Not(Field("tile_m").isin([12, 16]))
    assert why(small, {"tile_m": 12}) == "tile_m = 12 is one of the excluded 12, 16"


def test_a_partial_explain_over_several_cells_ends_with_a_summary() -> None:
    space = Space("gfx950", ["forward", "bwd_data", "bwd_weight"], 2, "bf16", ck=None)
    text = space.explain({"pipeline": "mem", "tile_m": 16}).text()
    summary = [line for line in text.splitlines() if line.startswith("summary: ")]
    assert len(summary) == 1
    found = re.fullmatch(r"summary: (\d+) valid completion\(s\) in (\d) of 3 cells", summary[0])
    per_cell = [int(n) for n in re.findall(r"VALID; (\d+) valid completion", text)]
    assert found and int(found[1]) == sum(per_cell) and int(found[2]) == len(per_cell) > 0


def test_the_verification_doc_snippet_runs_as_written() -> None:
    text = (ROOT / "docs" / "verification.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, "docs/verification.md", "exec"), namespace)  # our own doc, not user text
    assert namespace["result"].checked > 0


def test_select_json_with_no_kernel_still_answers_on_stdout(tmp_path, capsys) -> None:
    import json

    from ckspace.cli import main

    names = tmp_path / "names.txt"
    names.write_text("grouped_conv_fwd_bf16_nhwgc_3d_compv3_cshuffle_intrawave_64x64x64_2x2x1_32x32x16_vec8_8_8\n")
    status = main(
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
            "N=1,C=64,K=64,Hi=8,Wi=8,Y=3,X=3,pad=1",
            "--format",
            "json",
        ]
    )
    record = json.loads(capsys.readouterr().out)
    assert status == 1 and record["pick"] is None and record["candidates"] == 1
    assert "problem_ndim" in json.dumps(record["blocking"]) and record["target"]["known_wrong_excluded"]
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
                "--top",
                "0",
                "--problem",
                "N=1,C=64,K=64,Hi=8,Wi=8,Y=3,X=3,pad=1",
            ]
        )
        == 2
    )
    assert "--top 0: valid: how many kernels to list, at least 1" in capsys.readouterr().err


def test_a_problem_lacking_keys_names_every_one_in_one_line(capsys) -> None:
    from ckspace.cli import main
    from ckspace.workloads.problem import ConvProblem

    assert main(["select", "--arch", "gfx950", "--dtype", "bf16", "--variant", "forward", "--problem", "N=1,C=64"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "{" not in err and "Field required" not in err
    assert err.startswith(
        "ckspace: error: problem 'N=1,C=64' lacks K, Wi, X (read as 1D: no depth or height key; "
        "for 2D give Hi, Y too, for 3D Di, Hi, Z, Y)"
    )
    with pytest.raises(InvalidInputError, match=r"^problem 'C=3,Hi=8' lacks N, K, Wi, Y, X \(a 2D problem\)$"):
        ConvProblem.parse("C=3,Hi=8")


def test_a_2d_or_3d_problem_without_a_filter_or_input_size_is_refused_not_read_as_1() -> None:
    """An absent dimension's sizes are 1; a present dimension's are never guessed: ``Hi=8,Wi=8,X=3``
    without Y is not a 1x3 filter."""
    from ckspace.workloads.problem import ConvProblem

    with pytest.raises(InvalidInputError, match=r"lacks Y \(a 2D problem\)$"):
        ConvProblem.parse("N=1,C=64,K=64,Hi=8,Wi=8,X=3")
    with pytest.raises(InvalidInputError, match=r"^ConvProblem lacks Hi \(a 2D problem\)$"):
        ConvProblem(ndim=2, N=1, C=64, K=64, Wi=8, Y=3, X=3)
    with pytest.raises(InvalidInputError, match=r"lacks Di, Z \(a 3D problem\)$"):
        ConvProblem.parse("N=1,C=64,K=64,Hi=8,Wi=8,Y=3,X=3,ndim=3")


def test_a_problem_built_without_ndim_reads_it_from_its_keys() -> None:
    from ckspace.workloads.problem import ConvProblem

    problem = ConvProblem(N=1, C=64, K=64, G=1, Hi=8, Wi=8, Y=3, X=3)
    assert problem.ndim == 2 and problem == ConvProblem.parse("N=1,C=64,K=64,G=1,Hi=8,Wi=8,Y=3,X=3")
    assert ConvProblem(N=1, C=8, K=8, Di=2, Hi=4, Wi=4, Z=1, Y=1, X=1).ndim == 3
    assert ConvProblem(N=1, C=8, K=8, Wi=4, X=1).ndim == 1


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["select", "--arch", "gfx950", "--dtype", "bf16", "--variant", "forward", "--problm", "x"],
            "unknown option --problm of ckspace select; did you mean --problem? (valid: --arch, ",
        ),
        (["enumerate", "--cuont"], "unknown option --cuont of ckspace enumerate; did you mean --count? (valid: "),
        (
            ["--cache-dirr", "x", "enumerate"],
            "unknown option --cache-dirr of ckspace; did you mean --cache-dir? (valid: ",
        ),
        (
            ["select", "--arch", "gfx950", "--topp", "3", "--top", "x"],
            "unknown option --topp of ckspace select; did you mean --top?",
        ),
        (
            ["enumerate", "--arch", "gfx950", "--variant", "forward", "--count", "--problm=N=1"],
            "unknown option --problm of ckspace enumerate; did you mean --problem?",
        ),
    ],
)
def test_an_unknown_option_is_named_first_with_the_closest_option(argv: list[str], line: str, capsys) -> None:
    from ckspace.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"ckspace: error: {line}"), err


def test_valid_values_that_look_like_options_are_not_taken_for_unknown_ones(capsys) -> None:
    from ckspace.cli import main

    assert (
        main(
            [
                "-vv",
                "enumerate",
                "--arch",
                "gfx950",
                "--variant",
                "forward",
                "--dtype",
                "bf16",
                "--ndim",
                "2",
                "--rule-set",
                "tiny",
                "--rules-only",
                "--count",
                "--where",
                "-tile_m > 0",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out == "0\n"
    assert (
        main(
            [
                "select",
                "--arch",
                "gfx950",
                "--dtype",
                "bf16",
                "--variant",
                "forward",
                "--problem",
                "N=1,C=64,K=64,Wi=8,X=1",
                "--top",
                "-3",
            ]
        )
        == 2
    )
    assert "--top -3: valid: how many kernels to list" in capsys.readouterr().err


def test_every_csv_spells_booleans_0_1_and_reads_back(capsys) -> None:
    """enumerate's CSV and bench's results (config_cells) spell a config alike, and the
    measurement reader reads enumerate's rows back to the kernels they name."""
    import csv
    import io

    from ckspace.cli import main
    from ckspace.workloads.measurement import CONFIG_COLUMNS, config_cells, config_from_row

    assert (
        main(
            [
                "enumerate",
                "--arch",
                "gfx950",
                "--variant",
                "forward",
                "bwd_weight",
                "--ndim",
                "2",
                "--dtype",
                "bf16",
                "--rule-set",
                "tiny",
                "--rules-only",
                "--list",
                "--format",
                "csv",
            ]
        )
        == 0
    )
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    gemm = [row for row in rows if row["kind"] == "gemm"]
    assert gemm and not any(value in ("True", "False") for row in rows for value in row.values())
    for row in gemm:
        config = config_from_row(row)
        assert config.name == row["name"] and {k: row[k] for k in CONFIG_COLUMNS} == config_cells(config)
    assert {row["two_stage"] for row in gemm} == {"0", "1"}


@pytest.mark.slow
def test_bench_host_backend_refuses_a_hip_library_up_front(tmp_path: Path, capsys) -> None:
    from standin_library import build_standin

    from ckspace.cli import main
    from ckspace.compiling.report import BuildReport
    from ckspace.compiling.toolchain import Toolchain

    tree = build_standin(tmp_path)
    problems = tmp_path / "problems.csv"
    problems.write_text("N,C,K,G,Hi,Wi,Y,X,stride_h,stride_w,pad_h,pad_w\n2,16,16,1,6,6,3,3,1,1,1,1\n")
    bench = ["bench", str(tree), "--problems", str(problems), "--backend", "host", "--timeout", "5"]
    assert main([*bench, "--out", str(tmp_path / "standin.csv")]) == 0  # a stand-in runs on the host
    capsys.readouterr()
    library = tree / "build" / "gfx950" / "libckspace_kernels_gfx950.so"
    toolchain = Toolchain(
        kind="clang",
        compiler="clang++-22",
        version="clang version 22.0.0",
        identity="0" * 64,
        arch="gfx950",
        compile_flags=(),
        link_flags=(),
    )
    report = BuildReport(
        arch="gfx950",
        toolchain=toolchain,
        ck_revision="r",
        ck_fingerprint="f",
        batch=8,
        jobs=1,
        units=1,
        compiled_units=1,
        seconds=1.0,
        ok=1,
        failed=0,
        cached=0,
        library=str(library),
        link_error=None,
        kernels=[],
    )
    (library.parent / "report.json").write_text(report.model_dump_json())  # as ckspace build leaves it
    assert main([*bench, "--out", str(tmp_path / "hip.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        f"ckspace: error: --backend host: {library} is a HIP library "
        "(ckspace build linked it for gfx950 with clang version 22.0.0)"
    )
    assert not (tmp_path / "hip.csv").exists()


def test_plan_warns_once_of_a_cell_without_a_model(tmp_path: Path, capsys) -> None:
    from ckspace.cli import main

    problems = tmp_path / "problems.csv"
    problems.write_text("N,C,K,G,Hi,Wi,Y,X,stride_h,stride_w,pad_h,pad_w\n4,128,128,1,28,28,3,3,1,1,1,1\n")
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
                "--rule-set",
                "default",
                "--budget",
                "1",
                "--problems",
                str(problems),
                "--time-limit",
                "2",
            ]
        )
        == 0
    )
    assert capsys.readouterr().err.count("no model for gfx942 forward bf16") == 1


def test_usage_lines_show_the_choices_and_help_lists_every_format() -> None:
    from ckspace.cli import _parser
    from ckspace.commands.common import CK_ROOT_DEFAULT, format_choices

    parser, modules = _parser()
    commands = parser.subcommands
    epilog = next(line for line in parser.format_help().splitlines() if line.startswith("formats (--format): "))
    for name, command in commands.items():
        choices = format_choices(command)
        assert (choices is None) == ("--format" not in command.format_usage()), name
        if choices:
            assert "--format {" + ",".join(choices) + "}" in " ".join(command.format_usage().split()), name
            assert tuple(choices) == modules[name].FORMATS
            listed = next(
                part
                for part in epilog.removeprefix("formats (--format): ").split("; ")
                if name in part.rsplit(" ", 1)[0].split(", ")
            )
            assert listed.rsplit(" ", 1)[1] == "|".join(choices), name
        if "--ck-root" in command.format_usage():
            text = " ".join(command.format_help().split())
            assert "--ck-root PATH" in text and f"({CK_ROOT_DEFAULT})" in text, name


def test_help_lists_every_environment_variable_the_code_reads() -> None:
    """``ckspace --help`` and ``info`` list the environment from one table; a variable the code reads
    by name and the table leaves out is one a user cannot find."""
    from ckspace.commands.common import ENVIRONMENT
    from ckspace.commands.train import OPENMP_DEFAULTS

    read = re.compile(r"""environ(?:\.get|\.pop|\.setdefault)?[(\[]\s*["']([A-Z_][A-Z0-9_]*)["']""")
    named = {name for path in (ROOT / "ckspace").rglob("*.py") for name in read.findall(path.read_text())}
    assert {"ROCM_PATH", "RAY_ADDRESS", "XDG_CACHE_HOME"} <= named  # the pattern sees them
    assert named | set(OPENMP_DEFAULTS) <= set(ENVIRONMENT)


def test_select_takes_an_emitted_tree_as_its_candidates(tmp_path: Path, capsys) -> None:
    import json

    from conftest import fake_ck

    from ckspace.cli import main

    tree, ck = tmp_path / "tree", str(fake_ck(tmp_path / "ck", explicit_gemm=True))
    assert (
        main(
            [
                "emit",
                "--arch",
                "gfx950",
                "--variant",
                "forward",
                "bwd_weight",
                "--ndim",
                "2",
                "--dtype",
                "bf16",
                "--rule-set",
                "default",
                "--ck-root",
                ck,
                "--out",
                str(tree),
            ]
        )
        == 0
    )
    capsys.readouterr()
    cell = [
        "select",
        "--arch",
        "gfx950",
        "--dtype",
        "bf16",
        "--problem",
        "N=1,C=64,K=64,Hi=8,Wi=8,Y=3,X=3,pad=1",
        "--ck-root",
        ck,
        "--format",
        "json",
    ]
    assert main([*cell, "--variant", "bwd_weight", "--candidates", str(tree)]) == 0
    answer = json.loads(capsys.readouterr().out)
    manifest = json.loads((tree / "manifest.json").read_text())
    bwd_weight = {k["name"] for k in manifest["kernels"] if k["variant"] == "bwd_weight"}
    assert answer["candidates"] == len(bwd_weight) < len(manifest["kernels"]) and answer["pick"] in bwd_weight
    assert main([*cell, "--variant", "bwd_data", "--candidates", str(tree)]) == 2
    assert (
        f"--candidates {tree}: no bwd_data bf16 kernel (it holds bwd_weight bf16, forward bf16)"
        in capsys.readouterr().err
    )


@pytest.mark.slow
def test_the_first_select_says_once_that_it_compiles_the_selector(tmp_path: Path) -> None:
    import json

    from conftest import c_compiler
    from fuzz_world import run_cli

    c_compiler()  # without one the selector calls LightGBM and nothing is compiled: a skip saying how to get one
    select = [
        "select",
        "--arch",
        "gfx950",
        "--variant",
        "forward",
        "--dtype",
        "bf16",
        "--rule-set",
        "tiny",
        "--rules-only",
        "--problem",
        "N=1,C=64,K=64,Hi=8,Wi=8,Y=3,X=3,pad=1",
        "--format",
        "json",
        "--cache-dir",
        str(tmp_path / "cache"),
    ]
    first, again = run_cli(select), run_cli(select)
    assert first.status == again.status == 0 and json.loads(first.stdout) == json.loads(again.stdout)
    said = [line for line in first.stderr.splitlines() if "compiling" in line]
    assert len(said) == 1 and said[0].startswith("ckspace: NOTICE: compiling the selector for gfx950 forward bf16 ")
    assert f"(once; cached in {tmp_path / 'cache' / 'compiled-selectors'}" in said[0]
    assert "compiling" not in again.stderr


def test_train_prints_a_legend_and_each_selector_once(tmp_path: Path, capsys, monkeypatch) -> None:
    from ckspace.cli import main
    from ckspace.training import plot
    from ckspace.training.metrics import HEADER, LEGEND
    from ckspace.workloads.datasets import DATASETS

    data = tmp_path / "small.csv"
    data.write_text("".join(DATASETS["mi355x-forward-bf16"].path.read_text().splitlines(keepends=True)[:400]))
    assert (
        main(
            [
                "train",
                "--data",
                str(data),
                "--arch",
                "gfx950",
                "--folds",
                "2",
                "--threads",
                "1",
                "--out",
                str(tmp_path / "model"),
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[lines.index(HEADER) - 1] == LEGEND
    rows = [line.split()[0] for line in lines[lines.index(HEADER) + 1 : -1]]
    winner = rows[0].removeprefix("model=")
    assert rows == [
        f"model={winner}",
        *({"lambdarank", "regression"} - {winner}),
        "single_best_kernel",
        "random",
        "analytical",
    ]
    figures = {}
    monkeypatch.setattr(plot, "_save", lambda fig, plt, path, option: figures.setdefault(option, fig))
    assert (
        main(
            [
                "evaluate",
                "--data",
                str(data),
                "--arch",
                "gfx950",
                "--folds",
                "2",
                "--threads",
                "1",
                "--plan-budgets",
                "2,4",
                "--plan-plot",
                str(tmp_path / "plans.png"),
            ]
        )
        == 0
    )
    axis = figures["--plan-plot"].axes[0]
    sets, styles = [a for a in axis.get_children() if type(a).__name__ == "Legend"]
    assert [t.get_text() for t in sets.get_texts()] == [
        "plan (predicted)",
        "hindsight (measured)",
        "most frequent winners",
        "random",
    ]
    solid, dashed = styles.legend_handles
    assert (solid.get_linestyle(), solid.get_marker()) != (dashed.get_linestyle(), dashed.get_marker())
    assert [t.get_text()[:3] for t in styles.get_texts()] == ["(a)", "(b)"]


def test_stdout_that_cannot_encode_a_character_gets_its_escape_not_stdout_is_closed(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    import io

    from ckspace.cli import main

    stdout = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    monkeypatch.setattr("sys.stdout", stdout)
    assert main(["cache", "info", "--cache-dir", str(tmp_path / "ü")]) == 0
    stdout.flush()
    text = stdout.buffer.getvalue().decode("ascii")
    assert f"{tmp_path}/\\xfc/cells" in text and capsys.readouterr().err == ""
