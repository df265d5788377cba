"""``ckspace train``: fit a cell's kernel-selection model on benchmark CSVs."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import TextIO

NAME = "train"
HELP = "train a LightGBM kernel-selection model on tile-engine benchmark CSVs"


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """--data, --arch, --variant, --dtype, --folds, --seed (shared with evaluate)."""
    parser.add_argument("--data", nargs="+", required=True, metavar="CSV", help="tile-engine benchmark CSV file(s)")
    parser.add_argument("--arch", help="GPU target the data was measured on (default: from the file names)")
    parser.add_argument("--variant", help="forward, bwd_data or bwd_weight (default: from the kernel names)")
    parser.add_argument("--dtype", help="fp16, bf16 or fp32 (default: from the kernel names)")
    parser.add_argument("--folds", type=int, default=5, help="cross-validation folds, grouped by shape (default: 5)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fold split and of LightGBM (default: 0)")


def configure(parser: argparse.ArgumentParser) -> None:
    add_data_arguments(parser)
    parser.add_argument("--out", required=True, type=Path, help="model directory to write (replaced atomically)")


def run(args: argparse.Namespace, out: TextIO) -> int:
    from ckspace.select.dataset import infer_cell
    from ckspace.select.metrics import HEADER
    from ckspace.select.training import train_model

    arch, variant, dtype = infer_cell(args.data, args.arch, args.variant, args.dtype)
    command = shlex.join(["ckspace", "train", "--data", *args.data, "--arch", arch, "--variant", variant.value,
                          "--dtype", dtype.value, "--folds", str(args.folds), "--seed", str(args.seed),
                          "--out", str(args.out)])
    card, cv = train_model(args.data, arch, variant, dtype, args.out, args.folds, args.seed, command)
    out.write(f"{card.cleaning}\n{card.objective_choice}\n{HEADER}\n")
    for name, scores in cv.scores.items():
        out.write(scores.row(name) + "\n")
    out.write(f"model written to {args.out}\n")
    return 0
