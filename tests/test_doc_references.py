"""Every reference the repository's prose makes leads somewhere: a newcomer who follows one must land
on what it names, whatever has moved since it was written.

Modules move (``hip_runtime/`` became ``build/``, ``run/`` and ``verify/``; ``select/`` gave
``features/``, ``training/`` and ``planning/`` their own packages), and every docstring, comment,
README paragraph or doc page that still names the old place is a map to nowhere. Nothing else
catches that: a stale reference is only text, so it imports, runs and passes every other test. So
this test reads all of that text and checks, with the same resolution a reader would make:

* every dotted ``ckspace.x.y[.z]`` reference (and every ``:mod:``/``:func:``/``:class:``/... role,
  relative ones against the module they are written in) names something that exists: the longest
  prefix that is a module is imported, the rest looked up as attributes;
* every path under ``ckspace/``, ``tests/``, ``docs/``, ``bench/``, ``scripts/``, ``examples/`` or ``.ci/`` (and a
  path written relative to the file that holds it, or to ``ckspace/``) exists;
* the environment variables ``ckspace --help`` and docs/cli.md document are exactly the ones the
  code reads (found in the code's syntax tree, not by a pattern over its text);
* nothing cites what a reader of the repository cannot open: an issue number of a tracker, or a
  document (``*.md``) that is not in the repository.

The text is every docstring, string and comment of the Python files, every line of the other text
files, and the notes of the JSON data files (the rule tables' ``_about`` and ``_source_commits``):
a note is prose a reader follows like any other.

Each check is shown to fail on a deliberately broken input through the same function, so a
resolver that accepts anything cannot pass for one that works.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import importlib.util
import inspect
import io
import json
import re
import textwrap
import tokenize
import types
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from ckspace.emit import hipdnn_plugin

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ckspace"
README = ROOT / "README.md"
CLI_DOC = ROOT / "docs" / "cli.md"
"""The page whose **Environment** item lists every variable ckspace reads."""

SCANNED = ("ckspace", "tests", "bench", "scripts", "docs", "examples")
"""The folders whose text is read, besides README.md and pyproject.toml (its import-linter
contracts name modules too)."""
TEXT_SUFFIXES = {".py", ".md", ".toml", ".txt", ".sh", ".j2", ".c", ".h", ".cpp", ".hpp", ".cfg", ""}
"""The files that are prose or code with prose in it; data (JSON, CSV, xz) is not read, except the
notes of JSON files (:func:`_json_pieces`)."""
NOT_SCANNED = (ROOT / "tests" / "golden", Path(__file__).resolve())
"""Emitted files kept byte for byte as ``emit`` writes them (their text is the templates', which are
read, and editing them by hand would only break the comparison), and this file, whose examples of
broken references are broken on purpose."""
PATH_ROOTS = ("ckspace", "tests", "docs", "bench", "scripts", ".ci", "examples")
"""The top-level folders a path in the text is taken to start from."""


# --- the text ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Piece:
    """A stretch of prose: a docstring, string or comment of a Python file, or a line of another."""

    path: Path
    line: int
    text: str
    module: str | None = None
    """The dotted name of the ckspace module the piece is in (for roles written relative to it)."""
    scope: tuple[str, ...] = ()
    """The classes and functions around the piece, outermost first."""

    def where(self, offset: int = 0) -> str:
        """``file:line`` of the character at ``offset`` in the piece."""
        return f"{self.path.relative_to(ROOT)}:{self.line + self.text.count(chr(10), 0, offset)}"


def _files() -> Iterator[Path]:
    yield README
    yield ROOT / "pyproject.toml"
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*")):
            parts = path.relative_to(ROOT).parts
            if (
                not path.is_file()
                or path.suffix not in {*TEXT_SUFFIXES, ".json"}
                or any(p.startswith(".") or p == "__pycache__" for p in parts)
                or any(path.is_relative_to(skipped) for skipped in NOT_SCANNED)
            ):
                continue
            yield path


def _module_name(path: Path) -> str | None:
    if path.suffix != ".py" or not path.is_relative_to(PACKAGE):
        return None
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _scopes(tree: ast.AST) -> list[tuple[int, int, tuple[str, ...]]]:
    """(first line, last line, enclosing names) of every class and function of a module."""
    out = []

    def visit(node: ast.AST, outer: tuple[str, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            inner = outer
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                inner = (*outer, child.name)
                out.append((child.lineno, child.end_lineno or child.lineno, inner))
            visit(child, inner)

    visit(tree, ())
    return out


def _python_pieces(path: Path, source: str) -> Iterator[Piece]:
    module = _module_name(path)
    scopes = _scopes(ast.parse(source))
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in (tokenize.STRING, tokenize.COMMENT):
            continue
        line = token.start[0]
        around = [names for first, last, names in scopes if first <= line <= last]
        yield Piece(path, line, token.string, module, max(around, key=len, default=()))


JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
"""A JSON string. No other JSON token holds a quote, so reading a document's strings left to right
finds each one whole, never a piece of one."""
JSON_COLON = re.compile(r"\s*:\s*")


def _json_pieces(path: Path, source: str) -> Iterator[Piece]:
    """The notes of a JSON data file: every string (key or value) inside the value of a key that
    starts with ``_`` (``"_about": "..."``, ``"_source_commits": {"file.py": "..."}``), at any depth,
    one piece each at the line it is written on. The data itself (the other keys) is not prose."""
    strings = list(JSON_STRING.finditer(source))
    decoder = json.JSONDecoder()
    read: set[int] = set()
    for token in strings:
        colon = JSON_COLON.match(source, token.end())
        if colon is None or not json.loads(token.group()).startswith("_"):
            continue  # a value, or a key that is not a note's
        _, end = decoder.raw_decode(source, colon.end())
        for inner in strings:
            if colon.end() <= inner.start() < end and inner.start() not in read:
                read.add(inner.start())
                yield Piece(path, source.count("\n", 0, inner.start()) + 1, json.loads(inner.group()))


@cache
def pieces() -> tuple[Piece, ...]:
    """Every piece of prose of the repository's texts."""
    out: list[Piece] = []
    for path in _files():
        source = path.read_text(errors="replace")
        if path.suffix == ".py":
            out.extend(_python_pieces(path, source))
        elif path.suffix == ".json":
            out.extend(_json_pieces(path, source))
        else:
            out.extend(Piece(path, number, line) for number, line in enumerate(source.splitlines(), 1))
    return tuple(out)


# --- dotted references and roles -----------------------------------------------------------------


class Unresolved(LookupError):
    """A reference that names nothing."""


DOTTED = re.compile(r"(?<![\w./-])~?(ckspace(?:\.[A-Za-z_]\w*)+)(?![\w-]|\.[A-Za-z_])")
"""``ckspace.x.y``, not part of a longer word, path or file name (``ckspace.egg-info``)."""
ROLE = re.compile(r":(mod|func|class|meth|data|attr|exc|obj|const):`~?\.?([A-Za-z_][\w.]*?)(?:\(\))?`")
"""A Sphinx role with a plain target (``:func:`~ckspace.environment.files.cache_dir```, ``:func:`bind```)."""


def _instance_attributes(klass: type) -> set[str]:
    """The attributes a class's methods assign on ``self`` (``self.arguments = []``)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
    except (OSError, TypeError):
        return set()
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Store)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    }


def _member(owner: object, name: str) -> object:
    """``getattr``, and for a class also what its instances have and it has not: dataclass and
    pydantic fields, annotations without a default, attributes its methods set on ``self``."""
    try:
        return getattr(owner, name)
    except AttributeError:
        pass
    if isinstance(owner, type):
        for klass in owner.__mro__:
            if (
                name in getattr(klass, "__annotations__", {})
                or name in getattr(klass, "model_fields", {})
                or name in _instance_attributes(klass)
            ):
                return name
    raise Unresolved(f"{getattr(owner, '__name__', owner)!s} has no {name!r}")


def resolve(dotted: str) -> object:
    """What ``dotted`` names: the longest prefix that is a module is imported (a module that exists
    but fails to import is an error, not "unresolved"), and the rest looked up attribute by
    attribute. Raises :class:`Unresolved` when some part names nothing."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            spec = importlib.util.find_spec(".".join(parts[:cut]))
        except (ModuleNotFoundError, ValueError):  # a parent is a module, not a package
            spec = None
        if spec is not None:
            break
    else:
        raise Unresolved(f"no module {parts[0]!r}")
    found: object = importlib.import_module(".".join(parts[:cut]))
    for name in parts[cut:]:
        found = _member(found, name)
    return found


def _fits(role: str, found: object) -> bool:
    """A module for ``:mod:``, something else for every other role."""
    return isinstance(found, types.ModuleType) == (role == "mod")


@cache
def _local_names(path: Path) -> dict[str, str | None]:
    """The names a file outside the package defines (None) or imports (the dotted name imported)."""
    names: dict[str, str | None] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.setdefault(node.name, None)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for leaf in ast.walk(target):
                    if isinstance(leaf, ast.Name):
                        names.setdefault(leaf.id, None)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:  # "import a.b" binds a; "import a.b as c" binds c to a.b
                top = alias.name.partition(".")[0]
                names[alias.asname or top] = alias.name if alias.asname else top
    return names


def resolve_role(role: str, target: str, piece: Piece) -> object:
    """What a role's target names, read as Sphinx would from where it is written: in a ckspace
    module, relative to the enclosing classes, the module and its packages in turn; in a file
    outside the package, among the names it defines or imports and the modules beside it; else
    as an absolute name or a builtin."""
    candidates: list[str] = []
    if piece.module:
        parts = piece.module.split(".")
        candidates += [".".join((piece.module, *piece.scope[:i], target)) for i in range(len(piece.scope), 0, -1)]
        candidates += [".".join((*parts[:i], target)) for i in range(len(parts), 0, -1)]
    elif piece.path.suffix == ".py":
        head, _, rest = target.partition(".")
        local = _local_names(piece.path)
        if head in local:
            if local[head] is not None:
                candidates.append(".".join(filter(None, (local[head], rest))))
            elif not rest or rest.rpartition(".")[2] in local:
                return target
        sibling = piece.path.with_name(f"{head}.py")
        if sibling.is_file() and (not rest or rest.partition(".")[0] in _local_names(sibling)):
            return target
    candidates.append(target)
    misses = []
    for candidate in candidates:
        try:
            found = resolve(candidate)
        except Unresolved as miss:
            misses.append(f"{candidate}: {miss}")
            continue
        if _fits(role, found):
            return found
        misses.append(f"{candidate}: not a {'module' if role == 'mod' else 'name in a module'}")
    head, _, rest = target.partition(".")
    if hasattr(builtins, head) and role != "mod":
        found = getattr(builtins, head)
        try:
            for name in filter(None, rest.split(".")):
                found = _member(found, name)
            return found
        except Unresolved as miss:
            misses.append(f"builtins.{target}: {miss}")
    raise Unresolved("; ".join(misses))


NOT_REFERENCES = {hipdnn_plugin.KNOB, hipdnn_plugin.KNOB_K_BATCH}
"""Dotted names ckspace gives to things outside Python, which name no module or attribute: the
hipDNN plugin's knob ids, dotted as hipDNN's own are (``global.deterministic``)."""


def _dotted_references() -> Iterator[tuple[Piece, int, str]]:
    for piece in pieces():
        for match in DOTTED.finditer(piece.text):
            if match.group(1) not in NOT_REFERENCES:
                yield piece, match.start(), match.group(1)


def _roles() -> Iterator[tuple[Piece, int, str, str]]:
    for piece in pieces():
        for match in ROLE.finditer(piece.text):
            if not match.group(2).startswith("ckspace"):  # absolute ones are dotted references
                yield piece, match.start(), match.group(1), match.group(2).rstrip(".")


@pytest.mark.slow
def test_every_dotted_reference_resolves() -> None:
    references = list(_dotted_references())
    assert len(references) > 300, "the scan finds the package's own references"
    broken = []
    for piece, offset, dotted in references:
        try:
            resolve(dotted)
        except Unresolved as miss:
            broken.append(f"{piece.where(offset)}: {dotted} ({miss})")
        except ImportError as failure:  # the module is there but does not import: say so, go on
            broken.append(f"{piece.where(offset)}: {dotted} (does not import: {failure})")
    assert not broken, "references to nothing:\n" + "\n".join(sorted(set(broken)))


@pytest.mark.slow
def test_every_role_resolves_where_it_is_written() -> None:
    roles = list(_roles())
    assert len(roles) > 200
    broken = []
    for piece, offset, role, target in roles:
        try:
            resolve_role(role, target, piece)
        except Unresolved as miss:
            broken.append(f"{piece.where(offset)}: :{role}:`{target}` ({miss})")
        except ImportError as failure:
            broken.append(f"{piece.where(offset)}: :{role}:`{target}` (does not import: {failure})")
    assert not broken, "roles naming nothing:\n" + "\n".join(sorted(set(broken)))


def test_the_resolvers_fail_on_broken_references() -> None:
    """The resolution above is a real one: it finds what exists and refuses what does not."""
    from ckspace.core.vocab import Dtype

    assert resolve("ckspace.core.vocab.Dtype") is Dtype
    assert resolve("ckspace.core.vocab.Dtype.BF16") is Dtype.BF16
    assert _member(_Example, "seen") and _member(_Example, "kept")  # set on self; an annotation
    for wrong in (
        "ckspace.core.vocab.Dtpye",
        "ckspace.core.no_such_module",
        "ckspace.hip_runtime.builder",
        "ckspace.core.vocab.Dtype.NO_SUCH_MEMBER",
        "ckspacex.core",
    ):
        try:
            resolve(wrong)
        except Unresolved:
            continue
        raise AssertionError(f"{wrong} resolved")
    try:
        _member(_Example, "unseen")
    except Unresolved:
        pass
    else:
        raise AssertionError("_Example.unseen resolved")
    assert [
        dotted
        for *_, dotted in _matches(
            DOTTED, "see ckspace.core.vocab.Dtype. And ~/.cache/ckspace.x, ckspace.egg-info, libckspace.so"
        )
    ] == ["ckspace.core.vocab.Dtype"]
    emit = Piece(PACKAGE / "emit" / "__init__.py", 1, "", "ckspace.emit")
    assert isinstance(resolve_role("mod", "cxx", emit), types.ModuleType)
    expr = Piece(PACKAGE / "constraints" / "expr.py", 1, "", "ckspace.constraints.language.expr", ("Expr",))
    assert callable(resolve_role("func", "bind", expr))
    for role, target, piece in (
        ("mod", "ck_revision", emit),
        ("func", "cxx", emit),
        ("func", "no_such", expr),
        ("mod", "bind", expr),
        ("func", "no_such", Piece(Path(__file__), 1, "")),
        ("func", "nested_loop.no_such", Piece(Path(__file__), 1, "")),
    ):
        try:
            resolve_role(role, target, piece)
        except Unresolved:
            continue
        raise AssertionError(f":{role}:`{target}` resolved in {piece.module or piece.path.name}")
    here = Piece(Path(__file__), 1, "")
    assert resolve_role("func", "nested_loop.enumerate_request", here) and resolve_role("func", "resolve", here)


class _Example:
    """A class whose instances have attributes the class has not."""

    kept: int

    def __init__(self) -> None:
        self.seen = self.unseen_too = 0


def _matches(pattern: re.Pattern, text: str) -> list[tuple[int, str]]:
    return [(match.start(), match.group(1)) for match in pattern.finditer(text)]


# --- paths ---------------------------------------------------------------------------------------


ROOTED_PATH = re.compile(r"(?<![\w./~$-])((?:" + "|".join(map(re.escape, PATH_ROOTS)) + r")/[\w./*<>{}-]*)")
"""A path from one of the repository's top-level folders."""
RELATIVE_PATH = re.compile(
    r"(?<![\w./~$<{-])((?:[a-z_][\w-]*/)+[\w-]+\.(?:py|md|json|toml|j2|c|h|sh|txt)|"
    r"(?:[a-z_][\w-]*/)+)(?![\w/<{-]|\.\w)"
)
"""A relative path to a file (``select/fallbacks.py``, ``fixtures/README.md``) or a folder
(``rulesets/``). It is checked when its first folder exists where the text stands, in ``ckspace/``
or at the top: other relative paths are upstream's (``grouped_conv/...``)."""


def _exists(path: str, base: Path) -> bool:
    """Whether ``path`` exists under ``base``; ``<placeholder>``, ``{field}`` and ``*`` match any
    name, ``...`` any run of folders."""
    path = path.rstrip(".,:;").replace("...", "**")
    pattern = re.sub(r"<[^>/]*>|\{[^}/]*\}", "*", path).rstrip("/") or "."
    if any(c in pattern for c in "*?["):
        return next(base.glob(pattern), None) is not None
    return (base / pattern).exists()


def _relative_bases(piece: Piece, path: str) -> list[Path]:
    first = path.split("/", 1)[0]
    bases = [piece.path.parent, PACKAGE, *[p for p in PACKAGE.iterdir() if p.is_dir()], ROOT]
    return [base for base in bases if (base / first).is_dir()]


def path_problems(piece: Piece) -> Iterator[tuple[int, str]]:
    """(offset, path) of each path in ``piece`` that does not exist."""
    for offset, path in _matches(ROOTED_PATH, piece.text):
        if re.fullmatch(r"ckspace/[a-z]+", path):
            continue  # "a ckspace/upstream name": the package's folders are written ckspace/core/
        if not _exists(path, ROOT):
            yield offset, path
    for offset, path in _matches(RELATIVE_PATH, piece.text):
        if path.split("/", 1)[0] in PATH_ROOTS:
            continue
        bases = _relative_bases(piece, path)
        if bases and not any(_exists(path, base) for base in bases):
            yield offset, path


def test_every_path_exists() -> None:
    found = sum(len(_matches(ROOTED_PATH, piece.text)) for piece in pieces())
    assert found > 200
    missing = [f"{piece.where(offset)}: {path}" for piece in pieces() for offset, path in path_problems(piece)]
    assert not missing, "paths to nothing:\n" + "\n".join(missing)


def test_the_path_check_fails_on_missing_paths() -> None:
    readme = Piece(README, 1, "")

    def problems(text: str, piece: Piece = readme) -> list[str]:
        return [path for _, path in path_problems(Piece(piece.path, 1, text, piece.module))]

    assert (
        problems(
            "`ckspace/core/vocab.py`, tests/test_doc_references.py. docs/rules.md, `bench/`, "
            "ckspace/data/tables/*.json, `ckspace/models/<arch>/{cell}/`, .ci/run, ~/.cache/ckspace, "
            "a ckspace/upstream name, :file:`templates/ckspace_dispatch.h.j2`, x/y.py"
        )
        == []
    )
    assert problems("`ckspace/hip_runtime/builder.py`, tests/no_such.py, `ckspace/data/tables/*.yaml`") == [
        "ckspace/hip_runtime/builder.py",
        "tests/no_such.py",
        "ckspace/data/tables/*.yaml",
    ]
    in_constraints = Piece(PACKAGE / "constraints" / "expr.py", 1, "", "ckspace.constraints.language.expr")
    assert problems("`rulesets/base.py`, `select/fallbacks.py`, grouped_conv/rules.py", in_constraints) == []
    assert problems("`select/formula.py`, `generate/full.py`", in_constraints) == [
        "select/formula.py",
        "generate/full.py",
    ]


# --- environment variables -----------------------------------------------------------------------


ENV_METHODS = {"get", "pop"}
"""``os.environ.get(X)``/``pop(X)`` read X. ``setdefault`` is left out: ckspace uses it to set
variables for a library it loads (OpenMP's), which are that library's settings, not ckspace's."""


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "environ") or (
        isinstance(node, ast.Attribute) and node.attr == "environ"
    )


def _assigned(name: str, tree: ast.AST) -> list[ast.expr]:
    return [
        assign.value
        for assign in ast.walk(tree)
        if isinstance(assign, ast.Assign)
        for target in assign.targets
        if isinstance(target, ast.Name) and target.id == name
    ]


def _keys(node: ast.AST, tree: ast.AST) -> list[ast.expr] | None:
    """The keys of a dict literal or the items of a list, tuple or set literal, directly or
    through a name bound once to one."""
    if isinstance(node, ast.Name) and len(_assigned(node.id, tree)) == 1:
        node = _assigned(node.id, tree)[0]
    if isinstance(node, ast.Dict):
        return None if None in node.keys else list(node.keys)  # type: ignore[arg-type]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return list(node.elts)
    return None


def _loop_values(name: str, tree: ast.AST) -> list[ast.expr] | None:
    """What a loop variable takes: ``for name in X``, ``X.keys()`` or ``for name, _ in X.items()``
    over a literal; None when ``name`` is bound by any other loop."""
    values: list[ast.expr] = []
    for loop in ast.walk(tree):
        if not isinstance(loop, (ast.For, ast.comprehension)):
            continue
        target, source = loop.target, loop.iter
        method = source.func.attr if isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute) else None
        if method in ("keys", "items"):
            source = source.func.value  # type: ignore[union-attr]
        if isinstance(target, ast.Tuple) and method == "items" and target.elts:
            target = target.elts[0]
        elif method == "items":
            continue
        if not (isinstance(target, ast.Name) and target.id == name):
            continue
        keys = _keys(source, tree)
        if keys is None:
            return None
        values += keys
    return values


def _strings(node: ast.AST, tree: ast.AST) -> set[str] | None:
    """The strings an expression can be: a literal, either branch of ``a if c else b``, or a name
    whose every assignment or loop over a literal in ``tree`` gives such; None when it cannot be
    told."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.IfExp):
        body, orelse = _strings(node.body, tree), _strings(node.orelse, tree)
        return None if body is None or orelse is None else body | orelse
    if isinstance(node, ast.Name):
        loops = _loop_values(node.id, tree)
        if loops is None:
            return None
        found = [_strings(value, tree) for value in [*_assigned(node.id, tree), *loops]]
        if found and all(s is not None for s in found):
            return set().union(*found)
    return None


def environment_reads(source: str) -> tuple[set[str], list[int]]:
    """The environment variables a module reads (``os.environ.get``/``pop``/``[...]``,
    ``os.getenv``, ``environ.get``), and the lines of reads whose variable cannot be told."""
    tree = ast.parse(source)
    names: set[str] = set()
    unknown: list[int] = []
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            environ_method = isinstance(func, ast.Attribute) and func.attr in ENV_METHODS and _is_environ(func.value)
            getenv = (isinstance(func, ast.Attribute) and func.attr == "getenv") or (
                isinstance(func, ast.Name) and func.id == "getenv"
            )
            if environ_method or getenv:
                key = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value):
            key = node.slice
        if key is None:
            continue
        found = _strings(key, tree)
        if found is None:
            unknown.append(node.lineno)
        else:
            names |= found
    return names, unknown


def read_by_the_code() -> set[str]:
    names: set[str] = set()
    unknown = []
    for path in sorted(PACKAGE.rglob("*.py")):
        found, lines = environment_reads(path.read_text())
        names |= found
        unknown += [f"{path.relative_to(ROOT)}:{line}" for line in lines]
    assert not unknown, f"environment reads whose variable this test cannot tell: {unknown}"
    return names


def documented_by_help() -> set[str]:
    """The keys of the package's one module-level ``ENVIRONMENT`` table (what ``ckspace --help``
    and ``ckspace info`` list), found wherever it lives."""
    owners = [
        path
        for path in sorted(PACKAGE.rglob("*.py"))
        if any(
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "ENVIRONMENT" for t in node.targets)
            for node in ast.parse(path.read_text()).body
        )
    ]
    assert len(owners) == 1, f"one ENVIRONMENT table, not {owners}"
    module = _module_name(owners[0])
    assert module is not None
    return set(resolve(f"{module}.ENVIRONMENT"))


ENV_NAME = re.compile(r"`\$?([A-Z][A-Z0-9_]*)")


def documented_by_readme(text: str) -> set[str]:
    """The variables docs/cli.md's **Environment** item names in backticks (`X` or `$X...`)."""
    item = re.search(r"^\* \*\*Environment\*\*:(.*?)(?=^\S|^\* |\Z)", text, flags=re.MULTILINE | re.DOTALL)
    assert item, "docs/cli.md has an **Environment** item"
    return set(ENV_NAME.findall(item.group(1)))


@pytest.mark.slow
def test_documented_environment_is_what_the_code_reads() -> None:
    read = read_by_the_code()
    assert {"CKSPACE_CACHE_DIR", "CK_ROOT", "CC"} <= read
    help_ = documented_by_help()
    documented = documented_by_readme(CLI_DOC.read_text())
    assert help_ == read, f"--help lists {sorted(help_ - read)} that nothing reads; misses {sorted(read - help_)}"
    assert documented == read, (
        f"docs/cli.md lists {sorted(documented - read)} that nothing reads; misses {sorted(read - documented)}"
    )


def test_the_environment_scan_sees_each_form_of_read() -> None:
    source = """
import os
from os import environ, getenv
NAME = "E_CONSTANT"
def f(flag):
    os.environ.get("E_GET"); os.environ["E_INDEX"]; os.getenv("E_GETENV"); environ.get(NAME)
    getenv("E_BARE", "x"); os.environ.pop("E_POP", None)
    variable = "E_LEFT" if flag else "E_RIGHT"
    os.environ.get(variable)
    os.environ["E_SET"] = "1"; os.environ.setdefault("E_DEFAULT", "1")
    os.environ.get(flag)
    for name, _ in TABLE.items():
        os.environ[name]
    for other in flag:
        os.environ.get(other)
TABLE = {"E_LOOP": 1}
"""
    names, unknown = environment_reads(source)
    assert names == {"E_CONSTANT", "E_GET", "E_INDEX", "E_GETENV", "E_BARE", "E_POP", "E_LEFT", "E_RIGHT", "E_LOOP"}
    assert unknown == [11, 15]
    readme = "x\n* **Environment**: `A_B` (default `$XDG_X/ckspace`), `CC`.\n  more `D_E`.\n* **Next**: `F_G`\n"
    assert documented_by_readme(readme) == {"A_B", "XDG_X", "CC", "D_E"}


# --- citations -----------------------------------------------------------------------------------


ISSUE = re.compile(r"\b(?:issues?|tickets?|bugs?)\s+#?\d+", re.IGNORECASE)
"""A tracker's issue number: the tracker is not part of the repository, and the reader has no way
to it. Upstream pull requests named with their repository (``ROCm/rocm-libraries PR #12173``) are
public provenance and not matched."""
DOCUMENT = re.compile(r"(?<![\w/.-])([\w./-]*[\w-]\.md)\b")


@cache
def _documents() -> frozenset[str]:
    return frozenset(
        path.name for folder in ("", *SCANNED) for path in (ROOT / folder).glob("*.md" if not folder else "**/*.md")
    )


def citation_problems(piece: Piece) -> Iterator[tuple[int, str]]:
    """(offset, text) of each issue number and each ``*.md`` that is not in the repository."""
    for match in ISSUE.finditer(piece.text):
        yield match.start(), match.group(0)
    for offset, document in _matches(DOCUMENT, piece.text):
        here = [ROOT, piece.path.parent]
        if not any((base / document).is_file() for base in here) and (
            "/" in document or document.rpartition("/")[2] not in _documents()
        ):
            yield offset, document


def test_nothing_cites_what_is_not_in_the_repository() -> None:
    cited = [f"{piece.where(offset)}: {text}" for piece in pieces() for offset, text in citation_problems(piece)]
    assert not cited, "citations of what the repository does not hold:\n" + "\n".join(cited)


def test_the_citation_check_fails_on_outside_citations() -> None:
    def problems(text: str) -> list[str]:
        return [found for _, found in citation_problems(Piece(ROOT / "tests" / "x.py", 1, text))]

    assert problems("see docs/rules.md, README.md, fixtures/README.md and quirk 14.1; upstream PR #12173") == []
    assert problems("Each example of issue 13; RULES.md section 14; spec/RULES.md; Issue #25") == [
        "issue 13",
        "Issue #25",
        "RULES.md",
        "spec/RULES.md",
    ]


def test_the_json_notes_are_read() -> None:
    """The rule tables' notes are scanned, each at its line; an outside citation or a broken
    reference in a note, at any depth, fails the checks above; the data beside a note is not read."""
    read = {(piece.path, piece.text): piece.line for piece in pieces()}
    tables = sorted((PACKAGE / "data" / "tables").glob("*.json"))
    assert len(tables) >= 9
    for path in tables:
        data = json.loads(path.read_text())
        assert read.get((path, data["_about"])) == 2, f"{path.name}'s _about is not scanned at its line"
        commits = data.get("_source_commits", {})
        assert all((path, text) in read for pair in commits.items() for text in pair), path.name
    source = textwrap.dedent(
        r"""
        {
          "_about": "Tables (RULES_SPEC.md section 8, T3; see ckspace.core.vocab.Dtype)",
          "_source_commits": {"grouped_conv/x.py": "docs/no_such.md"},
          "rows": [{"_note": ["a \"ckspace.core.no_such\" b", 1]}, {"_": null}],
          "data": "RULES_SPEC.md ckspace.no_such docs/no_such.md"
        }
        """
    ).lstrip()
    notes = list(_json_pieces(PACKAGE / "data" / "tables" / "x.json", source))
    assert [(piece.line, piece.text) for piece in notes] == [
        (2, "Tables (RULES_SPEC.md section 8, T3; see ckspace.core.vocab.Dtype)"),
        (3, "grouped_conv/x.py"),
        (3, "docs/no_such.md"),
        (4, 'a "ckspace.core.no_such" b'),
    ]
    assert [(piece.where(offset), text) for piece in notes for offset, text in citation_problems(piece)] == [
        ("ckspace/data/tables/x.json:2", "RULES_SPEC.md"),
        ("ckspace/data/tables/x.json:3", "docs/no_such.md"),
    ]
    assert [path for piece in notes for _, path in path_problems(piece)] == ["docs/no_such.md"]
    unresolved = []
    for piece in notes:
        for _, dotted in _matches(DOTTED, piece.text):
            try:
                resolve(dotted)
            except Unresolved:
                unresolved.append(dotted)
    assert unresolved == ["ckspace.core.no_such"]
