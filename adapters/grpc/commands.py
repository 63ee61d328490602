"""``querylog serve``: the gRPC sidecar."""

from __future__ import annotations

import sys

import click

from sidecar.commandkit import check_address, fail_config, fail_state, load, setup_logs
from sidecar.config import ConfigError
from sidecar.state import StateError, remove_state_database


@click.command("serve")
@click.option("--config", "-c", "config_file", required=True, type=click.Path(dir_okay=False), help="Config file.")
@click.option("--listen", default=None, metavar="HOST:PORT", help="Listen address (overrides server.listen).")
@click.option(
    "--reset-state",
    is_flag=True,
    help="Start from empty state: delete the state database (held events, profiles) first.",
)
def serve_cmd(config_file: str, listen: str | None, reset_state: bool) -> None:
    """Run the gRPC sidecar until SIGTERM/SIGINT (then drain, flush filters, close, exit 0)."""
    from adapters.grpc.codec import tune_gc
    from adapters.grpc.source import GrpcSource
    from sidecar.pipeline import Pipeline, build_component
    from sidecar.signals import StopFlag

    check_address(listen, "--listen")
    cfg = load(config_file)
    setup_logs(cfg)
    stop = StopFlag()
    stop.install()
    spec = cfg.source("grpc")
    if spec is None:  # pragma: no cover - the grpc source is this package's own entry point
        click.echo("serve: no grpc source installed", err=True)
        sys.exit(1)
    if reset_state and remove_state_database(cfg.state_dir):
        click.echo(f"state: removed the state database in {cfg.state_dir}", err=True)
    try:
        pipeline = Pipeline(cfg, with_sinks=True)
    except ConfigError as exc:
        fail_config(exc)
    except StateError as exc:
        fail_state(exc)
    try:
        source: GrpcSource = build_component(spec, pipeline.ctx, cfg)
        source.listen = listen
        source.start(pipeline)
    except ConfigError as exc:
        pipeline.close()
        fail_config(exc)
    except (OSError, RuntimeError) as exc:
        pipeline.close()
        click.echo(f"serve: {exc}", err=True)
        sys.exit(1)
    tune_gc()
    while not stop.event.wait(0.5):
        pass
    source.stop()
    pipeline.close()
