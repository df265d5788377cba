"""Train a cell's model on all the data, with its cross-validation figures in the card."""

from __future__ import annotations

import logging
import platform
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path

from ckspace.features.matrix import FEATURE_VERSION
from ckspace.select.store import ModelCard, check_model_target, save_model
from ckspace.select.support import ModelDomain, training_domain
from ckspace.training.boosters import design, fit, thread_count
from ckspace.training.dataset import Measurements
from ckspace.training.evaluation import CrossValidation, choose_folds, cross_validate, cross_validation_steps

log = logging.getLogger(__name__)

_LIBRARIES = ("ckspace", "lightgbm", "numpy", "pydantic")


def library_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in _LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


FINAL_FITS = 2
"""Fits after cross-validation: the log-TFLOPS regressor, and the ranker unless regression won (then
the regressor is the ranker and one fit is made)."""


def training_steps(folds: int) -> int:
    """The most fits :func:`train_model` makes (``progress`` calls): cross-validation's, then the final ones."""
    return cross_validation_steps(folds) + FINAL_FITS


def train_model(
    data: Measurements,
    out: Path,
    folds: int | None = None,
    seed: int = 0,
    command: str = "",
    force: bool = False,
    num_threads: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[ModelCard, CrossValidation]:
    """Cross-validate both objectives on one cell's measurements (``folds``: see
    :func:`~ckspace.training.evaluation.choose_folds`), then fit the winner (the ranker) and the
    log-TFLOPS regressor (the TFLOPS shown beside picks) on every problem and write the model
    directory (``force``: into a directory holding other files; checked first, so a refusal costs
    nothing). ``num_threads``: LightGBM's threads (default
    :func:`~ckspace.training.boosters.default_threads`; the model is the same for any count).
    ``progress`` is called once per fitted booster (at most :func:`training_steps`)."""
    check_model_target(out, force)
    threads = thread_count(num_threads)
    folds = choose_folds(data, folds)
    cv = cross_validate(data, folds, seed, num_threads=threads, progress=progress)
    log.info("cross-validation: %s wins (mean %.2f %%)", cv.objective, cv.scores["model"].mean)
    rows = design(data)
    regressor = fit(rows, "regression", seed, num_threads=threads)
    if progress is not None:
        progress("final regression")
    ranker = regressor
    if cv.objective != "regression":
        ranker = fit(rows, cv.objective, seed, num_threads=threads)
        if progress is not None:
            progress(f"final {cv.objective}")
    domain = training_domain(data.configs, data.problems, ranker, rows.features, rows.log_tflops, rows.problem)
    cross_validation = {
        "folds": folds,
        "seed": seed,
        "tflops_median_error_percent": cv.tflops_median_error,
        **{name: s.model_dump() for name, s in cv.scores.items()},
    }
    card = model_card(data, data.kernel_names, cv.objective, _choice_text(cv), cross_validation, command, domain)
    return save_model(out, ranker, regressor, card, force), cv


def model_card(
    record: Measurements,
    kernels: Sequence[str],
    objective: str,
    objective_choice: str,
    cross_validation: dict,
    command: str,
    domain: ModelDomain,
) -> ModelCard:
    """The card of a model trained on ``record`` (its cell, files, rows and cleaning) over
    ``kernels``: what ``train`` and the learning loop both write beside their trees, so that every
    model directory says the same things of itself."""
    return ModelCard(
        arch=record.arch,
        variant=record.variant.value,
        dtype=record.dtype.value,
        objective=objective,
        objective_choice=objective_choice,
        feature_version=FEATURE_VERSION,
        data={Path(p).name: digest for p, digest in record.report.files.items()},
        rows=record.report.rows_kept,
        rows_by_status=record.report.statuses,
        problems=record.report.problems,
        distinct_shapes=record.report.groups,
        cleaning=record.report.text(),
        kernels=list(kernels),
        cross_validation=cross_validation,
        training_command=command,
        library_versions=library_versions(),
        files={},
        domain=domain,
    )


def _choice_text(cv: CrossValidation) -> str:
    s = cv.scores
    other = "regression" if cv.objective == "lambdarank" else "lambdarank"
    return (
        f"{cv.objective} ranks (mean {s[cv.objective].mean:.2f} %, P10 {s[cv.objective].p10:.2f} %, "
        f"top-5 {s[cv.objective].top5:.1f} %) better than {other} (mean {s[other].mean:.2f} %, "
        f"P10 {s[other].p10:.2f} %, top-5 {s[other].top5:.1f} %) in {cv.folds}-fold grouped CV; "
        "the log-TFLOPS regressor supplies the predicted TFLOPS"
    )
