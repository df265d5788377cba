"""A trained model's support: what it was trained on, and how a kernel outside it is estimated.

A model learns from the kernels it was measured on. Asked about a kernel unlike all of them -- a
pipeline, scheduler, epilogue, specialisation, vector width or warp tile it never saw, tile sizes
beyond the ones it saw -- its trees answer with whatever leaf the kernel falls into, often the
same number as for a measured sibling (the shipped model gives a kernel's vec1 and vec8 variants
one prediction). So the card records the training *domain* (:class:`ModelDomain`), and a kernel
outside it is *extrapolated*:

* its **sibling** is the kernel with each field outside the domain moved to the nearest value the
  model saw (a number: the nearest seen value, the larger on a tie; a choice: the value most of the
  training kernels have; sizes clamped into the seen range);
* its estimate is the model's estimate for the sibling, moved by the analytical model's ratio of
  the two (:mod:`ckspace.features.performance`): ``score(sibling) + k * (A(kernel) - A(sibling))`` with
  ``A`` the analytical log2 TFLOPS and ``k`` the model's score units per doubling of TFLOPS
  (:attr:`ModelDomain.score_per_log2_tflops`, measured on the training data), and the TFLOPS
  ``tflops(sibling) * 2 ** (A(kernel) - A(sibling))``.

The model ranks what it has seen; physics adjusts what it has not. A narrower-vector variant of a
seen kernel has that kernel as its sibling, and the analytical model charges narrow vectors more
load instructions, so it is never estimated faster. Every ranked row says which it is (``model``,
``model, extrapolated: <reason>``, ``analytical``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from enum import Enum

import numpy as np
from pydantic import BaseModel, ConfigDict

from ckspace.core.config import GemmConfig
from ckspace.core.fields import GEMM_FIELD_NAMES

NUMERIC_FIELDS: tuple[str, ...] = ("tile_m", "tile_n", "tile_k", "wave_m", "wave_n", "wave_k")
"""Config fields whose seen range is the domain (a size between two seen sizes is in it)."""
NOT_THE_KERNEL: tuple[str, ...] = ("tagged", "layout")
"""Fields that do not change the kernel's code (the rule set's dtype tag; the layout string of the
name), so not its domain."""
CATEGORICAL_FIELDS: tuple[str, ...] = (
    "ndim",
    *(f for f in GEMM_FIELD_NAMES if f not in NUMERIC_FIELDS and f not in NOT_THE_KERNEL),
)
"""Config fields whose seen values are the domain: pipeline, scheduler, epilogue, specialisation,
vector widths, warp tiles, flags, ..."""
PROBLEM_QUANTITIES: tuple[str, ...] = ("N", "G", "Cg", "Kg", "input_volume", "filter_volume", "output_volume")
"""Problem sizes whose seen range the card records (a problem beyond them is reported, not adjusted:
every candidate shares it)."""

Value = str | int | bool


def _plain(value: object) -> Value:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, bool):
        return value
    return int(value)  # type: ignore[arg-type]


class ModelDomain(BaseModel):
    """What a model was trained on: per categorical config field its values, per numeric field and
    problem size its range, and its score scale."""

    model_config = ConfigDict(frozen=True)

    categorical: dict[str, list[Value]]
    numeric: dict[str, tuple[int, int]]
    problems: dict[str, tuple[int, int]]
    score_per_log2_tflops: float
    """The ranker's score units per doubling of measured TFLOPS within a problem (median over the
    training problems of the least-squares slope): what turns the analytical model's ratio into a
    score difference."""
    common: dict[str, Value] = {}
    """Per categorical field, the value most training kernels have (the sibling's choice for a
    value the model never saw, when the field is not a number)."""

    @classmethod
    def of(cls, configs: Sequence[GemmConfig], problems: Sequence, score_per_log2_tflops: float) -> ModelDomain:
        categorical: dict[str, list[Value]] = {}
        common: dict[str, Value] = {}
        for name in CATEGORICAL_FIELDS:
            counts = Counter(_plain(getattr(c, name)) for c in configs)
            categorical[name] = sorted(counts, key=lambda v: (str(type(v)), v))
            common[name] = max(counts, key=lambda v: (counts[v], str(v)))
        numeric = {
            name: (min(getattr(c, name) for c in configs), max(getattr(c, name) for c in configs))
            for name in NUMERIC_FIELDS
        }
        sizes = {
            name: (min(getattr(p, name) for p in problems), max(getattr(p, name) for p in problems))
            for name in PROBLEM_QUANTITIES
        }
        return cls(
            categorical=categorical,
            numeric=numeric,
            problems=sizes,
            score_per_log2_tflops=score_per_log2_tflops,
            common=common,
        )

    def outside(self, config: GemmConfig) -> str | None:
        """Why ``config`` is outside the domain (every field that is, with what was seen), or None."""
        reasons = []
        for name in CATEGORICAL_FIELDS:
            value = _plain(getattr(config, name))
            if value not in self.categorical[name]:
                seen = "/".join(str(v) for v in self.categorical[name])
                reasons.append(f"{name} {value} unseen (trained on {seen})")
        for name in NUMERIC_FIELDS:
            low, high = self.numeric[name]
            value = getattr(config, name)
            if not low <= value <= high:
                reasons.append(f"{name} {value} outside the trained {low}..{high}")
        return "; ".join(reasons) or None

    def sibling(self, config: GemmConfig) -> GemmConfig:
        """The nearest config the model saw the like of (equal to ``config`` when it is inside)."""
        changes: dict[str, object] = {}
        for name in CATEGORICAL_FIELDS:
            value = getattr(config, name)
            seen = self.categorical[name]
            if _plain(value) in seen:
                continue
            if isinstance(value, (bool, Enum)):
                chosen: Value = self.common[name]
            else:
                chosen = min(seen, key=lambda v: (abs(math.log2(float(v)) - math.log2(float(value))), -float(v)))
            changes[name] = type(value)(chosen) if isinstance(value, Enum) else chosen
        for name in NUMERIC_FIELDS:  # clamped into the seen range (a size inside it stays)
            low, high = self.numeric[name]
            changes[name] = min(max(getattr(config, name), low), high)
        return config.model_copy(update=changes)

    def problem_outside(self, problem: object) -> str | None:
        """Why a problem (its :data:`PROBLEM_QUANTITIES`, read as :meth:`of` reads them) is beyond
        the trained sizes, or None."""
        sizes = {name: getattr(problem, name) for name in self.problems}
        reasons = [
            f"{name} {sizes[name]} outside the trained {low}..{high}"
            for name, (low, high) in self.problems.items()
            if not low <= sizes[name] <= high
        ]
        return "; ".join(reasons) or None


def source_text(model: bool, reason: str | None) -> str:
    """Where an estimate comes from, in the words every output uses: ``analytical`` (no model),
    ``model`` (inside its domain) or ``model, extrapolated: <reason>``."""
    if not model:
        return "analytical"
    return "model" if reason is None else f"model, extrapolated: {reason}"


MIN_SCALE = 1e-3
"""The scale of a model whose scores do not rise with TFLOPS (or that nothing measures)."""


def score_scale(scores: np.ndarray, log2_tflops: np.ndarray, groups: np.ndarray) -> float:
    """The median over problems (rows sharing ``groups``, three kernels or more) of the
    least-squares slope of ``scores`` against measured ``log2_tflops``; a model whose scores do
    not rise with TFLOPS gets the smallest positive scale, so the analytical ratio still orders
    a kernel's variants."""
    slopes = []
    for g in np.unique(groups):
        rows = groups == g
        x, y = log2_tflops[rows], scores[rows]
        if rows.sum() < 3 or np.ptp(x) == 0:
            continue
        x = x - x.mean()  # centred, so the scores need not be
        slopes.append(float((x * y).sum() / (x * x).sum()))
    return max(float(np.median(slopes)), MIN_SCALE) if slopes else MIN_SCALE


def training_domain(
    configs: Sequence[GemmConfig],
    problems: Sequence,
    ranker: object,
    features: np.ndarray,
    log_tflops: np.ndarray,
    groups: np.ndarray,
) -> ModelDomain:
    """The domain of a model fit on ``features`` rows (their natural-log measured TFLOPS and
    problem of each row), with the ranker's score scale measured on them."""
    scores = np.asarray(ranker.predict(features, num_threads=1))  # type: ignore[attr-defined]
    return ModelDomain.of(configs, problems, score_scale(scores, log_tflops / math.log(2), groups))
