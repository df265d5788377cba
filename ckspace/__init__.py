"""ckspace: the exact, explainable space of AMD CK Tile grouped-convolution kernels.

``from ckspace import Space`` is the entry point. Heavy modules (pydantic models, numpy, the CP-SAT
solver) load on first use, so that command-line answers served from the cache stay fast. This module
imports nothing when it loads: the ``ckspace`` command runs it before its signal handlers are in
place (:mod:`ckspace.cli`), and a Ctrl-C during an import then would be a traceback.
"""

TYPE_CHECKING = False  # not typing's: see above
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"
"""The one statement of the version: packaging metadata reads it from here (pyproject.toml)."""

_EXPORTS = {
    "Space": "ckspace.space.space",
    "Explanation": "ckspace.space.explain",
    "Optimum": "ckspace.space.optimum",
    "Kernel": "ckspace.space.listing",
    "GemmConfig": "ckspace.core.config",
    "DepthwiseConfig": "ckspace.core.config",
    "ConvProblem": "ckspace.workloads.problem",
    "ArchFacts": "ckspace.core.arch",
    "arch_facts": "ckspace.core.arch",
    "CkRevision": "ckspace.core.ck",
    "RulesRevision": "ckspace.core.revisions",
    "rules_revision": "ckspace.core.revisions",
    "rules_revision_names": "ckspace.core.revisions",
    "CkspaceError": "ckspace.core.errors",
    "InvalidChoiceError": "ckspace.core.errors",
    "InvalidInputError": "ckspace.core.errors",
    "KernelNameError": "ckspace.core.errors",
    "NoKernelError": "ckspace.core.errors",
    "CkHeadersNotFound": "ckspace.core.errors",
    "Target": "ckspace.environment.target",
    "resolve_target": "ckspace.environment.target",
    "Variant": "ckspace.core.vocab",
    "Dtype": "ckspace.core.vocab",
    "Pipeline": "ckspace.core.vocab",
    "Scheduler": "ckspace.core.vocab",
    "Epilogue": "ckspace.core.vocab",
    "Specialization": "ckspace.core.vocab",
    "StreamKStrategy": "ckspace.core.vocab",
    "Layout": "ckspace.core.vocab",
    "Predicate": "ckspace.core.vocab",
    "RuleKind": "ckspace.core.vocab",
    "Selector": "ckspace.select.selector",
    "Selection": "ckspace.select.selection",
    "emit_tree": "ckspace.workflow",
    "build_library": "ckspace.workflow",
    "KernelLibrary": "ckspace.run.library",
}

__all__ = ["__version__", *_EXPORTS]


def __dir__() -> list[str]:
    """The lazy exports too (``dir(ckspace)`` lists ``Space``, ``Selector``, ...), not only what is loaded."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})


def __getattr__(name: str) -> "Any":
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ckspace' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(module), name)
