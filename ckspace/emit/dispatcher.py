"""The generated C/C++ dispatcher: ``ckspace emit --with-selector``.

Beside the kernels, the emitted tree gets

* ``ckspace_dispatch.h`` — the C API (:file:`templates/ckspace_dispatch.h.j2` documents it);
* ``ckspace_dispatch.c`` — host C: the kernel table, the IsSupportedArgument checks rendered from
  their rule expressions (:mod:`ckspace.constraints.language.cexpr`), the vector-width fallbacks
  (:mod:`ckspace.select.fallbacks`), the features rendered from their formulas
  (:mod:`ckspace.features.c_source`) and the selection loop;
* ``ckspace_model/`` — each cell's ranker as QuickScorer tables (:mod:`ckspace.select.forest`: the
  same scores as TL2cgen's C, several times faster over a call's rows) and its regressor compiled to
  C by TL2cgen (:mod:`ckspace.select.compiled`);
* ``ckspace_dispatch_run.cpp`` — ``ckspace_run``, compiled with the kernels by a HIP compiler.

Nothing here is written by hand per kernel or per rule: regenerate after any change. The Python
:class:`~ckspace.select.selector.Selector` given the same candidates and the library as its
fallback pool returns the same kernel (tests compare them on real and drawn problems).
"""

from __future__ import annotations

import logging
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import jinja2
import numpy as np

from ckspace.constraints.language.cexpr import C_HELPERS, to_c
from ckspace.constraints.rulebook.problem_rules import PARAMS, gemm_problem_templates
from ckspace.core.config import GemmConfig
from ckspace.core.errors import CkspaceError
from ckspace.core.fields import GEMM_FIELD_NAMES
from ckspace.core.kernel_key import KernelKey
from ckspace.core.vocab import Dtype, Variant
from ckspace.environment.files import banner
from ckspace.features.c_source import c_double, features_c
from ckspace.features.hardware import HardwareFacts, hardware_facts
from ckspace.features.matrix import (
    ANALYTICAL_FEATURE,
    CONFIG_FEATURES,
    FEATURE_NAMES,
    FORMULA_COLUMNS,
    PROBLEM_FEATURES,
    PROBLEM_VALUES,
    ConfigTable,
    feature_formulas,
)
from ckspace.features.performance import constant
from ckspace.select.compiled import model_sources
from ckspace.select.fallbacks import family_key, vector_variants
from ckspace.select.forest import Forest, forest_c
from ckspace.select.store import RANKER_FILE, TFLOPS_FILE, load_model, model_facts, model_texts, shipped_model_dir
from ckspace.select.support import PROBLEM_QUANTITIES, ModelDomain, source_text
from ckspace.workloads.operands import OPERANDS
from ckspace.workloads.problem import ELEMENTS_MAX, FIELD_BOUNDS, TENSOR_ELEMENTS

log = logging.getLogger(__name__)

API_VERSION = 5
"""``CKSPACE_API_VERSION``: raised whenever a C function's signature, a status code or
``ckspace_conv_problem`` changes (2: ``ckspace_run`` takes the caller's workspace; added
``ckspace_api_version``, ``ckspace_kernel_index``, ``ckspace_workspace_size``; 3: added
``ckspace_arch``, ``ckspace_arch_matches``, ``ckspace_device_supported`` and ``CKSPACE_NO_DEVICE``;
4: added the strided run with an epilogue (``ckspace_strides``, ``ckspace_epilogue``,
``ckspace_check_layout``, ``ckspace_strided_workspace_size``, ``ckspace_strided_run``,
``CKSPACE_INVALID_LAYOUT``) and ``ckspace_select_explained`` with its ``CKSPACE_ESTIMATE_*``;
5: a library may hold several archs (:func:`fleet_dispatcher_sources`): ``ckspace_arch`` is their
comma-separated list, every call answers for the current device's arch (its kernels, its model)
and ``CKSPACE_NO_ARCH`` refuses a device of an arch the library lacks). A library of one arch is
the API of version 4 unchanged and says 4 (:data:`ONE_ARCH_API_VERSION`): its header and sources
are the same bytes as before."""
ONE_ARCH_API_VERSION = 4
"""What a library of one arch says: version 5 changed nothing for it."""


@dataclass(frozen=True)
class Status:
    """One status code of the C API: its macro's name (after ``CKSPACE_``), value, what the header
    says of it and the words a caller prints; ``fleet``: only a library of several archs has it."""

    name: str
    code: int
    doc: str
    text: str
    fleet: bool = False


STATUSES: tuple[Status, ...] = (
    Status("OK", 0, "success", "ok"),
    Status(
        "NO_KERNEL", 1, "no kernel of the library (nor a fallback) can run the problem", "no kernel can run the problem"
    ),
    Status("UNSUPPORTED", 2, "ckspace_run: this kernel cannot run this problem", "the kernel cannot run the problem"),
    Status("INVALID_PROBLEM", 3, "the problem itself is malformed (see ckspace_conv_problem)", "malformed problem"),
    Status("INVALID_KERNEL", 4, "kernel index out of range", "kernel index out of range"),
    Status("LAUNCH_FAILED", 5, "ckspace_run: the kernel's launcher reported an error", "launch failed"),
    Status(
        "WORKSPACE_TOO_SMALL",
        6,
        "ckspace_run: fewer workspace bytes than ckspace_workspace_size",
        "the workspace is smaller than ckspace_workspace_size (ckspace_strided_workspace_size for a strided run)",
    ),
    Status("NO_DEVICE", 7, "ckspace_device_supported: HIP reports no current device", "HIP reports no current device"),
    Status(
        "INVALID_LAYOUT",
        8,
        "ckspace_strided_run: strides or an epilogue the library does not serve (ckspace_check_layout)",
        "strides or an epilogue the library does not serve",
    ),
    Status(
        "NO_ARCH",
        9,
        "the current device's arch is none of ckspace_arch()'s (a library of several archs)",
        "the current device's arch is not one the library was built for",
        fleet=True,
    ),
)
"""The C API's status codes, stated once: the header's macros, the plugin's words and
:data:`ckspace.run.library.STATUS` are generated from them."""

ESTIMATES: tuple[tuple[str, str], ...] = (
    ("MODEL", "the cell's trained model"),
    (
        "EXTRAPOLATED",
        "the model extrapolated beyond its training domain (the nearest kernel it saw, moved by the analytical ratio)",
    ),
    ("ANALYTICAL", "the analytical model, calibrated in level (no model for the cell)"),
)
"""Where ``ckspace_select_explained``'s predicted TFLOPS come from (``CKSPACE_ESTIMATE_<name>``,
numbered in this order): :class:`~ckspace.core.vocab.ScoreSource`'s three sources."""

ACTIVATIONS: tuple[tuple[str, str], ...] = (
    ("NONE", "y = x"),
    ("RELU", "y = x > 0 ? min(x, upper) : slope * x (ReLU; ReLU6 with upper 6; leaky with a slope)"),
    ("SIGMOID", "y = 1 / (1 + exp(-x))"),
    ("TANH", "y = tanh(x)"),
    ("ELU", "y = x > 0 ? x : alpha * (exp(x) - 1)"),
)
"""The epilogue's activations (``CKSPACE_ACTIVATION_<name>``, numbered in this order), applied after
the bias: what a hipDNN graph's pointwise nodes may ask after a convolution."""
LAYOUT_ALIGNMENT = 256
"""Bytes each staged tensor of a strided run is aligned to in the workspace."""
MAX_RANK = 5
"""Dims of a tensor of a strided run: N and C, then up to three spatial ones."""

HEADER = "ckspace_dispatch.h"
HOST_SOURCE = "ckspace_dispatch.c"
RUN_SOURCE = "ckspace_dispatch_run.cpp"
LAYOUT_HEADER = "ckspace_layout.h"
"""The element of a layout conversion, one source for the GPU and the host stand-in."""
MODEL_DIR = "ckspace_model"


def _cell_prefix(variant: Variant, dtype: Dtype, unit: str | None = None) -> str:
    """The prefix of a cell's C functions and model files (``unit``: the arch of a library of
    several archs, whose cells are per arch)."""
    return f"cks_{unit}_{variant.value}_{dtype.value}" if unit else f"cks_{variant.value}_{dtype.value}"


def ranker_source(variant: Variant, dtype: Dtype, unit: str | None = None) -> str:
    """Where a tree holds a cell's ranker (its QuickScorer tables in C): a cell ranked by a model
    has this file, one ranked by the analytical score has none."""
    return f"{MODEL_DIR}/{_cell_prefix(variant, dtype, unit)}_ranker.c"


def arch_unit(arch: str) -> str:
    """The host C of one arch of a library of several archs."""
    return f"ckspace_dispatch_{arch}.c"


FIELD_DOCS: dict[str, str] = {
    "variant": "CKSPACE_FORWARD, CKSPACE_BWD_DATA or CKSPACE_BWD_WEIGHT",
    "dtype": "CKSPACE_DTYPE_*",
    "ndim": "spatial dimensions: 1, 2 or 3",
    "N": "batch size (images)",
    "G": "groups; C and K are multiples of G",
    "C": "input channels, all groups together",
    "K": "output channels, all groups together",
    "Di": "input depth (3D)",
    "Hi": "input height (2D, 3D)",
    "Wi": "input width",
    "Z": "filter depth (3D)",
    "Y": "filter height (2D, 3D)",
    "X": "filter width",
    "stride_d": "stride along depth, >= 1",
    "stride_h": "stride along height, >= 1",
    "stride_w": "stride along width, >= 1",
    "pad_d": "padding before and after along depth, >= 0",
    "pad_h": "padding along height, >= 0",
    "pad_w": "padding along width, >= 0",
    "dil_d": "dilation along depth, >= 1",
    "dil_h": "dilation along height, >= 1",
    "dil_w": "dilation along width, >= 1",
    "k_batch": "split-K factor: 1, or more for bwd_weight kernels that split the reduction",
}
STRUCT_FIELDS: tuple[str, ...] = ("variant", "dtype", *PARAMS)
"""The fields of ``ckspace_conv_problem``, in order (all ``int64_t``)."""
assert set(FIELD_DOCS) == set(STRUCT_FIELDS), "every field of the C problem is documented"

_C_FACTORS: dict[str, tuple[str, ...]] = {
    "N": ("p->N",),
    "G": ("p->G",),
    "C": ("p->C",),
    "K": ("p->K",),
    "Cg": ("p->C / p->G",),
    "Kg": ("p->K / p->G",),
    "input_volume": ("size[0]", "size[1]", "size[2]"),
    "output_volume": ("out[0]", "out[1]", "out[2]"),
    "filter_volume": ("filter[0]", "filter[1]", "filter[2]"),
}
"""The C (in ``cks_normalize``) of each quantity :data:`~ckspace.workloads.problem.TENSOR_ELEMENTS` names;
absent dimensions are 1 there."""


def problem_checks() -> dict[str, object]:
    """What ``cks_normalize`` refuses beside the rules, from :class:`~ckspace.workloads.problem.ConvProblem`'s
    own statement of its bounds: each field's range (:data:`~ckspace.workloads.problem.FIELD_BOUNDS`)
    and each tensor's element count (:data:`~ckspace.workloads.problem.TENSOR_ELEMENTS`, at most
    :data:`~ckspace.workloads.problem.ELEMENTS_MAX`)."""
    missing = [f for f in FIELD_BOUNDS if f not in STRUCT_FIELDS]
    unknown = sorted({f for factors in TENSOR_ELEMENTS.values() for f in factors} - set(_C_FACTORS))
    if missing or unknown:
        raise AssertionError(f"the C problem lacks fields {missing} or factors {unknown} of ConvProblem")
    return {
        "ndim_bounds": FIELD_BOUNDS["ndim"],
        "bounds": [(name, low, high) for name, (low, high) in FIELD_BOUNDS.items() if name != "ndim"],
        "tensors": [
            (tensor, [c for f in factors for c in _C_FACTORS[f]]) for tensor, factors in TENSOR_ELEMENTS.items()
        ],
        "elements_max": ELEMENTS_MAX,
        "ranges": _ranges_text(),
    }


def _ranges_text() -> list[str]:
    """FIELD_BOUNDS as comment lines of the header: the fields of each range, wrapped."""
    groups: dict[tuple[int, int], list[str]] = {}
    for name, bounds in FIELD_BOUNDS.items():
        groups.setdefault(bounds, []).append(name)
    return [
        line
        for (low, high), names in groups.items()
        for line in textwrap.wrap(f"{low} .. {high}: {', '.join(names)}", 92, subsequent_indent="    ")
    ]


@dataclass(frozen=True)
class Library:
    """What the dispatcher serves: the kernels in table order (name order), which of them the
    selector ranks (the others are only vector-width fallbacks), and each candidate's fallbacks."""

    kernels: tuple[GemmConfig, ...]
    candidate: tuple[bool, ...]
    fallbacks: tuple[tuple[int, ...], ...]

    @classmethod
    def build(cls, kernels: Sequence[GemmConfig], fallback_only: frozenset[str] = frozenset()) -> Library:
        kernels = tuple(sorted(kernels, key=lambda c: c.name))
        index = {c.kernel_key(): i for i, c in enumerate(kernels)}
        fallbacks: list[tuple[int, ...]] = [() for _ in kernels]
        by_cell: dict[tuple, list[int]] = {}
        for i, c in enumerate(kernels):
            by_cell.setdefault((c.arch, c.variant, c.dtype), []).append(i)
        for members in by_cell.values():
            variants = vector_variants([kernels[i] for i in members])
            for i, family in zip(members, variants, strict=True):
                found = [index.get(v.kernel_key()) for v in family]
                fallbacks[i] = tuple(j for j in found if j is not None)
        return cls(kernels, tuple(c.name not in fallback_only for c in kernels), tuple(fallbacks))


def model_directory(
    arch: str, variant: Variant, dtype: Dtype, model_dirs: Mapping[tuple[Variant, Dtype], Path]
) -> Path:
    """The model directory that ranks a cell: the one given for it, else the one ckspace ships for
    it (which may not exist: the cell is then ranked by the analytical score)."""
    return Path(model_dirs.get((variant, dtype)) or shipped_model_dir(arch, variant.value, dtype.value))


class CellModel(NamedTuple):
    """A cell's model as the dispatcher compiles it: its two files' text (verified), its training
    domain and the facts its features are priced with (its card's measured constants)."""

    texts: dict[str, str]
    domain: ModelDomain
    hw: HardwareFacts


def _cell_models(
    cells: Sequence[tuple[Variant, Dtype]], arch: str, model_dirs: Mapping[tuple[Variant, Dtype], Path]
) -> dict[tuple[Variant, Dtype], CellModel | None]:
    """Per cell its model, or None for the analytical score."""
    out: dict[tuple[Variant, Dtype], CellModel | None] = {}
    for variant, dtype in cells:
        directory = model_directory(arch, variant, dtype, model_dirs)
        if not Path(directory).is_dir():
            log.info(
                "no model for %s %s %s: the dispatcher ranks that cell by the analytical score",
                arch,
                variant.value,
                dtype.value,
            )
            out[variant, dtype] = None
            continue
        _, _, card = load_model(Path(directory))
        if (card.arch, card.variant, card.dtype) != (arch, variant.value, dtype.value):
            raise CkspaceError(
                f"model {directory} is for {card.arch} {card.variant} {card.dtype}, not for the "
                f"library's {arch} {variant.value} {dtype.value} kernels"
            )
        assert card.domain is not None  # load_model refuses a card without one
        out[variant, dtype] = CellModel(model_texts(Path(directory), card), card.domain, model_facts(card))
    return out


def dispatcher_sources(
    library: Library, arch: str, environment: jinja2.Environment, model_dirs: Mapping[tuple[Variant, Dtype], Path] = {}
) -> dict[str, bytes]:
    """The dispatcher's files (path in the tree -> bytes) for ``library``: each modelled cell's
    ranker and regressor in C, the header, the host C and ``ckspace_run``."""
    files, table = _host_sources(library, arch, environment, model_dirs, None)
    files[HEADER] = _header(environment, arch, None)
    files[LAYOUT_HEADER] = environment.get_template("ckspace_layout.h.j2").render().encode()
    files[RUN_SOURCE] = _run_source(environment, table["kernels"])
    return files


def fleet_dispatcher_sources(
    libraries: Mapping[str, Library],
    environment: jinja2.Environment,
    model_dirs: Mapping[str, Mapping[tuple[Variant, Dtype], Path]] = {},
) -> dict[str, bytes]:
    """The dispatcher of a library of several archs (``libraries``: each arch's kernels, as its
    own target lists them). Each arch's host C (:func:`arch_unit`) is the one-arch dispatcher of
    its kernels with its models and hardware facts, its C API renamed ``cks_<arch>_*`` and hidden;
    ``ckspace_dispatch.c`` holds the library's kernel table (every kernel once, in name order: the
    indices of the C API) and answers each call with the unit of the current device's arch,
    mapping kernel indices between the two; ``ckspace_run`` launches the library's kernels, each
    compiled for the archs that hold it."""
    if len(libraries) < 2:
        raise CkspaceError("a library of several archs needs two archs or more")
    archs = sorted(libraries)
    names = sorted({c.name for library in libraries.values() for c in library.kernels})
    index = {name: i for i, name in enumerate(names)}
    files: dict[str, bytes] = {}
    units = []
    for arch in archs:
        unit_files, _ = _host_sources(libraries[arch], arch, environment, model_dirs.get(arch, {}), arch)
        files.update(unit_files)
        units.append({"arch": arch, "global": [index[c.name] for c in libraries[arch].kernels]})
    local = [[-1] * len(names) for _ in archs]
    for a, unit in enumerate(units):
        for i, g in enumerate(unit["global"]):
            local[a][g] = i
    files[HOST_SOURCE] = (
        environment.get_template("ckspace_dispatch_fleet.c.j2")
        .render({"names": names, "units": units, "local": local, "arch_list": ",".join(archs)})
        .encode()
    )
    files[HEADER] = _header(environment, ",".join(archs), archs)
    files[LAYOUT_HEADER] = environment.get_template("ckspace_layout.h.j2").render().encode()
    files[RUN_SOURCE] = _run_source(environment, [{"name": name} for name in names])
    return files


FLEET_RENAMED: tuple[str, ...] = (
    "ckspace_api_version",
    "ckspace_arch",
    "ckspace_arch_matches",
    "ckspace_kernel_count",
    "ckspace_kernel_name",
    "ckspace_kernel_index",
    "ckspace_workspace_size",
    "ckspace_is_supported",
    "ckspace_check_layout",
    "ckspace_strided_workspace_size",
    "ckspace_strided_run",
    "ckspace_select",
    "ckspace_select_explained",
    "ckspace_run",
    "cks_run_checks",
)
"""The functions an arch's unit of a library of several archs names ``cks_<arch>_<name>``: the C
API it defines (hidden) and ``ckspace_run``, which ``ckspace_dispatch.c`` bridges to the library's."""


def _header(environment: jinja2.Environment, arch: str, archs: Sequence[str] | None) -> bytes:
    """``ckspace_dispatch.h`` of a library of ``arch`` (``archs``: the archs of a library of several)."""
    context = _strided_context()
    if archs is None:
        context["statuses"] = [s for s in STATUSES if not s.fleet]
    return (
        environment.get_template("ckspace_dispatch.h.j2")
        .render(
            {
                "api_version": API_VERSION if archs else ONE_ARCH_API_VERSION,
                "arch": arch,
                "archs": list(archs or []),
                "variants": [(v.value, v.code) for v in Variant],
                "dtypes": [(d.value, d.code) for d in Dtype],
                "problem": problem_checks(),
                "fields": [(f, FIELD_DOCS[f]) for f in STRUCT_FIELDS],
                **context,
            }
        )
        .encode()
    )


def _run_source(environment: jinja2.Environment, kernels: Sequence[Mapping[str, object]]) -> bytes:
    return (
        environment.get_template("ckspace_dispatch_run.cpp.j2")
        .render({"kernels": kernels, "operand_map": operand_map()})
        .encode()
    )


def _host_sources(
    library: Library,
    arch: str,
    environment: jinja2.Environment,
    model_dirs: Mapping[tuple[Variant, Dtype], Path],
    unit: str | None,
) -> tuple[dict[str, bytes], dict[str, object]]:
    """The host C of ``library`` (``unit``: as the arch's unit of a library of several archs) with
    its models' files, and its kernel table."""
    if not library.kernels:
        raise CkspaceError(
            "the dispatcher needs at least one GEMM kernel; the request emitted none" + (f" for {arch}" if unit else "")
        )
    hw = hardware_facts(arch)
    cells = sorted({(c.variant, c.dtype) for c in library.kernels}, key=lambda vd: (vd[0].code, vd[1].code))
    cell_index = {cell: i for i, cell in enumerate(cells)}
    models = _cell_models(cells, arch, model_dirs)
    cell_hw = {cell: model.hw if model is not None else hw for cell, model in models.items()}
    domains = {cell: model.domain for cell, model in models.items() if model is not None}
    table = _kernel_table(library, cell_index, domains, cell_hw)
    checks = _rule_checks(library, cell_index)
    cell_context, files = _cell_sources(cells, models, cell_hw, table.pop("model_rows"), unit)
    variants = [(v.value, v.code) for v in Variant]
    dtypes = [(d.value, d.code) for d in Dtype]
    strided = _strided_context()
    if unit is None:
        strided["statuses"] = [s for s in STATUSES if not s.fleet]
    files[arch_unit(unit) if unit else HOST_SOURCE] = (
        environment.get_template("ckspace_dispatch.c.j2")
        .render(
            {
                **table,
                "fields": GEMM_FIELD_NAMES,
                "checks": checks,
                "cells": cell_context,
                "helpers": C_HELPERS,
                "arch": arch,
                "unit": unit,
                "renamed": FLEET_RENAMED,
                "problem": problem_checks(),
                "variants": variants,
                "dtypes": dtypes,
                **_feature_layout(),
                **strided,
            }
        )
        .encode()
    )
    return files, table


def _strided_context() -> dict[str, object]:
    """What the header and the host C say of statuses, estimates and strided runs."""
    return {
        "statuses": STATUSES,
        "estimates": ESTIMATES,
        "activations": ACTIVATIONS,
        "max_rank": MAX_RANK,
        "alignment": LAYOUT_ALIGNMENT,
        "tensor_of_operand": tensor_of_operand(),
    }


def _kernel_table(
    library: Library,
    cell_index: Mapping[tuple[Variant, Dtype], int],
    domains: Mapping[tuple[Variant, Dtype], ModelDomain],
    cell_hw: Mapping[tuple[Variant, Dtype], HardwareFacts],
) -> dict[str, object]:
    """The host C's kernel table: per kernel its cell, row and config features, its fallbacks (a
    range of ``fallbacks``), its other vector-width variants (a range of ``members``) and, when it
    lies outside its cell's model domain, the sibling inside it that its score is taken from (an
    index into ``siblings``); kernels and siblings with their rows in their cell's ranker tables
    (``model_rows``). Each kernel's and sibling's model columns are priced with its cell's facts
    (``cell_hw``: a model's measured constants), as its cell's formulas are."""
    table = _priced_table(library.kernels, cell_hw)
    reasons = [
        domains[c.variant, c.dtype].outside(c) if (c.variant, c.dtype) in domains else None for c in library.kernels
    ]
    distinct: dict[KernelKey, tuple[int, GemmConfig]] = {}  # the siblings the extrapolated kernels share, each once
    sibling_of = [
        distinct.setdefault((s := domains[c.variant, c.dtype].sibling(c)).kernel_key(), (len(distinct), s))[0]
        if reason
        else -1
        for c, reason in zip(library.kernels, reasons, strict=True)
    ]
    siblings = _priced_table([s for _, s in distinct.values()], cell_hw)
    by_family: dict[tuple, list[int]] = {}
    for i, config in enumerate(library.kernels):
        by_family.setdefault(family_key(config), []).append(i)
    members: list[int] = []  # per kernel, the other vector-width variants of it in the library
    flat: list[int] = []
    kernels = []
    for i, config in enumerate(library.kernels):
        begin = len(flat)
        flat += library.fallbacks[i]
        member_begin = len(members)
        members += [j for j in by_family[family_key(config)] if j != i]
        cell_model = (config.variant, config.dtype) in domains
        kernels.append(
            {
                "name": config.name,
                "cell": cell_index[config.variant, config.dtype],
                "block_values": table.block[i],
                "ndim": config.ndim,
                "candidate": int(library.candidate[i]),
                "fallback_begin": begin,
                "fallback_end": len(flat),
                "row": [str(v) for v in config.row()],
                "formula_columns": [c_double(v) for v in table.formula_columns[i]],
                "block": [c_double(v) for v in table.block[i]],
                "sibling": sibling_of[i],
                "member_begin": member_begin,
                "member_end": len(members),
                "source": source_text(cell_model, reasons[i]).replace("*/", "* /"),
            }
        )
    sibling_entries = [
        {
            "name": c.name,
            "cell": cell_index[c.variant, c.dtype],
            "block_values": siblings.block[j],
            "formula_columns": [c_double(v) for v in siblings.formula_columns[j]],
            "block": [c_double(v) for v in siblings.block[j]],
        }
        for j, c in enumerate(siblings.configs)
    ]
    return {
        "kernels": kernels,
        "fallbacks": flat,
        "members": members,
        "siblings": sibling_entries,
        "model_rows": _number_model_rows([*kernels, *sibling_entries]),
    }


def _priced_table(configs: Sequence[GemmConfig], cell_hw: Mapping[tuple[Variant, Dtype], HardwareFacts]) -> ConfigTable:
    """The table of ``configs``, each row priced with its cell's facts (a table per cell, its rows
    put back in the configs' order; the merged table's own ``constants`` are no one cell's, so it is
    read by row, never scored whole)."""
    by_cell: dict[tuple[Variant, Dtype], list[int]] = {}
    for i, c in enumerate(configs):
        by_cell.setdefault((c.variant, c.dtype), []).append(i)
    block = np.empty((len(configs), len(CONFIG_FEATURES)))
    formula_columns = np.empty((len(configs), len(FORMULA_COLUMNS)))
    for cell, rows in by_cell.items():
        part = ConfigTable.build([configs[i] for i in rows], cell_hw[cell])
        block[rows], formula_columns[rows] = part.block, part.formula_columns
    return ConfigTable(tuple(configs), block, formula_columns)


def _number_model_rows(entries: Sequence[dict]) -> dict[int, list]:
    """Give each kernel and sibling (in that order) its ``model_row``, its row in its cell's ranker
    tables, and return per cell the config blocks of those rows: the ranker applies the config
    features' splits at generation (:func:`~ckspace.select.forest.forest_c`)."""
    rows: dict[int, list] = {}
    for entry in entries:
        entry["model_row"] = len(rows.setdefault(entry["cell"], []))
        rows[entry["cell"]].append(entry.pop("block_values"))
    return rows


def _rule_checks(library: Library, cell_index: Mapping[tuple[Variant, Dtype], int]) -> list[dict[str, object]]:
    """Per cell and ndim of the library, its IsSupportedArgument rules in C
    (:func:`~ckspace.constraints.language.cexpr.to_c`)."""
    checks = []
    for variant, dtype in cell_index:
        for ndim in sorted({c.ndim for c in library.kernels if (c.variant, c.dtype) == (variant, dtype)}):
            rules = [
                {
                    "name": r.name,
                    "source": r.source.replace("*/", "* /"),
                    "vector": r.vector_field is not None,
                    "c": to_c(r.expr, lambda f: f"k->{f}", lambda p: f"p->{p}"),
                }
                for r in gemm_problem_templates(variant, ndim, dtype)
            ]
            checks.append(
                {
                    "cell": f"{variant.value} {ndim}D {dtype.value}",
                    "cell_index": cell_index[variant, dtype],
                    "ndim": ndim,
                    "function": f"cks_checks_{variant.value}_{ndim}d_{dtype.value}",
                    "rules": rules,
                }
            )
    return checks


def _cell_sources(
    cells: Sequence[tuple[Variant, Dtype]],
    models: Mapping[tuple[Variant, Dtype], CellModel | None],
    cell_hw: Mapping[tuple[Variant, Dtype], HardwareFacts],
    model_rows: Mapping[int, list],
    unit: str | None = None,
) -> tuple[list[dict[str, object]], dict[str, bytes]]:
    """Per cell its context in the host C (features in C, whether a model ranks it) and the files
    of its ranker (QuickScorer tables over the cell's ``model_rows``: :func:`~ckspace.select.forest.forest_c`)
    and regressor (TL2cgen: :func:`~ckspace.select.compiled.model_sources`) in C."""
    files: dict[str, bytes] = {}
    cell_context = []
    for index, (variant, dtype) in enumerate(cells):
        prefix = _cell_prefix(variant, dtype, unit)
        model = models[variant, dtype]
        texts = model.texts if model is not None else None
        function = f"{prefix}_features"
        cell_context.append(
            {
                "prefix": prefix,
                "model": texts is not None,
                "variant_code": variant.code,
                "dtype_code": dtype.code,
                "features_function": function,
                "score_scale": c_double(model.domain.score_per_log2_tflops) if model else "0.0",
                "problem_ranges": [
                    (c_double(model.domain.problems[name][0]), c_double(model.domain.problems[name][1]))
                    for name in PROBLEM_QUANTITIES
                ]
                if model
                else [],
                "features": features_c(function, feature_formulas(variant, dtype, cell_hw[variant, dtype])),
            }
        )
        if texts is not None:
            forest = Forest.from_model_text(texts[RANKER_FILE])
            files[ranker_source(variant, dtype, unit)] = forest_c(
                f"{prefix}_ranker", forest, _PROBLEM_SPAN, _CONFIG_SPAN, model_rows[index]
            ).encode()
            for path, text in model_sources(texts[TFLOPS_FILE], f"{prefix}_tflops", len(FEATURE_NAMES)).items():
                files[f"{MODEL_DIR}/{path}"] = f"{banner('c', 'ckspace emit --with-selector')}\n{text}".encode()
    return cell_context, files


_PROBLEM_SPAN = range(len(PROBLEM_FEATURES))
_CONFIG_SPAN = range(len(PROBLEM_FEATURES), len(PROBLEM_FEATURES) + len(CONFIG_FEATURES))
"""Where a feature row holds the problem block (the same in every row of a call) and the config
block (a kernel's, the same in every call)."""


def _feature_layout() -> dict[str, object]:
    """The sizes of the feature vector's parts, where the analytical score sits in it and the level
    that turns it into TFLOPS (:func:`~ckspace.features.performance.calibrated_tflops`)."""
    return {
        "n_features": len(FEATURE_NAMES),
        "n_formula_columns": len(FORMULA_COLUMNS),
        "n_config_features": len(CONFIG_FEATURES),
        "n_problem_values": len(PROBLEM_VALUES),
        "problem_values": ", ".join(f"(double)p.{name}" for name in PROBLEM_VALUES),
        "analytical_index": FEATURE_NAMES.index(ANALYTICAL_FEATURE),
        "analytical_level": c_double(constant("analytical_level")),
        "quantities": [_C_FACTORS[name] for name in PROBLEM_QUANTITIES],
    }


def operand_map() -> list[list[int]]:
    """Per variant code, the GEMM operand (0 = a, 1 = b, 2 = c) of In, Wei and Out."""
    rows = []
    for variant in Variant:
        gemm = OPERANDS[variant]
        tensors = [gemm.a.tensor, gemm.b.tensor, gemm.c.tensor]
        rows.append([tensors.index(t) for t in ("In", "Wei", "Out")])
    return rows


def tensor_of_operand() -> list[list[int]]:
    """Per variant code, the tensor (0 = In, 1 = Wei, 2 = Out) of each GEMM operand (a, b, c):
    :func:`operand_map` inverted."""
    return [[row.index(operand) for operand in range(3)] for row in operand_map()]


def host_units(files: Sequence[str]) -> list[str]:
    """The C translation units of the host part among a tree's files."""
    return [
        HOST_SOURCE,
        *sorted(f for f in files if f.startswith("ckspace_dispatch_") and f.endswith(".c")),
        *sorted(f for f in files if f.startswith(f"{MODEL_DIR}/") and f.count("/") == 1 and f.endswith(".c")),
    ]
