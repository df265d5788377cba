"""Enumerating a request: the rule set's proposals classified by the rules, through the on-disk cell
cache that every listing reads."""
