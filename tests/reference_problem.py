"""Plain-Python statement of CK Tile's ``IsSupportedArgument`` checks for grouped convolution (the
revision vendored in amd-aiter 0.1.7.post2.dev18), independent of ckspace, used by property tests.

Channels are per group in CK: Cg = C/G, Kg = K/G. A kernel config is a dict of GEMM fields
(``variant``, ``ndim``, ``dtype``, ``vec_a/b/c``, ``specialization``, ``two_stage``,
``num_groups_to_merge``) or of depthwise fields (``kind == "depthwise"``).
"""

from __future__ import annotations

import math


def _dims(p: dict) -> list[str]:
    return ["d", "h", "w"][3 - p["ndim"] :]


def supports(cfg: dict, p: dict) -> bool:
    """True when the kernel accepts the problem."""
    if cfg["ndim"] != p["ndim"]:
        return False
    cg, kg = p["C"] // p["G"], p["K"] // p["G"]
    filt = {"d": p.get("Z", 1), "h": p.get("Y", 1), "w": p["X"]}
    if cfg.get("kind") == "depthwise":
        return (
            cg == 1
            and kg == 1
            and p["ndim"] == 2
            and cfg["filter"] == filt["h"] == filt["w"]
            and (cfg["stride_h"], cfg["stride_w"]) == (p["stride_h"], p["stride_w"])
            and (cfg["pad_h"], cfg["pad_w"]) == (p["pad_h"], p["pad_w"])
            and cfg["dilation"] == p["dil_h"] == p["dil_w"]
        )
    return not gemm_failures(cfg, p)


def gemm_failures(cfg: dict, p: dict) -> set[str]:
    """The checks a GEMM kernel of the problem's rank fails, by the names ckspace gives them (the
    vector checks name the per-group channels they read: ``vec_b_divides_cg``)."""
    cg, kg = p["C"] // p["G"], p["K"] // p["G"]
    dims = _dims(p)
    filt = {"d": p.get("Z", 1), "h": p.get("Y", 1), "w": p["X"]}
    failed = set()
    variant = cfg["variant"]
    spec = cfg["specialization"]
    all_one = all(filt[d] == 1 for d in dims)
    no_pad = all(p[f"pad_{d}"] == 0 for d in dims)
    if spec == "filter1x1_stride1_pad0" and not (all_one and no_pad and all(p[f"stride_{d}"] == 1 for d in dims)):
        failed.add("spec_filter1x1_stride1_pad0")
    if spec == "filter1x1_pad0" and not (all_one and no_pad):
        failed.add("spec_filter1x1_pad0")
    if spec == "filter3x3" and not (cg == 1 and all(filt[d] == 3 for d in dims)):
        failed.add("spec_filter3x3")
    a, b, c = cfg["vec_a"], cfg["vec_b"], cfg["vec_c"]
    if variant == "forward":  # A = input, B = weight (both along Cg), C = output (along Kg)
        reads = {"vec_a": ("cg", cg), "vec_b": ("cg", cg), "vec_c": ("kg", kg)}
    else:  # A = output gradient (Kg); bwd_data: B = weight, C = input gradient; bwd_weight: B = input,
        reads = {"vec_a": ("kg", kg), "vec_b": ("cg", cg), "vec_c": ("cg", cg)}  # C = weight gradient
    for field, width in (("vec_a", a), ("vec_b", b), ("vec_c", c)):
        name, channels = reads[field]
        if channels % width:
            failed.add(f"{field}_divides_{name}")
    if variant == "bwd_weight":
        if p["k_batch"] > 1 and c % 2 == 1 and cfg["dtype"] in ("fp16", "bf16") and not cfg["two_stage"]:
            failed.add("split_k_atomic_dtype")
        if cfg["num_groups_to_merge"] > 1 and p["G"] % cfg["num_groups_to_merge"]:
            failed.add("groups_to_merge_divides_g")
    elif p["k_batch"] != 1:
        failed.add("no_split_k")
    if variant == "bwd_data":
        count = 1
        for d in dims:
            tilde = p[f"stride_{d}"] // math.gcd(p[f"stride_{d}"], p[f"dil_{d}"])
            count *= min(tilde, filt[d])
        if count > 128:
            failed.add("bwd_data_gemm_count")
    return failed
