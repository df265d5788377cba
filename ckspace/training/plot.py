"""The evaluation plot: sorted per-problem efficiency of every selector, and the regressor's
out-of-fold predicted vs measured TFLOPS."""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np

from ckspace.core.errors import CkspaceError, InvalidInputError
from ckspace.environment.files import refuse_foreign, write_atomic
from ckspace.training.evaluation import CrossValidation

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
"""The first bytes of every PNG file: what a plot path that exists must hold to be replaced."""


def check_plot_target(path: Path, option: str = "--plot") -> None:
    """Refuse, before any work is done (the cross-validation takes minutes), what the plot could not
    be written to: a path ckspace could not have written the PNG at, because it is not a regular
    file (:func:`refuse_foreign`), its name does not end in ``.png``, or it exists and holds no PNG
    (a CSV given by mistake would be replaced); and a missing matplotlib."""
    path = Path(path)
    refuse_foreign(path, option)
    if path.suffix.lower() != ".png":
        raise InvalidInputError(f"{option} {str(path)!r}: the plot is a PNG; give a path ending in .png")
    if not _holds_no_file_or_a_png(path, option):
        raise InvalidInputError(
            f"{option} {str(path)!r} exists and is not a PNG; ckspace replaces only a plot, give another path"
        )
    _pyplot()


def _holds_no_file_or_a_png(path: Path, option: str) -> bool:
    """True when nothing is at ``path`` or its first bytes are a PNG's (read without following a
    link or blocking; :func:`refuse_foreign` has made sure it is a regular file)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return True
    except OSError as exc:
        raise InvalidInputError(f"{option} {str(path)!r}: {exc.strerror}") from None
    try:
        return os.read(fd, len(PNG_SIGNATURE)) == PNG_SIGNATURE
    finally:
        os.close(fd)


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise CkspaceError("plots need matplotlib: pip install 'ckspace[plot]'") from None
    return plt


def _save(fig, plt, path: Path, option: str) -> None:
    """Render the PNG in memory and write it atomically (never over a device, link or directory)."""
    image = io.BytesIO()
    fig.savefig(image, dpi=110, format="png")
    plt.close(fig)
    write_atomic(Path(path), image.getvalue(), option)


def write_plan_plot(cv: CrossValidation, path: Path, title: str) -> None:
    """Mean efficiency against budget for the plan and each baseline, in two legends: the colour is
    the kernel set, the line (a) the best measured kernel in it (solid, filled circles) or (b) the
    selector's pick in it (dashed, open squares). One legend of eight entries drew (a) and (b) of a
    set alike at its size, and lay over the lines."""
    from matplotlib.lines import Line2D

    plt = _pyplot()
    fig, axis = plt.subplots(figsize=(10, 5.5))
    budgets = [int(b) for b in cv.plans]
    labels = {
        "plan": "plan (predicted)",
        "hindsight": "hindsight (measured)",
        "frequent_winners": "most frequent winners",
        "random": "random",
    }
    series = {
        "plan_oracle": ("(a) best measured kernel in the set", {"linestyle": "-", "marker": "o"}),
        "plan_selector": (
            "(b) the selector's pick in the set",
            {"linestyle": "--", "marker": "s", "markerfacecolor": "none"},
        ),
    }
    for color, name in enumerate(labels):
        for key, (_, style) in series.items():
            means = [r.figures(name)[key].mean for r in cv.plans.values()]
            axis.plot(budgets, means, color=f"C{color}", **style)
    axis.set_xscale("log", base=2)
    axis.set_xticks(budgets, [str(b) for b in budgets])
    axis.set(xlabel="kernels in the plan (budget)", ylabel="mean efficiency vs best measured (%)", title=title)
    axis.grid(alpha=0.3)
    sets = axis.legend(
        [Line2D([], [], color=f"C{i}", linewidth=3) for i in range(len(labels))],
        list(labels.values()),
        title="kernel set",
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        fontsize=9,
    )
    axis.add_artist(sets)
    axis.legend(
        [Line2D([], [], color="black", **style) for _, style in series.values()],
        [label for label, _ in series.values()],
        title="efficiency of",
        loc="upper left",
        bbox_to_anchor=(1.02, 0.55),
        fontsize=9,
        handlelength=4,
    )
    fig.tight_layout()
    _save(fig, plt, path, "--plan-plot")


def write_plot(cv: CrossValidation, path: Path, title: str) -> None:
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5.5))
    labels = {
        "model": f"model ({cv.objective})",
        "analytical": "analytical fallback",
        "single_best_kernel": "single best kernel",
        "random": "random (expected)",
    }
    for key, label in labels.items():
        eff = np.sort(np.asarray(cv.efficiency[key]) * 100.0)[::-1]
        left.plot(np.arange(1, eff.size + 1), eff, label=f"{label}: mean {cv.scores[key].mean:.1f} %")
    left.set(
        xlabel="problems, sorted by efficiency",
        ylabel="efficiency vs oracle (%)",
        title=f"{cv.folds}-fold grouped CV, {cv.problems} problems",
    )
    left.grid(alpha=0.3)
    left.legend(loc="lower left")
    measured, predicted = np.exp(cv.measured_log_tflops), np.exp(cv.predicted_log_tflops)
    right.loglog(measured, predicted, ".", alpha=0.3, markersize=3)
    bounds = [min(measured.min(), predicted.min()), max(measured.max(), predicted.max())]
    right.plot(bounds, bounds, "k--", linewidth=1)
    right.set(
        xlabel="measured TFLOPS",
        ylabel="predicted TFLOPS (regressor, out of fold)",
        title=f"median |error| {cv.tflops_median_error:.1f} %",
    )
    right.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    _save(fig, plt, path, "--plot")
