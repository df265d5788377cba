"""The selector compiled to C: its features and tree ensembles as straight-line code.

A LightGBM booster's ``predict`` spends most of its time on per-call set-up: for one problem's
few dozen candidates it costs ~0.1 ms, where the 150 trees themselves take a few microseconds. The
same model compiled to C answers in microseconds. Both the generated dispatcher (``emit
--with-selector``) and the Python selector use the C that this module writes:

* :func:`model_sources` turns a booster into C with TL2cgen (from a Treelite model of the
  booster, Treelite's LightGBM frontend), with every exported symbol prefixed so that two models
  (ranker and regressor) link into one library, plus a batch entry point
  ``<prefix>_batch(const double* rows, long n, long cols, double* out)`` that writes the raw
  scores (LightGBM's ``raw_score``: trees summed in order, no transformation). A leading run of
  trees on one feature alone, such as a learnt model's prior (``ckspace learn``: 400 trees of 63
  leaves on the analytical feature), is not TL2cgen's: as nested ``if``s it is ~5 MB of C, which
  made the first select of such a model take over a minute and a half, most of it in the C
  compiler. It is tabled instead, as the dispatcher's ranker tables it
  (:class:`~ckspace.select.forest.Stairs`, :func:`~ckspace.select.forest.stairs_c`): the batch
  starts each row's score at the run's sum for the row, and TL2cgen's ``predict``, given the
  trees after the run, adds theirs and then the base score, so the scores are TL2cgen's over
  every tree to the bit (tests compare them, and with LightGBM).
* :class:`CompiledSelector` adds the features rendered from their formulas
  (:mod:`ckspace.features.c_source`), builds everything once per model with the host C compiler into
  the cache directory (keyed by the sources and the compiler's
  :func:`~ckspace.environment.compilers.identify` digest) and calls it through ctypes: one call
  for a problem's feature matrix, one per ensemble.

A cache entry (``compiled-selectors/<key>/``) holds the sources, the library and ``entry.json``
with the library's sha256. Loading a shared library trusts it completely (a truncated one kills the
process with SIGBUS when mapped), so an entry is loaded only when its checksum matches; a damaged
one (short, garbage, a fifo or directory in its place, no or a wrong checksum, or one that does not
load) is compiled again and replaced atomically, with a warning. A cache that cannot be written
makes the selector call LightGBM for the run (said once), or, for ``engine="compiled"``, compile
into a temporary directory removed at once (the loaded library needs no file).

TL2cgen was chosen over LightGBM's own ``convert_model`` (C++ if-else, CLI only, not in the
Python package) and over hand-written tree walking: it is maintained for exactly this, emits C
with no dependencies that any C compiler builds, and keeps thresholds at full double precision,
so its scores equal LightGBM's (tests compare them). Its input is a ``union Entry`` whose ``int
missing`` shares the low 32 bits of the ``double fvalue``, -1 meaning missing: every double whose
low 32 bits are all set (any value one ulp below a short binary fraction, such as the
``0.6679687499999999`` that ``0.95 * 0.75 * 0.9375`` gives) then reads as missing and takes the
default branch where LightGBM does not. :func:`model_sources` makes the entry a struct, so the
flag is a field of its own, set for NaN alone (LightGBM's missing value).
"""

from __future__ import annotations

import ctypes
import io
import json
import logging
import os
import re
import shutil
import stat
import subprocess
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, redirect_stdout
from pathlib import Path

import numpy as np

from ckspace.core.errors import CkspaceError
from ckspace.environment.cachefiles import read_entry, read_json_entry, unusable, usable_folder
from ckspace.environment.compilers import identify
from ckspace.environment.files import cache_dir, sha256
from ckspace.environment.progress import NOTICE
from ckspace.environment.trees import TEMPORARY, discard, listed, remove_leftovers, replace_directory
from ckspace.features.c_source import c_double, features_c
from ckspace.features.formula import Formula
from ckspace.features.matrix import ConfigTable
from ckspace.select.forest import Forest, Stairs, stairs_c, treelite_model

log = logging.getLogger(__name__)

_EXPORTED = (
    "get_num_target",
    "get_num_class",
    "get_num_feature",
    "get_threshold_type",
    "get_leaf_output_type",
    "predict",
    "postprocess",
)


def model_sources(model_text: str, prefix: str, features: int) -> dict[str, str]:
    """C sources of one booster (its model file's text, as :func:`ckspace.select.store.model_texts`
    checks it first: Treelite's parser trusts its input): ``{prefix}.c``, the translation unit to
    compile, exporting ``{prefix}_batch``, and, unless the staircase is every tree,
    ``{prefix}/main.c`` and ``{prefix}/header.h`` from TL2cgen, which ``{prefix}.c`` includes with
    its symbols renamed to ``{prefix}_*``. A leading run of trees on one feature
    (:class:`~ckspace.select.forest.Stairs`) is tabled in ``{prefix}.c`` and only the trees after it
    go to TL2cgen. They carry no banner: the emitter, which puts them in a tree a user may open, adds
    ckspace's one banner (:func:`ckspace.environment.files.banner`); here they are also a cache's,
    which no one edits."""
    forest = Forest.from_model_text(model_text) if _first_tree_on_one_feature(model_text) else None
    stairs = Stairs.of(forest, set(range(features))) if forest is not None else None
    if stairs is None:
        return _with_batch(_tl2cgen_sources(model_text, prefix), prefix, features, "0.0", "the trees summed in order")
    tabled = stairs_c(prefix, stairs) + "\n"
    start = f"{prefix}_stairs(rows[r * cols + {stairs.feature}])"
    if stairs.trees < len(forest.leaves):
        sources = _tl2cgen_sources(_trees_from(model_text, stairs.trees), prefix)
        what = f"the trees summed in order: the first {stairs.trees} tabled, the rest by TL2cgen"
        return _with_batch(sources, prefix, features, start, what, tabled)
    # every tree tabled: no TL2cgen, whose predict would add the base score after the trees
    return {
        f"{prefix}.c": f"""#include <math.h>

{tabled}/* Raw scores of n rows of cols features (row-major doubles): the trees summed in order (every
   one on the same feature, tabled), then the base score. */
void {prefix}_batch(const double* rows, long n, long cols, double* out) {{
  for (long r = 0; r < n; ++r) out[r] = {start} + {c_double(forest.base_score)};
}}
"""
    }


def _first_tree_on_one_feature(model_text: str) -> bool:
    """Whether the model's first tree splits on one feature alone, as a staircase's does, read off
    its ``split_feature`` line: Treelite's parse and the forest it gives (a fifth of a second for a
    shipped model, paid on every select since the sources key the cache) are needed only then."""
    for line in model_text.partition("\nTree=0\n")[2].splitlines():
        if line.startswith("split_feature="):
            return len(set(line[len("split_feature=") :].split())) == 1
        if line.startswith("Tree="):
            break
    return False


def _with_batch(
    sources: dict[str, str], prefix: str, features: int, start: str, what: str, tabled: str = ""
) -> dict[str, str]:
    """TL2cgen's ``sources`` and ``{prefix}.c``: they renamed, the C ``tabled`` and
    ``{prefix}_batch``, each row's score started at ``start`` (an expression of ``rows``, ``r`` and
    ``cols``) and continued by TL2cgen's ``predict`` (``result[0] += leaf`` per tree, then the base
    score)."""
    renames = "".join(f"#define {name} {prefix}_{name}\n" for name in _EXPORTED)
    sources[f"{prefix}.c"] = f"""{renames}#include "{prefix}/main.c"

{tabled}/* Raw scores of n rows of cols features (row-major doubles): {what}. */
void {prefix}_batch(const double* rows, long n, long cols, double* out) {{
  struct Entry entry[{features}];
  for (long r = 0; r < n; ++r) {{
    for (long c = 0; c < cols; ++c) {{
      entry[c].fvalue = rows[r * cols + c];
      entry[c].missing = isnan(entry[c].fvalue) ? -1 : 0;
    }}
    out[r] = {start};
    {prefix}_predict(entry, 1, &out[r]);
  }}
}}
"""
    return sources


def _trees_from(model_text: str, first: int) -> str:
    """The model without its first ``first`` trees, as LightGBM writes it (the leaves and
    thresholds at full precision: Treelite reads the same values, tests compare them)."""
    import lightgbm as lgb

    return lgb.Booster(model_str=model_text).model_to_string(start_iteration=first)


def _tl2cgen_sources(model_text: str, prefix: str) -> dict[str, str]:
    """TL2cgen's ``{prefix}/main.c`` and ``{prefix}/header.h`` of a model, its entry a struct."""
    import tl2cgen

    model = treelite_model(model_text)
    with tempfile.TemporaryDirectory(prefix="ckspace-tl2cgen-") as tmp:
        out = Path(tmp) / "c"
        try:  # the text was checked by ckspace.select.store; a refusal left is still one line
            with _quiet_tl2cgen():
                tl2cgen.generate_c_code(model, dirpath=str(out), params={"parallel_comp": 0})
        except tl2cgen.TL2cgenError as exc:
            first = (str(exc).strip().splitlines() or [""])[-1]
            raise CkspaceError(f"{prefix}: TL2cgen refuses the model: {first}") from None
        return {f"{prefix}/{name}": _separate_missing((out / name).read_text()) for name in ("main.c", "header.h")}


_UNION_ENTRY = "union Entry {\n  int missing;\n  double fvalue;\n  int qvalue;\n};"
_STRUCT_ENTRY = "struct Entry {\n  int missing;\n  double fvalue;\n  int qvalue;\n};"


def _separate_missing(text: str) -> str:
    """TL2cgen's source with its input entry a struct instead of a union (the module says why).
    The header's declaration is matched exactly, so that a TL2cgen whose entry differs is refused
    rather than half rewritten."""
    if "union Entry {" in text:
        if _UNION_ENTRY not in text:
            raise CkspaceError("TL2cgen's input entry is not the union this ckspace knows; cannot compile the model")
        text = text.replace(_UNION_ENTRY, _STRUCT_ENTRY)
    return text.replace("union Entry*", "struct Entry*")


@contextmanager
def _quiet_tl2cgen() -> Iterator[None]:
    """TL2cgen's native library prints progress notes through Python's ``print`` (and warnings):
    send them to the debug log, never to a ckspace command's output."""
    notes = io.StringIO()
    with warnings.catch_warnings(record=True) as caught, redirect_stdout(notes):
        warnings.simplefilter("always")
        yield
    for line in notes.getvalue().splitlines() + [str(w.message) for w in caught]:
        log.debug("tl2cgen: %s", line)


def host_c_compiler() -> str | None:
    """``$CC``, else ``cc``, ``gcc`` or ``clang`` from PATH; None when there is none."""
    explicit = os.environ.get("CC")
    candidates = [explicit] if explicit else ["cc", "gcc", "clang"]
    for name in candidates:
        path = shutil.which(name) if name else None
        if path:
            return path
    return None


FLAGS = ("-O2", "-ffp-contract=off", "-fPIC")
"""No contraction into fused multiply-adds and no fast-math: the C computes the same doubles as
the Python features."""


def features_unit(formulas: Sequence[Formula]) -> str:
    """A translation unit exporting ``cks_features`` (see :mod:`ckspace.features.c_source`)."""
    return (
        "#pragma STDC FP_CONTRACT OFF\n#include <math.h>\n\n"
        + features_c("cks_features_of", formulas)
        + "\nvoid cks_features(const double* p, const double* cfg, const double* block, long n, double* out) {\n"
        "  cks_features_of(p, cfg, block, n, out);\n}\n"
    )


CACHE_FOLDER = "compiled-selectors"
LIBRARY = "selector.so"
ENTRY = "entry.json"
UNITS = ("cks_features.c", "cks_ranker.c", "cks_tflops.c")
_FORMAT = 2
"""Part of every entry's key: entries of format 1 (no checksum) are never looked up, nor trusted."""
_ENTRY_NAME = re.compile(r"[0-9a-f]{32}")


def _build_into(folder: Path, sources: dict[str, str], units: Sequence[str], compiler: str) -> Path:
    for name, text in sources.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    library = folder / LIBRARY
    command = [compiler, *FLAGS, "-shared", "-o", str(library), *(str(folder / u) for u in units), "-lm"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"status {done.returncode}"
        raise CkspaceError(f"compiling the selector to C failed ({compiler}): {last}")
    return library


def _load(library: Path) -> ctypes.CDLL:
    try:
        return ctypes.CDLL(str(library))
    except OSError as exc:
        raise CkspaceError(f"the selector compiled to C does not load: {exc}") from None


def _whole(target: Path) -> tuple[str, ctypes.CDLL | None]:
    """The loaded library of the entry at ``target`` (reason ''), or why it cannot be used (no
    library; reason '' when there is no entry): its checksum is checked before it is loaded."""
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        return "", None
    except OSError as exc:
        return exc.strerror or str(exc), None
    if not stat.S_ISDIR(mode):
        return "not a directory", None
    try:
        entry = read_json_entry(target / ENTRY)
        data = read_entry(target / LIBRARY)
    except ValueError as exc:
        return str(exc), None
    if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
        return f"no {ENTRY} with the library's checksum", None
    if data is None or sha256(data) != entry["sha256"]:
        return f"{LIBRARY} is missing or does not match its checksum", None
    try:
        return "", ctypes.CDLL(str(target / LIBRARY))
    except OSError as exc:
        return f"does not load: {exc}", None


def cached_library(
    sources: dict[str, str], units: Sequence[str], compiler: str, what: str = "generated C"
) -> tuple[Path, ctypes.CDLL] | None:
    """The shared library of ``units`` (names in ``sources``) built with ``compiler``, from the
    cache directory (compiled there once per distinct sources and compiler; a damaged entry is
    compiled again and replaced, see the module's docstring), loaded; None when the cache cannot
    be written (said once). Concurrent builders are safe: each loads the library it compiled before
    moving it into place."""
    digest = sha256(
        "\0".join(
            [
                f"format {_FORMAT}",
                identify(compiler).digest,
                *FLAGS,
                *units,
                *(f"{name}\0{text}" for name, text in sorted(sources.items())),
            ]
        ).encode()
    )
    root = cache_dir()
    folder = root / CACHE_FOLDER
    if not usable_folder(root, folder):
        return None
    target = folder / digest[:32]
    why, loaded = _whole(target)
    if loaded is not None:
        return target / LIBRARY, loaded
    if why:
        log.warning("compiled selector %s is damaged (%s): compiling it again", target, why)
    else:
        # said without -v (NOTICE): the first select would otherwise be silent for seconds
        log.log(NOTICE, "compiling %s with %s (once; cached in %s)", what, compiler, target)

    def fill(staging: Path) -> ctypes.CDLL:
        library = _build_into(staging, sources, units, compiler)
        lib = _load(library)  # before it is moved into place: what another process does then is no matter
        (staging / ENTRY).write_text(json.dumps({"format": _FORMAT, "sha256": sha256(library.read_bytes())}))
        return lib

    try:
        return target / LIBRARY, replace_directory(target, fill)
    except OSError as exc:
        unusable(root, f"cannot write {folder}: {exc.strerror or exc}")
        return None


def compile_library(sources: dict[str, str], units: Sequence[str], compiler: str) -> Path:
    """:func:`cached_library`'s path; an error when the cache cannot hold it."""
    found = cached_library(sources, units, compiler)
    if found is None:
        raise CkspaceError(
            f"the cache directory {cache_dir()} cannot be written: set CKSPACE_CACHE_DIR or "
            "--cache-dir to a writable directory"
        )
    return found[0]


def cache_info() -> dict[str, object]:
    """Where the compiled selectors are cached, how many entries and their size in bytes."""
    folder = cache_dir() / CACHE_FOLDER
    entries = [p for p in listed(folder) if _ENTRY_NAME.fullmatch(p.name)]
    size = 0
    for entry in entries:
        for base, _, names in os.walk(entry):
            size += sum(os.lstat(os.path.join(base, n)).st_size for n in names)
    return {"directory": str(folder), "entries": len(entries), "bytes": size}


def clear_cache() -> int:
    """Delete the compiled selectors (entries ``<hex>/`` and what killed builders left, never the
    staging of a live one; nothing else in the folder); returns how many entries were removed."""
    folder = cache_dir() / CACHE_FOLDER
    removed = 0
    for path in listed(folder):
        if _ENTRY_NAME.fullmatch(path.name):
            discard(path)
            removed += 1
        elif (match := TEMPORARY.fullmatch(path.name)) and _ENTRY_NAME.fullmatch(match["name"]):
            remove_leftovers(folder / match["name"])
    return removed


class CompiledSelector:
    """A model's features and trees compiled into one shared library, called through ctypes."""

    def __init__(self, lib: ctypes.CDLL, features: int) -> None:
        self.features = features
        self._lib = lib
        self._features = self._lib.cks_features
        self._features.restype = None
        self._features.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_long, ctypes.c_void_p]
        self._calls = {}
        for prefix in ("cks_ranker", "cks_tflops"):
            fn = getattr(self._lib, f"{prefix}_batch")
            fn.restype = None
            fn.argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_long, ctypes.c_void_p]
            self._calls[prefix] = fn

    @classmethod
    def build(
        cls,
        formulas: Sequence[Formula],
        ranker_text: str,
        tflops_text: str,
        features: int,
        compiler: str,
        uncached: bool = False,
        model: str = "a model",
    ) -> CompiledSelector | None:
        """The model compiled (once, into the cache); None when the cache cannot be written, unless
        ``uncached``: then it is compiled into a temporary directory, removed once loaded. ``model``
        names the model in the line that announces a compile."""
        sources = {
            "cks_features.c": features_unit(formulas),
            **model_sources(ranker_text, "cks_ranker", features),
            **model_sources(tflops_text, "cks_tflops", features),
        }
        found = cached_library(sources, UNITS, compiler, f"the selector for {model}")
        if found is not None:
            return cls(found[1], features)
        if not uncached:
            return None
        with tempfile.TemporaryDirectory(prefix="ckspace-selector-") as folder:
            return cls(_load(_build_into(Path(folder), sources, UNITS, compiler)), features)

    def feature_matrix(self, values: np.ndarray, table: ConfigTable) -> np.ndarray:
        """The features of one problem (``values`` in PROBLEM_VALUES order, float64) with every row
        of ``table``."""
        out = np.empty((len(table), self.features), dtype=np.float64)
        self._features(
            values.ctypes.data, table.formula_columns.ctypes.data, table.block.ctypes.data, len(table), out.ctypes.data
        )
        return out

    def _run(self, prefix: str, matrix: np.ndarray) -> np.ndarray:
        if matrix.dtype != np.float64 or not matrix.flags.c_contiguous or matrix.shape[1] != self.features:
            raise ValueError(f"expected a C-contiguous float64 matrix with {self.features} columns")
        out = np.empty(matrix.shape[0], dtype=np.float64)
        self._calls[prefix](matrix.ctypes.data, matrix.shape[0], matrix.shape[1], out.ctypes.data)
        return out

    def rank(self, matrix: np.ndarray) -> np.ndarray:
        """The ranker's raw scores."""
        return self._run("cks_ranker", matrix)

    def log_tflops(self, matrix: np.ndarray) -> np.ndarray:
        """The regressor's raw predictions (log TFLOPS)."""
        return self._run("cks_tflops", matrix)
