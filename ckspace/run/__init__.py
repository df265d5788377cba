"""Running and measuring a built library.

:mod:`~ckspace.run.library` is the one handle on a built library (its kernels and its generated
C API; :mod:`~ckspace.run.elf` lists them without loading it); :mod:`~ckspace.run.device` and
:mod:`~ckspace.run.gpus` are the GPU through HIP Python or the host stand-in;
:mod:`~ckspace.run.sweep` plans a bench and feeds its batches to devices,
:mod:`~ckspace.run.supervisor` runs each batch in bench workers (:mod:`~ckspace.run.worker`) and
:mod:`~ckspace.run.results` writes their measurements.
May import build (which library a tree built, the Ray cluster), verify and everything below them.
"""
