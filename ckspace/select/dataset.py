"""Benchmark CSVs (tile-engine schema) read, cleaned and shaped as a problems x kernels matrix.

Rows: ``kernel, problem_idx, N, C, K, G, [Di,] Hi, Wi, [Z,] Y, X, [stride_d,] stride_h, stride_w,
[pad_d,] pad_h, pad_w, latency_ms, tflops[, non_zero]`` (C and K total channels; dilation columns
are optional and default to 1). A *problem* is one ``problem_idx`` of one file: repeated shapes stay
separate problems (their spread is measurement noise the evaluation must live with) but share a
*group*, the shape's text form, so cross-validation never splits them. Cleaning drops rows that
are not usable measurements and says how many and why; nothing is invented or imputed.
"""

from __future__ import annotations

import csv
import logging
import math
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from ckspace.core.config import GemmConfig
from ckspace.core.errors import CkspaceError, InvalidInputError
from ckspace.core.files import sha256_file
from ckspace.core.problem import ConvProblem
from ckspace.core.vocab import Dtype, Variant, parse_arch
from ckspace.select.benchmark_names import config_from_any_name
from ckspace.select.hardware import hardware_facts

log = logging.getLogger(__name__)

REQUIRED = ("kernel", "problem_idx", "N", "C", "K", "G", "Wi", "X", "stride_w", "pad_w", "latency_ms", "tflops")
TFLOPS_TOLERANCE = 0.01
"""Relative disagreement allowed between the row's TFLOPS and 2*MACs/latency before the row is
called inconsistent (the upstream file agrees to ~1e-15)."""


class CleaningReport(BaseModel):
    """What reading the CSVs kept and dropped, by reason."""

    files: dict[str, str]  # path -> sha256
    rows_read: int
    rows_kept: int
    dropped: dict[str, int]
    problems: int
    groups: int
    kernels: int
    problems_dropped: int

    def text(self) -> str:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(self.dropped.items()) if v) or "none"
        return (f"read {self.rows_read} rows from {len(self.files)} file(s); kept {self.rows_kept} "
                f"({self.problems} problems, {self.groups} distinct shapes, {self.kernels} kernels); "
                f"dropped rows: {reasons}; problems dropped (fewer than 2 kernels left): {self.problems_dropped}")


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

    def subset(self, index: Sequence[int] | np.ndarray) -> "Measurements":
        """The measurements of the problems at ``index`` (the kernels stay)."""
        index = np.asarray(index, dtype=int)
        return Measurements(self.arch, self.variant, self.dtype, tuple(self.problems[i] for i in index),
                            tuple(self.groups[i] for i in index), self.kernel_names, self.configs,
                            self.tflops[index], self.report)


def _int(row: dict[str, str], key: str, default: int) -> int:
    value = row.get(key)
    return default if value is None or value.strip() == "" else int(value)


def _problem(row: dict[str, str]) -> ConvProblem:
    three_d = any(row.get(k, "").strip() for k in ("Di", "Z"))
    ndim = 3 if three_d else 2
    values = {"ndim": ndim, "N": int(row["N"]), "G": int(row["G"]), "C": int(row["C"]), "K": int(row["K"]),
              "Hi": _int(row, "Hi", 1), "Wi": int(row["Wi"]), "Y": _int(row, "Y", 1), "X": int(row["X"])}
    for prefix, default in (("stride", 1), ("pad", 0), ("dil", 1)):
        for dim in ("h", "w") + (("d",) if three_d else ()):
            values[f"{prefix}_{dim}"] = _int(row, f"{prefix}_{dim}", default)
    if three_d:
        values.update(Di=_int(row, "Di", 1), Z=_int(row, "Z", 1))
    return ConvProblem(**values)


@contextmanager
def _readable(path: Path) -> Iterator[None]:
    """A CSV that is not UTF-8 text (binary, UTF-16) is bad input, said in one line; a UTF-8 byte
    order mark is accepted (the files are opened as ``utf-8-sig``)."""
    try:
        yield
    except (UnicodeDecodeError, csv.Error) as exc:
        raise InvalidInputError(f"{path}: not a UTF-8 CSV file ({str(exc).splitlines()[0][:120]})") from None


def load_measurements(paths: Sequence[str | Path], arch: str, variant: Variant | str,
                      dtype: Dtype | str) -> Measurements:
    """Read, check and clean benchmark CSVs of one cell (arch, variant, dtype)."""
    variant, dtype = Variant.parse(variant), Dtype.parse(dtype)
    peak = hardware_facts(arch).peak_tflops(dtype)
    dropped: Counter[str] = Counter()
    files: dict[str, str] = {}
    kernels: dict[str, GemmConfig] = {}
    cells: dict[tuple[str, str], dict[str, list[float]]] = {}  # (file, idx) -> kernel -> tflops
    unit_problem: dict[tuple[str, str], ConvProblem] = {}
    rows_read = 0
    for raw_path in paths:
        path = Path(raw_path)
        if not path.is_file():
            raise CkspaceError(f"no such data file: {path}")
        files[str(path)] = sha256_file(path)
        with path.open(newline="", encoding="utf-8-sig") as handle, _readable(path):
            reader = csv.DictReader(handle)
            missing = [c for c in REQUIRED if c not in (reader.fieldnames or ())]
            if missing:
                raise CkspaceError(f"{path}: not a tile-engine benchmark CSV (missing columns {', '.join(missing)})")
            for row in reader:
                rows_read += 1
                reason = _check_row(row, path, arch, variant, dtype, peak, kernels, unit_problem)
                if reason:
                    dropped[reason] += 1
                    continue
                unit = (str(path), row["problem_idx"].strip())
                cells.setdefault(unit, {}).setdefault(row["kernel"].strip(), []).append(float(row["tflops"]))
    names = tuple(sorted(kernels))
    column = {n: i for i, n in enumerate(names)}
    problems, groups, matrix = [], [], []
    problems_dropped = 0
    for unit, by_kernel in cells.items():
        if len(by_kernel) < 2:
            problems_dropped += 1
            dropped["problem_with_fewer_than_2_kernels"] += sum(len(v) for v in by_kernel.values())
            continue
        line = np.full(len(names), np.nan)
        for name, values in by_kernel.items():
            if len(values) > 1:
                dropped["duplicate_row_merged_by_median"] += len(values) - 1
            line[column[name]] = float(np.median(values))
        problems.append(unit_problem[unit])
        groups.append(unit_problem[unit].text())
        matrix.append(line)
    if not problems:
        raise CkspaceError(f"no usable {variant.value} {dtype.value} measurements in {', '.join(map(str, paths))}")
    tflops = np.vstack(matrix)
    used = ~np.all(np.isnan(tflops), axis=0)
    names = tuple(n for n, keep in zip(names, used) if keep)
    tflops = tflops[:, used]
    report = CleaningReport(files=files, rows_read=rows_read, rows_kept=int(np.sum(~np.isnan(tflops))),
                            dropped=dict(dropped), problems=len(problems), groups=len(set(groups)),
                            kernels=len(names), problems_dropped=problems_dropped)
    log.info("%s", report.text())
    return Measurements(arch, variant, dtype, tuple(problems), tuple(groups), names,
                        tuple(kernels[n] for n in names), tflops, report)


def _check_row(row: dict[str, str], path: Path, arch: str, variant: Variant, dtype: Dtype, peak: float,
               kernels: dict[str, GemmConfig], unit_problem: dict[tuple[str, str], ConvProblem]) -> str | None:
    """Why a row is unusable (a reason key), or None; records the kernel's config and the problem."""
    name = (row.get("kernel") or "").strip()
    try:
        config = kernels.get(name) or config_from_any_name(name, arch)
        problem = _problem(row)
        latency, tflops = float(row["latency_ms"]), float(row["tflops"])
    except (ValueError, TypeError, KeyError, CkspaceError):
        return "malformed"
    if config.variant is not variant or config.dtype is not dtype or config.ndim != problem.ndim:
        return "other_variant_dtype_or_ndim"
    if not (math.isfinite(latency) and math.isfinite(tflops)) or latency <= 0 or tflops <= 0:
        return "failed_or_zero_tflops"
    non_zero = (row.get("non_zero") or "").strip()
    if non_zero and int(float(non_zero)) == 0:
        return "all_zero_output"
    expected = problem.flops / (latency * 1e-3) / 1e12
    if abs(tflops - expected) > TFLOPS_TOLERANCE * expected:
        return "tflops_inconsistent_with_latency"
    if tflops > peak:
        return "above_arch_peak"
    unit = (str(path), row["problem_idx"].strip())
    if unit_problem.setdefault(unit, problem) != problem:
        return "problem_idx_with_two_shapes"
    kernels[name] = config
    return None


_ARCH_TOKEN = re.compile(r"(gfx[0-9a-z]+)")


def infer_cell(paths: Sequence[str | Path], arch: str | None = None, variant: str | None = None,
               dtype: str | None = None) -> tuple[str, Variant, Dtype]:
    """Fill in what the caller left out: the variant and dtype from the first kernel name of each
    file, the arch from the ``gfxNNN`` token of the tile-engine file names
    (``benchmark_<variant>_<n>_<dtype>_<arch>.csv``). Files that disagree are an error."""
    if arch is None:
        tokens = {m.group(1) for p in paths for m in [_ARCH_TOKEN.search(Path(p).name)] if m}
        if len(tokens) != 1 or any(_ARCH_TOKEN.search(Path(p).name) is None for p in paths):
            raise CkspaceError("give --arch: the data file names do not all name the same arch")
        arch = tokens.pop()
    if variant is None or dtype is None:
        cells = set()
        for raw in paths:
            path = Path(raw)
            if not path.is_file():
                raise CkspaceError(f"no such data file: {path}")
            with path.open(newline="", encoding="utf-8-sig") as handle, _readable(path):
                first = next(csv.DictReader(handle), None)
            if first is None or "kernel" not in first:
                raise CkspaceError(f"{path}: no benchmark rows")
            config = config_from_any_name(first["kernel"], parse_arch(arch))
            cells.add((config.variant, config.dtype))
        if len(cells) != 1:
            raise CkspaceError("the data files hold different variants or dtypes: give --variant and --dtype")
        found_variant, found_dtype = cells.pop()
        variant = variant or found_variant.value
        dtype = dtype or found_dtype.value
    return parse_arch(arch), Variant.parse(variant), Dtype.parse(dtype)
