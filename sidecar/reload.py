"""Reload a running ``serve``: re-read the config, build the new chain on the same state store, swap it between
batches (:meth:`sidecar.pipeline.Pipeline.reload`), and reopen file sinks (logrotate's move + HUP).

What carries over: everything the state store holds (held events, profiles, budgets, outboxes): a filter built on
the same :class:`~sidecar.state.StateStore` restores it, and a changed option (``k``...) applies to what is held.
A filter whose name and options did not change keeps running as it is (its in-memory state too).

What a reload refuses, with a located error (``FILE:LINE: KEY: problem``) and the old chain running on:
- a config that ``check-config`` refuses (the same located errors);
- a change of anything but ``filters`` (sources, sinks, schema, state_dir...): restart ``serve`` for those;
- removing a buffering filter that holds events (they would be stranded in the state store);
- adding or removing the chain's only buffering filters (sources chose how to acknowledge by it when they started).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from sidecar.api import Filter, StateDamaged
from sidecar.chain import Chain
from sidecar.config import ConfigError, ErrorCollector, LoadedConfig, SidecarConfig, load_config
from sidecar.state import StateError

if TYPE_CHECKING:
    from sidecar.pipeline import Pipeline

log = structlog.get_logger("querylog.reload")

#: Top-level keys a reload may change (every other change is refused: restart serve for it).
RELOADABLE = frozenset({"filters"})


def refused_changes(old: LoadedConfig, new: LoadedConfig) -> list[ConfigError]:
    """A located error for each top-level key of ``new`` that differs from ``old`` and a reload cannot apply."""
    errors = []
    for f in dataclasses.fields(SidecarConfig):
        if f.name in RELOADABLE or getattr(old.sidecar, f.name) == getattr(new.sidecar, f.name):
            continue
        errors.append(new.doc.error(f.name, "changed: a reload applies changes of `filters` only; restart serve"))
    if old.state_dir != new.state_dir and not any(e.key == "state_dir" for e in errors):
        errors.append(new.doc.error("state_dir", "changed: a reload keeps its state folder; restart serve"))
    return errors


def _buffering_refusals(old: list[Filter[Any]], new: LoadedConfig) -> list[ConfigError]:
    """Removing a buffering filter that holds events, or changing whether the chain buffers at all."""
    errors = []
    kept = Counter(spec.name for spec in new.filters)
    for f in old:
        if not f.BUFFERING:
            continue
        if kept[f.NAME] > 0:
            kept[f.NAME] -= 1
        elif f.held():
            errors.append(
                new.doc.error(
                    "filters",
                    f"removes {f.NAME}, which holds {f.held()} events (they would stay in the state store, "
                    "never released): keep it until it holds none, or restart serve",
                )
            )
    if not errors and any(f.BUFFERING for f in old) != any(spec.cls.BUFFERING for spec in new.filters):
        errors.append(
            new.doc.error(
                "filters",
                "adds or removes the chain's only buffering filters: sources chose how to acknowledge by it "
                "when they started; restart serve",
            )
        )
    return errors


def build_chain(pipeline: Pipeline, new: LoadedConfig) -> tuple[Chain, list[Filter[Any]]]:
    """The chain of ``new`` on ``pipeline``'s state store (the caller holds the runtime's lock: no batch runs),
    and the old filters it no longer uses (to close once it is swapped in). A filter with the same name and
    options as one of the running chain is that very filter; the others are built and restore their state.
    :class:`ConfigError` (located; several as ``ConfigErrors``) when the reload is refused: nothing changed."""
    from sidecar.pipeline import build_component

    old = pipeline.chain
    errors = ErrorCollector()
    errors.errors.extend((*refused_changes(pipeline.config, new), *_buffering_refusals(old.filters, new)))
    errors.raise_any()
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
    return _carry_counts(old, Chain(filters)), [f for _, f in spare]


def _carry_counts(old: Chain, new: Chain) -> Chain:
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
            reopen = getattr(sink, "reopen", None)
            if not callable(reopen):
                continue
            try:
                reopen()
            except OSError as exc:
                log.error("sink_reopen_failed", sink=sink.NAME, error=exc.strerror or type(exc).__name__)


def _log_refused(exc: ConfigError) -> None:
    for error in getattr(exc, "errors", (exc,)):
        log.error("config_reload_refused", file=error.file, line=error.line, key=error.key, error=str(error))


def reload_file(pipeline: Pipeline, path: str | Path) -> bool:
    """SIGHUP: reopen file sinks, then load ``path`` and swap in its chain. A refused or invalid config is logged
    with its file and line and counted (``config_reloads`` failure); the running chain goes on. True on success."""
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
    try:
        pipeline.reload(config)  # counts its own outcome
    except ConfigError as exc:
        _log_refused(exc)
        return False
    except Exception as exc:  # a filter that could not be built (state, a file): never the end of serve
        log.error("config_reload_failed", error=str(exc) if isinstance(exc, StateError) else type(exc).__name__)
        return False
    log.info("config_reloaded", filters=[f.NAME for f in pipeline.filters])
    return True
