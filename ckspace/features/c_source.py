"""The selector's features rendered to C from their formulas (:mod:`ckspace.features.formula`).

:func:`features_c` writes one C function,

    void <name>(const double* p, const double* cfg, const double* block, long n, double* out)

that fills ``out`` (``n`` rows of :data:`~ckspace.features.matrix.FEATURE_NAMES`, row-major) from the
problem values ``p`` (:data:`~ckspace.features.matrix.PROBLEM_VALUES` order), the config columns the
formulas read (``cfg``, ``n`` rows of :data:`~ckspace.features.matrix.FORMULA_COLUMNS`) and the config
block (``block``, ``n`` rows of :data:`~ckspace.features.matrix.CONFIG_FEATURES`). Problem-only nodes are computed once
before the loop over candidates. Every node is one parenthesised double operation in the formula's
order, and the unit must be compiled without contraction or reassociation (no ``-ffast-math``;
``-ffp-contract=off``), so C and Python compute the same doubles.
"""

from __future__ import annotations

from collections.abc import Sequence

from ckspace.features.formula import Formula, Num, Op, Var, reads_config, topological
from ckspace.features.matrix import CONFIG_FEATURES, FEATURE_NAMES, FORMULA_COLUMNS, PROBLEM_FEATURES, PROBLEM_VALUES

_INFIX = {"+", "-", "*", "/"}
_CALL = {"min": "fmin", "max": "fmax", "log2": "log2", "ceil": "ceil", "floor": "floor"}


def c_double(value: float) -> str:
    """A double literal that reads back exactly (Python's shortest round-trip repr)."""
    text = repr(float(value))
    if text in ("inf", "-inf", "nan"):
        raise ValueError(f"no C literal for {text}")
    return text if any(c in text for c in ".e") else text + ".0"


def features_c(name: str, formulas: Sequence[Formula]) -> str:
    """The C function ``name`` computing the features whose problem and interaction blocks are
    ``formulas`` (in :func:`~ckspace.features.matrix.feature_formulas` order)."""
    n_problem = len(PROBLEM_FEATURES)
    n_config = len(CONFIG_FEATURES)
    if len(formulas) != len(FEATURE_NAMES) - n_config:
        raise ValueError(f"expected {len(FEATURE_NAMES) - n_config} formulas, got {len(formulas)}")
    columns = FORMULA_COLUMNS
    nodes = topological(formulas)
    memo: dict[Formula, bool] = {}
    names: dict[Formula, str] = {}
    scalar_lines, column_lines = [], []
    for i, node in enumerate(nodes):
        if isinstance(node, Num):
            names[node] = c_double(node.value)
            continue
        if isinstance(node, Var):
            if node.source == "problem":
                names[node] = f"p[{PROBLEM_VALUES.index(node.name)}]"
            else:
                names[node] = f"c[{columns.index(node.name)}]"
            continue
        assert isinstance(node, Op)
        args = [names[a] for a in node.args]
        text = f"({args[0]} {node.op} {args[1]})" if node.op in _INFIX else f"{_CALL[node.op]}({', '.join(args)})"
        var = f"t{i}"
        names[node] = var
        (column_lines if reads_config(node, memo) else scalar_lines).append(f"const double {var} = {text};")
    width = len(FEATURE_NAMES)
    stores = [f"o[{j}] = {names[f]};" for j, f in enumerate(formulas[:n_problem])]
    stores += [f"o[{n_problem + j}] = b[{j}];" for j in range(n_config)]
    stores += [f"o[{n_problem + n_config + j}] = {names[f]};" for j, f in enumerate(formulas[n_problem:])]
    indent = "\n  "
    inner = "\n    "
    return f"""/* Features of one problem with n candidate kernels ({width} per row; see ckspace.features.matrix).
   config columns in cfg: {", ".join(columns)} */
static void {name}(const double* p, const double* cfg, const double* block, long n, double* out) {{
  {indent.join(scalar_lines)}
  for (long i = 0; i < n; ++i) {{
    const double* c = cfg + i * {len(columns)};
    const double* b = block + i * {n_config};
    double* o = out + i * {width};
    {inner.join(column_lines)}
    {inner.join(stores)}
  }}
}}
"""
