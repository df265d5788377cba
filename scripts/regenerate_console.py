"""Rewrite the output shown in a page's console blocks with what the commands print now.

``tests/test_readme.py`` runs every ```` ```console ```` block of the docs and fails when a command
prints other lines than the page shows. Where the figures are meant to follow the code (the census
of ``docs/hipdnn-census.md`` changes whenever the plugin serves more), this script runs the blocks
the same way (each block in a fresh directory of its own, each ``$ command`` in ``bash`` with this
interpreter's ``ckspace`` first on PATH, stdout and stderr together) and writes what they print
under each command. A command that fails stops the script and leaves the page as it was.

Usage: python scripts/regenerate_console.py PAGE [PAGE ...]   (e.g. docs/hipdnn-census.md)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

TIMEOUT = 600


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("COLUMNS", None)
    return env


def _run(command: str, directory: Path) -> list[str]:
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=directory,
        env=_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=TIMEOUT,
    )
    if done.returncode != 0:
        raise SystemExit(f"$ {command}\nexit {done.returncode}:\n{done.stdout}")
    return [line.rstrip() for line in done.stdout.rstrip("\n").splitlines()] if done.stdout.strip() else []


def regenerate(lines: list[str]) -> list[str]:
    """The page's lines with every console block's shown output replaced by the commands' own."""
    out: list[str] = []
    index = 0
    while index < len(lines):
        out.append(lines[index])
        if lines[index].strip() != "```console":
            index += 1
            continue
        index += 1
        with tempfile.TemporaryDirectory() as scratch:
            while lines[index].rstrip() != "```":
                if not lines[index].startswith("$ "):
                    index += 1  # shown output: replaced below
                    continue
                written = [lines[index]]
                while written[-1].rstrip().endswith("\\"):
                    index += 1
                    written.append(lines[index])
                index += 1
                command = " ".join(line.rstrip().removesuffix("\\").strip() for line in written).removeprefix("$ ")
                out += written
                out += _run(command, Path(scratch))
        out.append(lines[index])
        index += 1
    return out


def main(argv: list[str]) -> int:
    for name in argv:
        page = Path(name)
        text = "\n".join(regenerate(page.read_text().splitlines())) + "\n"
        temporary = page.with_name(f".{page.name}.regenerating")
        temporary.write_text(text)
        os.replace(temporary, page)  # whole or not at all
        print(f"regenerated {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
