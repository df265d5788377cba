"""Building rows from the config defaults of the rule tables (``common.json``)."""

from __future__ import annotations

from functools import cache

from ckspace.data import table
from ckspace.space.fields import FIELD_INDEX, GEMM_FIELD_NAMES, Row, encode


@cache
def default_row() -> tuple[int, ...]:
    """A row holding the upstream config defaults; geometry fields are 0 until set."""
    d = table("common")["config_defaults"]
    values = {name: 0 for name in GEMM_FIELD_NAMES}
    values.update(
        vec_a=d["vec"][0], vec_b=d["vec"][1], vec_c=d["vec"][2],
        layout=encode("layout", d["layout"]), epilogue=encode("epilogue", d["epilogue"]),
        scheduler=encode("scheduler", d["scheduler"]),
        pad_m=int(d["pad"][0]), pad_n=int(d["pad"][1]), pad_k=int(d["pad"][2]),
        num_wave_groups=d["num_wave_groups"], num_groups_to_merge=d["num_groups_to_merge"],
        specialization=encode("specialization", d["specialization"]),
        double_smem_buffer=int(d["double_smem_buffer"]), two_stage=int(d["two_stage"]),
        explicit_gemm=int(d["explicit_gemm"]), split_image=int(d["split_image"]),
        streamk_enabled=int(d["streamk"]), streamk_persistent=int(d["streamk_persistent"]),
        streamk_strategy=encode("streamk_strategy", "none"), tagged=int(d["datatype"] is not None),
    )
    return tuple(values[name] for name in GEMM_FIELD_NAMES)


def make_row(base: tuple[int, ...], **values: int) -> Row:
    """``base`` with the given (already encoded) fields replaced."""
    row = list(base)
    for name, value in values.items():
        row[FIELD_INDEX[name]] = value
    return tuple(row)
