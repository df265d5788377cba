"""Every rule, stated once: the upstream generator's validity checks, the problem checks CK Tile makes
before a run, what a CK revision cannot build, the kernels upstream documents as wrong, and the
catalogue (`catalogue`) that lists every family for the `rules` command, the target, emit and the
fallbacks."""
