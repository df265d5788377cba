"""``ckspace train``: fit kernel-selection models on measurement CSVs, one per cell they hold.

The data name their cells (ours in columns, tile_engine's in file and kernel names; see
:mod:`ckspace.select.dataset`); ``--arch/--variant/--dtype`` pick among them. One cell: ``--out``
is its model directory. Several: each cell's model goes to ``--out/<arch>/<variant>_<dtype>/``,
the layout of ``ckspace/models/``, because a sweep of a ``--variant all`` library holds three
cells and its user wants all three models from one command. Every target is checked and every
cell's data cleaned before the first model is trained, so a refusal costs nothing and writes
nothing.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ckspace.core.errors import InvalidInputError

if TYPE_CHECKING:
    from ckspace.select.dataset import DataCell

NAME = "train"
HELP = "train LightGBM kernel-selection models on measurement CSVs (ckspace bench's or tile-engine's)"


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """--data, --arch, --variant, --dtype, --folds, --seed (shared with evaluate)."""
    parser.add_argument("--data", nargs="+", required=True, metavar="CSV",
                        help="measurement CSV file(s): ckspace bench's (cells in columns) or tile-engine's")
    parser.add_argument("--arch", help="only the cells of this GPU target; for tile-engine CSVs, the target they "
                                       "were measured on (required unless every such file name says it: "
                                       "benchmark_<variant>_<n>_<dtype>_<arch>.csv)")
    parser.add_argument("--variant", help="only the cells of forward, bwd_data or bwd_weight (default: every "
                                          "variant in the data)")
    parser.add_argument("--dtype", help="only the cells of fp16, bf16 or fp32 (default: every dtype in the data)")
    parser.add_argument("--folds", type=int, default=None,
                        help="cross-validation folds, grouped by shape (default: 5, or the number of distinct "
                             "shapes when the data hold fewer; at least 2 shapes are needed)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the fold split and of LightGBM, 0 to 2^31-1 (default: 0)")


def configure(parser: argparse.ArgumentParser) -> None:
    add_data_arguments(parser)
    parser.add_argument("--out", required=True,
                        help="the model directory when the data hold one cell (replaced atomically; a non-empty "
                             "directory that is not a ckspace model is refused); with several cells, the root of "
                             "OUT/<arch>/<variant>_<dtype>/, one model directory per cell")
    parser.add_argument("--force", action="store_true",
                        help="write into a non-empty model directory that is not a model (only the model files "
                             "change)")


def check_data_arguments(args: argparse.Namespace) -> None:
    """Folds and seed in range before any file is read."""
    if args.folds is not None and args.folds < 2:
        raise InvalidInputError(f"--folds {args.folds}: cross-validation needs at least 2 folds")
    if not 0 <= args.seed < 2**31:
        raise InvalidInputError(f"--seed {args.seed}: a seed is 0 to 2^31-1 (LightGBM's C int)")


def model_targets(out: Path, cells: Sequence[DataCell]) -> list[Path]:
    """Where each cell's model goes: ``out`` itself for one cell, ``out/<arch>/<variant>_<dtype>``
    for several; an existing model directory cannot be the root of several (one clear line)."""
    from ckspace.select.store import CARD_FILE

    if len(cells) == 1:
        return [out]
    if (out / CARD_FILE).is_file():
        raise InvalidInputError(f"--out {str(out)!r} is the model directory of one cell, but the data hold "
                                f"{len(cells)} cells ({'; '.join(c.text() for c in cells)}): give a new directory "
                                "for one model per cell, or --arch/--variant/--dtype to pick one cell")
    return [out / cell.model_subdir() for cell in cells]


def run(args: argparse.Namespace, out: TextIO) -> int:
    from ckspace.core.files import output_path
    from ckspace.select.dataset import load_cells
    from ckspace.select.evaluation import choose_folds
    from ckspace.select.metrics import HEADER
    from ckspace.select.store import check_model_target
    from ckspace.select.training import train_model

    check_data_arguments(args)
    target = output_path(args.out, "--out")
    cells = load_cells(args.data, args.arch, args.variant, args.dtype)
    targets = model_targets(target, [data.cell for data in cells])
    for data, directory in zip(cells, targets):  # every refusal before the first fit
        check_model_target(directory, args.force)
        choose_folds(data, args.folds)
    for data, directory in zip(cells, targets):
        command = shlex.join(["ckspace", "train", "--data", *args.data, "--arch", data.arch, "--variant",
                              data.variant.value, "--dtype", data.dtype.value,
                              *(["--folds", str(args.folds)] if args.folds is not None else []),
                              "--seed", str(args.seed), "--out", str(directory)])
        card, cv = train_model(data, directory, args.folds, args.seed, command, args.force)
        out.write(f"{data.cell.text()}: {card.cleaning}\n{card.objective_choice}\n{HEADER}\n")
        for name, scores in cv.scores.items():
            out.write(scores.row(name) + "\n")
        out.write(f"model written to {directory}\n")
    return 0
