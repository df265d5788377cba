"""``ckspace train``: fit a cell's kernel-selection model on benchmark CSVs."""

from __future__ import annotations

import argparse
import shlex
from typing import TextIO

from ckspace.core.errors import InvalidInputError

NAME = "train"
HELP = "train a LightGBM kernel-selection model on tile-engine benchmark CSVs"


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """--data, --arch, --variant, --dtype, --folds, --seed (shared with evaluate)."""
    parser.add_argument("--data", nargs="+", required=True, metavar="CSV", help="tile-engine benchmark CSV file(s)")
    parser.add_argument("--arch", help="GPU target the data was measured on; required unless every file name "
                                       "says it (tile-engine's benchmark_<variant>_<n>_<dtype>_<arch>.csv)")
    parser.add_argument("--variant", help="forward, bwd_data or bwd_weight (default: from the kernel names)")
    parser.add_argument("--dtype", help="fp16, bf16 or fp32 (default: from the kernel names)")
    parser.add_argument("--folds", type=int, default=5, help="cross-validation folds, grouped by shape (default: 5)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the fold split and of LightGBM, 0 to 2^31-1 (default: 0)")


def configure(parser: argparse.ArgumentParser) -> None:
    add_data_arguments(parser)
    parser.add_argument("--out", required=True, help="model directory to write (replaced atomically; a non-empty "
                                                     "directory that is not a ckspace model is refused)")
    parser.add_argument("--force", action="store_true",
                        help="write into a non-empty directory that is not a model (only the model files change)")


def check_data_arguments(args: argparse.Namespace) -> None:
    """Folds and seed in range before any file is read."""
    if args.folds < 2:
        raise InvalidInputError(f"--folds {args.folds}: cross-validation needs at least 2 folds")
    if not 0 <= args.seed < 2**31:
        raise InvalidInputError(f"--seed {args.seed}: a seed is 0 to 2^31-1 (LightGBM's C int)")


def run(args: argparse.Namespace, out: TextIO) -> int:
    from ckspace.core.files import output_path
    from ckspace.select.dataset import infer_cell
    from ckspace.select.metrics import HEADER
    from ckspace.select.training import train_model

    check_data_arguments(args)
    target = output_path(args.out, "--out")
    arch, variant, dtype = infer_cell(args.data, args.arch, args.variant, args.dtype)
    command = shlex.join(["ckspace", "train", "--data", *args.data, "--arch", arch, "--variant", variant.value,
                          "--dtype", dtype.value, "--folds", str(args.folds), "--seed", str(args.seed),
                          "--out", str(args.out)])
    card, cv = train_model(args.data, arch, variant, dtype, target, args.folds, args.seed, command, args.force)
    out.write(f"{card.cleaning}\n{card.objective_choice}\n{HEADER}\n")
    for name, scores in cv.scores.items():
        out.write(scores.row(name) + "\n")
    out.write(f"model written to {args.out}\n")
    return 0
