"""The generators behind the rule sets: table walks, tile arithmetic and sampling.

Kept apart from :mod:`ckspace.constraints.rulesets` (which only declares rule sets) so that naming
a rule set, or answering from the cache, never loads the solver or numpy.
"""
