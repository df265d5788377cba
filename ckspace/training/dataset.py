"""Measurement CSVs read, cleaned and shaped as one problems x kernels matrix per cell.

Two schemas are read, row by row (:mod:`ckspace.workloads.measurement` states both):

* **ours** (``ckspace bench``): the row carries the kernel's whole config and its cell (``arch``,
  ``variant``, ``dtype``) in columns, and how the pair ended (``status``). Kernel identity is the
  config's (:meth:`~ckspace.core.config.GemmConfig.kernel_key`); the ``kernel`` column is only a
  label and is never parsed. One file may hold several cells (a sweep of a ``--variant all``
  library holds three).
* **tile_engine's** (``kernel, problem_idx, N, C, K, G, [Di,] Hi, Wi, [Z,] Y, X, strides, pads,
  latency_ms, tflops[, non_zero]``): the kernel is known by its name only, the file's cell is its
  first kernel name's variant and dtype, and its arch is ``--arch`` or the ``gfxNNN`` token of the
  file name (``benchmark_<variant>_<n>_<dtype>_<arch>.csv``). Every row counts as ``ok``.

Problems are read by :class:`ckspace.workloads.problem_columns.ProblemColumns` (dilations, split-K and
1/2/3D included). A *problem* is one ``problem_idx`` of one file: repeated shapes stay separate
problems (their spread is measurement noise the evaluation must live with) but share a *group*,
the shape's text form, so cross-validation never splits them. Cleaning drops rows that are not
usable measurements and says how many and why, by status first (``wrong`` results are never
measurements); nothing is invented or imputed.
"""

from __future__ import annotations

import csv
import io
import logging
import math
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
from pydantic import BaseModel

from ckspace.core.config import GemmConfig
from ckspace.core.errors import CkspaceError, InvalidInputError
from ckspace.core.kernel_key import KernelKey
from ckspace.core.vocab import Dtype, Variant, parse_arch
from ckspace.environment.files import sha256
from ckspace.environment.inputs import decode_input, read_input
from ckspace.features.hardware import hardware_facts
from ckspace.space.benchmark_names import config_from_any_name
from ckspace.workloads.measurement import CONFIG_COLUMNS, STATUSES, config_from_row, has_config, measured_ndim
from ckspace.workloads.problem import ConvProblem
from ckspace.workloads.problem_columns import ProblemColumns

log = logging.getLogger(__name__)

REQUIRED = ("kernel", "problem_idx", "latency_ms", "tflops")
"""The columns a measurement CSV names exactly, beside its problem columns, which are read as
``--problem`` reads keys (:class:`~ckspace.workloads.problem_columns.ProblemColumns`)."""
TFLOPS_TOLERANCE = 0.01
"""Relative disagreement allowed between the row's TFLOPS and 2*MACs/latency before the row is
called inconsistent (the upstream file agrees to ~1e-15)."""
MIN_KERNELS_PER_PROBLEM = 2
"""A problem teaches the ranker something only when at least two kernels ran it correctly."""
_DAMAGED = "row_of_another_length_than_the_header"
"""Why a row whose cells do not match its file's header is dropped: which cell, kernel or problem
it is cannot be told, so it is counted in the report of every cell its file holds rows of."""


class DataCell(NamedTuple):
    """What one model is for: the arch the data were measured on, the variant and the dtype."""

    arch: str
    variant: Variant
    dtype: Dtype

    def text(self) -> str:
        return f"{self.arch} {self.variant.value} {self.dtype.value}"

    def model_subdir(self) -> Path:
        """The cell's place in a tree of models (the layout of ``ckspace/models/``)."""
        return Path(self.arch) / f"{self.variant.value}_{self.dtype.value}"


class CleaningReport(BaseModel):
    """What reading the CSVs kept and dropped for one cell, by reason."""

    files: dict[str, str]  # path -> sha256
    rows_read: int  # every row of every file, whatever its cell
    rows_other_cells: int = 0  # rows of the files that belong to other cells (not this cell's concern)
    statuses: dict[str, int] = {}  # this cell's rows by status (tile_engine rows count as ok)
    rows_kept: int
    dropped: dict[str, int]
    problems: int
    groups: int
    kernels: int
    problems_dropped: int

    def text(self) -> str:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(self.dropped.items()) if v) or "none"
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(self.statuses.items())) or "none"
        others = f" ({self.rows_other_cells} of other cells)" if self.rows_other_cells else ""
        return (
            f"read {self.rows_read} rows from {len(self.files)} file(s){others}; by status: {statuses}; "
            f"kept {self.rows_kept} ({self.problems} problems, {self.groups} distinct shapes, "
            f"{self.kernels} kernels); dropped rows: {reasons}; problems dropped (fewer than "
            f"{MIN_KERNELS_PER_PROBLEM} kernels left): {self.problems_dropped}"
        )


@dataclass(frozen=True)
class Measurements:
    """Clean measurements of one cell: ``tflops[p, k]`` of kernel k on problem p (NaN = none)."""

    arch: str
    variant: Variant
    dtype: Dtype
    problems: tuple[ConvProblem, ...]
    groups: tuple[str, ...]
    kernel_names: tuple[str, ...]
    configs: tuple[GemmConfig, ...]
    tflops: np.ndarray
    report: CleaningReport

    @property
    def cell(self) -> DataCell:
        return DataCell(self.arch, self.variant, self.dtype)

    def subset(self, index: Sequence[int] | np.ndarray) -> Measurements:
        """The measurements of the problems at ``index`` (the kernels stay)."""
        index = np.asarray(index, dtype=int)
        return Measurements(
            self.arch,
            self.variant,
            self.dtype,
            tuple(self.problems[i] for i in index),
            tuple(self.groups[i] for i in index),
            self.kernel_names,
            self.configs,
            self.tflops[index],
            self.report,
        )


@contextmanager
def _readable(path: Path) -> Iterator[None]:
    """Text the csv module cannot parse (a field longer than its limit) is bad input, said in one
    line; text that is not UTF-8 was refused when read (:func:`~ckspace.environment.inputs.read_input_text`)."""
    try:
        yield
    except csv.Error as exc:
        raise InvalidInputError(f"--data {str(path)!r} is not a CSV file ({str(exc).splitlines()[0][:120]})") from None


Row = dict[str, str]


@dataclass
class _Read:
    """Every row of the data files, by the cell it belongs to, with where it came from."""

    files: dict[str, str]  # path -> sha256
    rows_read: int
    cells: dict[DataCell, list[tuple[str, int, Row]]]  # (path, line, row)
    layouts: dict[str, ProblemColumns]  # path -> where its problem columns are
    damaged: dict[str, int]  # path -> rows of another length than its header (counted, never read)


def _read(paths: Sequence[str | Path], arch: str | None) -> _Read:
    """Read every file once and give each row its cell: ours from its columns, tile_engine's from
    its file (see the module doc)."""
    files: dict[str, str] = {}
    cells: dict[DataCell, list[tuple[str, int, Row]]] = {}
    layouts: dict[str, ProblemColumns] = {}
    damaged: Counter[str] = Counter()
    rows_read = 0
    for raw_path in paths:
        path = Path(raw_path)
        data = read_input(path, "--data")  # read once: what is hashed is what is parsed
        files[str(path)] = sha256(data)
        with _readable(path):
            reader = csv.DictReader(io.StringIO(decode_input(data, path, "--data"), newline=""))
            layout = layouts[str(path)] = ProblemColumns.of_header(reader.fieldnames, path)
            missing = [c for c in REQUIRED if c not in (reader.fieldnames or ())]
            missing += layout.lacking()
            if missing:
                raise CkspaceError(f"{path}: not a measurement CSV (missing columns {', '.join(missing)})")
            file_cell: DataCell | None = None
            for line, row in enumerate(reader, start=2):
                rows_read += 1
                try:
                    layout.check_width(row, line)
                except CkspaceError:  # a cut last line (an interrupted write), a stray comma
                    damaged[str(path)] += 1
                    continue
                if has_config(row):
                    cell = _cell_of_columns(row, path, line)
                else:
                    file_cell = file_cell or _tile_engine_cell(row, path, arch)
                    cell = file_cell
                cells.setdefault(cell, []).append((str(path), line, row))
    return _Read(files, rows_read, cells, layouts, dict(damaged))


def _cell_of_columns(row: Row, path: Path, line: int) -> DataCell:
    """The cell a row of ours names; a value that names none is a damaged file, said in one line."""
    try:
        return DataCell(parse_arch(row["arch"]), Variant.parse(row["variant"]), Dtype.parse(row["dtype"]))
    except InvalidInputError as exc:
        raise InvalidInputError(f"{path} line {line}: {exc}") from None


_ARCH_TOKEN = re.compile(r"(gfx[0-9a-z]+)")


def _tile_engine_cell(row: Row, path: Path, arch: str | None) -> DataCell:
    """A tile_engine file's cell: ``arch`` (else its file name's ``gfxNNN``) and its first kernel
    name's variant and dtype."""
    if arch is None:
        token = _ARCH_TOKEN.search(path.name)
        if token is None:
            raise InvalidInputError(
                f"give --arch: {path} is a tile-engine CSV (no config columns) and its name names no gfx arch"
            )
        arch = parse_arch(token.group(1))
    try:
        config = config_from_any_name(row.get("kernel") or "", arch)
    except CkspaceError as exc:
        raise InvalidInputError(f"{path}: its first kernel name says no variant and dtype ({exc})") from None
    return DataCell(config.arch, config.variant, config.dtype)


def _given(arch: str | None, variant: str | None, dtype: str | None) -> tuple[str | None, Variant | None, Dtype | None]:
    return (
        parse_arch(arch) if arch else None,
        Variant.parse(variant) if variant else None,
        Dtype.parse(dtype) if dtype else None,
    )


def find_cells(
    read: _Read, arch: str | None = None, variant: str | None = None, dtype: str | None = None
) -> list[DataCell]:
    """The cells of the data that ``arch``/``variant``/``dtype`` (each optional) pick, in a fixed
    order; options that pick none of them are an error naming both the options and the cells."""
    want = _given(arch, variant, dtype)
    found = sorted(read.cells, key=lambda c: (c.arch, c.variant.value, c.dtype.value))
    chosen = [c for c in found if all(w is None or w == v for w, v in zip(want, c, strict=True))]
    if not chosen:
        options = " ".join(
            f"--{name} {value.value if hasattr(value, 'value') else value}"
            for name, value in zip(("arch", "variant", "dtype"), want, strict=True)
            if value is not None
        )
        held = "; ".join(c.text() for c in found) or "no rows"
        raise InvalidInputError(f"{options} disagrees with the data, which hold {held}")
    return chosen


def load_cells(
    paths: Sequence[str | Path], arch: str | None = None, variant: str | None = None, dtype: str | None = None
) -> list[Measurements]:
    """Read the data files once and clean every cell they hold that the options pick (see
    :func:`find_cells`). ``arch`` also names the arch of tile_engine files (their rows lack it)."""
    given_arch = parse_arch(arch) if arch else None
    read = _read(paths, given_arch)
    return [_clean(cell, read) for cell in find_cells(read, given_arch, variant, dtype)]


def load_measurements(
    paths: Sequence[str | Path], arch: str, variant: Variant | str, dtype: Dtype | str
) -> Measurements:
    """Read, check and clean the measurements of one cell (arch, variant, dtype)."""
    variant, dtype = Variant.parse(variant), Dtype.parse(dtype)
    return load_cells(paths, arch, variant.value, dtype.value)[0]


def _clean(cell: DataCell, read: _Read) -> Measurements:
    """The cell's rows checked, merged per (problem, kernel) and shaped as a matrix."""
    checked = _check_rows(cell, read)
    shaped = _shape(checked)
    if not shaped.problems:
        _refuse_empty(cell, read, checked.dropped)
    shaped = _without_unmeasured_kernels(shaped)
    report = _report(read, read.cells[cell], checked, shaped)
    log.info("%s: %s", cell.text(), report.text())
    return Measurements(
        cell.arch,
        cell.variant,
        cell.dtype,
        tuple(shaped.problems),
        tuple(shaped.groups),
        tuple(checked.kernels[k][0] for k in shaped.order),
        tuple(checked.kernels[k][1] for k in shaped.order),
        shaped.tflops,
        report,
    )


@dataclass
class _Checked:
    """A cell's usable rows, by measurement unit (one ``problem_idx`` of one file) and kernel, with
    the count of every row dropped by its reason and of every row by its status."""

    dropped: Counter[str]
    statuses: Counter[str]
    kernels: dict[KernelKey, tuple[str, GemmConfig]]  # kernel -> (its label, its config)
    units: dict[tuple[str, str], dict[KernelKey, list[float]]]  # (file, problem_idx) -> kernel -> tflops
    unit_problem: dict[tuple[str, str], ConvProblem]


def _check_rows(cell: DataCell, read: _Read) -> _Checked:
    """Every row of the cell judged once: a status other than ``ok`` or a row :func:`_check_row`
    refuses is counted by its reason; the rest are kept under their unit and kernel. A damaged row
    of a file is counted here too, since it cannot be told which cell it was of."""
    peak = hardware_facts(cell.arch).peak_tflops(cell.dtype)
    rows = read.cells[cell]
    checked = _Checked(Counter(), Counter(), {}, {}, {})
    configs: dict[tuple, GemmConfig | None] = {}
    for path in dict.fromkeys(path for path, _, _ in rows):
        if read.damaged.get(path):
            checked.dropped[_DAMAGED] += read.damaged[path]
    for path, line, row in rows:
        status = _status(row)
        checked.statuses[status] += 1
        if status != "ok":
            checked.dropped[f"status_{status}"] += 1
            continue
        verdict = _check_row(row, (path, line), read.layouts[path], cell, peak, configs, checked.unit_problem)
        if isinstance(verdict, str):
            checked.dropped[verdict] += 1
            continue
        config, tflops = verdict
        key = config.kernel_key()
        checked.kernels.setdefault(key, (config.name if has_config(row) else row["kernel"].strip(), config))
        checked.units.setdefault((path, row["problem_idx"].strip()), {}).setdefault(key, []).append(tflops)
    return checked


@dataclass
class _Shaped:
    """The kept units as rows of a problems x kernels matrix (kernels in ``order``, NaN where a
    kernel was not measured), and how many units had too few kernels to keep."""

    order: list[KernelKey]
    problems: list[ConvProblem]
    groups: list[str]
    tflops: np.ndarray
    problems_dropped: int


def _shape(checked: _Checked) -> _Shaped:
    """One matrix row per unit that at least :data:`MIN_KERNELS_PER_PROBLEM` kernels ran, a
    kernel's repeated rows on it merged by their median (each merge counted as dropped)."""
    order = sorted(checked.kernels, key=lambda k: checked.kernels[k][0])
    column = {k: i for i, k in enumerate(order)}
    problems, groups, matrix = [], [], []
    problems_dropped = 0
    for unit, by_kernel in checked.units.items():
        if len(by_kernel) < MIN_KERNELS_PER_PROBLEM:
            problems_dropped += 1
            checked.dropped[f"problem_with_fewer_than_{MIN_KERNELS_PER_PROBLEM}_kernels"] += sum(
                len(v) for v in by_kernel.values()
            )
            continue
        line = np.full(len(order), np.nan)
        for key, values in by_kernel.items():
            if len(values) > 1:
                checked.dropped["duplicate_row_merged_by_median"] += len(values) - 1
            line[column[key]] = float(np.median(values))
        problems.append(checked.unit_problem[unit])
        groups.append(checked.unit_problem[unit].text())
        matrix.append(line)
    tflops = np.vstack(matrix) if matrix else np.empty((0, len(order)))
    return _Shaped(order, problems, groups, tflops, problems_dropped)


def _refuse_empty(cell: DataCell, read: _Read, dropped: Counter[str]) -> None:
    """No usable problem is an error that says why every row went, so the data can be fixed."""
    summary = ", ".join(f"{k} {v}" for k, v in sorted(dropped.items())) or "no rows"
    raise CkspaceError(
        f"no usable {cell.text()} measurements in {', '.join(read.files)}: a problem needs "
        f"at least {MIN_KERNELS_PER_PROBLEM} kernels measured ok on it (dropped rows: {summary})"
    )


def _without_unmeasured_kernels(shaped: _Shaped) -> _Shaped:
    """The kernels measured on no kept problem left out (their rows all fell with dropped units):
    a column of NaN teaches nothing."""
    used = ~np.all(np.isnan(shaped.tflops), axis=0)
    order = [k for k, keep in zip(shaped.order, used, strict=True) if keep]
    return _Shaped(order, shaped.problems, shaped.groups, shaped.tflops[:, used], shaped.problems_dropped)


def _report(read: _Read, rows: list, checked: _Checked, shaped: _Shaped) -> CleaningReport:
    """What was read, kept and dropped for the cell, by reason, for the log and the model's record."""
    return CleaningReport(
        files=read.files,
        rows_read=read.rows_read,
        rows_other_cells=read.rows_read - len(rows) - checked.dropped[_DAMAGED],
        statuses=dict(checked.statuses),
        rows_kept=int(np.sum(~np.isnan(shaped.tflops))),
        dropped=dict(checked.dropped),
        problems=len(shaped.problems),
        groups=len(set(shaped.groups)),
        kernels=len(shaped.order),
        problems_dropped=shaped.problems_dropped,
    )


def _status(row: Row) -> str:
    """How the pair ended: the ``status`` column of ours (an unknown value is ``unknown``), ``ok``
    for tile_engine's rows, which have no such column and hold only kernels that ran."""
    if "status" not in row or row["status"] is None:
        return "ok"
    status = row["status"].strip()
    return status if status in STATUSES else "unknown"


def _check_row(
    row: Row,
    where: tuple[str, int],
    layout: ProblemColumns,
    cell: DataCell,
    peak: float,
    configs: dict[tuple, GemmConfig | None],
    unit_problem: dict[tuple[str, str], ConvProblem],
) -> str | tuple[GemmConfig, float]:
    """Why an ``ok`` row is unusable (a reason key), or its kernel's config and TFLOPS; records the
    problem of its ``problem_idx``."""
    ours = has_config(row)
    key = tuple(row.get(c) for c in (*CONFIG_COLUMNS, "ndim")) if ours else (row.get("kernel"),)
    if key not in configs:
        try:
            configs[key] = config_from_row(row) if ours else config_from_any_name(row.get("kernel") or "", cell.arch)
        except (ValueError, CkspaceError):
            configs[key] = None
    config = configs[key]
    try:
        problem = layout.problem(row, where[1], measured_ndim)
        latency, tflops = float(row["latency_ms"]), float(row["tflops"])
        non_zero = (row.get("non_zero") or "").strip()
        all_zero = bool(non_zero) and int(float(non_zero)) == 0
    except (ValueError, TypeError, KeyError, OverflowError, CkspaceError):
        return "malformed"
    if config is None:
        return "malformed"
    if (config.variant, config.dtype) != (cell.variant, cell.dtype):
        return "kernel_of_another_variant_or_dtype"
    if config.ndim != problem.ndim:
        return "kernel_ndim_differs_from_problem"
    if not (math.isfinite(latency) and math.isfinite(tflops)) or latency <= 0 or tflops <= 0:
        return "failed_or_zero_tflops"
    if all_zero:
        return "all_zero_output"
    expected = problem.flops / (latency * 1e-3) / 1e12
    if abs(tflops - expected) > TFLOPS_TOLERANCE * expected:
        return "tflops_inconsistent_with_latency"
    if tflops > peak:
        return "above_arch_peak"
    unit = (where[0], row["problem_idx"].strip())
    if unit_problem.setdefault(unit, problem) != problem:
        return "problem_idx_with_two_shapes"
    return config, tflops
