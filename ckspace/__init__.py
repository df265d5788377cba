"""ckspace: the exact, explainable space of AMD CK Tile grouped-convolution kernels.

``from ckspace import Space`` is the entry point. Heavy modules (pydantic models, numpy, the CP-SAT
solver) load on first use, so that command-line answers served from the cache stay fast.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "Space": "ckspace.space.space",
    "GemmConfig": "ckspace.space.config",
    "DepthwiseConfig": "ckspace.space.config",
    "ArchFacts": "ckspace.space.arch",
    "arch_facts": "ckspace.space.arch",
    "CkspaceError": "ckspace.errors",
    "InvalidChoiceError": "ckspace.errors",
    "KernelNameError": "ckspace.errors",
    "Variant": "ckspace.space.vocab",
    "Dtype": "ckspace.space.vocab",
    "Pipeline": "ckspace.space.vocab",
    "ConvProblem": "ckspace.space.problem",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ckspace' has no attribute {name!r}")
    return getattr(import_module(module), name)
