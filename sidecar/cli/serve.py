"""``querylog serve``: every configured source into one runtime and its sinks, until SIGTERM/SIGINT.

``serve`` is a driver: it builds the runtime, starts the sources and waits. The runtime owns the rest (the one
release timer, delivery, outboxes, backpressure, the state folder's lock). Shutdown order (a drain): readiness
turns not ready (``/readyz`` 503, gRPC health NOT_SERVING), the sources keep taking input ``drain_seconds``, then
stop (last started first, each lets its in-flight batches finish), one final release into the sinks, the runtime
closes (each sink's outbox delivers for its ``close_drain_seconds``), and the log says what the outboxes still hold.
A finite source (a file) ends when its input ends; ``serve`` keeps running the others, and ends by itself when
every source was finite and all have ended.
"""

from __future__ import annotations

import sys
import threading
from functools import partial
from typing import Any

import click
import structlog

from sidecar.commandkit import EXIT_USAGE, check_address, fail_config, fail_state, load, setup_logs
from sidecar.config import ConfigError
from sidecar.state import StateError, StateInUse, remove_state_database

log = structlog.get_logger("querylog.serve")


@click.command("serve")
@click.option("--config", "-c", "config_file", required=True, type=click.Path(dir_okay=False), help="Config file.")
@click.option(
    "--listen", default=None, metavar="HOST:PORT", help="Listen address of the grpc source (overrides its listen)."
)
@click.option(
    "--reset-state",
    is_flag=True,
    help="Start from empty state: delete the state database (held events, profiles) first.",
)
@click.option(
    "--reload-flush",
    is_flag=True,
    help="A reload that removes a buffering filter holding events flushes it (its final flush, as at shutdown, "
    "through the rest of the chain into the sinks) instead of being refused; what it still holds stays in the "
    "state store.",
)
def serve_cmd(config_file: str, listen: str | None, reset_state: bool, reload_flush: bool) -> None:
    """Run every configured source into the chain and its sinks until SIGTERM/SIGINT.

    The sources are those of `sources:` (the grpc service when none is listed). A finite source (a file) ends
    when its input ends while the others go on. On SIGTERM/SIGINT each source stops taking input and lets its
    in-flight batches finish; then buffers flush into the sinks once, sinks close, exit 0. On SIGHUP file sinks
    reopen their file and the config is read again: a change of `filters` is swapped in between batches, keeping
    held events, profiles and budgets; a changed, added or removed server source is rebound (drained, nothing
    acknowledged lost); a config it refuses is logged (FILE:LINE) and the running sources and chain go on.
    A state folder in use by another process: one line naming it and the holder's pid, exit 4."""
    from sidecar.gctune import tune_gc
    from sidecar.liveaudit import build_live_audit
    from sidecar.pipeline import Pipeline
    from sidecar.signals import ReloadFlag, StopFlag

    hup = ReloadFlag()  # first: a SIGHUP while serve starts is a reload once it runs, never its end
    hup.install()
    check_address(listen, "--listen")
    cfg = load(config_file)
    setup_logs(cfg)
    if not cfg.sources:
        click.echo("serve: no source configured (sources:)", err=True)
        sys.exit(EXIT_USAGE)
    stop = StopFlag()
    stop.install()
    try:
        if reset_state and remove_state_database(cfg.state_dir):
            click.echo(f"state: removed the state database in {cfg.state_dir}", err=True)
        pipeline = Pipeline(cfg, with_sinks=True)
        pipeline.audit = build_live_audit(cfg.sidecar.live_audit, cfg.sidecar.metrics_listen)
    except ConfigError as exc:
        fail_config(exc)
    except (StateError, StateInUse) as exc:
        fail_state(exc)
    sources = _start_sources(cfg, pipeline, listen)
    pipeline.readiness_checks += (sources.not_listening,)
    pipeline.start_release_timer()
    reload = partial(_on_sighup, config_file, pipeline, sources, reload_flush, threading.Lock())
    metrics, metrics_port = _start_metrics(cfg, pipeline, sources, reload)
    tune_gc()
    log.info("serving", sources=[spec.path for spec in cfg.sources], metrics_port=metrics_port)
    while not stop.event.wait(0.5):
        if hup.take():
            reload()
        if sources.all_finite_ended():
            break  # every source was finite and every one has ended
    _drain(stop, pipeline, cfg.sidecar.drain_seconds)
    _shutdown(sources, pipeline, metrics)
    failed = [reader for reader in sources.finite if reader.error is not None]
    for reader in failed:  # a located config error names the input and the key; anything else only its type
        error = reader.error
        click.echo(
            f"serve: {error}"
            if isinstance(error, ConfigError | StateError)
            else f"serve: source {reader.source.NAME} failed ({type(error).__name__})",
            err=True,
        )
    if failed:
        sys.exit(EXIT_USAGE if all(isinstance(r.error, ConfigError) for r in failed) else 1)


def _on_sighup(config_file: Any, pipeline: Any, sources: Any, flush: bool, one_at_a_time: threading.Lock) -> bool:
    """SIGHUP (or ``POST /-/reload``; one reload at a time): reopen file sinks, reload the config, rebind the
    changed sources and swap in its chain between batches (:mod:`sidecar.reload`); a refused config is logged
    with its file and line, counted, and the running sources and chain go on (False)."""
    from sidecar.reload import reload_file

    with one_at_a_time:
        try:
            return reload_file(pipeline, config_file, sources=sources, flush=flush)
        except Exception as exc:  # a reload never ends serve
            log.error("config_reload_failed", error=type(exc).__name__)
            return False


def _start_sources(cfg: Any, pipeline: Any, listen: str | None) -> Any:
    """Build and start every source (:class:`~sidecar.served_sources.ServedSources`): servers return at once,
    finite ones read on threads of their own. A failure to start (a port in use, a TLS file that cannot be read)
    stops what started and exits 1."""
    from sidecar.served_sources import ServedSources

    sources = ServedSources(pipeline, listen)
    try:
        sources.start(cfg)
    except ConfigError as exc:
        _shutdown(sources, pipeline)
        fail_config(exc)
    except (OSError, RuntimeError) as exc:
        _shutdown(sources, pipeline)
        click.echo(f"serve: {exc}", err=True)
        sys.exit(1)
    return sources


def _start_metrics(cfg: Any, pipeline: Any, sources: Any, reload: Any) -> tuple[Any, int | None]:
    """The Prometheus endpoint (``sidecar.metrics_listen``, secured by ``sidecar.metrics``), or (None, the port of
    a source's own endpoint, ``server.metrics_listen``, if any) when off; exit 1 when it cannot bind, 2 when a TLS
    or token file of ``metrics`` cannot be read."""
    if cfg.sidecar.metrics_listen is None:
        own = [port for port in (getattr(source, "metrics_port", None) for source in sources.sources) if port]
        return None, own[0] if own else None
    from sidecar.api import ConfigValueError
    from sidecar.metrics import serve_metrics
    from sidecar.serving import ssl_server_context

    access = cfg.sidecar.metrics
    try:
        tls, token = ssl_server_context(access, pipeline.ctx), access.bearer_token(pipeline.ctx)
        reload_token = access.reload_token(pipeline.ctx)
        metrics, _, port = serve_metrics(
            cfg.sidecar.metrics_listen,
            pipeline.stats,
            ssl_context=tls,
            token=token,
            ready=pipeline.ready,
            reload=reload,
            reload_token=reload_token,
        )
    except ConfigValueError as exc:
        _shutdown(sources, pipeline)
        fail_config(cfg.doc.error(f"metrics.{exc.key}", exc.problem))
    except OSError as exc:
        _shutdown(sources, pipeline)
        click.echo(f"serve: metrics_listen {cfg.sidecar.metrics_listen}: {exc.strerror or exc}", err=True)
        sys.exit(1)
    log.info(
        "metrics_listening", port=port, tls=tls is not None, auth=access.auth_kinds(), http_reload=bool(reload_token)
    )
    if not access.secured and any(source.authentication() != ["none"] for source in sources.sources):
        log.warning("metrics_open", hint="sources authenticate clients; set metrics.tls_* or metrics.auth_token_*")
    return metrics, port


def _drain(stop: Any, pipeline: Any, seconds: float) -> None:
    """Readiness turns not ready at once; after a stop signal the sources keep taking input ``seconds`` (a second
    SIGTERM/SIGINT ends the wait) so that load balancers see it and stop sending first."""
    signalled = stop.event.is_set()
    stop.event.clear()  # before readiness flips: a signal sent once a probe saw the flip is always a second one
    pipeline.draining = True
    log.info("draining", drain_seconds=seconds if signalled else 0)
    if signalled and seconds > 0:
        stop.event.wait(seconds)


def _outbox_left(pipeline: Any) -> dict[str, dict[str, int]]:
    """What each outbox of the sinks still holds (counts): it stays in the state folder for the next start."""
    from sidecar.outbox import Outbox

    outboxes = list(getattr(pipeline.ctx.outboxes, "made", ()))
    outboxes += [s.outbox for s in pipeline.sinks if isinstance(getattr(s, "outbox", None), Outbox)]
    left: dict[str, dict[str, int]] = {}
    for outbox in outboxes:
        pending = outbox.pending()
        left[outbox.name] = {"events": pending.events, "batches": pending.batches, "bytes": pending.bytes}
    return left


def _shutdown(sources: Any, pipeline: Any, metrics: Any = None) -> None:
    """Stop the sources (last started first: each lets its in-flight batches finish), release once what buffering
    filters let go at shutdown into the sinks, stop the metrics endpoint (it answered 503 on /readyz meanwhile),
    close the runtime (timer, sinks and their outboxes' last delivery, state), log what the outboxes still hold."""
    sources.stop_all()
    try:
        pipeline.release(final=True)
    except Exception as exc:  # a full outbox or disk at shutdown: the release rolled back, the events stay held
        log.warning("final_release_skipped", error=type(exc).__name__)
    if metrics is not None:
        metrics.shutdown()
        metrics.server_close()
    pipeline.close()
    left = _outbox_left(pipeline)
    events = sum(counts["events"] for counts in left.values())
    (log.warning if events else log.info)("outbox_left", events=events, outboxes=left)
