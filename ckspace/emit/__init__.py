"""Turning kernel configs into CK Tile C++ (``ckspace emit``).

:mod:`ck_revision` finds and fingerprints the CK headers and states what that revision lacks as
rules; :mod:`cxx` maps config fields to CK types; :mod:`emitter` renders the jinja2 templates of
``templates/`` into a tree described by :mod:`manifest`.
"""
