"""``querylog bench``: benchmark commands that print figures (never timed tests).

Each module in ``MODULES`` exposes ``COMMAND``, a click command added under ``bench``.
"""

from __future__ import annotations

import importlib
import resource

import click

MODULES: tuple[str, ...] = ("passthrough", "buffer", "profile", "classify", "scrub", "anonymity", "default")


def peak_rss_mib(children: bool = False) -> float:
    """Peak resident set size of this process (or of its waited-for children), MiB."""
    who = resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF
    return resource.getrusage(who).ru_maxrss / 1024.0


@click.group("bench")
def bench() -> None:
    """Benchmarks: print throughput and memory figures."""


for _name in MODULES:
    bench.add_command(importlib.import_module(f"sidecar.bench.{_name}").COMMAND)

COMMANDS = [bench]
