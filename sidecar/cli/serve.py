"""``querylog serve``: every configured source into one chain and its sinks, until SIGTERM/SIGINT."""

from __future__ import annotations

import sys
from typing import Any

import click
import structlog

from sidecar.commandkit import EXIT_USAGE, check_address, fail_config, fail_state, load, setup_logs
from sidecar.config import ConfigError
from sidecar.state import StateError, remove_state_database

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
def serve_cmd(config_file: str, listen: str | None, reset_state: bool) -> None:
    """Run every configured source into the chain and its sinks until SIGTERM/SIGINT.

    The sources are those of `sources:` (the grpc service when none is listed). On SIGTERM/SIGINT each stops
    taking input and lets its in-flight batches finish; then buffers flush, sinks close, exit 0."""
    from sidecar.gctune import tune_gc
    from sidecar.pipeline import Pipeline, build_component
    from sidecar.release import TimedRelease
    from sidecar.signals import StopFlag

    check_address(listen, "--listen")
    cfg = load(config_file)
    setup_logs(cfg)
    finite = [spec.path for spec in cfg.sources if spec.cls.FINITE]
    if finite:
        click.echo(f"serve: {', '.join(finite)} reads to its end: use `querylog replay` for it", err=True)
        sys.exit(EXIT_USAGE)
    if not cfg.sources:
        click.echo("serve: no source configured (sources:)", err=True)
        sys.exit(EXIT_USAGE)
    stop = StopFlag()
    stop.install()
    if reset_state and remove_state_database(cfg.state_dir):
        click.echo(f"state: removed the state database in {cfg.state_dir}", err=True)
    try:
        pipeline = Pipeline(cfg, with_sinks=True)
    except ConfigError as exc:
        fail_config(exc)
    except StateError as exc:
        fail_state(exc)
    started: list[Any] = []
    try:
        for spec in cfg.sources:
            source = build_component(spec, pipeline.ctx, cfg)
            if listen is not None and spec.name == "grpc":
                source.listen = listen
            source.start(pipeline)
            started.append(source)
    except ConfigError as exc:
        _stop(started, pipeline)
        fail_config(exc)
    except (OSError, RuntimeError) as exc:  # a port in use, a TLS file that cannot be read...
        _stop(started, pipeline)
        click.echo(f"serve: {exc}", err=True)
        sys.exit(1)
    timer = None
    if pipeline.sinks and any(f.BUFFERING for f in pipeline.filters):
        timer = TimedRelease(pipeline, cfg.sidecar.flush_interval_seconds)
    metrics_port = None
    if cfg.sidecar.metrics_listen is not None:
        from sidecar.metrics import serve_metrics

        try:
            metrics, _, metrics_port = serve_metrics(cfg.sidecar.metrics_listen, pipeline.stats)
        except OSError as exc:
            if timer is not None:
                timer.stop()
            _stop(started, pipeline)
            click.echo(f"serve: metrics_listen {cfg.sidecar.metrics_listen}: {exc.strerror or exc}", err=True)
            sys.exit(1)
    tune_gc()
    log.info("serving", sources=[spec.path for spec in cfg.sources], metrics_port=metrics_port)
    while not stop.event.wait(0.5):
        pass
    if timer is not None:
        timer.stop()
    if metrics_port is not None:
        metrics.shutdown()
    _stop(started, pipeline)


def _stop(sources: list[Any], pipeline: Any) -> None:
    """Stop the sources (last started first: each lets its in-flight batches finish), release what buffering
    filters let go at shutdown into the sinks, close the pipeline (sinks flush, state stays)."""
    for source in reversed(sources):
        source.stop()
    try:
        with pipeline.transaction():
            released = pipeline.flush(final=True)
            if released and pipeline.sinks:
                pipeline.deliver(released)
                pipeline.flush_sinks()
            for ev in released if not pipeline.sinks else ():  # nobody to take them: counted, kept in the file
                record = ev.codec.encode(ev) if ev.codec is not None else None
                pipeline.dead_letters.add(
                    "undelivered_at_shutdown", "serve", None, record if isinstance(record, str | bytes) else None
                )
    except Exception as exc:  # a full outbox or disk at shutdown: the release rolled back, the events stay held
        log.warning("final_release_skipped", error=type(exc).__name__)
    pipeline.dead_letters.flush()
    pipeline.close()
