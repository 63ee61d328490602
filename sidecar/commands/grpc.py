"""``querylog serve`` (the gRPC sidecar) and ``querylog send`` (a client that streams a log through it)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from sidecar.cli import fail_config, load, setup_logs
from sidecar.configload import ConfigError


def _check_address(value: str | None, what: str) -> None:
    if value is None:
        return
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        click.echo(f"{what}: must be host:port, got {value!r}", err=True)
        sys.exit(2)


@click.command("serve")
@click.option("--config", "-c", "config_file", required=True, type=click.Path(dir_okay=False), help="Config file.")
@click.option("--listen", default=None, metavar="HOST:PORT", help="Listen address (overrides server.listen).")
def serve_cmd(config_file: str, listen: str | None) -> None:
    """Run the gRPC sidecar until SIGTERM/SIGINT (then drain, flush filters, close, exit 0)."""
    from adapters.grpc_codec import tune_gc
    from adapters.grpc_server import SidecarServer
    from sidecar.pipeline import Pipeline
    from sidecar.replay import StopFlag

    _check_address(listen, "--listen")
    cfg = load(config_file)
    setup_logs(cfg)
    stop = StopFlag()
    stop.install()
    try:
        pipeline = Pipeline(cfg, with_sinks=True)
    except ConfigError as exc:
        fail_config(exc)
    try:
        server = SidecarServer(cfg, pipeline, listen)
    except (OSError, RuntimeError) as exc:
        pipeline.close()
        click.echo(f"serve: {exc}", err=True)
        sys.exit(1)
    tune_gc()
    server.start()
    while not stop.event.wait(0.5):
        pass
    server.stop()


@click.command("send")
@click.option("--address", "-a", required=True, metavar="HOST:PORT", help="Sidecar address.")
@click.option("--batch-size", default=1000, show_default=True, type=click.IntRange(1, 100_000),
              help="Events per batch.")
@click.option("--tls-ca", default=None, type=click.Path(dir_okay=False, exists=True),
              help="CA certificate (PEM): use TLS.")
@click.option("--config", "-c", "config_file", default=None, type=click.Path(dir_okay=False),
              help="Take the record schema and limits from this config (default: AOL TSV).")
@click.option("--output", "-o", required=True, help="Where the returned events go (input's schema; .gz compresses).")
@click.option("--timeout", default=None, type=float, help="Give up after this many seconds.")
@click.argument("input_path", metavar="INPUT")
def send_cmd(address: str, batch_size: int, tls_ca: str | None, config_file: str | None, output: str,
             timeout: float | None, input_path: str) -> None:
    """Stream a log file (TSV/JSONL, .gz; `-` = stdin) through the sidecar's Filter and write what comes back."""
    import grpc

    from adapters.grpc_client import channel, send_file
    from adapters.grpc_codec import tune_gc
    from sidecar.records import SchemaConfig

    _check_address(address, "--address")
    schema, limit = SchemaConfig(), 65536
    if config_file:
        cfg = load(config_file)
        schema, limit = cfg.sidecar.schema, cfg.sidecar.limits.max_record_bytes
    setup_logs()
    if input_path != "-" and not Path(input_path).is_file():
        click.echo(f"{input_path}: no such file", err=True)
        sys.exit(2)
    tune_gc()
    chan = channel(address, tls_ca)
    try:
        if timeout is not None:
            grpc.channel_ready_future(chan).result(timeout=timeout)
        summary = send_file(chan, input_path, output, schema, batch_size, limit)
    except grpc.FutureTimeoutError:
        click.echo(f"send: no connection to {address} within {timeout} s", err=True)
        sys.exit(1)
    except grpc.RpcError as exc:
        click.echo(f"send: {exc.code().name}: {exc.details()}", err=True)  # type: ignore[attr-defined]
        sys.exit(1)
    except ConfigError as exc:
        fail_config(exc)
    finally:
        chan.close()
    click.echo(summary.line(), err=True)


COMMANDS = [serve_cmd, send_cmd]
