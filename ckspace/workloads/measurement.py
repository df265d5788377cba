"""The columns of a measurement CSV: one row per (kernel, problem) pair that ``ckspace bench`` ran.

The first columns are upstream tile_engine's benchmark schema, so its readers and ours read both;
the ones after them are what tile_engine leaves out and a training set needs: the dilations, the
split-K factor and the dimensionality, the kernel's whole config (kernel identity is the config,
never its name), how the pair ended and by how much its result differed from the CPU reference,
and where and how it was measured. Absent spatial dimensions (depth of a 2D problem) are empty
cells, as tile_engine writes them. ``latency_ms``/``tflops``/``non_zero`` are empty unless the
kernel ran to completion.

Both the writer (``ckspace.run``) and the readers (``ckspace.training.dataset``) use this module, so the
schema is stated once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, get_args

from ckspace.core.config import GemmConfig
from ckspace.core.errors import InvalidInputError
from ckspace.core.fields import GEMM_FIELD_NAMES, GEMM_FIELDS
from ckspace.core.vocab import csv_cell
from ckspace.workloads.problem import ConvProblem
from ckspace.workloads.problem_columns import ProblemColumns

Status = Literal["ok", "wrong", "crash", "timeout", "failed"]
"""How a pair ended: ``ok`` ran and matched the reference (or was not verified, ``--no-verify``);
``wrong`` ran and differed beyond the tolerance; ``crash`` took its process down (a signal or an
abnormal exit); ``timeout`` did not finish in time; ``failed`` was refused by ``ckspace_run``
(status code in ``detail``) or not run: its operands do not fit in the memory free, or the worker
died preparing them (the bytes in ``detail``). Only ``ok`` rows are measurements."""
STATUSES: tuple[str, ...] = get_args(Status)
"""The values of :data:`Status`, for readers that check a row's status."""

PROBLEM_COLUMNS: tuple[str, ...] = (
    "N",
    "C",
    "K",
    "G",
    "Di",
    "Hi",
    "Wi",
    "Z",
    "Y",
    "X",
    "stride_d",
    "stride_h",
    "stride_w",
    "pad_d",
    "pad_h",
    "pad_w",
)
TILE_ENGINE_COLUMNS: tuple[str, ...] = ("kernel", "problem_idx", *PROBLEM_COLUMNS, "latency_ms", "tflops", "non_zero")
EXTRA_PROBLEM_COLUMNS: tuple[str, ...] = ("dil_d", "dil_h", "dil_w", "k_batch", "ndim")
CONFIG_COLUMNS: tuple[str, ...] = ("arch", "variant", "dtype", *GEMM_FIELD_NAMES)
RESULT_COLUMNS: tuple[str, ...] = (
    "status",  # one of STATUSES
    "max_abs_error",  # largest |kernel - reference| over the output or its sampled elements (empty if not verified)
    "max_rel_error",  # largest |kernel - reference| / (|reference| + atol) (empty if not verified)
    "tolerance",  # the bound the error was held to, as "rtol/atol"
    "latency_min_ms",  # spread of the timed repeats (latency_ms is their median)
    "latency_max_ms",
    "warmup",  # untimed runs before timing
    "repeat",  # timed runs
    "device",  # which device of the node ran it (index as the worker saw it)
    "device_name",  # e.g. "AMD Instinct MI355X (gfx950)"
    "clock_mhz",  # the device's reported peak engine clock
    "detail",  # why a pair is not ok: signal, status code, timeout; for a sampled check, on how many elements
    "ckspace_version",
)
COLUMNS: tuple[str, ...] = (*TILE_ENGINE_COLUMNS, *EXTRA_PROBLEM_COLUMNS, *CONFIG_COLUMNS, *RESULT_COLUMNS)

_SPATIAL = {
    "d": ("Di", "Z", "stride_d", "pad_d", "dil_d"),
    "h": ("Hi", "Y", "stride_h", "pad_h", "dil_h"),
    "w": ("Wi", "X", "stride_w", "pad_w", "dil_w"),
}
_KINDS = {f.name: f.kind for f in GEMM_FIELDS}


def problem_cells(problem: ConvProblem) -> dict[str, str]:
    """The problem's columns; the fields of absent dimensions are empty."""
    cells = {name: str(getattr(problem, name)) for name in ("N", "C", "K", "G", "k_batch", "ndim")}
    for dim, names in _SPATIAL.items():
        present = dim in problem.dims
        cells.update({name: str(getattr(problem, name)) if present else "" for name in names})
    return cells


def config_cells(config: GemmConfig) -> dict[str, str]:
    """The config's columns: enums by their value, booleans as 0/1."""
    cells = {"arch": config.arch, "variant": config.variant.value, "dtype": config.dtype.value}
    cells.update({name: csv_cell(getattr(config, name)) for name in GEMM_FIELD_NAMES})
    return cells


def _cell(row: Mapping[str, str | None], name: str) -> str:
    value = row.get(name)
    return "" if value is None else value.strip()


def measured_ndim(values: Mapping[str, int]) -> int:
    """A measurement row's dimension count when it has no ``ndim`` cell (tile_engine's schema):
    3D when ``Di`` or ``Z`` is filled, else 2D (its 2D files leave the depth cells empty)."""
    return 3 if "Di" in values or "Z" in values else 2


def problem_from_row(row: Mapping[str, str | None]) -> ConvProblem:
    """The problem of a row of either schema: ours names ``ndim``; tile_engine's is 3D when ``Di`` or
    ``Z`` is filled and 2D otherwise. Its columns are read as every problems CSV's are
    (:class:`~ckspace.workloads.problem_columns.ProblemColumns`); a reader of a whole file checks the
    header once with that class instead. Bad values raise :class:`InvalidInputError`."""
    header = [name for name in row if isinstance(name, str)]
    return ProblemColumns.of_header(header, "row").problem(row, 0, measured_ndim)  # type: ignore[arg-type]


def has_config(row: Mapping[str, str | None]) -> bool:
    """Whether the row carries the kernel's config (our schema), not only its name (tile_engine's)."""
    return all(_cell(row, name) for name in ("arch", "variant", "dtype", "tile_m", "pipeline"))


def config_from_row(row: Mapping[str, str | None]) -> GemmConfig:
    """The kernel's config from the config columns (validated; see :func:`has_config`)."""
    values: dict[str, object] = {name: _cell(row, name) for name in CONFIG_COLUMNS}
    for name in GEMM_FIELD_NAMES:
        kind = _KINDS[name]
        text = str(values[name])
        if kind is bool:
            values[name] = {"1": True, "0": False}.get(text, text)
        elif kind is int:
            try:
                values[name] = int(text)
            except ValueError:
                raise InvalidInputError(f"config column {name}={text!r} is not an integer") from None
    values["ndim"] = _cell(row, "ndim")
    return GemmConfig(**values)
