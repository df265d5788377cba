"""The examples each command's ``--help`` ends with, in one table.

Kept in one place rather than in each command's module so that they read as one set (the same
arch, cell and data sets throughout, each step's output the next one's input) and so that one test
(``tests/test_help_examples.py``) parses every line, and runs the cheap ones, wherever they are
shown: an example that stops working fails that test instead of misleading a user. The parser
factory (:meth:`ckspace.commands.parsing.StrictParser.add_subparsers`) puts them below each
command's options. Names of shipped data sets stand where a command takes a CSV, so every line runs
as it is on a fresh install; ``kernels/`` is the tree ``emit`` writes and ``build`` compiles.
"""

from __future__ import annotations

KERNEL = "grouped_conv_fwd_fp16_nhwgc_2d_compv3_cshuffle_intrawave_16x64x128_1x4x1_16x16x32"
"""A kernel of gfx942's default rule set, named as ckspace names it."""

PROBLEM = "N=1,G=1,C=64,K=128,Hi=56,Wi=56,Y=3,X=3,stride=1,pad=1"
"""A 2D forward convolution, in the syntax of ``--problem``."""

EXAMPLES: dict[str, tuple[tuple[str, str], ...]] = {
    "enumerate": (
        (
            "count the forward kernels the CK headers found can build",
            "ckspace enumerate --arch gfx942 --variant forward --count",
        ),
        (
            "list the 2D bf16 ones with a large tile, one name a line",
            "ckspace enumerate --arch gfx942 --variant forward --ndim 2 --dtype bf16 "
            "--where 'tile_m * tile_n >= 16384' --list",
        ),
        (
            "upstream's rule space, whatever CK is installed, as JSON",
            "ckspace enumerate --arch gfx950 --variant bwd_weight --count --rules-only --format json",
        ),
    ),
    "explain": (
        ("why a kernel is (or is not) in the space", f"ckspace explain {KERNEL} --arch gfx942 --rule-set default"),
        (
            "whether a config of your own is valid, and the kernels nearest it (exit 0, 1 or 3)",
            "ckspace explain --arch gfx942 --variant forward --ndim 2 --dtype fp16 --set tile_m=48 --set tile_n=64",
        ),
    ),
    "lint": (
        ("check the rule tables of one arch", "ckspace lint --arch gfx942 --rule-set default"),
        ("fail (exit 1) on any finding, for CI", "ckspace lint --strict --format json"),
    ),
    "rules": (
        ("every validity rule, as markdown", "ckspace rules"),
        (
            "the rules of one cell, with those a problem adds",
            f"ckspace rules --arch gfx942 --variant forward --problem '{PROBLEM}'",
        ),
    ),
    "diff": (
        (
            "what gfx950 adds over gfx942",
            "ckspace diff --arch gfx942 --variant forward --ndim 2 --dtype bf16 --against-arch gfx950",
        ),
        (
            "what the curated list leaves out of the full space",
            "ckspace diff --arch gfx942 --variant forward --ndim 2 --dtype bf16 --rule-set full "
            "--against-rule-set default",
        ),
    ),
    "emit": (
        (
            "the curated forward 2D fp16 kernels as C++ sources",
            "ckspace emit --arch gfx942 --variant forward --ndim 2 --dtype fp16 --rule-set default --out kernels",
        ),
        (
            "the same with the run-time selector (ckspace_dispatch.h)",
            "ckspace emit --arch gfx942 --variant forward --ndim 2 --dtype fp16 --rule-set default "
            "--with-selector --out kernels",
        ),
    ),
    "build": (
        ("compile an emitted tree into one library, on every core", "ckspace build kernels --arch gfx942"),
        ("the dispatcher's host part alone, no HIP needed", "ckspace build kernels --host-only"),
        ("compile on a Ray cluster", "ckspace build kernels --arch gfx942 --executor ray --address auto"),
    ),
    "bench": (
        (
            "time every kernel on 300 shapes from MIOpen",
            "ckspace bench kernels --problems miopen-forward-300 --out results.csv",
        ),
        (
            "continue an interrupted run",
            "ckspace bench kernels --problems miopen-forward-300 --out results.csv --resume",
        ),
    ),
    "probe": (
        (
            "compile a sample of 20 kernels to find what the compiler rejects",
            "ckspace probe --arch gfx942 --variant forward --ndim 2 --dtype fp16 --sample 20 --out probe",
        ),
    ),
    "train": (
        ("retrain the shipped model from its data set", "ckspace train --data mi355x-forward-bf16 --out my_model"),
        ("a model from your own bench results", "ckspace train --data results.csv --out my_model --force"),
    ),
    "evaluate": (
        ("5-fold cross-validation of a data set", "ckspace evaluate --data mi355x-forward-bf16"),
        (
            "kernel-set plans of 4 and 8 kernels too, as JSON",
            "ckspace evaluate --data mi355x-forward-bf16 --plan-budgets 4,8 --format json",
        ),
    ),
    "learn": (
        (
            "a model from 12 kernels and 700 pairs of a recording, instead of all 6,930",
            "ckspace learn --arch gfx950 --variant forward --dtype bf16 --problems mi355x-forward-bf16 "
            "--replay mi355x-forward-bf16 --budget-kernels 12 --budget-pairs 700 --out learnt",
        ),
        (
            "the same on a GPU: build an emitted tree (whole, once) and time the pairs the loop asks, verified",
            "ckspace learn --arch gfx942 --variant forward --dtype bf16 --problems YOUR.csv --tree kernels "
            "--budget-kernels 12 --budget-pairs 600 --out learnt",
        ),
    ),
    "select": (
        (
            "the best kernels for a problem",
            f"ckspace select --arch gfx950 --variant forward --dtype bf16 --problem '{PROBLEM}' --top 3",
        ),
    ),
    "plan": (
        (
            "8 kernels that serve a workload best",
            "ckspace plan --arch gfx950 --variant forward --dtype bf16 --problems miopen-forward-300 --budget 8",
        ),
        (
            "the fewest kernels that reach 90% efficiency",
            "ckspace plan --arch gfx950 --variant forward --dtype bf16 --problems miopen-forward-300 "
            "--min-efficiency 90",
        ),
        (
            "a fleet: 12 kernels over two archs, where they help most; emit takes the plan",
            "ckspace plan --arch gfx942 gfx950 --variant forward --dtype bf16 --problems miopen-forward-300 "
            "--total-budget 12",
        ),
    ),
    "hipdnn": (
        (
            "which of ResNet-50's convolutions the plugin serves in training, and why it declines the others",
            "ckspace hipdnn census kernels/build/gfx942/libckspace_hipdnn_gfx942.so --problems torchvision-resnet50",
        ),
        (
            "a channels-last model's forward passes only, and hipDNN's rules that prefer the plugin for them",
            "ckspace hipdnn census kernels/build/gfx942/libckspace_hipdnn_gfx942.so --problems torchvision-vgg16 "
            "--variant forward --memory-format channels_last --hipdnn-rules rules.json",
        ),
    ),
    "info": (
        ("what this machine has and what ckspace knows", "ckspace info"),
        ("the same as JSON", "ckspace info --format json"),
        ("what an emitted or built tree holds, per arch", "ckspace info kernels"),
    ),
    "cache": (
        ("where the cache is and how big", "ckspace cache info"),
        ("empty it, compiled objects included", "ckspace cache clear --objects"),
    ),
}
"""Each command's examples: (what it does, the command line), in the order ``--help`` shows them."""


def examples_epilog(command: str) -> str | None:
    """The ``examples:`` section of ``command``'s help (None: the command has no examples), each
    example a comment line then the command line, laid out as written (a raw epilog)."""
    examples = EXAMPLES.get(command)
    if not examples:
        return None
    return "examples:\n" + "\n".join(f"  # {what}\n  {line}" for what, line in examples)
