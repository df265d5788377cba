"""Plain-Python statement of CK Tile's ``IsSupportedArgument`` checks for grouped convolution (the
revision vendored in amd-aiter 0.1.7.post2.dev18), independent of ckspace, used by property tests.

Channels are per group in CK: Cg = C/G, Kg = K/G. A kernel config is a dict of GEMM fields
(``variant``, ``ndim``, ``dtype``, ``vec_a/b/c``, ``specialization``, ``two_stage``,
``num_groups_to_merge``) or of depthwise fields (``kind == "depthwise"``).
"""

from __future__ import annotations

import math


def _dims(p: dict) -> list[str]:
    return ["d", "h", "w"][3 - p["ndim"]:]


def supports(cfg: dict, p: dict) -> bool:
    """True when the kernel accepts the problem."""
    if cfg["ndim"] != p["ndim"]:
        return False
    cg, kg = p["C"] // p["G"], p["K"] // p["G"]
    dims = _dims(p)
    filt = {"d": p.get("Z", 1), "h": p.get("Y", 1), "w": p["X"]}
    if cfg.get("kind") == "depthwise":
        return (cg == 1 and kg == 1 and p["ndim"] == 2 and cfg["filter"] == filt["h"] == filt["w"]
                and (cfg["stride_h"], cfg["stride_w"]) == (p["stride_h"], p["stride_w"])
                and (cfg["pad_h"], cfg["pad_w"]) == (p["pad_h"], p["pad_w"])
                and cfg["dilation"] == p["dil_h"] == p["dil_w"])
    variant = cfg["variant"]
    spec = cfg["specialization"]
    all_one = all(filt[d] == 1 for d in dims)
    no_pad = all(p[f"pad_{d}"] == 0 for d in dims)
    if spec == "filter1x1_stride1_pad0" and not (all_one and no_pad and all(p[f"stride_{d}"] == 1 for d in dims)):
        return False
    if spec == "filter1x1_pad0" and not (all_one and no_pad):
        return False
    if spec == "filter3x3" and not (cg == 1 and all(filt[d] == 3 for d in dims)):
        return False
    a, b, c = cfg["vec_a"], cfg["vec_b"], cfg["vec_c"]
    if variant == "forward":
        if p["k_batch"] != 1 or cg % a or cg % b or kg % c:
            return False
    elif variant == "bwd_data":
        if p["k_batch"] != 1 or kg % a or cg % b or cg % c:
            return False
        count = 1
        for d in dims:
            tilde = p[f"stride_{d}"] // math.gcd(p[f"stride_{d}"], p[f"dil_{d}"])
            count *= min(tilde, filt[d])
        if count > 128:
            return False
    else:
        if kg % a or cg % b or cg % c:
            return False
        if p["k_batch"] > 1 and c % 2 == 1 and cfg["dtype"] in ("fp16", "bf16") and not cfg["two_stage"]:
            return False
        if cfg["num_groups_to_merge"] > 1 and p["G"] % cfg["num_groups_to_merge"]:
            return False
    return True
