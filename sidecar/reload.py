"""Reload a running ``serve``: re-read the config, build the new chain on the same state store, swap it between
batches (:meth:`sidecar.pipeline.Pipeline.reload`), and reopen file sinks (logrotate's move + HUP).

What carries over: everything the state store holds (held events, profiles, budgets, outboxes): a filter built on
the same :class:`~sidecar.state.StateStore` restores it, and a changed option (``k``...) applies to what is held.
A filter whose name and options did not change keeps running as it is (its in-memory state too).

``serve`` also rebinds its sources (:mod:`sidecar.served_sources`): a changed, added or removed server source is
started and stopped around the chain's swap, and started back if the reload is refused.

What a reload refuses, with a located error (``FILE:LINE: KEY: problem``) and the old chain running on:
- a config that ``check-config`` refuses (the same located errors);
- a change of anything but ``filters`` and (in ``serve``) ``sources``: sinks (a network sink's outbox keeps its
  pending batches under the sink's name, and a file sink reopens its file on every reload anyway), schema,
  state_dir, metrics_listen...: restart ``serve`` for those;
- a new source that cannot be built or bound (its port in use...);
- removing a buffering filter that holds events (they would be stranded in the state store), unless ``flush``
  (``serve --reload-flush``): the filter's final flush (what it lets go at shutdown) then runs through the rest
  of the old chain into the sinks, committed with the delivery, and what it still holds stays in the state
  store (counted in the log; restored if the filter comes back). ``category_buffer``'s final flush lets nothing
  go (releasing below k would break its guarantee), so its held events always stay;
- adding or removing the chain's only buffering filters (sources chose how to acknowledge by it when they started).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from sidecar.api import Event, Filter, StateDamaged
from sidecar.chain import Chain
from sidecar.config import ConfigError, ErrorCollector, LoadedConfig, SidecarConfig, load_config
from sidecar.outbox import OutboxFull
from sidecar.state import StateError

if TYPE_CHECKING:
    from sidecar.pipeline import Pipeline
    from sidecar.served_sources import ServedSources

log = structlog.get_logger("querylog.reload")

#: Top-level keys a reload of the chain may change (every other change is refused: restart serve for it).
RELOADABLE = frozenset({"filters"})
#: ... and those a reload of ``serve`` may change too: it rebinds its sources (``server`` is grpc's old spelling).
SOURCE_KEYS = frozenset({"sources", "server"})
#: Why a changed sink is refused (the outbox's pending batches are keyed by the sink's name).
SINKS_REFUSED = (
    "changed: a reload does not rebuild sinks (a network sink's outbox holds its pending batches under the sink's "
    "name; file sinks reopen their file on every reload); restart serve"
)
FLUSH_OPTION = "serve --reload-flush"


def refused_changes(old: LoadedConfig, new: LoadedConfig, reloadable: frozenset[str] = RELOADABLE) -> list[ConfigError]:
    """A located error for each top-level key of ``new`` that differs from ``old`` and a reload cannot apply."""
    errors = []
    what = " and ".join(f"`{key}`" for key in sorted(reloadable - {"server"}))
    for f in dataclasses.fields(SidecarConfig):
        if f.name in reloadable or getattr(old.sidecar, f.name) == getattr(new.sidecar, f.name):
            continue
        problem = (
            SINKS_REFUSED if f.name == "sinks" else f"changed: a reload applies changes of {what} only; restart serve"
        )
        errors.append(new.doc.error(f.name, problem))
    if old.state_dir != new.state_dir and not any(e.key == "state_dir" for e in errors):
        errors.append(new.doc.error("state_dir", "changed: a reload keeps its state folder; restart serve"))
    return errors


def removed_buffering(old: list[Filter[Any]], new: LoadedConfig) -> list[Filter[Any]]:
    """The running buffering filters that ``new`` no longer has (by name: a same-named filter restores their
    state), in chain order."""
    kept = Counter(spec.name for spec in new.filters)
    removed = []
    for f in old:
        if not f.BUFFERING:
            continue
        if kept[f.NAME] > 0:
            kept[f.NAME] -= 1
        else:
            removed.append(f)
    return removed


def _buffering_refusals(old: list[Filter[Any]], new: LoadedConfig, flush: bool) -> list[ConfigError]:
    """Removing a buffering filter that holds events (unless ``flush``), or changing whether the chain buffers."""
    errors = [
        new.doc.error(
            "filters",
            f"removes {f.NAME}, which holds {f.held()} events (they would stay in the state store, never released): "
            f"keep it until it holds none, reload with {FLUSH_OPTION} to flush it, or restart serve",
        )
        for f in removed_buffering(old, new)
        if f.held() and not flush
    ]
    if not errors and any(f.BUFFERING for f in old) != any(spec.cls.BUFFERING for spec in new.filters):
        errors.append(
            new.doc.error(
                "filters",
                "adds or removes the chain's only buffering filters: sources chose how to acknowledge by it "
                "when they started; restart serve",
            )
        )
    return errors


def check(
    pipeline: Pipeline, new: LoadedConfig, *, flush: bool = False, reloadable: frozenset[str] = RELOADABLE
) -> None:
    """Raise the located refusals of a reload to ``new`` (changed keys it cannot apply, buffering filters), if
    any; nothing is built. Takes the runtime's lock (the filters' held counts)."""
    with pipeline.lock:
        errors = ErrorCollector()
        errors.errors.extend(
            (*refused_changes(pipeline.config, new, reloadable), *_buffering_refusals(pipeline.filters, new, flush))
        )
        errors.raise_any()


def build_chain(
    pipeline: Pipeline, new: LoadedConfig, *, flush: bool = False, reloadable: frozenset[str] = RELOADABLE
) -> tuple[Chain, list[Filter[Any]]]:
    """The chain of ``new`` on ``pipeline``'s state store (the caller holds the runtime's lock: no batch runs),
    and the old filters it no longer uses (to close once it is swapped in). A filter with the same name and
    options as one of the running chain is that very filter; the others are built and restore their state.
    :class:`ConfigError` (located; several as ``ConfigErrors``) when the reload is refused: nothing changed.
    The new chain's counts are not carried over yet (:func:`carry_counts`, once removed filters flushed)."""
    from sidecar.pipeline import build_component

    old = pipeline.chain
    check(pipeline, new, flush=flush, reloadable=reloadable)
    errors = ErrorCollector()
    spare = list(zip(pipeline.config.filters, old.filters))
    filters: list[Filter[Any]] = []
    built: list[Filter[Any]] = []
    try:
        for spec in new.filters:
            same = next((pair for pair in spare if (pair[0].name, pair[0].config) == (spec.name, spec.config)), None)
            if same is not None:
                spare.remove(same)
                filters.append(same[1])
                continue
            with errors.guard():
                try:
                    made = build_component(spec, pipeline.ctx, new)
                except StateDamaged as exc:
                    raise StateError(pipeline.state.path, str(exc)) from None
                built.append(made)
                filters.append(made)
        errors.raise_any()
    except BaseException:
        for f in built:
            f.close()
        raise
    return Chain(filters), [f for _, f in spare]


def flush_removed(chain: Chain, removed: list[Filter[Any]]) -> list[Event]:
    """``--reload-flush``: each filter of ``removed`` flushes as at shutdown (``flush(final=True)``), and what it
    lets go runs through the rest of ``chain`` (the running one), counted as the chain counts a release. The
    caller delivers the result in a transaction."""
    released: list[Event] = []
    for f in chain.filters:
        if released:
            chain.per_filter_in[f.NAME] += len(released)
            released = f.process(released)
            chain.per_filter_out[f.NAME] += len(released)
        if any(f is r for r in removed):
            more = f.flush(True)
            chain.per_filter_out[f.NAME] += len(more)
            released.extend(more)
    chain.events_out += len(released)
    log.info(
        "reload_flushed",
        filters=[f.NAME for f in removed],
        released=len(released),
        left_in_state=sum(f.held() for f in removed),
    )
    return released


def flush_into_sinks(pipeline: Pipeline, removed: list[Filter[Any]], new: LoadedConfig) -> None:
    """``reload(flush=True)``: what ``removed`` let go at a final flush goes through the rest of the running chain
    into the sinks, committed with its delivery (the caller holds the runtime's lock); refused (located, nothing
    flushed) while a sink's outbox is full."""
    try:
        with pipeline.transaction():
            released = flush_removed(pipeline.chain, removed)
            pipeline.audit.outgoing(released)  # the live audit counts them as it counts a release
            if released:
                pipeline.deliver(released)
                pipeline.flush_sinks()
    except OutboxFull as exc:
        names = ", ".join(f.NAME for f in removed)
        raise new.doc.error(
            "filters", f"removes {names}: flushing it needs the sinks, and {exc}; reload later"
        ) from None
    finally:
        pipeline.dead.flush()


def carry_counts(old: Chain, new: Chain) -> Chain:
    """The new chain goes on counting where the old one was (Prometheus counters never go back); what the new
    filters restored beyond what the old ones held counts as restored, so ``dropped`` does not move."""
    new.events_in, new.events_out = old.events_in, old.events_out
    new.per_filter_in.update(old.per_filter_in)
    new.per_filter_out.update(old.per_filter_out)
    new.restored = old.restored + new.held() - old.held()
    return new


def reopen_sinks(pipeline: Pipeline) -> None:
    """Sinks that write a file open it again by its path (after logrotate moved it: a new file), between
    batches; a sink that cannot is logged and keeps writing where it was."""
    with pipeline.lock:
        for sink in pipeline.sinks:
            try:
                sink.reopen()
            except OSError as exc:
                log.error("sink_reopen_failed", sink=sink.NAME, error=exc.strerror or type(exc).__name__)


def _log_refused(exc: ConfigError) -> None:
    for error in getattr(exc, "errors", (exc,)):
        log.error("config_reload_refused", file=error.file, line=error.line, key=error.key, error=str(error))


def reload_file(
    pipeline: Pipeline, path: str | Path, *, sources: ServedSources | None = None, flush: bool = False
) -> bool:
    """SIGHUP: reopen file sinks, then load ``path``, rebind the changed ``sources`` (``serve``'s) and swap in
    its chain; ``flush``: a removed buffering filter that holds events is flushed (:func:`flush_removed`) instead
    of refused. A refused or invalid config is logged with its file and line and counted (``config_reloads``
    failure); the running sources and chain go on. True on success."""
    reopen_sinks(pipeline)
    try:
        config = load_config(path)
    except (ConfigError, OSError) as exc:
        pipeline.reloads["failure"] += 1
        if isinstance(exc, ConfigError):
            _log_refused(exc)
        else:
            log.error("config_reload_refused", file=str(path), error=exc.strerror or type(exc).__name__)
        return False
    reloadable = RELOADABLE | SOURCE_KEYS if sources is not None else RELOADABLE
    rebind = None
    try:
        if sources is not None:
            rebind = sources.plan(config)
            check(pipeline, config, flush=flush, reloadable=reloadable)  # refused before any source moves
            rebind.apply()
    except Exception as exc:
        if rebind is not None:
            rebind.undo()  # (apply undid itself already when a source failed: then a no-op)
        pipeline.reloads["failure"] += 1
        _log_failure(exc)
        return False
    try:
        pipeline.reload(config, flush=flush, reloadable=reloadable)  # counts its own outcome
    except Exception as exc:
        if rebind is not None:
            rebind.undo()
        _log_failure(exc)
        return False
    if rebind is not None:
        rebind.commit()
    log.info("config_reloaded", filters=[f.NAME for f in pipeline.filters])
    return True


def _log_failure(exc: Exception) -> None:
    if isinstance(exc, ConfigError):
        _log_refused(exc)
    else:  # a filter or source that could not be built (state, a file): never the end of serve
        log.error("config_reload_failed", error=str(exc) if isinstance(exc, StateError) else type(exc).__name__)
