"""The vocabulary: every enumerated value a kernel config or a query can name.

One place for names, in the manner of ``cutlass_library``: rules, the CLI, naming and emission all
refer to these enums, never to loose strings. Integer codes (the position in the enum) are what the
CP-SAT model and the vectorised evaluator store; they are stable for a given ckspace version and
are part of no public format.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from ckspace.core.errors import InvalidChoiceError
from ckspace.core.tables import table


class Choice(StrEnum):
    """A StrEnum that parses user text with a one-line error listing the valid values."""

    @classmethod
    def parse(cls, value: object) -> Choice:
        if isinstance(value, cls):
            return value
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            raise InvalidChoiceError(cls.label(), value, [m.value for m in cls]) from None

    @classmethod
    def label(cls) -> str:
        return cls.__name__.lower()

    @property
    def code(self) -> int:
        """Position in the enum: the integer the solver and the evaluator use."""
        return _codes(type(self))[self]

    @classmethod
    def codes_of(cls, values: Iterable[str]) -> list[int]:
        """The codes of ``values`` as the tables spell them, in order: how a rule puts a table's
        list (of pipelines, say) to the solver and the evaluator."""
        return [cls(value).code for value in values]


_CODE_CACHE: dict[type, dict] = {}


def _codes(cls: type) -> dict:
    table = _CODE_CACHE.get(cls)
    if table is None:
        table = {member: i for i, member in enumerate(cls)}
        _CODE_CACHE[cls] = table
    return table


class Variant(Choice):
    FORWARD = "forward"
    BWD_DATA = "bwd_data"
    BWD_WEIGHT = "bwd_weight"

    @property
    def token(self) -> str:
        """The ``{V}`` part of kernel names."""
        return _VARIANT_TOKENS[self.value]

    @property
    def is_backward(self) -> bool:
        return self is not Variant.FORWARD


_VARIANT_TOKENS = dict(table("common")["variant_token"])


class Dtype(Choice):
    FP16 = "fp16"
    BF16 = "bf16"
    FP32 = "fp32"

    @property
    def dtype_class(self) -> str:
        """``half`` for fp16/bf16, ``float`` for fp32: the key of the per-class rule tables."""
        return "float" if self is Dtype.FP32 else "half"

    @property
    def key(self) -> str:
        """The arch tables' warp-tile key, e.g. ``bf16_bf16_fp32`` (``arch.json`` ``dtype_key``)."""
        return table("arch")["dtype_key"][self.value]


class Pipeline(Choice):
    COMPV1 = "compv1"
    COMPV2 = "compv2"
    COMPV3 = "compv3"
    COMPV4 = "compv4"
    COMPV5 = "compv5"
    COMPV6 = "compv6"
    MEM = "mem"
    BASIC_V1 = "basic_v1"
    BASIC_V2 = "basic_v2"
    BASIC_ASYNC_V1 = "basic_async_v1"
    COMP_ASYNC = "comp_async"
    WAVELET = "wavelet"


class Scheduler(Choice):
    INTRAWAVE = "intrawave"
    INTERWAVE = "interwave"


class Epilogue(Choice):
    CSHUFFLE = "cshuffle"
    DEFAULT = "default"


class Specialization(Choice):
    DEFAULT = "default"
    FILTER1X1_PAD0 = "filter1x1_pad0"
    FILTER1X1_STRIDE1_PAD0 = "filter1x1_stride1_pad0"
    FILTER3X3 = "filter3x3"


class StreamKStrategy(Choice):
    NONE = "none"
    TREE = "tree"
    LINEAR = "linear"

    @classmethod
    def label(cls) -> str:
        return "stream-K strategy"


class Layout(Choice):
    """The layout string kernel names carry (upstream default/full use nhwgc for every ndim)."""

    NHWGC = "nhwgc"
    NDHWGC = "ndhwgc"
    NGCHW = "ngchw"


class ScoreSource(Choice):
    """What a selector ranks kernels by (``Selection.source``, ``plan``'s ``source``)."""

    MODEL = "model"
    """The cell's trained model (:mod:`ckspace.select.store`)."""
    ANALYTICAL = "analytical"
    """The analytical performance model: the cell has no trained model."""


class Engine(Choice):
    """What computes a selector's scores (``Selector.engine``)."""

    COMPILED = "compiled"
    """The model's trees compiled to C (:mod:`ckspace.select.compiled`)."""
    LIGHTGBM = "lightgbm"
    """LightGBM's C API."""
    ANALYTICAL = "analytical"
    """The analytical performance model's formula (no model)."""


class RuleKind(Choice):
    """What excludes a config, as explanations report it."""

    VALIDITY = "validity"
    """An upstream validity predicate: the generator would never emit the config."""
    RULE_SET = "rule_set"
    """The config is valid but not among the rule set's proposals."""
    FILTER = "filter"
    """A user filter (``--where``)."""
    PROBLEM = "problem"
    """A check CK Tile makes before running a kernel on a problem (``IsSupportedArgument``)."""
    CK = "ck"
    """The CK headers in use cannot compile the config."""
    KNOWN_WRONG = "known_wrong"
    """Upstream documents the config as giving wrong results: outside every target, kept only by the
    rule space (``--rules-only``)."""


class Predicate(Choice):
    """The check a rule belongs to: an upstream function, or the source of an extra constraint."""

    STRUCTURE = "structure"
    """Consistency of ckspace's own fields (stream-K flags), true of every proposal."""
    TILE_DIVISIBILITY = "tile_divisibility"
    """``TileConfig.is_valid``, which only the ``full`` rule set calls on its proposals."""
    IS_VALID_FOR_ARCH = "is_valid_for_arch"
    """The arch check the ``default`` and ``full`` rule sets call on their proposals."""
    IS_CONFIG_VALID = "is_config_valid"
    """The config check the generator applies to everything it emits."""
    DEPTHWISE = "depthwise"
    """The generation-time checks of depthwise configs."""
    WHERE = "where"
    """A user filter."""
    PROBLEM = "problem"
    """A check of CK Tile's ``IsSupportedArgument`` for one problem."""
    CK_REVISION = "ck_revision"
    """What the CK revision in use cannot compile."""
    DOMAIN = "domain"
    """The values a field ranges over in a rule set without a proposal table (``open``)."""
    KNOWN_WRONG = "known_wrong"
    """Configs upstream documents as giving wrong results (:mod:`ckspace.constraints.rulebook.known_wrong`)."""

    @property
    def kind(self) -> RuleKind:
        """How explanations classify a rule of this predicate (total over the enum)."""
        return _PREDICATE_KIND[self]


_PREDICATE_KIND = {
    Predicate.STRUCTURE: RuleKind.VALIDITY,
    Predicate.TILE_DIVISIBILITY: RuleKind.VALIDITY,
    Predicate.IS_VALID_FOR_ARCH: RuleKind.VALIDITY,
    Predicate.IS_CONFIG_VALID: RuleKind.VALIDITY,
    Predicate.DEPTHWISE: RuleKind.VALIDITY,
    Predicate.WHERE: RuleKind.FILTER,
    Predicate.PROBLEM: RuleKind.PROBLEM,
    Predicate.CK_REVISION: RuleKind.CK,
    Predicate.DOMAIN: RuleKind.RULE_SET,
    Predicate.KNOWN_WRONG: RuleKind.KNOWN_WRONG,
}

EMITTED_PREDICATES: tuple[Predicate, ...] = (
    Predicate.STRUCTURE,
    Predicate.IS_VALID_FOR_ARCH,
    Predicate.IS_CONFIG_VALID,
)
"""What "valid" means for a GEMM config: the upstream generator emits a proposal exactly when it
passes these (depthwise configs: :attr:`Predicate.DEPTHWISE`)."""

NDIMS: tuple[int, ...] = (1, 2, 3)


def parse_ndim(value: object) -> int:
    """Parse a spatial dimension count (1, 2 or 3)."""
    try:
        ndim = int(str(value).strip())
    except ValueError:
        ndim = -1
    if ndim not in NDIMS:
        raise InvalidChoiceError("ndim", value, NDIMS)
    return ndim


def csv_cell(value: object) -> str:
    """One value as every CSV ckspace writes spells it: booleans 0/1 (as the kernel names and the
    measurement readers have them; ``True`` in one file and ``1`` in another made a reader of
    both parse two spellings), choices by their value, None empty."""
    if isinstance(value, bool):
        return str(int(value))
    if value is None:
        return ""
    return str(value.value if isinstance(value, Choice) else value)


def arch_names() -> tuple[str, ...]:
    """Every arch of the shipped arch table, in table order."""
    return tuple(table("arch")["arch_order"])


def parse_arch(value: object) -> str:
    """Validate an arch name (case-insensitive), returning its canonical spelling."""
    name = str(value).strip().lower()
    if name not in arch_names():
        raise InvalidChoiceError("arch", value, arch_names())
    return name
