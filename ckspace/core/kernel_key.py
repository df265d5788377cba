"""What makes two configs the same kernel, stated once for configs and for listed rows alike.

Pure Python on purpose: the listing (:class:`ckspace.space.listing.Kernel`) keys cached rows with it
and must not pay for pydantic; a config builds it with :meth:`ckspace.core.config.GemmConfig.kernel_key`.
"""

from __future__ import annotations

from typing import NamedTuple

from ckspace.core.cells import Cell
from ckspace.core.fields import Row


class KernelKey(NamedTuple):
    """A kernel's identity: two configs are the same kernel exactly when their keys are equal.

    It is the arch, the cell (variant, ndim, dtype), the kind (depthwise or GEMM-style) and every
    field of the row: everything the validity rules, the emitter and the problem checks read. Two
    GEMM fields are in it although the emitted code does not read them: ``tagged``, because
    upstream's WMMA rule does (of two configs that differ only in it, one may be valid and the
    other not), and ``layout``, because the name does (the emitted files are named by it; upstream
    names one 3D kernel with either layout, quirk 14.10). The name is not part of it: names are
    output, spelled from the key less the arch and the dtype tag. A model's domain leaves both
    out (:data:`ckspace.select.support.NOT_THE_KERNEL`): it asks what code was timed, not which
    kernel it was."""

    arch: str
    cell: Cell
    depthwise: bool
    row: Row
