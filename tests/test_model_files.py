"""Model directories with malformed content whose sizes and card hashes are kept consistent (the
sha256 check passes): loading refuses them with one line naming the file, never an abort inside
LightGBM/Treelite, a traceback or a silently different model."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckspace.cli import main
from ckspace.core.errors import CkspaceError
from ckspace.features.matrix import FEATURE_NAMES
from ckspace.select.store import FEATURES_FILE, RANKER_FILE, TFLOPS_FILE, _booster_text, load_model, shipped_model_dir

SHIPPED = shipped_model_dir("gfx950", "forward", "bf16")
PROBLEM = "N=1,C=64,K=64,Hi=8,Wi=8,Y=3,X=3"
SELECT = ["select", "--arch", "gfx950", "--variant", "forward", "--dtype", "bf16", "--problem", PROBLEM, "--model"]


def with_sizes(text: str) -> str:
    """``text`` with its header's tree_sizes recomputed, so that the sizes match the trees."""
    body, end, trailer = text.partition("end of trees")
    header, _, trees = body.partition("\nTree=")
    blocks = ("Tree=" + trees).split("\nTree=")
    blocks = [blocks[0]] + ["Tree=" + b for b in blocks[1:]]
    sizes = [len(b) + (1 if i < len(blocks) - 1 else 0) for i, b in enumerate(blocks)]
    header = re.sub(r"(?m)^tree_sizes=.*$", "tree_sizes=" + " ".join(map(str, sizes)), header)
    return header + "\n" + "\n".join(blocks) + end + trailer


def damaged(directory: Path, name: str, data: bytes) -> Path:
    """A copy of the shipped model with ``name`` replaced by ``data`` and the card's hash updated."""
    shutil.copytree(SHIPPED, directory, dirs_exist_ok=True)
    (directory / name).write_bytes(data)
    card = json.loads((directory / "card.json").read_text())
    card["files"][name] = hashlib.sha256(data).hexdigest()
    (directory / "card.json").write_text(json.dumps(card))
    return directory


def in_tree(old: str, new: str, tree: int = 0) -> bytes:
    text = (SHIPPED / RANKER_FILE).read_text()
    start = text.index(old, text.index(f"\nTree={tree}\n"))
    return with_sizes(text[:start] + new + text[start + len(old) :]).encode()


def test_with_sizes_keeps_a_whole_file_whole(tmp_path: Path) -> None:
    text = (SHIPPED / RANKER_FILE).read_text()
    assert with_sizes(text) == text


def _tree0(key: str, values: int) -> str:
    """``key=`` and its first ``values`` numbers in tree 0 of the shipped ranker (they change with
    every retraining, so the damage below is aimed at what the file holds)."""
    text = (SHIPPED / RANKER_FILE).read_text()
    start = text.index(f"{key}=", text.index("\nTree=0\n"))
    return " ".join(text[start:].split("\n", 1)[0].split(" ")[:values])


LEAF_COUNT, LEFT, SPLIT = _tree0("leaf_count", 1), _tree0("left_child", 3), _tree0("split_feature", 2)


@pytest.mark.parametrize(
    "old, new",
    [
        ("num_leaves=15", "num_leaves=1x"),  # SIGABRT in LightGBM before
        ("num_leaves=15", "num_leaves=16"),  # SIGABRT
        ("num_cat=0", "num_cat=3"),  # SIGABRT
        (LEFT, LEFT[:-1] + "x"),  # Treelite traceback
        (SPLIT, SPLIT[:-1] + "x"),  # Treelite traceback
        (LEAF_COUNT, LEAF_COUNT[:-1] + "x"),  # Treelite traceback
        ("shrinkage=0.1", "shrinkage=0.x"),  # loaded, silently
        (LEFT, LEFT.rsplit(" ", 1)[0] + " 1"),  # a node reached twice: loaded, silently a different model
        (SPLIT, "split_feature=99 " + SPLIT.split(" ", 1)[1]),  # Treelite traceback
    ],
)
@pytest.mark.slow
def test_a_malformed_tree_is_one_line_naming_the_file_not_an_abort(tmp_path: Path, old: str, new: str) -> None:
    """Run as a separate process: before the fix some of these aborted the interpreter."""
    model = damaged(tmp_path / "m", RANKER_FILE, in_tree(old, new))
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from ckspace.cli import main; sys.exit(main(sys.argv[1:]))",
            *SELECT,
            str(model),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, (done.returncode, done.stderr[-500:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and RANKER_FILE in lines[0] and "Traceback" not in done.stderr, done.stderr


def test_a_malformed_header_number_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    last = f"max_feature_idx={len(FEATURE_NAMES) - 1}"
    text = (SHIPPED / TFLOPS_FILE).read_text()
    assert last in text
    text = text.replace(last, last[:-1] + "x", 1)
    model = damaged(tmp_path / "m", TFLOPS_FILE, text.encode())
    assert main([*SELECT, str(model)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and TFLOPS_FILE in err[0] and "max_feature_idx" in err[0]


@pytest.mark.parametrize(
    "data",
    [b'{"version": 1, "names": ', b"[1, 2]", b"\xff\xfe{}", b"[" * 100_000 + b"]" * 100_000, b'"names"', b"null"],
)
def test_a_malformed_features_json_is_one_line_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes
) -> None:
    model = damaged(tmp_path / "m", FEATURES_FILE, data)
    assert main([*SELECT, str(model)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and FEATURES_FILE in err[0], err


@cache
def number_spans() -> tuple[str, tuple[tuple[int, int], ...]]:
    """The ranker's text and the spans of every number token in its trees."""
    text = (SHIPPED / RANKER_FILE).read_text()
    start, end = text.index("\nTree=0\n"), text.index("end of trees")
    spans = tuple(m.span() for m in re.finditer(r"(?<=[= ])[-+0-9.eE]+(?=[ \n])", text[start:end]))
    return text, tuple((a + start, b + start) for a, b in spans)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    st.data(),
    st.sampled_from(
        ["", "x", "1.5.2", "1e999", "-1e999", "nan", "inf", "--1", "0x10", "1,5", "1 2", "\u0661", "1e", ".", "+-3"]
    ),
)
def test_any_malformed_number_of_any_tree_is_refused(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, token: str
) -> None:
    text, spans = number_spans()
    start, end = data.draw(st.sampled_from(spans))
    mutated = with_sizes(text[:start] + token + text[end:]).encode("utf-8")
    model = damaged(tmp_path_factory.mktemp("m"), RANKER_FILE, mutated)
    with pytest.raises(CkspaceError, match=RANKER_FILE):
        load_model(model)


def test_checked_text_predicts_what_the_file_does() -> None:
    """The text handed to LightGBM is rebuilt from the checked values: the same predictions."""
    import lightgbm as lgb

    ranker, regressor, _ = load_model(SHIPPED)
    rows = np.random.default_rng(0).uniform(0, 4096, size=(500, ranker.num_feature()))
    for booster, name in ((ranker, RANKER_FILE), (regressor, TFLOPS_FILE)):
        original = lgb.Booster(model_str=(SHIPPED / name).read_text())
        assert np.array_equal(booster.predict(rows, raw_score=True), original.predict(rows, raw_score=True))


# -- each refusal names the value, line by line (the check reads a whole line at once) -----------
SHIPPED_TEXT = (SHIPPED / RANKER_FILE).read_text()


def _with(text: str, key: str, index: int, token: str) -> bytes:
    """``text`` with the first tree's ``key`` line's value ``index`` replaced by ``token``."""
    lines = text.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith(key + "="))
    values = lines[at][len(key) + 1 :].rstrip("\n").split(" ")
    values[index] = token
    lines[at] = f"{key}={' '.join(values)}\n"
    return "".join(lines).encode()


def _check(data: bytes) -> str:
    """The checked text of a ranker file's ``data`` (what LightGBM and Treelite are then given)."""
    return _booster_text(Path("m"), RANKER_FILE, data, list(FEATURE_NAMES))


@pytest.mark.parametrize(
    ("key", "index", "token", "said"),
    [
        ("threshold", 0, "nan", "'nan' is not a finite number"),
        ("threshold", 2, "inf", "'inf' is not a finite number"),
        ("threshold", -1, "1e999", "'1e999' is not a finite number"),
        ("leaf_value", 3, "0x10", "'0x10' is not a finite number"),
        ("leaf_value", 0, "1_0", "'1_0' is not a finite number"),
        ("split_gain", 1, "", "'' is not a finite number"),
        ("split_feature", 0, "999", "'999' is not an integer in 0.."),
        ("split_feature", -1, "-1", "'-1' is not an integer in 0.."),
        ("left_child", 0, "1.5", "'1.5' is not an integer in"),
        ("internal_count", 0, "+", "'+' is not an integer in"),
        ("decision_type", 0, "1", "decision_type other than"),
    ],
)
def test_a_malformed_number_is_refused_and_named(key: str, index: int, token: str, said: str) -> None:
    with pytest.raises(CkspaceError, match="not a whole LightGBM model file") as caught:
        _check(_with(SHIPPED_TEXT, key, index, token))
    assert said in str(caught.value) and "tree 0" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_line_of_the_wrong_length_is_refused() -> None:
    lines = SHIPPED_TEXT.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("leaf_value="))
    lines[at] = lines[at].rstrip("\n") + " 1.0\n"
    with pytest.raises(CkspaceError, match="tree 0 leaf_value has"):
        _check("".join(lines).encode())
