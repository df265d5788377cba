"""``ckspace train``: fit kernel-selection models on measurement CSVs, one per cell they hold.

The data name their cells (ours in columns, tile_engine's in file and kernel names; see
:mod:`ckspace.training.dataset`); ``--arch/--variant/--dtype`` pick among them. One cell: ``--out``
is its model directory. Several: each cell's model goes to ``--out/<arch>/<variant>_<dtype>/``,
the layout of ``ckspace/models/``, because a sweep of a ``--variant all`` library holds three
cells and its user wants all three models from one command. Every target is checked and every
cell's data cleaned before the first model is trained, so a refusal costs nothing and writes
nothing.

``--threads N`` (shared with ``evaluate``) bounds LightGBM's threads, fitting and predicting, and
OpenMP's default thread count and spin-waiting for the process (:func:`bound_openmp`); on a
terminal a progress bar on stderr counts the fits (cross-validation folds x objectives, then the
final fits), and nothing is drawn otherwise.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ckspace.commands.common import data_set_help, measurements_file
from ckspace.core.errors import InvalidInputError
from ckspace.workloads.datasets import Kind, argument_text

if TYPE_CHECKING:
    from ckspace.training.dataset import DataCell

log = logging.getLogger(__name__)

NAME = "train"
HELP = "train LightGBM kernel-selection models on measurement CSVs (ckspace bench's or tile-engine's)"


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """--data, --arch, --variant, --dtype, --folds, --seed, --threads (shared with evaluate)."""
    parser.add_argument(
        "--data",
        nargs="+",
        required=True,
        metavar="CSV",
        type=measurements_file,
        help="measurement CSV file(s): ckspace bench's (cells in columns) or tile-engine's, "
        + data_set_help(Kind.MEASUREMENTS),
    )
    parser.add_argument(
        "--arch",
        help="only the cells of this GPU target; for tile-engine CSVs, the target they "
        "were measured on (required unless every such file name says it: "
        "benchmark_<variant>_<n>_<dtype>_<arch>.csv)",
    )
    parser.add_argument(
        "--variant", help="only the cells of forward, bwd_data or bwd_weight (default: every variant in the data)"
    )
    parser.add_argument("--dtype", help="only the cells of fp16, bf16 or fp32 (default: every dtype in the data)")
    parser.add_argument(
        "--folds",
        type=int,
        default=None,
        help="cross-validation folds, grouped by shape (default: 5, or the number of distinct "
        "shapes when the data hold fewer; at least 2 shapes are needed)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the fold split and of LightGBM, 0 to 2^31-1 (default: 0)"
    )
    parser.add_argument(
        "--threads",
        metavar="N",
        help="threads LightGBM may use to fit and predict, 1 to 1024 (default: the CPUs this "
        "process may run on, at most 4: more threads than cores oversubscribe and slow "
        "every fit on a loaded machine, and these small data sets gain little beyond "
        "about 4); the figures and the trees do not depend on it",
    )


def configure(parser: argparse.ArgumentParser) -> None:
    add_data_arguments(parser)
    parser.add_argument(
        "--out",
        required=True,
        help="the model directory when the data hold one cell (replaced atomically; a non-empty "
        "directory that is not a ckspace model is refused); with several cells, the root of "
        "OUT/<arch>/<variant>_<dtype>/, one model directory per cell",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="write into a non-empty model directory that is not a model (only the model files change)",
    )


def check_data_arguments(args: argparse.Namespace) -> None:
    """Folds, seed and threads in range before any file is read; ``args.threads`` becomes the
    number of threads (the default filled in), and OpenMP is bounded by it (:func:`bound_openmp`)."""
    if args.folds is not None and args.folds < 2:
        raise InvalidInputError(f"--folds {args.folds}: cross-validation needs at least 2 folds")
    if not 0 <= args.seed < 2**31:
        raise InvalidInputError(f"--seed {args.seed}: a seed is 0 to 2^31-1 (LightGBM's C int)")
    args.threads = parse_threads(args.threads)
    bound_openmp(args.threads)


MAX_THREADS = 1024
"""The most ``--threads`` accepts: far above any core count this runs on, and far below what would
make OpenMP try to start threads by the million (LightGBM reads a C int)."""


def parse_threads(text: str | None) -> int:
    """``--threads``: a whole number, 1 to :data:`MAX_THREADS`; none given is
    :func:`~ckspace.training.boosters.default_threads` (the affinity mask's CPUs, at most 4). Taken as
    text and checked here, not by argparse's ``type=int``, so that 0, -1 and "two" all get the same
    one line naming the value. More threads than this process's CPUs is allowed (the user asked) but
    logged as a warning: it oversubscribes, which is slower, never faster."""
    from ckspace.training.boosters import available_cpus, default_threads

    if text is None:
        return default_threads()
    try:
        value = int(text.strip())
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_THREADS:
        raise InvalidInputError(f"--threads {text!r}: give a whole number of threads, 1 to {MAX_THREADS}")
    cores = available_cpus()
    if value > cores:
        log.warning(
            "--threads %d is more than the %d CPUs this process may run on: the threads will "
            "oversubscribe them, which is slower",
            value,
            cores,
        )
    return value


OPENMP_DEFAULTS = {"OMP_NUM_THREADS": None, "GOMP_SPINCOUNT": "10000"}
"""What :func:`bound_openmp` sets unless the user has (None: the thread count)."""


def bound_openmp(threads: int) -> None:
    """Bound OpenMP for this process unless the user's environment already says otherwise:
    ``OMP_NUM_THREADS`` = ``threads``, and ``GOMP_SPINCOUNT=10000`` (GNU OpenMP, which LightGBM's
    Linux wheels use; other runtimes ignore it).

    Every LightGBM call of train and evaluate names its threads, but one that names none (a booster
    predicting with LightGBM's defaults) takes OpenMP's default, every core. And OpenMP's threads
    spin, burning their core, while they wait for each other at the end of each parallel region,
    which LightGBM opens several times per boosting round: 300,000 spins by default, so on a busy
    machine a thread spins through whole time slices waiting for one that is not running. 10,000
    spins is long enough for the regions of an unloaded fit to meet, short enough to sleep soon
    otherwise. Measured on 2 cores (``evaluate`` of the MI355X data, --threads 2, runs of a noisy
    machine): unloaded 2.5 to 3.4 s wall with 10,000 spins as with 300,000 (``OMP_WAIT_POLICY=
    PASSIVE``, never spinning: 7.8 s); beside two busy processes 5 to 13 s wall with 10,000 spins,
    17 to 21 s with 300,000, and 9 to 123 s (CPU time up to 74 s) before ``--threads`` existed.
    OpenMP reads the variables when it starts, which is when LightGBM is first imported, at the
    first fit, after the arguments are checked; in a process that has already loaded it (tests
    calling ``main``) this changes nothing, which is harmless. A user's own values are kept: they
    are a choice for the whole process, and LightGBM follows ``--threads`` anyway."""
    for name, value in OPENMP_DEFAULTS.items():
        wanted = str(threads) if value is None else value
        if os.environ.setdefault(name, wanted) != wanted:
            log.info("%s=%s from the environment is kept (ckspace would set %s)", name, os.environ[name], wanted)


@contextmanager
def fit_progress(label: str, total: int) -> Iterator[Callable[[str], None] | None]:
    """A progress bar on stderr counting ``total`` fits, given to the select/ modules as their
    ``progress`` callback (one call per finished fit, naming it). Only on a terminal: in a pipe, a
    file or a test, stderr stays as it was (the callback is None and nothing of rich is loaded).
    Transient, so the figures printed afterwards stand alone."""
    if not sys.stderr.isatty():
        yield None
        return
    from ckspace.environment.progress import counting_bar

    with counting_bar(enabled=True, transient=True, stderr=True) as bar:
        task = bar.add_task(f"{label}: fitting", total=total)
        yield lambda step: bar.update(task, advance=1, description=f"{label}: fitted {step}")


def model_targets(out: Path, cells: Sequence[DataCell]) -> list[Path]:
    """Where each cell's model goes: ``out`` itself for one cell, ``out/<arch>/<variant>_<dtype>``
    for several; an existing model directory cannot be the root of several (one clear line)."""
    from ckspace.select.store import CARD_FILE

    if len(cells) == 1:
        return [out]
    if (out / CARD_FILE).is_file():
        raise InvalidInputError(
            f"--out {str(out)!r} is the model directory of one cell, but the data hold "
            f"{len(cells)} cells ({'; '.join(c.text() for c in cells)}): give a new directory "
            "for one model per cell, or --arch/--variant/--dtype to pick one cell"
        )
    return [out / cell.model_subdir() for cell in cells]


def run(args: argparse.Namespace, out: TextIO) -> int:
    from ckspace.environment.files import output_path
    from ckspace.select.store import check_model_target
    from ckspace.training.dataset import load_cells
    from ckspace.training.evaluation import choose_folds
    from ckspace.training.metrics import table
    from ckspace.training.trainer import train_model, training_steps

    check_data_arguments(args)
    target = output_path(args.out, "--out")
    cells = load_cells(args.data, args.arch, args.variant, args.dtype)
    targets = model_targets(target, [data.cell for data in cells])
    for data, directory in zip(cells, targets, strict=True):  # every refusal before the first fit
        check_model_target(directory, args.force)
        choose_folds(data, args.folds)
    for data, directory in zip(cells, targets, strict=True):
        command = shlex.join(
            [
                "ckspace",
                "train",
                "--data",
                *map(argument_text, args.data),
                "--arch",
                data.arch,
                "--variant",
                data.variant.value,
                "--dtype",
                data.dtype.value,
                *(["--folds", str(args.folds)] if args.folds is not None else []),
                "--seed",
                str(args.seed),
                "--threads",
                str(args.threads),
                "--out",
                str(directory),
            ]
        )
        with fit_progress(data.cell.text(), training_steps(choose_folds(data, args.folds))) as progress:
            card, cv = train_model(
                data, directory, args.folds, args.seed, command, args.force, num_threads=args.threads, progress=progress
            )
        out.write(f"{data.cell.text()}: {card.cleaning}\n{card.objective_choice}\n{table(cv.scores, cv.objective)}")
        out.write(f"model written to {directory}\n")
    return 0
