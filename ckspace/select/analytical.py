"""The analytical fallback: rank kernels by a roofline estimate when no model exists.

The estimate (feature ``log2_roofline_tflops`` of :mod:`ckspace.select.features`) charges each
kernel its padded work — tile quantisation along M, N and K and the channel padding its vector
widths force — at the arch's dense peak scaled by the share of compute units its grid keeps busy
and by its last-wave efficiency, or its tile-level global traffic at full memory bandwidth,
whichever takes longer. It needs only spec-sheet facts, so it is the cold-start answer on an arch
without measurements; cross-validation scores it on the same data as the model.
"""

from __future__ import annotations

ANALYTICAL_FEATURE = "log2_roofline_tflops"
