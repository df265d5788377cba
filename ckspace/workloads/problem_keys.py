"""The keys a convolution problem is written with: ``--problem`` text and a problems CSV's columns.

Stated apart from :class:`~ckspace.workloads.problem.ConvProblem` (pydantic) so that a command's
``--help`` and a cached listing read them without loading the model: the key vocabulary, the one
reading of a key (any case), and the completeness rule for per-dimension keys.
"""

from __future__ import annotations

DIMS = ("d", "h", "w")
"""The spatial dimensions, outermost first."""
SHORTHANDS = ("stride", "pad", "dil")
"""The keys that give every dimension at once (``stride=2``)."""
SIZE_FIELDS: tuple[str, ...] = (
    *("N", "G", "C", "K", "Di", "Hi", "Wi", "Z", "Y", "X"),
    *(f"{what}_{dim}" for what in SHORTHANDS for dim in DIMS),
)
"""A problem's sizes, strides, pads and dilations in one order: the columns of a problem list."""
PROBLEM_KEYS: tuple[str, ...] = (*SIZE_FIELDS[:10], *SHORTHANDS, *SIZE_FIELDS[10:], "k_batch", "ndim")
"""Every key a problem is written with, in ``--problem`` text and as a problems CSV's columns
(case-insensitive): the sizes, the shorthands ``stride``/``pad``/``dil`` for all dimensions, the
per-dimension ``stride_h``..., ``k_batch`` and ``ndim``."""
_BY_LOWER = {k.lower(): k for k in PROBLEM_KEYS}
BIAS = "bias"
"""A problems CSV's column saying whether the layer adds a bias (0 or 1; no column: none). Not a
problem key: the convolution is the same with or without it (kernels, plans and measurements do not
change), but the graph a framework sends does (PyTorch fuses the bias as a second node), so only
``hipdnn census`` reads it; every other reader of a problems CSV leaves it alone."""
BIAS_VALUES = ("0", "1")


def problem_key(name: str) -> str | None:
    """The key ``name`` spells (``Stride_H`` is ``stride_h``, ``n`` is ``N``), or None: the one
    reading of a key, for ``--problem`` and for every problems CSV's header."""
    return _BY_LOWER.get(name.strip().lower())


def lacking_per_dimension(keys, dims: tuple[str, ...] | str) -> str | None:
    """Why keys that give a stride, pad or dilation for some of the problem's dimensions but not
    all of them (and no shorthand for the rest) are refused, or None. A lone ``stride_h`` of a 2D
    problem would otherwise leave ``stride_w`` at 1: a convolution other than the one meant,
    without a word. ``dims`` are the problem's dimensions (``"hw"`` for 2D)."""
    keys = set(keys)
    for short in SHORTHANDS:
        given = [f"{short}_{d}" for d in dims if f"{short}_{d}" in keys]
        if given and short not in keys and len(given) < len(dims):
            missing = [f"{short}_{d}" for d in dims if f"{short}_{d}" not in keys]
            return (
                f"{', '.join(given)} given without {', '.join(missing)} (a {len(dims)}D problem: give every "
                f"dimension's {short}_*, or {short} for all of them)"
            )
    return None


COLUMNS_HELP = (
    "columns (any case, any order): N, C, K, Wi, X required; G, Hi, Y (2D), Di, Z (3D); stride, pad, dil "
    "for every dimension or stride_d/h/w, pad_d/h/w, dil_d/h/w for each; k_batch; ndim (else 3D when a depth "
    "column is not 1/1/1/0/1); Do, Ho, Wo are checked; a column given twice or in another vocabulary (padding, "
    "Stride_X, groups) is refused; bias (0/1, the layer adds a bias: read by hipdnn census, ignored by the other "
    "readers); other columns are ignored"
)
"""What ``--help`` says of a problems CSV's columns: the rules of :mod:`ckspace.workloads.problem_columns`
in one line, here so that ``--help`` reads it without loading pydantic."""
