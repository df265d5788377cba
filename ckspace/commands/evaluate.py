"""``ckspace evaluate``: grouped K-fold cross-validation of the selector, its baselines and the
analytical fallback on benchmark CSVs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TextIO

from ckspace.commands.train import add_data_arguments, check_data_arguments
from ckspace.core.errors import InvalidChoiceError

NAME = "evaluate"
HELP = "cross-validate kernel selection (model, baselines, analytical fallback) on benchmark CSVs"
FORMATS = ("text", "json")


def configure(parser: argparse.ArgumentParser) -> None:
    add_data_arguments(parser)
    parser.add_argument("--format", default="text", help="text or json (default: text)")
    parser.add_argument("--plot", metavar="FILE.png",
                        help="write sorted per-problem efficiency and predicted-vs-measured TFLOPS")


def run(args: argparse.Namespace, out: TextIO) -> int:
    if args.format not in FORMATS:
        raise InvalidChoiceError("format", args.format, FORMATS)
    from ckspace.select.dataset import infer_cell, load_measurements
    from ckspace.select.evaluation import cross_validate
    from ckspace.select.metrics import HEADER

    check_data_arguments(args)
    if args.plot is not None:
        from ckspace.core.files import output_path
        from ckspace.select.plot import check_plot_target

        check_plot_target(output_path(args.plot, "--plot"))
    arch, variant, dtype = infer_cell(args.data, args.arch, args.variant, args.dtype)
    data = load_measurements(args.data, arch, variant, dtype)
    cv = cross_validate(data, args.folds, args.seed)
    if args.plot is not None:
        from ckspace.select.plot import write_plot

        write_plot(cv, Path(args.plot), f"{arch} {variant.value} {dtype.value}: kernel selection vs measured oracle")
    if args.format == "json":
        out.write(json.dumps({**cv.summary(), "cleaning": data.report.model_dump()}) + "\n")
        return 0
    out.write(f"{data.report.text()}\n{cv.folds}-fold cross-validation grouped by shape (seed {cv.seed}), "
              f"{cv.problems} problems; efficiency = picked TFLOPS / best measured TFLOPS (percent)\n")
    out.write("top5 = measured best within the selector's top 5; top5b = the pick within the measured top 5\n")
    out.write(HEADER + "\n")
    for name, scores in cv.scores.items():
        out.write(scores.row(name) + "\n")
    out.write(f"model = {cv.objective} (better mean efficiency); log-TFLOPS regressor median |error| "
              f"{cv.tflops_median_error:.1f} %\n")
    return 0
