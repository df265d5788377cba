"""Features of (problem, kernel config) pairs: the selector's model inputs.

Three blocks, always in this order (the order and names are the versioned feature spec saved with
every model; change either and bump :data:`FEATURE_VERSION`):

* problem: sizes as CK sees them (per-group channels, spatial/filter sizes, strides, pads,
  dilations), the variant's implicit GEMM M/N/K, FLOPs, bytes moved and arithmetic intensity;
* config: every :class:`~ckspace.core.config.GemmConfig` field (enums as their codes) plus
  threads per block, LDS footprint and the pipeline's blocks-per-CU hint;
* interaction: what a tile does to this problem on this arch: quantisation efficiency along M,
  N and K, output tiles against compute units, last-wave efficiency, padding waste, K-loop trip
  count, blocks per CU that LDS allows, channel padding the vector widths force, tile-level
  global traffic, a roofline TFLOPS estimate, and the analytical performance model's TFLOPS.

The last interaction feature is the *analytical model* (:data:`ANALYTICAL_FEATURE`,
:mod:`ckspace.features.performance`): a kernel's time for the problem from its tiles, occupancy,
pipeline, scheduler, epilogue, vector widths and the arch's facts. It ranks kernels where no
trained model exists and scales the trained model's estimates for kernels outside its training
domain (:mod:`ckspace.select.support`); cross-validation scores it beside the model.

The problem and interaction features are stated once, as formulas
(:mod:`ckspace.features.formula`): the Python selector evaluates them, the generated C dispatcher
is rendered from them. Config columns depend on the candidates only, so a selector computes them
once (:class:`ConfigTable`, emitted as data into the dispatcher); per problem it adds the scalars and
the interactions in a handful of numpy operations over all candidates at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ckspace.core.arch import arch_facts, element_size, lds_bytes
from ckspace.core.config import GemmConfig
from ckspace.core.fields import GEMM_FIELD_NAMES
from ckspace.core.vocab import Dtype, Variant
from ckspace.features import performance
from ckspace.features.formula import Formula, Program, ceil, config, floor, log2, maximum, minimum, problem
from ckspace.features.hardware import HardwareFacts
from ckspace.workloads.operands import OPERANDS
from ckspace.workloads.problem import PROBLEM_FIELDS, ConvProblem

FEATURE_VERSION = 2

PROBLEM_FEATURES: tuple[str, ...] = (
    "N",
    "G",
    "Cg",
    "Kg",
    "Di",
    "Hi",
    "Wi",
    "Z",
    "Y",
    "X",
    "Do",
    "Ho",
    "Wo",
    "stride_d",
    "stride_h",
    "stride_w",
    "pad_d",
    "pad_h",
    "pad_w",
    "dil_d",
    "dil_h",
    "dil_w",
    "gemm_m",
    "gemm_n",
    "gemm_k",
    "log2_gemm_m",
    "log2_gemm_n",
    "log2_gemm_k",
    "log2_flops",
    "log2_bytes",
    "arithmetic_intensity",
)
CONFIG_FEATURES: tuple[str, ...] = (
    *GEMM_FIELD_NAMES,
    "threads",
    "lds_bytes",
    "block_per_cu_hint",
    "warp_iters_m",
    "warp_iters_n",
    "warp_iters_k",
)
INTERACTION_FEATURES: tuple[str, ...] = (
    "eff_m",
    "eff_n",
    "eff_k",
    "eff_mnk",
    "padding_waste",
    "tiles_m",
    "tiles_n",
    "log2_tiles",
    "tiles_per_cu",
    "last_wave_eff",
    "waves_of_blocks",
    "k_loop",
    "blocks_per_cu_lds",
    "vec_pad_eff_a",
    "vec_pad_eff_b",
    "vec_pad_eff_c",
    "log2_tile_traffic",
    "tile_intensity",
    "log2_roofline_tflops",
    "log2_model_tflops",
)
FEATURE_NAMES: tuple[str, ...] = PROBLEM_FEATURES + CONFIG_FEATURES + INTERACTION_FEATURES
FORMULA_COLUMNS: tuple[str, ...] = (
    "block_per_cu_hint",
    "elem",
    "lds_bytes",
    "tile_k",
    "tile_m",
    "tile_n",
    "vec_a",
    "vec_b",
    "vec_c",
    *performance.COLUMNS,
)
"""The config columns the feature formulas read, in the order the generated C receives them."""
ANALYTICAL_FEATURE = "log2_model_tflops"


@dataclass(frozen=True)
class ConfigTable:
    """Candidate configs as columns, computed once per candidate set."""

    configs: tuple[GemmConfig, ...]
    block: np.ndarray  # (n, len(CONFIG_FEATURES)) float64
    formula_columns: np.ndarray  # (n, len(FORMULA_COLUMNS)) float64: the columns the formulas read
    constants: tuple[tuple[str, float], ...] = ()
    """The measured constants the model's columns were priced with (the facts' ``calibrated``,
    sorted; empty: the shipped ones). A table is scored only with facts carrying the same
    (:meth:`check_priced`): config columns of one GPU's constants under another's formulas would be
    a feature the model never saw, silently."""

    def check_priced(self, hw: HardwareFacts) -> None:
        """Refuse to score this table with facts carrying other measured constants than its own."""
        if self.constants != priced_key(hw):
            raise ValueError(
                f"a config table priced with constants {dict(self.constants)} scored with facts carrying "
                f"{hw.calibrated}: build the table with the facts it is scored with"
            )

    @property
    def col(self) -> dict[str, np.ndarray]:
        """The columns the formulas read, by name (views of :attr:`formula_columns`)."""
        return {name: self.formula_columns[:, i] for i, name in enumerate(FORMULA_COLUMNS)}

    @classmethod
    def build(cls, configs: Sequence[GemmConfig], hw: HardwareFacts | None = None) -> ConfigTable:
        """The table of ``configs``, the model's columns priced with ``hw`` (default: each config's
        arch's spec sheet; facts carrying constants measured on a GPU price with those)."""
        configs = tuple(configs)
        rows = np.asarray([c.row() for c in configs], dtype=np.float64).reshape(len(configs), len(GEMM_FIELD_NAMES))
        warp = np.asarray([arch_facts(c.arch).warp_size for c in configs], dtype=np.float64)
        elem = np.asarray([element_size(c.dtype) for c in configs], dtype=np.float64)
        f = {name: rows[:, i] for i, name in enumerate(GEMM_FIELD_NAMES)}
        waves = f["wave_m"] * f["wave_n"] * f["wave_k"]
        lds = lds_bytes(f["tile_m"], f["tile_n"], f["tile_k"], elem) * (1 + f["double_smem_buffer"])
        hint = np.asarray([c.block_per_cu for c in configs], dtype=np.float64)
        derived = (
            np.column_stack(
                [
                    warp * waves,
                    lds,
                    hint,
                    f["tile_m"] / (f["wave_m"] * f["warp_tile_m"]),
                    f["tile_n"] / (f["wave_n"] * f["warp_tile_n"]),
                    f["tile_k"] / (f["wave_k"] * f["warp_tile_k"]),
                ]
            )
            if configs
            else np.empty((0, 6))
        )
        block = np.ascontiguousarray(np.hstack([rows, derived]))
        model = performance.config_columns(configs, hw)
        col = {**f, "lds_bytes": lds, "block_per_cu_hint": hint, "elem": elem, **model}
        matrix = (
            np.ascontiguousarray(np.column_stack([col[name] for name in FORMULA_COLUMNS]))
            if configs
            else np.empty((0, len(FORMULA_COLUMNS)))
        )
        return cls(configs, block, matrix, priced_key(hw))

    def take(self, index: np.ndarray) -> ConfigTable:
        """The rows ``index`` (no recomputation)."""
        return ConfigTable(
            tuple(self.configs[i] for i in index),
            np.ascontiguousarray(self.block[index]),
            np.ascontiguousarray(self.formula_columns[index]),
            self.constants,
        )

    def stack(self, other: ConfigTable) -> ConfigTable:
        """These rows, then ``other``'s (priced with the same constants)."""
        if other.constants != self.constants:
            priced = f"{dict(self.constants)} and {dict(other.constants)}"
            raise ValueError(f"stacking tables priced with constants {priced}")
        return ConfigTable(
            self.configs + other.configs,
            np.ascontiguousarray(np.vstack([self.block, other.block])),
            np.ascontiguousarray(np.vstack([self.formula_columns, other.formula_columns])),
            self.constants,
        )

    def __len__(self) -> int:
        return len(self.configs)


def priced_key(hw: HardwareFacts | None) -> tuple[tuple[str, float], ...]:
    """What a :class:`ConfigTable` records of the facts it was priced with: their measured constants."""
    return tuple(sorted(hw.calibrated.items())) if hw is not None else ()


_DIMS = ("d", "h", "w")
_IN, _FILTER = {"d": "Di", "h": "Hi", "w": "Wi"}, {"d": "Z", "h": "Y", "w": "X"}


def _output_size(d: str) -> Formula:
    """CK's output size along ``d``; an absent dimension (size 1, filter 1, no pad) gives 1."""
    p = problem
    return floor((p(_IN[d]) + 2 * p(f"pad_{d}") - p(f"dil_{d}") * (p(_FILTER[d]) - 1) - 1) / p(f"stride_{d}")) + 1


def _product(factors: list[Formula]) -> Formula:
    out = factors[0]
    for f in factors[1:]:
        out = out * f
    return out


def _vec_pad_eff(channels: Formula, vec: Formula) -> Formula:
    """Share of useful channels when ``channels`` are padded up to a multiple of ``vec``."""
    return channels / (ceil(channels / vec) * vec)


def feature_formulas(variant: Variant, dtype: Dtype, hw: HardwareFacts) -> tuple[Formula, ...]:
    """The problem and interaction features of a cell, in :data:`PROBLEM_FEATURES` then
    :data:`INTERACTION_FEATURES` order (the config block is data, :class:`ConfigTable`). Both
    blocks read the cell's implicit GEMM, stated once (:func:`_implicit_gemm`)."""
    gemm = _implicit_gemm(variant, dtype)
    problem_block = _problem_block(gemm)
    interaction_block = _interaction_block(gemm, dtype, hw)
    assert len(problem_block) == len(PROBLEM_FEATURES) and len(interaction_block) == len(INTERACTION_FEATURES)
    return problem_block + interaction_block


@dataclass(frozen=True)
class _GemmFormulas:
    """A cell's problem as CK sees it, as formulas: its sizes (per-group channels, input, filter and
    output volumes), the implicit GEMM's M, N and K, its FLOPs and bytes moved, and the channels
    each vector width (``vec_a``/``vec_b``/``vec_c``) runs along."""

    sizes: dict[str, Formula]
    m: Formula
    n: Formula
    k: Formula
    flops: Formula
    moved: Formula
    vec_channels: dict[str, Formula]


def _implicit_gemm(variant: Variant, dtype: Dtype) -> _GemmFormulas:
    """The implicit GEMM of ``variant`` over a problem (:data:`~ckspace.workloads.operands.OPERANDS`)."""
    p = problem
    sizes = {
        "N": p("N"),
        "Cg": p("C") / p("G"),
        "Kg": p("K") / p("G"),
        "input": p("Di") * p("Hi") * p("Wi"),
        "filter": p("Z") * p("Y") * p("X"),
        "output": _output_size("d") * _output_size("h") * _output_size("w"),
    }
    gemm = OPERANDS[variant]
    m, n, k = (_product([sizes[f] for f in factors]) for factors in (gemm.m, gemm.n, gemm.k))
    flops = 2 * p("G") * p("N") * sizes["output"] * sizes["Kg"] * sizes["Cg"] * sizes["filter"]
    moved = (
        p("N") * p("C") * sizes["input"] + p("K") * sizes["Cg"] * sizes["filter"] + p("N") * p("K") * sizes["output"]
    ) * element_size(dtype)
    vec_channels = {f: sizes[gemm.operand(f).channels] for f in ("vec_a", "vec_b", "vec_c")}
    return _GemmFormulas(sizes, m, n, k, flops, moved, vec_channels)


def _problem_block(g: _GemmFormulas) -> tuple[Formula, ...]:
    """The problem features, in :data:`PROBLEM_FEATURES` order."""
    p = problem
    m, n, k = g.m, g.n, g.k
    return (
        p("N"),
        p("G"),
        g.sizes["Cg"],
        g.sizes["Kg"],
        p("Di"),
        p("Hi"),
        p("Wi"),
        p("Z"),
        p("Y"),
        p("X"),
        *(_output_size(d) for d in _DIMS),
        *(p(f"{prefix}_{d}") for prefix in ("stride", "pad", "dil") for d in _DIMS),
        m,
        n,
        k,
        log2(m),
        log2(n),
        log2(k),
        log2(g.flops),
        log2(g.moved),
        g.flops / g.moved,
    )


def _interaction_block(g: _GemmFormulas, dtype: Dtype, hw: HardwareFacts) -> tuple[Formula, ...]:
    """The interaction features, in :data:`INTERACTION_FEATURES` order: what the config's tiles do
    to this GEMM on ``hw``."""
    p, c = problem, config
    m, n, k, flops = g.m, g.n, g.k, g.flops
    tm, tn, tk = c("tile_m"), c("tile_n"), c("tile_k")
    tiles_m, tiles_n, k_loop = ceil(m / tm), ceil(n / tn), ceil(k / tk)
    eff_m, eff_n, eff_k = m / (tiles_m * tm), n / (tiles_n * tn), k / (k_loop * tk)
    eff = eff_m * eff_n * eff_k
    tiles = tiles_m * tiles_n * p("G")
    cus = float(hw.compute_units)
    blocks_lds = floor(hw.lds_bytes_per_cu / c("lds_bytes"))
    slots = cus * maximum(minimum(blocks_lds, c("block_per_cu_hint")), 1.0)
    rounds = ceil(tiles / slots)
    last_wave = tiles / (rounds * slots)
    vec_a, vec_b, vec_c = (_vec_pad_eff(g.vec_channels[f], c(f)) for f in ("vec_a", "vec_b", "vec_c"))
    traffic = p("G") * c("elem") * (tiles_n * m * k + tiles_m * n * k + m * n)
    # roofline: the padded work at peak over the CUs the grid keeps busy, or the tile traffic at
    # full bandwidth, whichever takes longer
    busy = minimum(tiles, slots) / slots
    compute_s = flops / (eff * vec_a * vec_c) / (hw.peak_tflops(dtype) * 1e12 * busy * last_wave)
    memory_s = traffic / (hw.memory_bandwidth_gbs * 1e9)
    roofline = flops / maximum(compute_s, memory_s) / 1e12
    model_seconds = performance.cycles_formula(m, n, k, hw) / hw.clock_hz
    return (
        eff_m,
        eff_n,
        eff_k,
        eff,
        1.0 - eff,
        tiles_m,
        tiles_n,
        log2(tiles),
        tiles / cus,
        last_wave,
        tiles / slots,
        k_loop,
        blocks_lds,
        vec_a,
        vec_b,
        vec_c,
        log2(traffic),
        flops / traffic,
        log2(roofline),
        log2(flops / model_seconds / 1e12),
    )


def feature_program(variant: Variant, dtype: Dtype, hw: HardwareFacts) -> Program:
    """The compiled features of a cell on ``hw`` (memoised: a selector evaluates it per problem)."""
    key = (variant, dtype, hw.model_dump_json())
    program = _PROGRAMS.get(key)
    if program is None:
        program = _PROGRAMS[key] = Program(feature_formulas(variant, dtype, hw))
    return program


_PROGRAMS: dict[tuple, Program] = {}


PROBLEM_VALUES: tuple[str, ...] = PROBLEM_FIELDS
"""The problem quantities the features read."""


def feature_matrix(
    problem: ConvProblem, variant: Variant, dtype: Dtype, table: ConfigTable, hw: HardwareFacts
) -> np.ndarray:
    """Features of ``problem`` with every candidate of ``table``: (n, len(FEATURE_NAMES)) float64."""
    table.check_priced(hw)
    values = {name: getattr(problem, name) for name in PROBLEM_VALUES}
    return assemble(feature_program(variant, dtype, hw), values, table)


def feature_column(
    name: str, problems: Sequence[ConvProblem], variant: Variant, dtype: Dtype, table: ConfigTable, hw: HardwareFacts
) -> np.ndarray:
    """One computed feature (a problem or interaction feature of ``FEATURE_NAMES``) of every problem
    with every candidate of ``table``: (problems, n) float64, the column :func:`feature_matrix` gives
    each problem (``tests/test_features.py`` holds them to it). Its formula alone is compiled, with
    ``hw``'s constants (no memo), and evaluated over every problem at once
    (:meth:`~ckspace.features.formula.Program.over_problems`): for studies that rescore a cell's
    problems under many values of the model's constants (``bench/analytical_fit.py``)."""
    computed = PROBLEM_FEATURES + INTERACTION_FEATURES
    if name not in computed:
        raise ValueError(f"{name!r} is not a computed feature; computed features: {', '.join(computed)}")
    table.check_priced(hw)
    formula = feature_formulas(variant, dtype, hw)[computed.index(name)]
    values = {field: np.array([getattr(p, field) for p in problems], dtype=np.float64) for field in PROBLEM_VALUES}
    (column,) = Program([formula]).over_problems(values, table.col)
    return np.array(column)


def assemble(program: Program, values: dict[str, int], table: ConfigTable) -> np.ndarray:
    """The feature matrix from a compiled :func:`feature_program`."""
    outputs = program(values, table.col)
    n_problem, n_config = len(PROBLEM_FEATURES), table.block.shape[1]
    out = np.empty((len(table), len(FEATURE_NAMES)), dtype=np.float64)
    out[:, :n_problem] = outputs[:n_problem]
    out[:, n_problem : n_problem + n_config] = table.block
    for j, value in enumerate(outputs[n_problem:], start=n_problem + n_config):
        out[:, j] = value
    return out


def feature_spec() -> dict[str, object]:
    """The versioned feature list saved with a model."""
    return {"version": FEATURE_VERSION, "names": list(FEATURE_NAMES)}
