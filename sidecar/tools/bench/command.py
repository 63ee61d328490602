"""The ``querylog bench`` group and its benchmarks."""

from __future__ import annotations

import click

from sidecar.tools.bench import anonymity, buffer, classify, default, passthrough, profile, scrub


@click.group("bench")
def bench() -> None:
    """Benchmarks: print throughput and memory figures."""


for _module in (passthrough, buffer, profile, classify, scrub, anonymity, default):
    bench.add_command(_module.COMMAND)
