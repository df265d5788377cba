"""The ``rdna`` generator: the small forward catalog upstream's open PR #12289 proposes for
warp-size-32 archs (``get_configs`` of ``grouped_config_rules_rdna.py``; commit in ``rdna.json``'s
``_source_commits``).

Upstream's entry point refuses, by raising, any call with a part it does not support, rather than
answering it with nothing: an empty catalog must not look like success. :func:`refusal` states its
checks in the order it runs them, and :func:`proposals` the one config per wave split it gives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ckspace.core.arch import arch_facts
from ckspace.core.cells import Cell
from ckspace.core.fields import Row, default_row, encode, make_row
from ckspace.core.tables import shape_key, table
from ckspace.core.vocab import Dtype, Variant


def supported_dtypes(arch: str) -> tuple[Dtype, ...]:
    """The table's dtypes for which ``arch`` lists the catalog's warp tile, in the table's order:
    upstream reads them off the arch's warp-tile lists, so an arch whose WMMA shape differs
    (gfx1250: 16x16x32) supports none."""
    t = table("rdna")
    facts = arch_facts(arch)
    return tuple(d for d in map(Dtype.parse, t["dtypes"]) if tuple(t["warp_tile"]) in (facts.warp_tiles_for(d) or ()))


def _words(values: Sequence[object]) -> str:
    return ", ".join(str(getattr(v, "value", v)) for v in values)


def refusal(arch: str, variants: Sequence[Variant], ndims: Sequence[int], dtypes: Sequence[Dtype]) -> str | None:
    """Why upstream's entry point raises for a call on ``arch`` with these variants, ndims and
    dtypes, in the words of the first of its checks that fails (``rdna.json`` ``refusal_order``);
    None when it answers. Every check but the arch's asks whether each requested value is supported,
    so a call is refused exactly when one of its cells would be refused alone."""
    t = table("rdna")
    warp_size = arch_facts(arch).warp_size
    allowed = supported_dtypes(arch)
    checks: dict[str, Callable[[], str | None]] = {
        "warp_size": lambda: (
            None
            if warp_size == t["warp_size"]
            else f"it proposes only for warp-size-{t['warp_size']} archs, and {arch} runs warp size {warp_size}"
        ),
        "variants": lambda: _unsupported("variant", variants, [Variant.parse(v) for v in t["variants"]]),
        "ndims": lambda: _unsupported("ndim", ndims, t["ndims"]),
        "arch_dtypes": lambda: (
            None if allowed else f"{arch} lists warp tile {shape_key(t['warp_tile'])} for none of {_words(t['dtypes'])}"
        ),
        "dtypes": lambda: _unsupported("dtype", dtypes, allowed, f" on {arch}"),
    }
    return next((reason for reason in (checks[name]() for name in t["refusal_order"]) if reason), None)


def _unsupported(what: str, asked: Sequence[object], supported: Sequence[object], where: str = "") -> str | None:
    """The words for the requested values outside ``supported``, or None when there are none."""
    extra = [v for v in asked if v not in supported]
    return f"it supports only {what} {_words(supported)}{where}, not {_words(extra)}" if extra else None


def proposals(arch: str, cell: Cell) -> list[Row]:
    """The configs of ``cell`` (one the catalog supports), one per wave split of ``arch`` in its
    list order: a tile of one warp tile per wave along M and N, the table's tile_k and trait, the
    dtype tag, and the layout string the table gives the ndim (3D names read ``ndhwgc`` here, where
    ``default`` and ``full`` write ``nhwgc``)."""
    t = table("rdna")
    warp_m, warp_n, warp_k = t["warp_tile"]
    fixed = make_row(
        default_row(),
        tile_k=t["tile_k"],
        warp_tile_m=warp_m,
        warp_tile_n=warp_n,
        warp_tile_k=warp_k,
        vec_a=t["vec"][0],
        vec_b=t["vec"][1],
        vec_c=t["vec"][2],
        pipeline=encode("pipeline", t["pipeline"]),
        epilogue=encode("epilogue", t["epilogue"]),
        scheduler=encode("scheduler", t["scheduler"]),
        pad_m=int(t["pad"][0]),
        pad_n=int(t["pad"][1]),
        pad_k=int(t["pad"][2]),
        layout=encode("layout", t["layout_by_ndim"][str(cell.ndim)]),
        tagged=int(t["tagged"]),
    )
    return [
        make_row(fixed, tile_m=wave_m * warp_m, tile_n=wave_n * warp_n, wave_m=wave_m, wave_n=wave_n, wave_k=wave_k)
        for wave_m, wave_n, wave_k in arch_facts(arch).wave_combos
    ]
