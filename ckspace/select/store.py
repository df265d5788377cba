"""Model directories: LightGBM model files, the feature spec and the model card, verified on load.

A model directory (shipped ones live in ``ckspace/models/<arch>/<variant>_<dtype>/``) holds

* ``ranker.txt`` — LightGBM's own model file of the booster that orders candidates;
* ``tflops.txt`` — LightGBM's model file of the log-TFLOPS regressor whose predictions are shown
  beside the top candidates (the ranker's scores are not TFLOPS);
* ``features.json`` — the feature spec (version and names) the boosters were trained on;
* ``card.json`` — the model card: cell, objective, data files and their sha256, rows (kept, and
  the cell's rows by status: ``ok``, ``wrong``, ``crash``, ...), problems,
  cross-validation figures, the training command, library versions, the kernels trained on, and
  the sha256 of the three files above.

Loading recomputes the hashes and compares the feature spec with the code's: a model that was
edited, truncated or trained on other features is refused with a message saying which.
Directories are written into a temporary sibling and renamed into place, so a reader never sees
half a model; a directory holding files of others is refused (``--force``: only the model files in
it are replaced).
"""

from __future__ import annotations

import json
import logging
import os
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ckspace.core.errors import CkspaceError, InvalidInputError
from ckspace.core.files import refuse_foreign, sha256, write_directory
from ckspace.select.features import FEATURE_VERSION, feature_spec

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


def shipped_model_dir(arch: str, variant: str, dtype: str) -> Path:
    """Where the package keeps the model of a cell (the directory may not exist)."""
    return Path(str(resources.files("ckspace").joinpath("models", arch, f"{variant}_{dtype}")))


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
        raise InvalidInputError(f"--out {str(directory)!r} is a non-empty directory that is not a ckspace model "
                                f"({shown}); give an empty or new directory, or --force to write the model "
                                "files into it")
    return existing


def save_model(directory: Path, ranker: Any, regressor: Any, card: ModelCard, force: bool = False) -> ModelCard:
    """Write a model directory; returns the card with the file hashes filled in.

    A directory that exists, is not empty and holds no model card is someone else's: it is refused
    unless ``force``, and then only the model files in it are replaced."""
    directory = Path(directory)
    existing = check_model_target(directory, force)
    contents = {RANKER_FILE: ranker.model_to_string().encode(), TFLOPS_FILE: regressor.model_to_string().encode(),
                FEATURES_FILE: (json.dumps(feature_spec(), indent=1) + "\n").encode()}
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
        raise InvalidInputError(f"--model {str(directory)!r} is not a model directory (it holds {CARD_FILE}, "
                                f"{RANKER_FILE}, {TFLOPS_FILE} and {FEATURES_FILE}; `ckspace train --out` writes one)")
    try:
        card = ModelCard.model_validate_json((directory / CARD_FILE).read_bytes())
    except FileNotFoundError:
        raise CkspaceError(f"no model card in {directory}") from None
    except ValueError as exc:
        raise CkspaceError(f"model card {directory / CARD_FILE} is unreadable: {exc}") from None
    contents: dict[str, bytes] = {}
    for name in (RANKER_FILE, TFLOPS_FILE, FEATURES_FILE):
        try:
            contents[name] = (directory / name).read_bytes()
        except FileNotFoundError:
            raise CkspaceError(f"model {directory} lacks {name}") from None
        if sha256(contents[name]) != card.files.get(name):
            raise CkspaceError(f"model {directory}: {name} does not match the sha256 in its card "
                               "(the file was changed or damaged); retrain or reinstall")
    spec = json.loads(contents[FEATURES_FILE])
    expected = feature_spec()
    if spec.get("version") != FEATURE_VERSION or card.feature_version != FEATURE_VERSION:
        raise CkspaceError(f"model {directory} was trained on feature spec version {spec.get('version')}, "
                           f"this ckspace computes version {FEATURE_VERSION}; retrain it with `ckspace train`")
    if spec.get("names") != expected["names"]:
        raise CkspaceError(f"model {directory}: its feature names differ from this ckspace's feature spec "
                           f"version {FEATURE_VERSION}; retrain it with `ckspace train`")
    texts = {name: _booster_text(directory, name, contents[name]) for name in (RANKER_FILE, TFLOPS_FILE)}
    ranker = lgb.Booster(model_str=texts[RANKER_FILE])
    regressor = lgb.Booster(model_str=texts[TFLOPS_FILE])
    for booster, name in ((ranker, RANKER_FILE), (regressor, TFLOPS_FILE)):
        if booster.num_feature() != len(expected["names"]):
            raise CkspaceError(f"model {directory}: {name} takes {booster.num_feature()} features, "
                               f"the feature spec has {len(expected['names'])}")
    return ranker, regressor, card


def _booster_text(directory: Path, name: str, data: bytes) -> str:
    """The text of a LightGBM model file, checked to be whole before LightGBM parses it: LightGBM
    trusts the header's ``tree_sizes`` and aborts the process (or worse) on a file that lies, so
    each tree must start where the sizes say and the file must end with ``end of trees``."""
    problem = f"model {directory}: {name} is not a whole LightGBM model file; retrain or reinstall"
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise CkspaceError(problem) from None
    header, _, _ = text.partition("\nTree=0\n")
    sizes_line = next((line for line in header.splitlines() if line.startswith("tree_sizes=")), None)
    if not text.startswith("tree\n") or sizes_line is None:
        raise CkspaceError(problem)
    try:
        sizes = [int(size) for size in sizes_line.removeprefix("tree_sizes=").split()]
    except ValueError:
        raise CkspaceError(problem) from None
    position = len(header) + 1
    for index, size in enumerate(sizes):
        if size <= 0 or not text.startswith(f"Tree={index}\n", position):
            raise CkspaceError(problem)
        position += size
    if not text.startswith("end of trees", position):
        raise CkspaceError(problem)
    return text


def model_texts(directory: Path, card: ModelCard) -> dict[str, str]:
    """The two booster files of a model directory as text, checked against the card's sha256."""
    out = {}
    for name in (RANKER_FILE, TFLOPS_FILE):
        data = (Path(directory) / name).read_bytes()
        if sha256(data) != card.files.get(name):
            raise CkspaceError(f"model {directory}: {name} changed while it was being loaded")
        out[name] = data.decode()
    return out
