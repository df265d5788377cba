"""Grouped convolution from its definition, one output element at a time, independent of ckspace.

The test statement of what ``ckspace.verify.reference`` computes: plain Python loops over
every element and every term of its sum, float64 accumulation, and the layouts written out here
(channels innermost, groups beside them): input ``N, spatial..., G, C/G``, weight
``G, K/G, filter..., C/G``, output ``N, out_spatial..., G, K/G``. A problem is a dict of the
``ConvProblem`` fields (``ndim``, ``N``, ``G``, total ``C`` and ``K``, ``Di/Hi/Wi``, ``Z/Y/X``,
``stride_*``, ``pad_*``, ``dil_*``), the missing ones taking their neutral values.

Forward: ``out[n, o, g, k] = sum_{t, c} in[n, o*stride - pad + t*dil, g, c] * w[g, k, t, c]`` over
the input positions inside the image. Backward data is the gradient of that sum in ``in``: every
(o, t) with ``o*stride - pad + t*dil == i``. Backward weight is its gradient in ``w``.
"""

from __future__ import annotations

from itertools import product

import numpy as np

DIMS = ("d", "h", "w")
IMAGE = {"d": "Di", "h": "Hi", "w": "Wi"}
FILTER = {"d": "Z", "h": "Y", "w": "X"}


def dims(p: dict) -> tuple[str, ...]:
    return DIMS[3 - p["ndim"] :]


def get(p: dict, name: str) -> int:
    neutral = 0 if name.startswith("pad") else 1
    return p.get(name, neutral)


def out_size(p: dict, d: str) -> int:
    """Output extent: the positions o with o*stride - pad + (filter-1)*dil inside the padded image."""
    size, filt = get(p, IMAGE[d]), get(p, FILTER[d])
    stride, pad, dil = get(p, f"stride_{d}"), get(p, f"pad_{d}"), get(p, f"dil_{d}")
    count = 0
    while count * stride + (filt - 1) * dil <= size + 2 * pad - 1:
        count += 1
    return count


def shapes(p: dict) -> dict[str, tuple[int, ...]]:
    g, cg, kg = p["G"], p["C"] // p["G"], p["K"] // p["G"]
    image = tuple(get(p, IMAGE[d]) for d in dims(p))
    filt = tuple(get(p, FILTER[d]) for d in dims(p))
    out = tuple(out_size(p, d) for d in dims(p))
    return {"In": (p["N"], *image, g, cg), "Wei": (g, kg, *filt, cg), "Out": (p["N"], *out, g, kg)}


def _terms(p: dict):
    """Every (n, g, k, c, o, t, i) of the forward sum whose input position i is inside the image."""
    s = shapes(p)
    n_, g_, kg, cg = p["N"], p["G"], p["K"] // p["G"], p["C"] // p["G"]
    ds = dims(p)
    out = s["Out"][1:-2]
    filt = s["Wei"][2:-1]
    image = s["In"][1:-2]
    for o in product(*map(range, out)):
        for t in product(*map(range, filt)):
            i = tuple(
                o[j] * get(p, f"stride_{d}") - get(p, f"pad_{d}") + t[j] * get(p, f"dil_{d}") for j, d in enumerate(ds)
            )
            if all(0 <= i[j] < image[j] for j in range(len(ds))):
                for n in range(n_):
                    for g in range(g_):
                        for k in range(kg):
                            for c in range(cg):
                                yield n, g, k, c, o, t, i


def forward(p: dict, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    y = np.zeros(shapes(p)["Out"], dtype=np.float64)
    for n, g, k, c, o, t, i in _terms(p):
        y[(n, *o, g, k)] += float(x[(n, *i, g, c)]) * float(w[(g, k, *t, c)])
    return y


def bwd_data(p: dict, dy: np.ndarray, w: np.ndarray) -> np.ndarray:
    dx = np.zeros(shapes(p)["In"], dtype=np.float64)
    for n, g, k, c, o, t, i in _terms(p):
        dx[(n, *i, g, c)] += float(dy[(n, *o, g, k)]) * float(w[(g, k, *t, c)])
    return dx


def bwd_weight(p: dict, dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    dw = np.zeros(shapes(p)["Wei"], dtype=np.float64)
    for n, g, k, c, o, t, i in _terms(p):
        dw[(g, k, *t, c)] += float(dy[(n, *o, g, k)]) * float(x[(n, *i, g, c)])
    return dw


NAIVE = {"forward": forward, "bwd_data": bwd_data, "bwd_weight": bwd_weight}
"""Per variant: the naive function of its operands a and b (forward: input, weight; bwd_data:
output gradient, weight; bwd_weight: output gradient, input)."""
