"""What answers questions about rules: CP-SAT models, vectorised classification of concrete configs,
and exact counting (bucket elimination) of a space given by domains and rules."""
