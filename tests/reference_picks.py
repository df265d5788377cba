"""A selector's pick stated by hand, for the tests of the figures computed from picks: among a
problem's measured kernels (TFLOPS not NaN), the best-scored one, the first of tied scores."""

from __future__ import annotations

import math

import numpy as np


def picks_by_hand(scores: np.ndarray, tflops: np.ndarray) -> list[int]:
    out = []
    for p in range(len(tflops)):
        best, best_score = None, -math.inf
        for k in range(tflops.shape[1]):
            if not math.isnan(tflops[p, k]) and scores[p, k] > best_score:
                best, best_score = k, scores[p, k]
        out.append(best)
    return out
