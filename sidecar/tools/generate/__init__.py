"""``querylog generate``: synthetic AOL-style query logs for demos, tests and benchmarks."""
