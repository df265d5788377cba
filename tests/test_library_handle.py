"""The one Python handle on a built library (``ckspace.run.library.KernelLibrary``) where it is its
own code rather than the C API's: what it says about the file at its path, the kernels by index
and name, the status texts, the refusals the C API answers as negative numbers, and what it
reports before and after it loads the library. The library is the stand-in of
``tests/standin_library.py`` (the real generated host dispatcher) or small shared objects made here
with the host C compiler."""

from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path

import pytest
from conftest import c_compiler
from standin_library import build_standin

from ckspace.core.errors import CkspaceError, InvalidInputError
from ckspace.emit.dispatcher import STATUSES
from ckspace.run.library import DEVICE_NAME_BYTES, STATUS, KernelLibrary, answer_of
from ckspace.workloads.problem import ConvProblem

PROBLEM = ConvProblem.parse("N=2,G=2,C=16,K=32,Hi=9,Wi=7,Y=3,X=3,pad=1")


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_standin(tmp_path_factory.mktemp("handle"))


@pytest.fixture()
def library(tree: Path) -> KernelLibrary:
    return KernelLibrary(tree / "build" / "gfx950" / "libckspace_kernels_gfx950.so")


def shared_object(folder: Path, name: str, source: str, *flags: str) -> Path:
    """``source`` compiled into ``folder/name`` with the host C compiler."""
    (folder / f"{name}.c").write_text(source)
    subprocess.run(
        [c_compiler(), "-shared", "-fPIC", str(folder / f"{name}.c"), "-o", str(folder / name), *flags], check=True
    )
    return folder / name


def test_every_status_of_the_header_has_its_text(tree: Path) -> None:
    header = (tree / "ckspace_dispatch.h").read_text()
    block = header[header.index("/* Status codes */") :].split("\n\n", 1)[0]
    codes = {int(code) for code in re.findall(r"^#define CKSPACE_\w+ (\d+)", block, flags=re.M)}
    fleet_only = {s.code for s in STATUSES if s.fleet}  # a library of several archs has them too
    assert codes == set(STATUS) - fleet_only and set(STATUS) == set(range(len(STATUS)))
    assert len(set(STATUS.values())) == len(STATUS) and all(STATUS.values())


def test_a_negative_answer_is_its_status_named(library: KernelLibrary) -> None:
    assert answer_of("ckspace_f", 0) == 0 and answer_of("ckspace_f", 7) == 7
    for value, text in [
        (-1, STATUS[1]),
        (-3, "malformed problem"),
        (-7, "HIP reports no current device"),
        (-99, "-99"),
    ]:
        with pytest.raises(InvalidInputError, match=f"^ckspace_f: {re.escape(text)}$"):
            answer_of("ckspace_f", value)
    assert library.workspace_size(0, PROBLEM, "bwd_weight", "bf16") >= 0  # a count of 0 is an answer


def test_kernels_by_index_and_by_name(library: KernelLibrary) -> None:
    last = len(library.names) - 1
    assert library.index(0) == 0 and library.index(last) == last
    assert library.index(library.names[0]) == 0 and library.index(library.names[last]) == last
    for wrong in (last + 1, -1):
        with pytest.raises(InvalidInputError, match=rf"^kernel index {wrong} is out of range: .* holds {last + 1}$"):
            library.index(wrong)
    with pytest.raises(InvalidInputError, match=r"has no kernel 'no_such_kernel'$"):
        library.index("no_such_kernel")
    # both answers come back as answers, not refusals (forward: a cell the library lacks)
    assert library.is_supported(last, PROBLEM, "bwd_weight", "bf16") is True
    assert library.is_supported(last, PROBLEM, "forward", "bf16") is False


def test_a_choice_is_a_value(library: KernelLibrary) -> None:
    choice = library.select(PROBLEM, "bwd_weight", "bf16")
    assert {choice, library.select(PROBLEM, "bwd_weight", "bf16")} == {choice}
    with pytest.raises(dataclasses.FrozenInstanceError):
        choice.kernel = 0  # type: ignore[misc]


def test_the_library_loads_on_first_use(tree: Path) -> None:
    library = KernelLibrary(tree / "build" / "gfx950" / "libckspace_kernels_gfx950.so")
    assert not library.loaded
    assert library.arch == "gfx950" and library.loaded


def test_what_stands_at_the_path_is_named(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=f"^no kernel library at {re.escape(str(tmp_path / 'none.so'))}$"):
        KernelLibrary(tmp_path / "none.so")
    (tmp_path / "file").write_text("")
    under_a_file = tmp_path / "file" / "lib.so"
    with pytest.raises(
        InvalidInputError, match=f"^kernel library {re.escape(repr(str(under_a_file)))}: Not a directory$"
    ):
        KernelLibrary(under_a_file)


def test_a_shared_object_of_neither_kernels_nor_dispatcher(tmp_path: Path) -> None:
    library = KernelLibrary(shared_object(tmp_path, "libother.so", "int other(void) { return 1; }\n"))
    assert library.names == () and not library.has_dispatcher and not library.has_run
    with pytest.raises(CkspaceError, match="has no dispatcher: emit its tree with --with-selector"):
        library.select(PROBLEM, "bwd_weight", "bf16")


def test_a_library_that_does_not_load_is_one_error(tmp_path: Path) -> None:
    """Its symbols are read from the file, but the loader refuses it (a dependency is gone)."""
    dependency = shared_object(tmp_path, "libgone.so", "int gone(void) { return 2; }\n")
    source = (
        "int gone(void);\nint ckspace_api_version(void) { return gone(); }\nint ckspace_select(void) { return 0; }\n"
    )
    library = shared_object(tmp_path, "libbroken.so", source, f"-L{tmp_path}", "-lgone")
    dependency.unlink()
    with pytest.raises(CkspaceError, match=f"^cannot load {re.escape(str(library))}: .*libgone.so"):
        KernelLibrary(library).index(0)


def test_the_device_name_is_cut_to_hips_field(library: KernelLibrary, monkeypatch: pytest.MonkeyPatch) -> None:
    long_name = "gfx950:" + "x" * 300
    monkeypatch.setenv("CKSPACE_STANDIN_DEVICE_ARCH", long_name)
    assert library.device_supported() == (True, long_name[: DEVICE_NAME_BYTES - 1])
