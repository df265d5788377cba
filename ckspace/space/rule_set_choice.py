"""Which rule sets hold kernels of a request, so that asking the wrong one is named as such.

A rule set can hold no kernel of a whole direction: upstream's ``full`` proposes bwd_data configs
that its own validity checks all discard (quirk 14.1), and ``full`` is the default of every
command. A user who asks ``--variant bwd_data`` then gets no kernel whatever the problem or filter:
the rule set, not the question, is wrong. :func:`refuse_rule_set_without_kernels` says so in one
line, naming the rule sets that hold kernels of the same request in the same target, computed from
the rule sets themselves (a new rule set, or a fixed upstream quirk, changes the answer by itself).
"""

from __future__ import annotations

import logging

from ckspace.constraints.rulesets import get_rule_set, rule_set_names
from ckspace.constraints.rulesets.base import RuleSetRefusal
from ckspace.core.cells import Request
from ckspace.core.errors import InvalidInputError
from ckspace.space.space import Space

log = logging.getLogger(__name__)


def holds_gemm_kernel(space: Space) -> bool:
    """Whether ``space`` holds a GEMM kernel (what select, plan and emit work on): ``open`` holds
    no depthwise config, so its count answers; a table rule set's listing is read from the cell
    cache."""
    if space.open:
        return space.count() > 0
    return any(not k.depthwise for k in space.iter_kernels())


def _unfiltered(space: Space, request: Request, rule_set: str) -> Space:
    """The space of ``request`` under ``rule_set`` in ``space``'s target, without filters or problem."""
    return Space(
        request.arch,
        [v.value for v in request.variants],
        list(request.ndims),
        [d.value for d in request.dtypes],
        rule_set,
        rules_revision=request.rules_revision,
        use_cache=space.use_cache,
        ck=space.target,
    )


def rule_sets_holding(space: Space, request: Request) -> list[str]:
    """The rule sets whose space of ``request`` (unfiltered, in ``space``'s target) holds a GEMM
    kernel; a rule set that refuses the request as upstream raises holds none."""
    holding = []
    for name in rule_set_names():
        try:
            if holds_gemm_kernel(_unfiltered(space, request, name)):
                holding.append(name)
        except RuleSetRefusal as exc:
            log.debug("rule set %s holds nothing of %s: %s", name, request.key(), exc.reason)
    return holding


def refuse_rule_set_without_kernels(space: Space) -> None:
    """:class:`InvalidInputError` (exit 2) when ``space`` holds no GEMM kernel because its rule set
    holds none of the request at all, while another rule set does. A space its filters or problem
    emptied is left alone: that is a negative answer to the question, not a wrong rule set. The line
    names the request, the rule sets that hold kernels of it and the option to pass. When no rule
    set holds any, nothing is refused here either: the caller's negative answer stands. Cheap when
    ``space`` holds a kernel: its own listing (or count), which the caller reads anyway."""
    if holds_gemm_kernel(space):
        return
    for request in space.requests:
        if holds_gemm_kernel(_unfiltered(space, request, request.rule_set)):
            continue
        others = [name for name in rule_sets_holding(space, request) if name != request.rule_set]
        if not others:
            continue
        listed = next((name for name in others if get_rule_set(name).has_table), others[0])  # select ranks a list
        raise InvalidInputError(
            f"rule set {request.rule_set} holds no {_described(request)} for {request.arch} in the target; "
            f"rule sets that do: {', '.join(others)} (pass --rule-set {listed})"
        )


def _described(request: Request) -> str:
    """The kernels ``request`` asks for in a few words: ``bwd_data GEMM kernel (2D, bf16)``."""
    variants = "/".join(v.value for v in request.variants)
    dims = "/".join(f"{n}D" for n in request.ndims)
    return f"{variants} GEMM kernel ({dims}, {'/'.join(d.value for d in request.dtypes)})"
