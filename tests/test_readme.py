"""The documentation runs: every Python and console block of README.md and of every ``docs/*.md``
page is executed as written, and every link between the pages leads somewhere, so no page can
drift from the code.

* A page's ```` ```python ```` blocks run in order, in one namespace of their own (a page is read
  top to bottom), in a fresh working directory. Every line ending in a comment that is a Python
  literal (``space.count()  # 790``) must evaluate to that literal.
* A ```` ```console ```` block is a shell session: each ``$ command`` (continued by a trailing
  backslash) runs in ``bash`` in a fresh directory of the block's own, must exit 0, and what it
  prints (stdout and stderr, in the order written) must be the lines shown under it. In a shown
  line ``...`` stands for any text; a line of ``...`` alone for any number of lines. A command
  shown with no lines under it is only run.
* Other blocks (```` ```sh ````, ```` ```cmake ````, ```` ``` ````, ...) are shown, not run: the
  syntax of a command, or what needs a GPU, ROCm or hipDNN.
* A line ``<!-- slow -->`` just above a block marks it slow (``pytest -m "not slow"`` leaves it
  out); a page's Python run is slow when one of its blocks is.

docs/testing.md (*The documentation's examples*) says the same for those who write the pages.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = (README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "examples" / "README.md")
"""Every page of prose a user reads: the README, the docs and the examples' README."""
SLOW = "<!-- slow -->"
COMMAND_TIMEOUT = 600


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    """The line of the block's first line of code (after the fence), 1-based."""
    kind: str
    text: str
    slow: bool

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


FENCE = re.compile(r"^```(\S*)\s*$")


def blocks(page: Path, text: str | None = None) -> list[Block]:
    """The fenced blocks of a page, with their language (``""`` when none is given)."""
    lines = (page.read_text() if text is None else text).splitlines()
    out: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        assert end < len(lines), f"{page}:{index + 1}: a block that is never closed"
        slow = index > 0 and lines[index - 1].strip() == SLOW
        out.append(Block(page, index + 2, opening.group(1), "\n".join(lines[index + 1 : end]) + "\n", slow))
        index = end + 1
    return out


# --- python blocks -------------------------------------------------------------------------------


def claims(block: str) -> list[tuple[int, str, object]]:
    """(line number, expression, expected value) for each line claiming a literal result."""
    out = []
    for number, line in enumerate(block.splitlines(), 1):
        code, sep, comment = line.partition("#")
        if not sep or not code.strip():
            continue
        try:
            expected = ast.literal_eval(comment.strip())
            ast.parse(code.strip(), mode="eval")
        except (ValueError, SyntaxError):
            continue
        out.append((number, code.strip(), expected))
    return out


def run_python(page_blocks: list[Block]) -> int:
    """Run a page's Python blocks in one namespace; the number of claims checked."""
    namespace: dict = {"__name__": "__doc__"}
    checked = 0
    for block in page_blocks:
        exec(compile(block.text, block.id, "exec"), namespace)
        for number, expression, expected in claims(block.text):
            found = eval(expression, namespace)
            assert found == expected, (
                f"{block.page.name}:{block.line + number - 1}: {expression} is {found!r}, not {expected!r}"
            )
            checked += 1
    return checked


def _python_pages() -> list:
    params = []
    for page in PAGES:
        python = [b for b in blocks(page) if b.kind == "python"]
        if python:
            marks = [pytest.mark.slow] if any(b.slow for b in python) else []
            params.append(pytest.param(python, id=str(page.relative_to(ROOT)), marks=marks))
    return params


@pytest.mark.parametrize("page_blocks", _python_pages())
def test_python_blocks_run_and_their_claims_hold(page_blocks: list[Block], tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    run_python(page_blocks)


def test_the_readme_claims_results() -> None:
    """The README's Python blocks claim results, not only run."""
    python = [b for b in blocks(README) if b.kind == "python"]
    assert len(python) >= 2
    assert sum(len(claims(b.text)) for b in python) >= 3  # count(), contains(bad), violated_rules(bad)


# --- console blocks ------------------------------------------------------------------------------


def session(block: str) -> list[tuple[str, list[str]]]:
    """(command, the lines shown under it) for each ``$`` command of a console block."""
    out: list[tuple[str, list[str]]] = []
    lines = block.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        assert line.startswith("$ "), f"a console block starts with a '$ ' command, not {line!r}"
        command = line[2:]
        while command.endswith("\\") and index + 1 < len(lines):
            index += 1
            command = command[:-1].rstrip() + " " + lines[index].strip()
        index += 1
        shown = []
        while index < len(lines) and not lines[index].startswith("$ "):
            shown.append(lines[index].rstrip())
            index += 1
        while shown and not shown[-1]:
            shown.pop()
        out.append((command, shown))
    return out


def shown_pattern(shown: list[str]) -> re.Pattern:
    """What the shown lines match: each line whole, ``...`` any text, a ``...`` line any lines."""
    parts = []
    for line in shown:
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(
                "".join(".*?" if piece == "..." else re.escape(piece) for piece in re.split(r"(\.\.\.)", line))
            )
            parts.append(r"\n")
    return re.compile("".join(parts))


def matches(shown: list[str], output: str) -> bool:
    text = "".join(line.rstrip() + "\n" for line in output.rstrip("\n").splitlines()) if output.strip() else ""
    return shown_pattern(shown).fullmatch(text) is not None


def _environment() -> dict[str, str]:
    """This interpreter's ``ckspace`` and ``python3`` first on PATH; output written as it happens,
    so stdout and stderr interleave in the order the program writes them."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("COLUMNS", None)
    return env


def run_console(block: Block, directory: Path) -> None:
    env = _environment()
    for command, shown in session(block.text):
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=directory,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=COMMAND_TIMEOUT,
        )
        where = f"{block.id}: $ {command}"
        assert done.returncode == 0, f"{where}\nexit {done.returncode}:\n{done.stdout}"
        if shown:
            assert matches(shown, done.stdout), f"{where}\nshown:\n" + "\n".join(shown) + f"\nprinted:\n{done.stdout}"


def _console_blocks() -> list:
    return [
        pytest.param(block, id=block.id, marks=[pytest.mark.slow] if block.slow else [])
        for page in PAGES
        for block in blocks(page)
        if block.kind == "console"
    ]


@pytest.mark.parametrize("block", _console_blocks())
def test_console_block_prints_what_it_shows(block: Block, tmp_path) -> None:
    run_console(block, tmp_path)


def test_the_console_check_fails_on_what_the_page_does_not_show() -> None:
    """The matcher and the runner, shown to fail: a resolver that accepts anything would pass every
    page too."""
    assert matches(["target: ... excluded", "396"], "target: CK x at /a/b; known-wrong kernels excluded\n396\n")
    assert matches(["first", "...", "last"], "first\nsecond\nthird\nlast\n")
    assert matches(["first", "...", "last"], "first\nlast\n")
    assert not matches(["396"], "397\n")
    assert not matches(["396"], "396\nmore\n")
    assert not matches(["a ... b"], "a x\nb\n")  # ... stays inside its line
    assert session("$ echo a \\\n    b\na b\n$ true\n") == [("echo a b", ["a b"]), ("true", [])]
    with pytest.raises(AssertionError, match="shown"):
        run_console(Block(README, 1, "console", "$ echo 397\n396\n", False), ROOT)
    with pytest.raises(AssertionError, match="exit 3"):
        run_console(Block(README, 1, "console", "$ exit 3\n", False), ROOT)


def test_the_python_check_fails_on_a_wrong_claim() -> None:
    block = Block(README, 1, "python", "x = 2\nx + 1  # 4\n", False)
    with pytest.raises(AssertionError, match="x \\+ 1 is 3, not 4"):
        run_python([block])
    assert run_python([Block(README, 1, "python", "x = 2\nx + 1  # 3\n", False)]) == 1


def test_block_parsing_sees_languages_and_the_slow_mark() -> None:
    text = "a\n<!-- slow -->\n```console\n$ true\n```\n```python\nx = 1\n```\n```\nshown\n```\n"
    found = blocks(README, text)
    assert [(b.kind, b.line, b.slow) for b in found] == [("console", 4, True), ("python", 7, False), ("", 10, False)]


def test_every_page_runs_some_block_or_says_why_not() -> None:
    """The pages with examples keep them run: moving a block into a plain fence would silently stop
    its execution, so the pages that have run blocks are listed."""
    ran = {page.relative_to(ROOT).as_posix() for page in PAGES for b in blocks(page) if b.kind in ("python", "console")}
    assert {
        "README.md",
        "docs/space.md",
        "docs/open.md",
        "docs/dispatcher.md",
        "docs/selection.md",
        "docs/verification.md",
    } <= ran


# --- links ---------------------------------------------------------------------------------------


LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but ``-`` and ``_`` dropped, spaces to ``-``."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = page.read_text()
    fenced = {b.line + i for b in blocks(page, text) for i in range(-1, b.text.count("\n"))}
    return {
        slug(line.lstrip("#"))
        for number, line in enumerate(text.splitlines(), 1)
        if line.startswith("#") and number not in fenced
    }


def link_problems(page: Path, text: str) -> list[str]:
    problems = []
    fenced = {b.line + i for b in blocks(page, text) for i in range(-1, b.text.count("\n") + 1)}
    for number, line in enumerate(text.splitlines(), 1):
        if number in fenced:
            continue
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.exists():
                problems.append(f"{page.name}:{number}: {target}: no such file")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                problems.append(f"{page.name}:{number}: {target}: no such heading")
    return problems


def test_every_link_between_pages_resolves() -> None:
    found = sum(len(LINK.findall(page.read_text())) for page in PAGES)
    assert found > 30
    problems = [problem for page in PAGES for problem in link_problems(page, page.read_text())]
    assert not problems, "links to nothing:\n" + "\n".join(problems)


def test_the_link_check_fails_on_links_to_nothing() -> None:
    page = ROOT / "docs" / "space.md"
    missing = "no_such" + ".md"  # built, so that tests/test_doc_references.py does not take it for a citation
    text = f"[a]({missing}) [b](open.md#no-such-heading) [c](open.md) [d](https://example.org/x) [e](#one-target)\n"
    assert link_problems(page, text) == [
        f"space.md:1: {missing}: no such file",
        "space.md:1: open.md#no-such-heading: no such heading",
    ]
    assert slug('What "valid" means') == "what-valid-means"
    assert slug("Rule set `open`: every config") == "rule-set-open-every-config"
