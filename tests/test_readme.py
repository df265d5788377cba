"""The README's Python blocks run as written, in order, in one namespace, and every line ending in
a comment that is a Python literal (``space.count()  # 790``) evaluates to that literal: the README
cannot drift from the code."""

from __future__ import annotations

import ast
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", README.read_text(), flags=re.S | re.M)


def _claims(block: str) -> list[tuple[int, str, object]]:
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


def test_readme_python_blocks_run_and_their_claims_hold() -> None:
    blocks = _blocks()
    assert len(blocks) >= 2
    namespace: dict = {}
    checked = 0
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)
        for _number, expression, expected in _claims(block):
            assert eval(expression, namespace) == expected, f"README: {expression} is not {expected!r}"
            checked += 1
    assert checked >= 3  # count(), contains(bad), violated_rules(bad)
