"""Linting a rule set: what it proposes that the generator throws away, and why."""
