"""Every command's --help ends with examples, and every example works: each line shown is parsed by
the real parser, and the cheap ones are run, so an example cannot rot (the tests' names give the
item of the tracker they answer)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from ckspace.cli import _parser, main
from ckspace.commands import COMMANDS

CHEAP = ("enumerate", "explain", "lint", "rules", "diff")
"""Commands whose examples answer in seconds from the rules alone: these examples are run."""


def help_of(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


def shown_examples(help_text: str) -> list[str]:
    """The command lines of the help's examples section, as a user would copy them."""
    section = help_text.partition("\nexamples:\n")[2]
    return [line.strip() for line in section.splitlines() if line.strip().startswith("ckspace ")]


@pytest.mark.parametrize("command", COMMANDS)
def test_issue36_item21_every_example_in_help_parses(
    command: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Shown below the options, one or more per command, each a line the parser takes as that
    command (``results.csv`` is what bench's example writes and train's reads: it exists here)."""
    examples = shown_examples(help_of(command, capsys))
    assert examples, f"ckspace {command} --help shows no examples"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results.csv").touch()
    parser, _ = _parser()
    for line in examples:
        words = shlex.split(line)
        assert words[:2] == ["ckspace", command], line
        assert parser.parse_args(words[1:]).command == command, line


@pytest.mark.parametrize("command", CHEAP)
@pytest.mark.slow
def test_issue36_item21_the_cheap_examples_run(
    command: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not refused as bad input (exit 2; a negative answer, 1 or explain's 3, is an answer) and an
    answer on stdout."""
    monkeypatch.chdir(tmp_path)
    examples = shown_examples(help_of(command, capsys))
    assert examples, f"ckspace {command} --help shows no examples"
    for line in examples:
        status = main(shlex.split(line)[1:])
        captured = capsys.readouterr()
        assert status != 2, (line, captured.err)
        assert captured.out.strip(), line
