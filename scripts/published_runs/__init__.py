"""scripts/published-runs' parts: the published runs, their simulation, the fits and the report."""
