"""Turning kernel configs into CK Tile C++ (``ckspace emit``).

:mod:`rendering` decides what a tree holds (the configs the CK headers can build, the rest listed
with the ``ck_revision`` rules of :mod:`ckspace.constraints.rulebook.ck_rules` they break) and renders the
jinja2 templates of ``templates/`` in memory, with :mod:`cxx` mapping config fields to CK types and
:mod:`dispatcher` generating the C dispatcher of ``--with-selector``; :mod:`emitter` writes the
rendered tree under ``--out``; :mod:`manifest` describes the tree. The CK headers themselves are
found and fingerprinted by :mod:`ckspace.environment.ck_headers`.
"""
