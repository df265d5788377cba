"""A problem's text as a new user writes it: missing keys named in one line, a 2D or 3D problem without a
filter or input size refused (not read as 1), the ndim read from the keys."""

from __future__ import annotations

import pytest

from ckspace.core.errors import InvalidInputError


def test_a_problem_lacking_keys_names_every_one_in_one_line(capsys) -> None:
    from ckspace.cli import main
    from ckspace.workloads.problem import ConvProblem

    assert main(["select", "--arch", "gfx950", "--dtype", "bf16", "--variant", "forward", "--problem", "N=1,C=64"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "{" not in err and "Field required" not in err
    assert err.startswith(
        "ckspace: error: problem 'N=1,C=64' lacks K, Wi, X (read as 1D: no depth or height key; "
        "for 2D give Hi, Y too, for 3D Di, Hi, Z, Y)"
    )
    with pytest.raises(InvalidInputError, match=r"^problem 'C=3,Hi=8' lacks N, K, Wi, Y, X \(a 2D problem\)$"):
        ConvProblem.parse("C=3,Hi=8")


def test_a_2d_or_3d_problem_without_a_filter_or_input_size_is_refused_not_read_as_1() -> None:
    """An absent dimension's sizes are 1; a present dimension's are never guessed: ``Hi=8,Wi=8,X=3``
    without Y is not a 1x3 filter."""
    from ckspace.workloads.problem import ConvProblem

    with pytest.raises(InvalidInputError, match=r"lacks Y \(a 2D problem\)$"):
        ConvProblem.parse("N=1,C=64,K=64,Hi=8,Wi=8,X=3")
    with pytest.raises(InvalidInputError, match=r"^ConvProblem lacks Hi \(a 2D problem\)$"):
        ConvProblem(ndim=2, N=1, C=64, K=64, Wi=8, Y=3, X=3)
    with pytest.raises(InvalidInputError, match=r"lacks Di, Z \(a 3D problem\)$"):
        ConvProblem.parse("N=1,C=64,K=64,Hi=8,Wi=8,Y=3,X=3,ndim=3")


def test_a_problem_built_without_ndim_reads_it_from_its_keys() -> None:
    from ckspace.workloads.problem import ConvProblem

    problem = ConvProblem(N=1, C=64, K=64, G=1, Hi=8, Wi=8, Y=3, X=3)
    assert problem.ndim == 2 and problem == ConvProblem.parse("N=1,C=64,K=64,G=1,Hi=8,Wi=8,Y=3,X=3")
    assert ConvProblem(N=1, C=8, K=8, Di=2, Hi=4, Wi=4, Z=1, Y=1, X=1).ndim == 3
    assert ConvProblem(N=1, C=8, K=8, Wi=4, X=1).ndim == 1
