"""The ``querylog bench`` group and its benchmarks."""

from __future__ import annotations

import click

from sidecar.tools.bench import (
    accesslog,
    anonymity,
    archive,
    buffer,
    classify,
    default,
    dp,
    forward,
    http_source,
    microaggregate,
    nats,
    otlp,
    passthrough,
    profile,
    scale,
    scrub,
    vector,
)


@click.group("bench")
def bench() -> None:
    """Benchmarks: print throughput and memory figures."""


for _module in (
    passthrough,
    buffer,
    profile,
    classify,
    scrub,
    anonymity,
    default,
    dp,
    forward,
    vector,
    http_source,
    otlp,
    nats,
    accesslog,
):
    bench.add_command(_module.COMMAND)
bench.add_command(archive.COMMAND)
bench.add_command(scale.COMMAND)
bench.add_command(microaggregate.COMMAND)
