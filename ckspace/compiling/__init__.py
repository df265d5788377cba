"""Compiling an emitted tree into one shared library.

:mod:`~ckspace.compiling.builder` checks the tree, compiles and links it;
:mod:`~ckspace.compiling.report` is the build report and each kernel's log, written after the compiles;
:mod:`~ckspace.compiling.units` plans the batched translation units and which of them are cached;
:mod:`~ckspace.compiling.toolchain` finds the HIP compiler and states the link's exports;
:mod:`~ckspace.compiling.package` writes the CMake package, the pkg-config file and
``compile_commands.json`` beside a library; :mod:`~ckspace.compiling.objcache` keeps
compiled objects by content; :mod:`~ckspace.compiling.executor` is the seam to what runs the compiles
(:mod:`~ckspace.compiling.ninja_executor` here, :mod:`~ckspace.compiling.ray_executor` and
:mod:`~ckspace.compiling.ray_task` on a Ray cluster that :mod:`~ckspace.compiling.cluster` connects to).
May import emit, select, space, constraints and core; never run, verify or commands.
"""
