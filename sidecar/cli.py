"""The ``querylog`` command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from sidecar.configload import ConfigError, describe_config


def fail_config(exc: ConfigError) -> None:
    click.echo(str(exc), err=True)
    sys.exit(2)


def load(config_path: str) -> Any:
    """Load a config or exit 2 with the located error."""
    from sidecar.config import load_config

    try:
        return load_config(config_path)
    except ConfigError as exc:
        fail_config(exc)


def setup_logs(config: Any | None = None) -> None:
    from sidecar.logs import configure_logging

    if config is None:
        configure_logging()
    else:
        configure_logging(config.sidecar.logging.level, config.sidecar.logging.format)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="querylog-sidecar")
def main() -> None:
    """querylog-sidecar: a privacy filter for web-search query logs."""


@main.command("check-config")
@click.argument("config_file", type=click.Path(dir_okay=False))
def check_config(config_file: str) -> None:
    """Validate a config file; exit 2 with FILE:LINE: KEY: problem when it is wrong."""
    from sidecar.pipeline import Pipeline

    cfg = load(config_file)
    setup_logs(cfg)
    try:
        Pipeline(cfg, with_sinks=True).close()
    except ConfigError as exc:
        fail_config(exc)
    names = [spec.name for spec in cfg.filters]
    click.echo(f"{config_file}: ok ({len(names)} filters: {' -> '.join(names) or 'none'})")


@main.command("filters")
def filters_cmd() -> None:
    """List the registered filters and sinks (JSON), with their options."""
    from sidecar.registry import FILTERS, SINKS, plugin_origin, plugins

    out = {}
    for group, key in ((FILTERS, "filters"), (SINKS, "sinks")):
        out[key] = [
            {
                "name": name,
                "entry_point": plugin_origin(group, name),
                "summary": cls.SUMMARY or (cls.__doc__ or "").strip().splitlines()[0],
                "buffering": bool(getattr(cls, "BUFFERING", False)),
                "options": describe_config(cls.Config),
            }
            for name, cls in sorted(plugins(group).items())
        ]
    click.echo(json.dumps(out, indent=2))


@main.command("replay")
@click.option("--config", "-c", "config_file", required=True, type=click.Path(dir_okay=False), help="Config file.")
@click.argument("input_path", metavar="INPUT")
@click.option(
    "--output", "-o", default=None, help="Output file (.gz compresses); default: the configured sinks, else stdout."
)
@click.option("--seed", type=int, default=None, help="Seed the random choices (tests and benchmarks only).")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: on a terminal).")
@click.option(
    "--resume",
    is_flag=True,
    help="Exactly once across crashes: commit output (fsync) with the state per batch; rerun to continue.",
)
@click.option(
    "--prescan/--no-prescan",
    default=None,
    help="Read the input once first, so category_buffer never pairs a user with a text they send later. "
    "Default: on when the chain has category_buffer and the input is a file (skipped, with a logged reason, "
    "when it cannot be); --prescan makes it required, --no-prescan replays as a live stream would.",
)
def replay_cmd(
    config_file: str, input_path: str, output: str | None, seed: int | None, progress: bool | None, resume: bool,
    prescan: bool | None,
) -> None:
    """Replay a log file (TSV or JSON lines, .gz; `-` = stdin) through the chain."""
    from sidecar.prescan import PrescanError
    from sidecar.replay import ResumeError, StopFlag, replay

    cfg = load(config_file)
    setup_logs(cfg)
    if input_path != "-" and not Path(input_path).is_file():
        click.echo(f"{input_path}: no such file", err=True)
        sys.exit(2)
    stop = StopFlag()
    stop.install()
    show = sys.stderr.isatty() if progress is None else progress
    try:
        summary = replay(
            cfg, input_path, output, seed=seed, progress=show, stop=stop, resume=resume, prescan=prescan
        )
    except ConfigError as exc:
        fail_config(exc)
    except (ResumeError, PrescanError) as exc:
        click.echo(str(exc), err=True)
        sys.exit(2)
    except OSError as exc:  # unwritable output or state folder: the path and the reason, no traceback
        click.echo(f"{exc.filename or input_path}: {exc.strerror or type(exc).__name__}", err=True)
        sys.exit(2)
    click.echo(summary.line(), err=True)


def _register_commands() -> None:
    from sidecar import bench, commands

    for command in [*commands.all_commands(), *bench.COMMANDS]:
        main.add_command(command)


_register_commands()

