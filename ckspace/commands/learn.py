"""``ckspace learn``: a cell's selection model from few built kernels timed on many problems.

The loop (:mod:`ckspace.training.learning`) starts from the analytical model, first fits its
constants to this GPU from 60 pairs (``--calibration``: by default on every arch but gfx950, whose
MI355X they were fitted on, unless ``--start-model`` gives this GPU's), measures a covering batch,
and round by round builds and times the close contenders of the problems whose picks are least sure
(the analytical model moved by each problem's measurements estimates them), until a budget or a
target regret stops it; then it trains the model, anchored on the analytical model
(:mod:`ckspace.training.anchored`), into a directory as ``ckspace train`` writes one; its card
carries the constants its features are priced with. ``--out DIR`` is that model directory (``ckspace
select --model DIR`` takes it) and holds the loop's record beside the model files:
``measurements.csv`` (bench's schema, every pair asked) and ``round.json`` (the round being
measured). Running the same command again resumes: no pair is asked twice, and the same seed ends
with the same model.

Two measurers: ``--replay CSV`` answers from a recorded measurement CSV; ``--tree DIR`` builds a
tree emitted ``--with-selector`` with ``ckspace build``'s machinery (the whole tree, once) and
times the pairs with ``ckspace bench``'s sweep, verified (:mod:`ckspace.run.bench_measurer`;
``--backend host`` times a stand-in library on the CPU, as ``ckspace bench --backend host`` does).
"""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path
from typing import TextIO

from ckspace.commands.common import add_format_argument, constants_text, data_set_help, write_report
from ckspace.commands.train import bound_openmp, parse_threads
from ckspace.core.errors import InvalidChoiceError, InvalidInputError
from ckspace.workloads.datasets import DATASETS, Kind, argument_text, data_file

NAME = "learn"
HELP = (
    "learn a cell's selection model by building few kernels and timing many problems, round by round "
    "(replayed from a recording, or built and benched from an emitted tree)"
)
MEASURER_OPTIONS = ("backend", "executor", "address", "devices")
"""The options of the ``--tree`` measurer, refused with ``--replay``."""
FORMATS = ("text", "json")
CALIBRATION = {"auto": None, "on": True, "off": False}
"""``--calibration``: ``LearnSettings.calibrate`` of each choice."""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--arch", required=True, help="the GPU target of the model (e.g. gfx950)")
    parser.add_argument("--variant", required=True, help="forward, bwd_data or bwd_weight")
    parser.add_argument("--dtype", required=True, help="fp16, bf16 or fp32")
    parser.add_argument(
        "--problems",
        required=True,
        metavar="CSV",
        help="the workload: a problems CSV (or a measurement CSV, read for its shapes), "
        + data_set_help(Kind.PROBLEMS)
        + f", or the shapes of a measurement data set ({', '.join(_names(Kind.MEASUREMENTS))})",
    )
    parser.add_argument(
        "--replay",
        metavar="CSV",
        help="measure by replaying this recording (ckspace bench's or tile-engine's CSV, "
        + data_set_help(Kind.MEASUREMENTS)
        + "); a pair it lacks is not measured, never invented, and builds and pairs cost what "
        "the replay measurer states. Give --replay or --tree",
    )
    parser.add_argument(
        "--tree",
        metavar="DIR",
        help="measure for real: build this tree (written by ckspace emit --with-selector; built whole, "
        "once, as ckspace build does) and time the pairs as ckspace bench does, verified; a kernel "
        "that fails to build, a wrong result, a crash or a timeout is a pair not measured",
    )
    parser.add_argument(
        "--backend",
        help="with --tree: hip (the default: AMD GPUs) or host (the tree's stand-in library computing "
        "on host memory, as ckspace bench --backend host)",
    )
    parser.add_argument(
        "--executor", help="with --tree: what runs the compiles and the timed batches, local (the default) or ray"
    )
    parser.add_argument("--address", metavar="ADDR", help="with --executor ray: the cluster (as ckspace build's)")
    parser.add_argument("--devices", metavar="0,1,...", help="with --tree: the devices to time on (default: all)")
    parser.add_argument("--budget-kernels", required=True, metavar="K", help="the most kernels to build, 1 or more")
    parser.add_argument("--budget-pairs", required=True, metavar="P", help="the most pairs to time, 1 or more")
    parser.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="the model directory, holding the loop's record too (measurements.csv, round.json); "
        "an existing one is resumed",
    )
    parser.add_argument("--seed", default="0", help="seed of the estimates and of LightGBM, 0 to 2^31-1 (default: 0)")
    parser.add_argument(
        "--target-regret",
        metavar="R",
        help="stop once the estimated mean regret of the picks is below R percent (e.g. 2.5)",
    )
    parser.add_argument("--threads", metavar="N", help="threads LightGBM may use (as train's --threads)")
    parser.add_argument(
        "--calibration",
        default="auto",
        metavar="{auto,on,off}",
        help="measure first up to 60 pairs that fit the analytical model's constants to this GPU; auto "
        "(default): on unless --arch is gfx950 (whose MI355X the shipped constants were fitted on) or "
        "--start-model gives this GPU's",
    )
    parser.add_argument(
        "--start-model",
        metavar="DIR",
        help="start from the analytical model's constants in this model's card (a model of this arch "
        "that learn calibrated, for another cell of the same GPU): they are this GPU's, so auto "
        "calibration keeps them",
    )
    add_format_argument(parser, FORMATS)


def _names(kind: Kind) -> list[str]:
    return [name for name, d in DATASETS.items() if d.kind is kind]


def _count(option: str, text: str) -> int:
    """A budget: a whole number, 1 or more, else one line naming it."""
    try:
        value = int(text.strip())
    except ValueError:
        value = 0
    if value < 1:
        raise InvalidInputError(f"{option} {text!r}: give a whole number, 1 or more")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        value = -1
    if not 0 <= value < 2**31:
        raise InvalidInputError(f"--seed {text!r}: a seed is a whole number, 0 to 2^31-1")
    return value


def _target(text: str | None) -> float | None:
    """``--target-regret`` in percent, as a fraction."""
    if text is None:
        return None
    try:
        value = float(text.strip())
    except ValueError:
        value = -1.0
    if not 0 < value < 100:
        raise InvalidInputError(f"--target-regret {text!r}: give a percentage above 0 and below 100, e.g. 2.5")
    return value / 100.0


def _problems_file(value: str) -> Path:
    """A path, a problems data set, or a measurement data set (its shapes)."""
    found = DATASETS.get(value)
    if found is not None and found.kind is Kind.MEASUREMENTS and not os.path.lexists(value):
        return found.path
    return data_file(value, Kind.PROBLEMS)


def _learn_directory(value: str) -> Path:
    """``--out``: new, empty, or a directory this command wrote (it holds the record)."""
    from ckspace.environment.files import output_path, refuse_foreign
    from ckspace.training.learning import RECORD_FILE

    out = output_path(value, "--out")
    refuse_foreign(out, "--out", "directory")
    if out.exists() and not out.is_dir():
        raise InvalidInputError(f"--out {value!r} is a file; give a new directory or one ckspace learn wrote")
    if out.is_dir() and os.listdir(out) and not (out / RECORD_FILE).is_file():
        raise InvalidInputError(
            f"--out {value!r} is a non-empty directory without {RECORD_FILE}: not one ckspace learn "
            "wrote; give a new or empty directory, or the --out of the run to resume"
        )
    return out


def run(args: argparse.Namespace, out: TextIO) -> int:
    from ckspace.core.vocab import Dtype, Variant, parse_arch
    from ckspace.planning.workload import read_workload
    from ckspace.run.results import ResultsFile
    from ckspace.training.learning import RECORD_FILE, Budget, LearnSettings, learn
    from ckspace.training.measurer import ReplayMeasurer

    arch, variant, dtype = parse_arch(args.arch), Variant.parse(args.variant), Dtype.parse(args.dtype)
    budget = Budget(
        kernels=_count("--budget-kernels", args.budget_kernels),
        pairs=_count("--budget-pairs", args.budget_pairs),
        target_regret=_target(args.target_regret),
    )
    seed, threads = _seed(args.seed), parse_threads(args.threads)
    if args.calibration not in CALIBRATION:
        raise InvalidChoiceError("--calibration", args.calibration, CALIBRATION)
    start = _start_constants(args.start_model, arch)
    problems_path = _problems_file(args.problems)
    _check_measurer(args)
    replay_path = data_file(args.replay, Kind.MEASUREMENTS) if args.replay is not None else None
    directory = _learn_directory(args.out)
    bound_openmp(threads)
    if replay_path is not None:
        measurer = ReplayMeasurer.load(replay_path, arch, variant.value, dtype.value)
        label = argument_text(replay_path)
    else:
        measurer = _bench_measurer(args, arch, variant.value, dtype.value)
        label = f"bench --backend {measurer.options.backend} of {args.tree}"
    workload = read_workload(problems_path, variant)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / RECORD_FILE
    command = _command(args, arch, variant.value, dtype.value, seed, threads)
    record = ResultsFile.open(path, path.exists(), workload.problems)
    try:
        settings = LearnSettings(calibrate=CALIBRATION[args.calibration], start=start)
        report = learn(
            measurer, record, workload.problems, workload.weights, budget, directory, seed, settings, threads, command
        )
    finally:
        record.close()
    write_report(out, args.format, report, lambda r: _text(r, label) + measurer.summary())
    return 0


def _command(args: argparse.Namespace, arch: str, variant: str, dtype: str, seed: int, threads: int) -> str:
    """The command that made the model (the card's ``training_command``): this one, whose rerun
    resumes from the record to the same model; ``ckspace train`` on the record would fit another."""
    words = ["ckspace", "learn", "--arch", arch, "--variant", variant, "--dtype", dtype, "--problems", args.problems]
    if args.replay is not None:
        words += ["--replay", args.replay]
    else:
        words += ["--tree", args.tree, "--backend", args.backend, "--executor", args.executor]
        words += ["--address", args.address] if args.address else []
        words += ["--devices", args.devices] if args.devices else []
    words += ["--budget-kernels", args.budget_kernels, "--budget-pairs", args.budget_pairs]
    words += ["--target-regret", args.target_regret] if args.target_regret is not None else []
    words += ["--calibration", args.calibration]
    words += ["--start-model", args.start_model] if args.start_model is not None else []
    return shlex.join([*words, "--seed", str(seed), "--threads", str(threads), "--out", args.out])


def _start_constants(value: str | None, arch: str) -> dict[str, float]:
    """``--start-model``: the constants its card says were measured on its GPU (none: the shipped
    ones), refused in one line when it is no model or a model of another arch (another GPU)."""
    if value is None:
        return {}
    from ckspace.select.store import CARD_FILE, load_model

    directory = Path(value)
    if not (directory / CARD_FILE).is_file():
        raise InvalidInputError(f"--start-model {value!r} is not a model directory (it has no {CARD_FILE})")
    card = load_model(directory)[2]
    if card.arch != arch:
        raise InvalidInputError(
            f"--start-model {value!r} is a {card.arch} model: its constants are another GPU's; give a {arch} model"
        )
    return dict(card.calibrated)


def _check_measurer(args: argparse.Namespace) -> None:
    """One measurer: ``--replay`` or ``--tree``, the latter's options only with it, each in one line."""
    from ckspace.compiling.executor import EXECUTORS
    from ckspace.run.device import BACKENDS

    if (args.replay is None) == (args.tree is None):
        raise InvalidInputError(
            "give one measurer: --replay CSV (a recording) or --tree DIR (build and bench an emitted tree)"
        )
    if args.replay is not None:
        given = [f"--{name}" for name in MEASURER_OPTIONS if getattr(args, name) is not None]
        if given:
            raise InvalidInputError(f"{given[0]} is an option of --tree, not of --replay")
        return
    if args.backend is not None and args.backend not in BACKENDS:
        raise InvalidChoiceError("--backend", args.backend, BACKENDS)
    if args.executor is not None and args.executor not in EXECUTORS:
        raise InvalidChoiceError("--executor", args.executor, EXECUTORS)
    if args.address is not None and args.executor != "ray":
        raise InvalidInputError("--address is for --executor ray")


def _bench_measurer(args: argparse.Namespace, arch: str, variant: str, dtype: str):
    """The ``--tree`` measurer, its devices as ``ckspace bench`` takes them (on this machine's GPUs,
    each checked to exist), bench's defaults otherwise (verification on)."""
    from ckspace.commands.bench import local_gpus, parse_devices
    from ckspace.run.bench_measurer import BenchMeasurer
    from ckspace.run.sweep import SweepOptions

    args.backend = args.backend or "hip"
    args.executor = args.executor or "local"
    devices = local_gpus(args, parse_devices(args.devices, args.backend))
    if devices == []:  # before the tree's build, which would be minutes spent for nothing
        raise InvalidInputError(
            "--backend hip: this machine has no AMD GPU to time on (--backend host times a tree's stand-in library)"
        )
    return BenchMeasurer(
        Path(args.tree),
        arch,
        variant,
        dtype,
        SweepOptions(backend=args.backend),
        executor=args.executor,
        address=args.address,
        devices=devices or [0],
    )


def _text(report, measurer: str) -> str:
    regret = report.estimated_mean_regret
    estimated = "none" if regret is None else f"{100.0 * regret:.2f} %"
    return (
        f"{report.rounds} rounds on {measurer}, stopped by {report.stopped_by}: {report.kernels_built} kernels "
        f"built, {report.pairs_timed} pairs timed ({report.pairs_not_measured} not measured), "
        f"{report.measurement_seconds:.0f} s of builds and timing\n"
        f"estimated mean regret of the picks ({report.estimate_source}): {estimated}\n"
        f"analytical model's constants, {'measured on this GPU' if report.calibrated else 'not calibrated'}: "
        + constants_text(report.constants)
        + "\n"
        f"model ({report.objective}) written to {report.model}\n"
    )
