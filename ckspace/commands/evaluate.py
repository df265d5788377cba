"""``ckspace evaluate``: grouped K-fold cross-validation of the selector, its baselines and the
analytical fallback on measurement CSVs, for every cell they hold (``--arch/--variant/--dtype``
pick among them, as for ``train``). Text: one block per cell, headed by the cell. JSON: one object
per line and cell, each naming its ``arch``, ``variant`` and ``dtype`` (one cell: one line, as
before). A plot shows one cell, so ``--plot``/``--plan-plot`` with several cells is an error.
``--threads`` and the progress bar on a terminal are ``train``'s (:mod:`ckspace.commands.train`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from ckspace.commands.common import add_format_argument, write_report
from ckspace.commands.train import add_data_arguments, check_data_arguments, fit_progress
from ckspace.core.errors import CkspaceError, InvalidInputError

NAME = "evaluate"
HELP = "cross-validate kernel selection (model, baselines, analytical fallback) on measurement CSVs"
FORMATS = ("text", "json")


def configure(parser: argparse.ArgumentParser) -> None:
    add_data_arguments(parser)
    add_format_argument(parser, FORMATS)
    parser.add_argument(
        "--plot",
        metavar="FILE.png",
        help="write sorted per-problem efficiency and predicted-vs-measured TFLOPS as a PNG (a new "
        "path ending in .png, or a PNG to replace; anything else is refused before any work)",
    )
    parser.add_argument(
        "--plan-budgets",
        metavar="K,K,...",
        help="also judge kernel-set plans of these sizes (e.g. 1,2,4,8,16) for each fold's "
        "held-out problems, beside the hindsight, frequent-winners and random plans",
    )
    parser.add_argument("--plan-plot", metavar="FILE.png", help="with --plan-budgets: write efficiency against budget")


def _budgets(text: str | None) -> tuple[int, ...]:
    if text is None:
        return ()
    try:
        budgets = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        raise InvalidInputError(f"--plan-budgets takes integers separated by commas, not {text!r}") from None
    if not budgets or budgets[0] < 1:
        raise InvalidInputError(f"--plan-budgets must list budgets of at least 1, not {text!r}")
    return budgets


def run(args: argparse.Namespace, out: TextIO) -> int:
    budgets = _budgets(args.plan_budgets)
    if args.plan_plot is not None and not budgets:
        raise CkspaceError("--plan-plot plots the plans: add --plan-budgets")
    from ckspace.training.dataset import load_cells
    from ckspace.training.evaluation import choose_folds, cross_validate, cross_validation_steps

    check_data_arguments(args)
    from ckspace.environment.files import output_path
    from ckspace.training.plot import check_plot_target

    for option, path in (("--plot", args.plot), ("--plan-plot", args.plan_plot)):
        if path is not None:
            check_plot_target(output_path(path, option), option)
    cells = load_cells(args.data, args.arch, args.variant, args.dtype)
    plotting = [option for option, path in (("--plot", args.plot), ("--plan-plot", args.plan_plot)) if path]
    if plotting and len(cells) > 1:
        raise CkspaceError(
            f"{plotting[0]} draws one cell, but the data hold {len(cells)} "
            f"({'; '.join(d.cell.text() for d in cells)}): pick one with --arch/--variant/--dtype"
        )
    folds = [choose_folds(data, args.folds) for data in cells]  # every cell's check before the first fit
    for data, count in zip(cells, folds, strict=True):
        with fit_progress(data.cell.text(), cross_validation_steps(count)) as progress:
            cv = cross_validate(data, count, args.seed, budgets, num_threads=args.threads, progress=progress)
        _report(args, data, cv, out)
    return 0


def _report(args: argparse.Namespace, data, cv, out: TextIO) -> None:
    """One cell's figures (and plots) as the options ask."""
    cell = data.cell.text()
    if args.plot is not None:
        from ckspace.training.plot import write_plot

        write_plot(cv, Path(args.plot), f"{cell}: kernel selection vs measured oracle")
    if args.plan_plot is not None:
        from ckspace.training.plot import write_plan_plot

        write_plan_plot(cv, Path(args.plan_plot), f"{cell}: kernel-set plans, {cv.folds}-fold grouped CV")
    record = {
        "arch": data.arch,
        "variant": data.variant.value,
        "dtype": data.dtype.value,
        **cv.summary(),
        "cleaning": data.report.model_dump(),
    }
    write_report(out, args.format, record, lambda _: _text(data, cv))


def _text(data, cv) -> str:
    """One cell's cross-validation as a table, headed by the cell and its data cleaning."""
    from ckspace.training.metrics import table

    return (
        f"{data.cell.text()}: {data.report.text()}\n{cv.folds}-fold cross-validation grouped by shape "
        f"(seed {cv.seed}), {cv.problems} problems; efficiency = picked TFLOPS / best measured TFLOPS (percent)\n"
        + table(cv.scores, cv.objective)
        + f"model = {cv.objective} (better mean efficiency); log-TFLOPS regressor median |error| "
        f"{cv.tflops_median_error:.1f} %\n" + (_plans_text(cv) if cv.plans else "")
    )


def _plans_text(cv) -> str:
    """The plan table: per budget, (a) best measured inside the plan and (b) the selector's pick
    inside it, each over the best measured overall, mean / P10, for the plan and its baselines."""
    from ckspace.training.plan_evaluation import PLANS as names

    lines = [
        "kernel-set plans for each fold's held-out problems: (a) best measured kernel inside the plan, "
        "(b) the selector's pick inside the plan, over the best measured overall (mean / P10, percent)",
        f"{'budget':>6}  " + "  ".join(f"{name + ' (a)':>22} {name + ' (b)':>22}" for name in names),
    ]
    for budget, result in cv.plans.items():
        cells = [
            f"{result.figures(n)[key].mean:12.2f} / {result.figures(n)[key].p10:6.2f}"
            for n in names
            for key in ("plan_oracle", "plan_selector")
        ]
        lines.append(f"{budget:>6}  " + "  ".join(f"{c:>22}" for c in cells))
    return "\n".join(lines) + "\n"
