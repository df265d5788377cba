"""The rule language: expressions (`expr`), rules (`rule`), their partial evaluation, rendering to C
and to words, and the user filters of `--where`. Everything else in `constraints` is written in it."""
