"""User filters: a small expression language over config fields, parsed without ``eval``.

``tile_m * tile_n >= 8192 and pipeline in [compv3, compv4] and not two_stage`` is parsed with
Python's ``ast`` into a tree that is checked node by node against a whitelist, type-checked (integer
fields, boolean fields, enum fields compared with their own values) and translated into the rule
expression language (:mod:`ckspace.constraints.language.expr`). The result is a named :class:`Rule` that
joins the cell's CP-SAT model like any other rule, and that the vectorised classifier evaluates
with the others. Anything outside the whitelist -- attribute access, calls, subscripts, lambdas,
floats, huge numbers, deep nesting -- is rejected with one line that points at the spot.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass

from ckspace.constraints.language.expr import Expr, Field, Not, all_of, any_of, lift
from ckspace.constraints.language.rule import Rule
from ckspace.core.errors import CkspaceError, did_you_mean
from ckspace.core.fields import DEPTHWISE_BOUNDS, DEPTHWISE_KIND, FIELD_KIND, GEMM_BOUNDS
from ckspace.core.vocab import Predicate

MAX_LENGTH = 1000
_NAME_PREFIX = "where["
"""How the name of a user filter's rule begins (``where[TEXT]``); :func:`where_text` reads TEXT back."""
MAX_DEPTH = 40
MAX_ABS = 2**31 - 1
MAX_BOUND = 2**53

_CMP = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_ARITH = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}
_BOOL_WORDS = {"true": 1, "false": 0}


class WhereError(CkspaceError):
    """A filter expression that cannot be accepted; the message points at the offending spot."""


@dataclass(frozen=True)
class _Typed:
    expr: Expr
    kind: object  # "int", "bool", or the enum class of an enum field
    lo: int
    hi: int


def _field_kinds() -> dict[str, object]:
    return {
        name: "bool" if kind is bool else "int" if kind is int else kind
        for name, kind in {**DEPTHWISE_KIND, **FIELD_KIND}.items()
    }


FIELD_KINDS = _field_kinds()
BOUNDS: Mapping[str, tuple[int, int]] = {**DEPTHWISE_BOUNDS, **GEMM_BOUNDS}


class _Translator:
    def __init__(self, text: str) -> None:
        self.text = text

    def fail(self, node: ast.AST | None, message: str) -> WhereError:
        where = f" at column {node.col_offset + 1}" if node is not None and hasattr(node, "col_offset") else ""
        return WhereError(f"filter {_quote(self.text)}: {message}{where}")

    def boolean(self, node: ast.AST, depth: int = 0) -> Expr:
        if depth > MAX_DEPTH:
            raise self.fail(node, f"expression nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, ast.BoolOp):
            parts = [self.boolean(v, depth + 1) for v in node.values]
            return all_of(*parts) if isinstance(node.op, ast.And) else any_of(*parts)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return Not(self.boolean(node.operand, depth + 1))
        if isinstance(node, ast.Compare):
            return self.compare(node, depth + 1)
        typed = self.value(node, depth + 1)
        if typed.kind != "bool":
            raise self.fail(node, "expected a condition (a comparison or a boolean field)")
        return typed.expr.eq(1)

    def compare(self, node: ast.Compare, depth: int) -> Expr:
        parts: list[Expr] = []
        left_node = node.left
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            if isinstance(op, (ast.In, ast.NotIn)):
                parts.append(self.membership(left_node, op, right_node, depth))
            elif type(op) in _CMP:
                parts.append(self.relation(left_node, _CMP[type(op)], right_node, depth))
            else:
                raise self.fail(node, f"operator {type(op).__name__} is not allowed (use ==, !=, <, <=, >, >=, in)")
            left_node = right_node
        return all_of(*parts)

    def relation(self, left_node: ast.AST, op: str, right_node: ast.AST, depth: int) -> Expr:
        left = self.value(left_node, depth, hint=right_node)
        right = self.value(right_node, depth, hint=left_node)
        if isinstance(left.kind, type) or isinstance(right.kind, type):
            if left.kind != right.kind:
                raise self.fail(right_node, "an enum field can only be compared with its own values")
            if op not in ("==", "!="):
                raise self.fail(left_node, f"enum fields support == and !=, not {op}")
        return {
            "==": left.expr.eq,
            "!=": left.expr.ne,
            "<": left.expr.__lt__,
            "<=": left.expr.__le__,
            ">": left.expr.__gt__,
            ">=": left.expr.__ge__,
        }[op](right.expr)

    def membership(self, left_node: ast.AST, op: ast.cmpop, right_node: ast.AST, depth: int) -> Expr:
        if not isinstance(right_node, (ast.List, ast.Tuple, ast.Set)):
            raise self.fail(right_node, "'in' needs a list of values, e.g. [compv3, compv4]")
        left = self.value(left_node, depth)
        values = []
        for element in right_node.elts:
            item = self.literal(element, left.kind)
            values.append(item)
        expr = left.expr.isin(values)
        return Not(expr) if isinstance(op, ast.NotIn) else expr

    def literal(self, node: ast.AST, kind: object) -> int:
        """A constant of the given kind (enum value, boolean or integer)."""
        if isinstance(kind, type):
            word = (
                node.id
                if isinstance(node, ast.Name)
                else node.value
                if (isinstance(node, ast.Constant) and isinstance(node.value, str))
                else None
            )
            if word is None:
                raise self.fail(node, f"expected a {kind.label()} value")
            try:
                return kind.parse(word).code  # type: ignore[attr-defined]
            except CkspaceError:
                values = [m.value for m in kind]  # type: ignore[attr-defined]
                hint = did_you_mean(word, values)
                raise self.fail(node, f"{word!r} is not a {kind.label()}{hint} (valid: {', '.join(values)})") from None
        typed = self.value(node, 0)
        if not isinstance(typed.expr, type(lift(0))):
            raise self.fail(node, "list entries must be constants")
        return typed.expr.value  # type: ignore[attr-defined]

    def value(self, node: ast.AST, depth: int, hint: ast.AST | None = None) -> _Typed:
        if depth > MAX_DEPTH:
            raise self.fail(node, f"expression nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, ast.Name):
            if node.id in FIELD_KINDS:
                lo, hi = BOUNDS[node.id]
                return _Typed(Field(node.id), FIELD_KINDS[node.id], lo, hi)
            if node.id.lower() in _BOOL_WORDS:
                v = _BOOL_WORDS[node.id.lower()]
                return _Typed(lift(v), "bool", v, v)
            enum_kind = self._enum_hint(hint)
            if enum_kind is not None:
                code = self.literal(node, enum_kind)
                return _Typed(lift(code), enum_kind, code, code)
            fields = sorted(FIELD_KINDS)
            hint = did_you_mean(node.id, fields)
            raise self.fail(node, f"unknown field {node.id!r}{hint} (fields: {', '.join(fields)})")
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                return _Typed(lift(int(node.value)), "bool", int(node.value), int(node.value))
            if isinstance(node.value, int):
                if abs(node.value) > MAX_ABS:
                    raise self.fail(node, f"number {node.value} is out of range (|n| <= {MAX_ABS})")
                return _Typed(lift(node.value), "int", node.value, node.value)
            if isinstance(node.value, str):
                enum_kind = self._enum_hint(hint)
                if enum_kind is not None:
                    code = self.literal(node, enum_kind)
                    return _Typed(lift(code), enum_kind, code, code)
                raise self.fail(node, "a text value can only be compared with an enum field")
            raise self.fail(node, f"constant {node.value!r} is not allowed (integers only)")
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = self.numeric(node.operand, depth + 1)
            return _Typed(lift(0) - inner.expr, "int", -inner.hi, -inner.lo)
        if isinstance(node, ast.BinOp):
            if type(node.op) not in _ARITH:
                raise self.fail(node, f"operator {type(node.op).__name__} is not allowed (use + - * // %)")
            left, right = self.numeric(node.left, depth + 1), self.numeric(node.right, depth + 1)
            return self._arith(node, _ARITH[type(node.op)], left, right)
        if isinstance(node, (ast.Compare, ast.BoolOp)) or (
            isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)
        ):
            raise self.fail(node, "a condition cannot be used as a number")
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):  # c.tile_n, as other tools write it
            raise self.fail(
                node,
                f"Attribute is not allowed in a filter: name the field alone ({node.attr!r}, "
                f"not {node.value.id}.{node.attr})",
            )
        raise self.fail(node, f"{type(node).__name__} is not allowed in a filter")

    def numeric(self, node: ast.AST, depth: int) -> _Typed:
        typed = self.value(node, depth)
        if isinstance(typed.kind, type):
            raise self.fail(node, "arithmetic on an enum field is not allowed")
        return typed

    def _arith(self, node: ast.AST, op: str, left: _Typed, right: _Typed) -> _Typed:
        if op in ("//", "%") and right.hi < 1:
            raise self.fail(node, "the divisor must be positive")
        if op == "+":
            lo, hi = left.lo + right.lo, left.hi + right.hi
        elif op == "-":
            lo, hi = left.lo - right.hi, left.hi - right.lo
        elif op == "*":
            corners = [a * b for a in (left.lo, left.hi) for b in (right.lo, right.hi)]
            lo, hi = min(corners), max(corners)
        elif op == "//":
            lo, hi = min(left.lo, 0), max(left.hi, 0)
        else:
            lo, hi = 0, max(0, right.hi - 1)
        if max(abs(lo), abs(hi)) > MAX_BOUND:
            raise self.fail(node, "the expression can exceed 2^53; use smaller numbers")
        expr = {
            "+": left.expr.__add__,
            "-": left.expr.__sub__,
            "*": left.expr.__mul__,
            "//": left.expr.__floordiv__,
            "%": left.expr.__mod__,
        }[op](right.expr)
        return _Typed(expr, "int", lo, hi)

    def _enum_hint(self, hint: ast.AST | None) -> type | None:
        if isinstance(hint, ast.Name) and isinstance(FIELD_KINDS.get(hint.id), type):
            return FIELD_KINDS[hint.id]  # type: ignore[return-value]
        return None


def _quote(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")


def parse_where(text: str) -> Rule:
    """Parse one filter into a named rule (predicate ``where``)."""
    text = str(text)
    if not text.strip():
        raise WhereError("filter '': empty (give an expression over config fields)")
    if len(text) > MAX_LENGTH:
        raise WhereError(f"filter of {len(text)} characters: too long (at most {MAX_LENGTH})")
    translator = _Translator(text)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        column = f" at column {exc.offset}" if exc.offset else ""
        raise WhereError(f"filter {_quote(text)}: syntax error ({exc.msg}){column}") from None
    except (RecursionError, MemoryError, ValueError):
        raise WhereError(f"filter {_quote(text)}: expression too deeply nested or too large") from None
    try:
        expr = translator.boolean(tree.body)
    except RecursionError:
        raise WhereError(f"filter {_quote(text)}: expression too deeply nested") from None
    return Rule(
        name=f"{_NAME_PREFIX}{text.strip()}]",
        predicate=Predicate.WHERE,
        expr=expr,
        text=f"user filter: {text.strip()}",
        source="--where",
    )


def where_text(rule: Rule) -> str:
    """The filter text a rule of :func:`parse_where` was parsed from (stripped), from its name."""
    if not (rule.name.startswith(_NAME_PREFIX) and rule.name.endswith("]")):
        raise ValueError(f"{rule.name} is not a user filter")
    return rule.name[len(_NAME_PREFIX) : -1]


def parse_objective(text: str) -> Expr:
    """An integer expression over fields (e.g. ``tile_m * tile_n - 4 * tile_k``) for optimisation."""
    text = str(text)
    if not text.strip() or len(text) > MAX_LENGTH:
        raise WhereError(f"objective {_quote(text)}: empty or longer than {MAX_LENGTH} characters")
    translator = _Translator(text)
    try:
        tree = ast.parse(text.strip(), mode="eval")
        typed = translator.numeric(tree.body, 0)
    except SyntaxError as exc:
        raise WhereError(f"objective {_quote(text)}: syntax error ({exc.msg})") from None
    except (RecursionError, MemoryError, ValueError):
        raise WhereError(f"objective {_quote(text)}: expression too deeply nested or too large") from None
    return typed.expr
