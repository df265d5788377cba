"""The problem columns of a CSV, read as ``--problem`` reads its keys.

Every reader of convolutions from a CSV (``plan``/``bench --problems``, ``train``/``evaluate
--data``) goes through :class:`ProblemColumns`, so a file is read the same way everywhere, and
the same way a ``--problem`` text is: a column whose name is a problem key in any case is read
(``Stride_H`` is ``stride_h``), and the shorthands ``stride``, ``pad`` and ``dil`` give every
dimension. What would otherwise be read as some other convolution without a word is refused in
one line naming the column:

* a column given twice (``N,...,N``, or ``N`` and ``n``): the csv module keeps the last;
* a column that spells a convolution's parameter in another vocabulary (``padding``,
  ``Stride_X``, ``groups``, MIOpenDriver's ``conv_stride_h``), which would be ignored;
* per-dimension columns for some dimensions only (a lone ``stride_h`` leaves ``stride_w`` at 1);
* an output size (``Do``, ``Ho``, ``Wo``, as problem lists write them) that differs from the one
  the row's sizes give: the row does not say which convolution it is.

Columns that are none of these (``idx``, a weight, notes) are the file's own business and left
alone. A row with fewer or more cells than the header is refused, naming its line. The ``bias``
column (:data:`~ckspace.workloads.problem_keys.BIAS`, any case) says whether a layer adds a bias; it is
no part of the convolution, so :meth:`ProblemColumns.problem` never reads it and only the readers
that build a framework's graphs ask :meth:`ProblemColumns.bias` (a cell other than 0 or 1 is refused
there, naming its line).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ckspace.core.errors import CkspaceError
from ckspace.workloads.problem import ConvProblem
from ckspace.workloads.problem_keys import BIAS, BIAS_VALUES, PROBLEM_KEYS, lacking_per_dimension, problem_key

REQUIRED_COLUMNS: tuple[str, ...] = ("N", "C", "K", "Wi", "X")
"""The problem columns every problems CSV has: what every problem states (a 2D or 3D file has its
Hi, Y, Di, Z too, which :class:`~ckspace.workloads.problem.ConvProblem` requires row by row)."""
OUTPUT_COLUMNS: dict[str, str] = {"do": "d", "ho": "h", "wo": "w"}
"""Output sizes problem lists carry beside the sizes (lower-cased name -> dimension); checked."""

_AXES = {"x": "w", "y": "h", "z": "d", "w": "w", "h": "h", "d": "d"}
_WORDS = {
    "stride": "stride",
    "strides": "stride",
    "conv_stride": "stride",
    "pad": "pad",
    "pads": "pad",
    "padding": "pad",
    "dil": "dil",
    "dils": "dil",
    "dilation": "dil",
    "dilations": "dil",
}
_PARAMETER = re.compile(r"^(?P<word>[a-z_]+?)[_\- ]?(?P<axis>[xyzwhd])?$")
_FOREIGN: dict[str, str] = {
    # PyTorch's Conv*d arguments and MIOpenDriver's long options, which say what ckspace's keys say
    "groups": "G",
    "group": "G",
    "group_count": "G",
    "batch": "N",
    "batchsize": "N",
    "batch_size": "N",
    "in_channels": "C",
    "out_channels": "K",
    "kernel_size": "Y and X (Z for 3D)",
    "in_d": "Di",
    "in_h": "Hi",
    "in_w": "Wi",
    "fil_d": "Z",
    "fil_h": "Y",
    "fil_w": "X",
}


def foreign_column(name: str) -> str | None:
    """The key(s) to write for a column that names a convolution's parameter in another vocabulary
    (``padding`` -> ``pad``, ``Stride_X`` -> ``stride_w``), or None for a column that does not."""
    lower = name.strip().lower()
    if lower in _FOREIGN:
        return _FOREIGN[lower]
    match = _PARAMETER.match(lower)
    if match is None or match["word"].rstrip("_- ") not in _WORDS:
        return None
    word = _WORDS[match["word"].rstrip("_- ")]
    return f"{word}_{_AXES[match['axis']]}" if match["axis"] else word


_PER_DIMENSION_SETS = ("", "w", "hw", "dhw")
"""The dimensions a file's per-dimension columns of one kind may cover: a 1D, 2D or 3D problem's."""


@dataclass(frozen=True)
class ProblemColumns:
    """Where each problem key and output size of a CSV is (column name by key), checked once from
    the header; :meth:`problem` then reads any row of the file."""

    source: str
    keys: dict[str, str]
    outputs: dict[str, str]
    width: int
    bias_column: str | None = None
    """The header's name of the :data:`~ckspace.workloads.problem_keys.BIAS` column, if it has one."""

    @classmethod
    def of_problems_header(cls, fieldnames: Sequence[str] | None, source: str | Path) -> ProblemColumns:
        """:meth:`of_header` of a problems CSV, which must state every problem column: one line
        naming the missing ones and the columns the file has."""
        layout = cls.of_header(fieldnames, source)
        missing = layout.lacking()
        if missing:
            have = ", ".join(fieldnames or ()) or "none"
            raise CkspaceError(f"{source}: not a problems CSV (missing columns {', '.join(missing)}; it has {have})")
        return layout

    @classmethod
    def of_header(cls, fieldnames: Sequence[str] | None, source: str | Path) -> ProblemColumns:
        """The header's problem columns, or one line naming the column that would be misread."""
        names = list(fieldnames or ())
        seen: dict[str, str] = {}
        keys: dict[str, str] = {}
        outputs: dict[str, str] = {}
        bias: str | None = None
        for name in names:
            folded = name.strip().lower()
            if folded in seen:
                twice = "twice" if seen[folded] == name else f"twice ({seen[folded]!r} and {name!r})"
                raise CkspaceError(f"{source}: column {name!r} is given {twice}; each column once")
            seen[folded] = name
            key = problem_key(name)
            if key is not None:
                keys[key] = name
            elif folded in OUTPUT_COLUMNS:
                outputs[OUTPUT_COLUMNS[folded]] = name
            elif folded == BIAS:
                bias = name
            elif (meant := foreign_column(name)) is not None:
                raise CkspaceError(
                    f"{source}: column {name!r} is not a problem column (write {meant}); problem columns "
                    f"(any case): {', '.join(PROBLEM_KEYS)}"
                )
        for short in ("stride", "pad", "dil"):
            dims = "".join(d for d in "dhw" if f"{short}_{d}" in keys)
            if short not in keys and dims not in _PER_DIMENSION_SETS:
                lacking = lacking_per_dimension(keys, "dhw" if "d" in dims else "hw")
                raise CkspaceError(f"{source}: columns {lacking}")
        return cls(str(source), keys, outputs, len(names), bias)

    def lacking(self) -> list[str]:
        """The :data:`REQUIRED_COLUMNS` the file has no column for."""
        return [key for key in REQUIRED_COLUMNS if key not in self.keys]

    def cell(self, row: Mapping[str | None, object], key: str) -> str:
        """The row's text under ``key`` ('' when the file has no such column or the cell is empty)."""
        column = self.keys.get(key)
        value = row.get(column) if column is not None else None
        return value.strip() if isinstance(value, str) else ""

    def bias(self, row: Mapping[str | None, object], line: int) -> bool:
        """Whether the row's layer adds a bias: its ``bias`` cell, 0 or 1 (no column: no bias); any
        other cell, an empty one too, is one line naming it and the valid values."""
        if self.bias_column is None:
            return False
        value = row.get(self.bias_column)
        text = value.strip() if isinstance(value, str) else ""
        if text in BIAS_VALUES:
            return text == "1"
        raise CkspaceError(
            f"{self.source}: line {line}: {self.bias_column}={text!r}; valid: {' or '.join(BIAS_VALUES)} "
            "(whether the layer adds a bias)"
        )

    def check_width(self, row: Mapping[str | None, object], line: int) -> None:
        """A row of another length than the header is a damaged file (a truncated last line, a
        stray comma): its cells would be read under other columns' names."""
        extra = row.get(None)
        missing = sum(value is None for key, value in row.items() if key is not None)
        if extra or missing:
            cells = self.width + len(extra or ()) - missing  # type: ignore[arg-type]
            raise CkspaceError(f"{self.source}: line {line} has {cells} cells, the header {self.width}")

    def problem(
        self, row: Mapping[str | None, object], line: int, ndim_of: Callable[[dict[str, int]], int]
    ) -> ConvProblem:
        """The row's problem. ``ndim_of`` gives the dimension count of a row without an ``ndim``
        cell (readers of problem lists and of measurements infer it differently) and may drop the
        neutral cells of the dimensions it leaves out. A damaged row (a cell that is no integer,
        another length than the header) or one whose per-dimension cells leave a dimension out is
        a :class:`CkspaceError` naming the line; integers that make no convolution are
        :class:`InvalidInputError` (a reader may skip those rows, and says so)."""
        self.check_width(row, line)
        values: dict[str, int] = {}
        for key in self.keys:
            text = self.cell(row, key)
            if not text:
                continue
            number = _integer(text)
            if number is None:
                raise CkspaceError(f"{self.source}: line {line}: {self.keys[key]}={text!r} is not an integer")
            values[key] = number
        if "ndim" not in values:
            values["ndim"] = ndim_of(values)
        dims = "dhw"[3 - values["ndim"] :] if values["ndim"] in (1, 2, 3) else ""
        lacking = lacking_per_dimension(values, dims)
        if lacking:
            raise CkspaceError(f"{self.source}: line {line}: {lacking}")
        problem = ConvProblem.from_values(values)
        self.check_outputs(problem, row, line)
        return problem

    def check_outputs(self, problem: ConvProblem, row: Mapping[str | None, object], line: int) -> None:
        """An output-size column must agree with the sizes: if it does not, the row names two
        convolutions (a pad or stride column spelt so that ckspace cannot read it, most often)."""
        for dim, column in self.outputs.items():
            value = row.get(column)
            text = value.strip() if isinstance(value, str) else ""
            if not text or dim not in problem.dims:
                continue
            if _integer(text) != problem.output_size(dim):
                raise CkspaceError(
                    f"{self.source}: line {line}: {column}={text} but the row's sizes give "
                    f"{problem.output_size(dim)} ({problem.text()}): which convolution is meant?"
                )


def _integer(text: str) -> int | None:
    """An integer cell; ``56.0`` is 56 (spreadsheets and pandas write integers so), ``56.5`` none."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)  # 1e400 is inf, not an error
    except ValueError:
        return None
    return int(value) if value.is_integer() else None
