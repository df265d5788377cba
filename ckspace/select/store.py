"""Model directories: LightGBM model files, the feature spec and the model card, verified on load.

A model directory (shipped ones live in ``ckspace/models/<arch>/<variant>_<dtype>/``) holds

* ``ranker.txt`` — LightGBM's own model file of the booster that orders candidates;
* ``tflops.txt`` — LightGBM's model file of the log-TFLOPS regressor whose predictions are shown
  beside the top candidates (the ranker's scores are not TFLOPS);
* ``features.json`` — the feature spec (version and names) the boosters were trained on;
* ``card.json`` — the model card: cell, objective, data files and their sha256, rows (kept, and
  the cell's rows by status: ``ok``, ``wrong``, ``crash``, ...), problems,
  cross-validation figures, the training command, library versions, the kernels trained on, the
  analytical model's constants measured on the data's GPU (``ckspace learn``'s calibration; the
  features are priced with them), and the sha256 of the three files above.

Loading recomputes the hashes and compares the feature spec with the code's: a model that was
edited, truncated or trained on other features is refused with a message saying which.
Directories are written into a temporary sibling and renamed into place, so a reader never sees
half a model; a directory holding files of others is refused (``--force``: only the model files in
it are replaced).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ckspace.core.errors import CkspaceError, InvalidInputError
from ckspace.environment.files import refuse_foreign, sha256
from ckspace.environment.inputs import decode_input, parse_json, read_input, read_json_model
from ckspace.environment.trees import write_directory
from ckspace.features import performance
from ckspace.features.hardware import HardwareFacts, hardware_facts
from ckspace.features.matrix import FEATURE_VERSION, feature_spec
from ckspace.select.support import ModelDomain

log = logging.getLogger(__name__)

RANKER_FILE = "ranker.txt"
TFLOPS_FILE = "tflops.txt"
FEATURES_FILE = "features.json"
CARD_FILE = "card.json"


class ModelCard(BaseModel):
    """What a model is, what it was trained on and how well it did in cross-validation."""

    arch: str
    variant: str
    dtype: str
    objective: str
    objective_choice: str
    feature_version: int
    data: dict[str, str]  # file name -> sha256
    rows: int  # (problem, kernel) measurements trained on
    rows_by_status: dict[str, int] = {}  # the cell's rows in the data by how the pair ended (ok, wrong, ...)
    problems: int
    distinct_shapes: int
    cleaning: str
    kernels: list[str]
    cross_validation: dict[str, Any]
    training_command: str
    library_versions: dict[str, str]
    files: dict[str, str]  # model file -> sha256
    domain: ModelDomain | None = None
    """What the model was trained on (:mod:`ckspace.select.support`): a kernel outside it is
    extrapolated."""
    calibrated: dict[str, float] = {}
    """The analytical model's constants as measured on the data's GPU (``ckspace learn`` fits them:
    :mod:`ckspace.training.calibration`), by name: the analytical feature the trees read is priced
    with them wherever the model is used (:func:`model_facts`). Empty: the shipped constants."""


def model_facts(card: ModelCard) -> HardwareFacts:
    """The hardware facts a model's features are priced with: its arch's, carrying the constants
    its card says were measured (a card :func:`load_model` returned: they were checked there)."""
    return performance.calibrated_facts(hardware_facts(card.arch), card.calibrated)


def check_card_constants(card: ModelCard, directory: Path | str = "") -> None:
    """A card naming an unknown constant or a value that is not positive is refused in one line
    naming the model (whatever its arch: an arch without facts is refused where the facts are read)."""
    try:
        performance.check_constants(card.calibrated)
    except (ValueError, CkspaceError) as exc:
        raise CkspaceError(f"model {directory}: its card's calibrated constants: {exc}") from None


def shipped_model_dir(arch: str, variant: str, dtype: str) -> Path:
    """Where the package keeps the model of a cell (the directory may not exist)."""
    return Path(str(resources.files("ckspace").joinpath("models", arch, f"{variant}_{dtype}")))


def shipped_models() -> dict[str, ModelCard]:
    """The models the package ships, by cell text (``gfx950 forward bf16``), cards only (read, not
    verified: :func:`load_model` verifies a model before it is used)."""
    root = Path(str(resources.files("ckspace").joinpath("models")))
    out: dict[str, ModelCard] = {}
    for card_path in sorted(root.glob(f"*/*/{CARD_FILE}")):
        card = read_json_model(ModelCard, card_path, "model card")
        out[f"{card.arch} {card.variant} {card.dtype}"] = card
    return out


def check_model_target(directory: Path, force: bool = False) -> set[str]:
    """The entries already in ``directory`` when a model may be written there (checked before
    training, so a refusal costs nothing); refuses links, non-directories and, unless ``force``,
    non-empty directories without a model card."""
    refuse_foreign(Path(directory), "--out", "directory")
    try:
        existing = set(os.listdir(directory)) if Path(directory).is_dir() else set()
    except OSError as exc:
        raise InvalidInputError(f"--out {str(directory)!r}: {exc.strerror}") from None
    if existing and CARD_FILE not in existing and not force:
        shown = ", ".join(sorted(existing)[:3]) + (", ..." if len(existing) > 3 else "")
        raise InvalidInputError(
            f"--out {str(directory)!r} is a non-empty directory that is not a ckspace model "
            f"({shown}); give an empty or new directory, or --force to write the model "
            "files into it"
        )
    return existing


def save_model(directory: Path, ranker: Any, regressor: Any, card: ModelCard, force: bool = False) -> ModelCard:
    """Write a model directory; returns the card with the file hashes filled in.

    A directory that exists, is not empty and holds no model card is someone else's: it is refused
    unless ``force``, and then only the model files in it are replaced."""
    directory = Path(directory)
    existing = check_model_target(directory, force)
    contents = {
        RANKER_FILE: ranker.model_to_string().encode(),
        TFLOPS_FILE: regressor.model_to_string().encode(),
        FEATURES_FILE: (json.dumps(feature_spec(), indent=1) + "\n").encode(),
    }
    card = card.model_copy(update={"files": {name: sha256(data) for name, data in contents.items()}})
    contents[CARD_FILE] = (card.model_dump_json(indent=1) + "\n").encode()  # last: a reader checks it
    write_directory(directory, contents, owned=existing <= set(contents))
    log.info("wrote model to %s", directory)
    return card


def load_model(directory: Path) -> tuple[Any, Any, ModelCard]:
    """(ranker booster, TFLOPS booster, card) of a verified model directory."""
    import lightgbm as lgb

    directory = Path(directory)
    if not directory.is_dir():
        raise InvalidInputError(
            f"--model {str(directory)!r} is not a model directory (it holds {CARD_FILE}, "
            f"{RANKER_FILE}, {TFLOPS_FILE} and {FEATURES_FILE}; `ckspace train --out` writes one)"
        )
    card = read_json_model(ModelCard, directory / CARD_FILE, "model card")
    contents: dict[str, bytes] = {}
    for name in (RANKER_FILE, TFLOPS_FILE, FEATURES_FILE):
        contents[name] = read_input(directory / name, "model file")
        if sha256(contents[name]) != card.files.get(name):
            raise CkspaceError(
                f"model {directory}: {name} does not match the sha256 in its card "
                "(the file was changed or damaged); retrain or reinstall"
            )
    spec = _feature_spec_of(directory, contents[FEATURES_FILE])
    expected = feature_spec()
    if spec.get("version") != FEATURE_VERSION or card.feature_version != FEATURE_VERSION:
        raise CkspaceError(
            f"model {directory} was trained on feature spec version {spec.get('version')!r}, "
            f"this ckspace computes version {FEATURE_VERSION}; retrain it with `ckspace train`"
        )
    if spec.get("names") != expected["names"]:
        raise CkspaceError(
            f"model {directory}: its feature names differ from this ckspace's feature spec "
            f"version {FEATURE_VERSION}; retrain it with `ckspace train`"
        )
    check_card_constants(card, directory)
    if card.domain is None:
        raise CkspaceError(
            f"model {directory}: its card records no training domain (an older ckspace wrote it), "
            "so kernels outside it cannot be told apart; retrain it with `ckspace train`"
        )
    texts = {
        name: _booster_text(directory, name, contents[name], list(expected["names"]))
        for name in (RANKER_FILE, TFLOPS_FILE)
    }
    boosters = []
    for name in (RANKER_FILE, TFLOPS_FILE):
        try:
            boosters.append(lgb.Booster(model_str=texts[name]))
        except lgb.basic.LightGBMError as exc:  # checked above; a LightGBM refusal is still one line
            first = (str(exc).splitlines() or [""])[0]
            raise CkspaceError(f"model {directory}: LightGBM refuses {name}: {first}") from None
    ranker, regressor = boosters
    for booster, name in ((ranker, RANKER_FILE), (regressor, TFLOPS_FILE)):
        if booster.num_feature() != len(expected["names"]):
            raise CkspaceError(
                f"model {directory}: {name} takes {booster.num_feature()} features, "
                f"the feature spec has {len(expected['names'])}"
            )
    return ranker, regressor, card


_FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_INT = re.compile(r"[+-]?\d+")
_FLOATS = re.compile(rf"{_FLOAT.pattern}(?: {_FLOAT.pattern})*")
_INTS = re.compile(rf"{_INT.pattern}(?: {_INT.pattern})*")
"""A whole line of numbers matched at once: a learnt model has ~1,000 trees of ~100 values each,
and matching token by token made loading it take seconds."""
_INT32 = 2**31 - 1
_OBJECTIVES = ("regression", "lambdarank")
_HEADER = (
    "version",
    "num_class",
    "num_tree_per_iteration",
    "label_index",
    "max_feature_idx",
    "objective",
    "feature_names",
    "feature_infos",
    "tree_sizes",
)
_TREE = (
    "num_leaves",
    "num_cat",
    "split_feature",
    "split_gain",
    "threshold",
    "decision_type",
    "left_child",
    "right_child",
    "leaf_value",
    "leaf_weight",
    "leaf_count",
    "internal_value",
    "internal_weight",
    "internal_count",
    "is_linear",
    "shrinkage",
)
_DECISION_TYPES = frozenset({0, 2, 4, 6, 8, 10})
"""LightGBM's decision_type bits: 1 categorical (never trained here), 2 default-left, then the
missing-value type (0 none, 1 zero, 2 NaN) in bits 2-3."""


class _Malformed(Exception):
    """One reason a model file is not what ``ckspace train`` writes."""


def _floats(where: str, value: str, count: int | tuple[int, ...]) -> list[str]:
    """The tokens of a line of finite decimal numbers, ``count`` of them (or one of the counts)."""
    tokens = value.split(" ") if value else []
    if len(tokens) not in ((count,) if isinstance(count, int) else count):
        raise _Malformed(f"{where} has {len(tokens)} values, not {count}")
    if tokens and not (_FLOATS.fullmatch(value) and all(map(math.isfinite, map(float, tokens)))):
        bad = next(t for t in tokens if not _FLOAT.fullmatch(t) or not math.isfinite(float(t)))
        raise _Malformed(f"{where} value {bad[:40]!r} is not a finite number")
    return tokens


def _ints(where: str, value: str, count: int | tuple[int, ...], low: int, high: int) -> list[int]:
    """A line of integers in ``low..high``, ``count`` of them (or one of the counts)."""
    tokens = value.split(" ") if value else []
    if len(tokens) not in ((count,) if isinstance(count, int) else count):
        raise _Malformed(f"{where} has {len(tokens)} values, not {count}")
    out = list(map(int, tokens)) if tokens and _INTS.fullmatch(value) else None
    if tokens and (out is None or min(out) < low or max(out) > high):
        bad = next(t for t in tokens if not _INT.fullmatch(t) or not low <= int(t) <= high)
        raise _Malformed(f"{where} value {bad[:40]!r} is not an integer in {low}..{high}")
    return out or []


def _key_values(lines: list[str], keys: tuple[str, ...], where: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in lines:
        key, sep, value = line.partition("=")
        if not sep or key not in keys:
            raise _Malformed(f"{where}: unexpected line {line[:40]!r}")
        if key in values:
            raise _Malformed(f"{where}: {key} is given twice")
        values[key] = value
    missing = [k for k in keys if k not in values]
    if missing:
        raise _Malformed(f"{where} lacks {', '.join(missing)}")
    return values


def _tree(index: int, lines: list[str], features: int) -> str:
    """One tree, validated value by value and as a tree (every node reached once from the root);
    returned as the canonical block LightGBM and Treelite read."""
    where = f"tree {index}"
    v = _key_values(lines, _TREE, where)
    leaves = _ints(f"{where} num_leaves", v["num_leaves"], 1, 1, _INT32)[0]
    _ints(f"{where} num_cat", v["num_cat"], 1, 0, 0)
    _ints(f"{where} is_linear", v["is_linear"], 1, 0, 0)
    _floats(f"{where} shrinkage", v["shrinkage"], 1)
    inner = leaves - 1
    _ints(f"{where} split_feature", v["split_feature"], inner, 0, features - 1)
    for key in ("split_gain", "threshold", "internal_value", "internal_weight"):
        _floats(f"{where} {key}", v[key], inner)
    _ints(f"{where} internal_count", v["internal_count"], inner, 0, 2**63 - 1)
    _floats(f"{where} leaf_value", v["leaf_value"], leaves)
    _floats(f"{where} leaf_weight", v["leaf_weight"], (0, leaves))
    _ints(f"{where} leaf_count", v["leaf_count"], (0, leaves), 0, 2**63 - 1)
    types = _ints(f"{where} decision_type", v["decision_type"], inner, 0, 255)
    if any(t not in _DECISION_TYPES for t in types):
        raise _Malformed(f"{where} has a decision_type other than {sorted(_DECISION_TYPES)}")
    left = _ints(f"{where} left_child", v["left_child"], inner, -leaves, inner - 1)
    right = _ints(f"{where} right_child", v["right_child"], inner, -leaves, inner - 1)
    seen_nodes, seen_leaves, stack = {0} if inner else set(), set(), [0] if inner else []
    while stack:
        node = stack.pop()
        for child in (left[node], right[node]):
            if child >= 0:
                if child in seen_nodes:
                    raise _Malformed(f"{where} is not a tree (node {child} is reached twice)")
                seen_nodes.add(child)
                stack.append(child)
            else:
                if ~child in seen_leaves:
                    raise _Malformed(f"{where} is not a tree (leaf {~child} is reached twice)")
                seen_leaves.add(~child)
    if len(seen_nodes) != inner or len(seen_leaves) != (leaves if inner else 0):
        raise _Malformed(f"{where} is not a tree (some nodes or leaves are not reached from its root)")
    return f"Tree={index}\n" + "".join(f"{key}={v[key]}\n" for key in _TREE) + "\n\n"


def _booster_text(directory: Path, name: str, data: bytes, names: list[str]) -> str:
    """The text of a LightGBM model file, validated in Python and rebuilt from what was validated.

    LightGBM's and Treelite's parsers trust their input: a malformed number or a tree whose
    children point outside it aborts the process (SIGABRT) or, worse, loads and answers wrongly.
    So nothing of the file reaches them unchecked: the header and every tree are parsed here,
    every value is checked (numbers are finite decimal numbers, integers in range, each array as
    long as ``num_leaves`` says, splits on the ``names`` features, child links forming one tree,
    no categorical or linear trees, which ``ckspace train`` never writes), and the text handed on
    is rendered from the checked values (header, trees, ``end of trees``; the informational
    trailer of feature importances and training parameters is dropped, it affects no prediction).
    Checking tokens before a native parse was preferred to loading in a child process: it costs
    milliseconds for a shipped model (a few hundred ms for a learnt one of ~1,000 trees: each line
    is matched whole, :data:`_FLOATS`) instead of an interpreter start, and names the bad value."""
    where = f"model {directory}: {name} is not a whole LightGBM model file as `ckspace train` writes it"
    try:
        return _checked_booster_text(data, names)
    except _Malformed as exc:
        raise CkspaceError(f"{where} ({exc}); retrain or reinstall") from None


def _checked_booster_text(data: bytes, names: list[str]) -> str:
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise _Malformed("it is not ASCII text") from None
    body, marker, _ = text.partition("\nend of trees\n")
    if not marker or not body.startswith("tree\n"):
        raise _Malformed("it does not start with 'tree' and end its trees with 'end of trees'")
    header_text, tree_marker, trees_text = body.partition("\nTree=")
    if not tree_marker:
        raise _Malformed("it holds no tree")
    header = _key_values([line for line in header_text.splitlines()[1:] if line], _HEADER, "its header")
    if header["version"] != "v4":
        raise _Malformed(f"version {header['version'][:20]!r} is not v4")
    _ints("num_class", header["num_class"], 1, 1, 1)
    _ints("num_tree_per_iteration", header["num_tree_per_iteration"], 1, 1, 1)
    _ints("label_index", header["label_index"], 1, 0, _INT32)
    _ints("max_feature_idx", header["max_feature_idx"], 1, len(names) - 1, len(names) - 1)
    if header["objective"] not in _OBJECTIVES:
        raise _Malformed(f"objective {header['objective'][:40]!r} is not one of {', '.join(_OBJECTIVES)}")
    if header["feature_names"].split(" ") != names:
        raise _Malformed("its feature names are not the feature spec's")
    infos = header["feature_infos"].split(" ")
    if len(infos) != len(names) or not all(i == "none" or _feature_info(i) for i in infos):
        raise _Malformed("feature_infos is not one 'none' or '[low:high]' per feature")
    sizes = _ints("tree_sizes", header["tree_sizes"], len(header["tree_sizes"].split(" ")), 1, len(text))
    blocks = ("Tree=" + trees_text + "\n").split("\nTree=")
    blocks[0] = blocks[0].removeprefix("Tree=")
    if len(blocks) != len(sizes):
        raise _Malformed(f"tree_sizes names {len(sizes)} trees, the file holds {len(blocks)}")
    trees = []
    for index, block in enumerate(blocks):
        first, _, rest = block.partition("\n")
        if first != str(index):
            raise _Malformed(f"tree {index} is labelled Tree={first[:20]}")
        trees.append(_tree(index, [line for line in rest.splitlines() if line], len(names)))
    header["tree_sizes"] = " ".join(str(len(tree)) for tree in trees)
    return "tree\n" + "".join(f"{key}={header[key]}\n" for key in _HEADER) + "\n" + "".join(trees) + "end of trees\n"


def _feature_info(info: str) -> bool:
    if not (info.startswith("[") and info.endswith("]")):
        return False
    low, sep, high = info[1:-1].partition(":")
    try:
        _floats("feature_infos", f"{low} {high}", 2)
    except _Malformed:
        return False
    return bool(sep)


def _feature_spec_of(directory: Path, data: bytes) -> dict[str, Any]:
    """``features.json``'s content: a JSON object, else one line naming the file."""
    path = directory / FEATURES_FILE
    spec = parse_json(decode_input(data, path, "model file"), path, "model file")
    if not isinstance(spec, dict):
        raise CkspaceError(
            f"model file {str(path)!r} is not a JSON object with version and names; retrain or reinstall"
        )
    return spec


def model_texts(directory: Path, card: ModelCard) -> dict[str, str]:
    """The two booster files of a model directory as checked text (:func:`_booster_text`: what
    Treelite reads for the compiled selector is validated as what LightGBM reads), each checked
    against the card's sha256."""
    out = {}
    names = list(feature_spec()["names"])
    for name in (RANKER_FILE, TFLOPS_FILE):
        data = read_input(Path(directory) / name, "model file")
        if sha256(data) != card.files.get(name):
            raise CkspaceError(f"model {directory}: {name} changed while it was being loaded")
        out[name] = _booster_text(Path(directory), name, data, names)
    return out
