"""Helpers shared by the benchmarks."""

from __future__ import annotations

import resource


def peak_rss_mib(children: bool = False) -> float:
    """Peak resident set size of this process (or of its waited-for children), MiB."""
    who = resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF
    return resource.getrusage(who).ru_maxrss / 1024.0
