"""The command line's arguments and help (``commands.parsing``, ``cli``): an unknown option named first
with the closest one, values that look like options taken as values, usage lines with their choices,
every environment variable in ``--help``, and a stdout that cannot encode a character."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import ROOT


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


def test_the_paths_help_spells_are_where_the_code_writes() -> None:
    """``build --help`` names the host library's path as text (importing the manifest module for it
    would cost every command's start a third of a second): it is the path ``build`` links."""
    from ckspace.cli import _parser
    from ckspace.emit.manifest import host_library

    parser, _ = _parser()
    text = " ".join(parser.subcommands["build"].format_help().split())
    assert f"C compiler: {host_library(Path())}, no HIP needed" in text
