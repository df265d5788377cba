"""Batch prediction straight through LightGBM's C API.

``Booster.predict`` re-validates its input, converts it and picks a thread count on every call,
which for one problem's few dozen candidate rows costs more than the trees themselves. Selection
calls the same ``LGBM_BoosterPredictForMat`` entry point that ``predict`` ends in, on a
C-contiguous float64 matrix the feature code already produced, with a fixed thread count; the
result is identical (tests compare them).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

_ROW_MAJOR = 1
_FLOAT64 = 1  # C_API_DTYPE_FLOAT64
_PREDICT_NORMAL = 0


class FastPredictor:
    """Raw-score prediction of one booster for C-contiguous float64 matrices."""

    def __init__(self, booster: Any, num_threads: int = 1) -> None:
        from lightgbm.basic import _LIB, _c_str  # the library handle lightgbm itself calls

        self.booster = booster  # keeps the handle alive
        self._lib = _LIB
        self._handle = booster._handle
        self._params = _c_str(f"num_threads={num_threads}")
        self._features = booster.num_feature()

    def __call__(self, matrix: np.ndarray) -> np.ndarray:
        if matrix.dtype != np.float64 or not matrix.flags.c_contiguous or matrix.shape[1] != self._features:
            raise ValueError(f"expected a C-contiguous float64 matrix with {self._features} columns")
        out = np.empty(matrix.shape[0], dtype=np.float64)
        written = ctypes.c_int64(0)
        status = self._lib.LGBM_BoosterPredictForMat(
            self._handle,
            matrix.ctypes.data_as(ctypes.c_void_p),
            ctypes.c_int(_FLOAT64),
            ctypes.c_int32(matrix.shape[0]),
            ctypes.c_int32(matrix.shape[1]),
            ctypes.c_int(_ROW_MAJOR),
            ctypes.c_int(_PREDICT_NORMAL),
            ctypes.c_int(0),
            ctypes.c_int(-1),
            self._params,
            ctypes.byref(written),
            out.ctypes.data_as(ctypes.POINTER(ctypes.c_double)),
        )
        if status != 0 or written.value != matrix.shape[0]:
            raise RuntimeError(self._lib.LGBM_GetLastError().decode())
        return out
