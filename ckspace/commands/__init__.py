"""Subcommands of the ``ckspace`` CLI, one module each.

A module here exposes ``NAME``, ``HELP``, ``configure(parser)`` and ``run(args, out) -> int``;
:data:`COMMANDS` lists them in the order ``ckspace --help`` shows. Modules import their heavy
dependencies inside ``run`` so that every command starts fast.
"""

COMMANDS = (
    "enumerate",
    "explain",
    "lint",
    "rules",
    "diff",
    "emit",
    "build",
    "bench",
    "probe",
    "train",
    "evaluate",
    "learn",
    "select",
    "plan",
    "hipdnn",
    "info",
    "cache",
)
