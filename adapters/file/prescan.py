"""``replay --prescan``: a first pass over an archive for the filters that can use it.

A streaming filter only knows the past. When a whole archive is replayed, the
future is on disk: ``category_buffer`` uses a first pass to learn which user
sends which text anywhere in the archive, so that it never pairs a user with a
text they send later (the only (user, query) matches a stream cannot avoid).

The first filter with ``PRESCAN`` receives every decodable event of the input,
after it went through the filters in front of it. Those must not declare
``STATEFUL`` and must be deterministic — true of the built-in stateless filters
(``pseudonymize`` with its keyed hash, ``hipaa_scrub``, ``classify``, ``drop``,
``truncate_url``). The first pass runs the pipeline's own instances of them
(building a chain twice cost more than a second at every start: the knowledge
base and the scrubber's name and place data), so their per-query caches
(``classify``'s, ``hipaa_scrub``'s) are warm when the real pass starts and each
distinct query is classified and scrubbed once, not twice. While it runs, each
of them sees a first-pass context (``Filter.ctx``: no state store, a dead-letter
counter that writes nothing, so the real pass reports bad records once), and its
``counts`` are put back afterwards (the real pass counts each event once). A
filter in front must therefore reach the state store and dead letters through
``self.ctx`` when it uses them, as the built-ins do.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from adapters.file.reader import is_stream, open_log
from sidecar.api import BuildContext, Event, Filter
from sidecar.config import LoadedConfig
from sidecar.deadletter import DeadLetters
from sidecar.pipeline import Pipeline


class PrescanError(ValueError):
    """``--prescan`` cannot be done with this chain or input; ``reason`` is a short code for logs."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def run_prescan(config: LoadedConfig, pipeline: Pipeline, input_path: str) -> None:
    """Feed the whole input to the first ``PRESCAN`` filter of ``pipeline``'s chain."""
    if is_stream(input_path):
        raise PrescanError("--prescan reads the input twice: give a file, not stdin or a pipe", "stdin")
    filters = pipeline.chain.filters
    index = next((i for i, f in enumerate(filters) if f.PRESCAN), None)
    if index is None:
        raise PrescanError(
            "--prescan: no filter of this chain uses a first pass (e.g. category_buffer)", "no_prescan_filter"
        )
    target = filters[index]
    counter = DeadLetters(None)
    ctx = BuildContext(
        config_dir=config.config_dir,
        state=None,
        rng=pipeline.ctx.rng,
        seed=pipeline.ctx.seed,
        schema=config.sidecar.schema,
        dead_letters=counter,
        clock=pipeline.ctx.clock,
        codecs=pipeline.ctx.codecs,
    )
    stateful = next((spec.cls.NAME for spec in config.filters[:index] if spec.cls.STATEFUL), None)
    if stateful is not None:
        raise PrescanError(
            f"--prescan: filter {stateful} in front of {target.NAME} keeps state; "
            "the filters in front of it must be stateless",
            "stateful_filter_in_front",
        )
    prefix: list[Filter[Any]] = filters[:index]
    saved = [(f.ctx, Counter(f.counts)) for f in prefix]
    try:
        for f in prefix:
            f.ctx = ctx
        target.prescan(_events(config, input_path, counter, prefix))
    finally:
        for f, (own_ctx, counts) in zip(prefix, saved):
            f.ctx = own_ctx
            f.counts.clear()
            f.counts.update(counts)


def _events(
    config: LoadedConfig, input_path: str, counter: DeadLetters, prefix: list[Filter[Any]]
) -> Iterator[list[Event]]:
    limits = config.sidecar.limits
    log_in = open_log(input_path, config.sidecar.schema, counter, limits.max_record_bytes, limits.batch_size)
    codec, batches = log_in.codec, log_in.batches  # the real pass has already checked the header
    decode_many = codec.decode_many
    for batch in batches:
        events: list[Event] = decode_many(batch.lines, "\n", [])
        for f in prefix:
            if not events:
                break
            events = f.process(events)
        if events:
            yield events
