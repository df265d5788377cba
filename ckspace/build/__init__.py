"""Compiling an emitted tree into one shared library.

:mod:`~ckspace.build.builder` checks the tree, compiles and links it;
:mod:`~ckspace.build.report` is the build report and each kernel's log, written after the compiles;
:mod:`~ckspace.build.units` plans the batched translation units and which of them are cached;
:mod:`~ckspace.build.toolchain` finds the HIP compiler and states the link's exports;
:mod:`~ckspace.build.package` writes the CMake package, the pkg-config file and
``compile_commands.json`` beside a library; :mod:`~ckspace.build.objcache` keeps
compiled objects by content; :mod:`~ckspace.build.executor` is the seam to what runs the compiles
(:mod:`~ckspace.build.ninja_executor` here, :mod:`~ckspace.build.ray_executor` and
:mod:`~ckspace.build.ray_task` on a Ray cluster that :mod:`~ckspace.build.cluster` connects to).
May import emit, select, space, constraints and core; never run, verify or commands.
"""
