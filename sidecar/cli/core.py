"""The runtime's own commands: ``check-config``, ``filters`` and ``config``."""

from __future__ import annotations

import json
import sys
from importlib import resources

import click

from sidecar.api import FILTERS, SINKS, SOURCES
from sidecar.cli.fieldcheck import report_sample
from sidecar.commandkit import EXIT_USAGE, fail_config, fail_state, load, setup_logs
from sidecar.config import ConfigError, describe_config
from sidecar.registry import plugin_origin, plugins
from sidecar.state import StateError


@click.command("check-config")
@click.argument("config_file", type=click.Path(dir_okay=False))
@click.option(
    "--strict",
    is_flag=True,
    help="Also fail (exit 2) when some network sources require authentication (token, mutual TLS, shared key) "
    "and others accept anyone: one line per open source.",
)
@click.option(
    "--sample",
    type=click.Path(exists=True, dir_okay=False),
    help="A file of records in the configured format: list (stderr) the non-role fields of its first 1,000 records "
    "that schema.fields gives no policy; with `unlisted: error` (their records would be dead-lettered) exit 2.",
)
def check_config(config_file: str, strict: bool, sample: str | None) -> None:
    """Validate a config file (touching nothing: no state, no files); exit 2 with FILE:LINE: KEY: problem."""
    from sidecar.pipeline import Pipeline, build_component

    cfg = load(config_file)
    setup_logs(cfg, level="warning")  # the verdict is the output: no info lines around it
    auth: list[tuple[str, list[str]]] = []  # (source path, its authentication), network sources only
    undeclared = False
    try:
        pipeline = Pipeline(cfg, with_sinks=True, validate_only=True)
        try:
            for spec in cfg.sources:  # built (options checked), never started
                source = build_component(spec, pipeline.ctx, cfg)
                if not source.FINITE:
                    auth.append((spec.path, list(source.authentication())))
            if sample is not None:
                undeclared = report_sample(cfg.sidecar.schema, pipeline.ctx, sample)
        finally:
            pipeline.close()
    except ConfigError as exc:
        fail_config(exc)
    except StateError as exc:
        fail_state(exc)
    open_ = [path for path, kinds in auth if kinds == ["none"]]
    if strict and open_ and len(open_) < len(auth):
        for path in open_:
            click.echo(
                f"{config_file}: {path}: accepts unauthenticated clients while other sources require "
                "authentication: require a token (auth_token_file/_env), mutual TLS (tls_client_ca_file) or, "
                "for forward, a shared key",
                err=True,
            )
        sys.exit(EXIT_USAGE)
    if undeclared:
        sys.exit(EXIT_USAGE)
    names = [spec.name for spec in cfg.filters]
    click.echo(f"{config_file}: ok ({len(names)} filters: {' -> '.join(names) or 'none'})")


@click.command("filters")
def filters_cmd() -> None:
    """List the registered filters, sources and sinks (JSON), with their options."""
    out = {}
    for group, key in ((FILTERS, "filters"), (SOURCES, "sources"), (SINKS, "sinks")):
        out[key] = [
            {
                "name": name,
                "entry_point": plugin_origin(group, name),
                "summary": cls.SUMMARY or (cls.__doc__ or "").strip().splitlines()[0],
                **({"buffering": bool(cls.BUFFERING), "stateful": bool(cls.STATEFUL)} if group == FILTERS else {}),
                "options": describe_config(cls.Config),
            }
            for name, cls in sorted(plugins(group).items())
        ]
    click.echo(json.dumps(out, indent=2))


#: The package that ships the ready configs (the repository's ``config/`` folder).
CONFIG_PACKAGE = "querylog_config"
#: Its folder of pipeline examples: one folder per setup, the sidecar's ``querylog*.yaml`` and the peer's files.
EXAMPLES = "examples"


def shipped_configs() -> dict[str, str]:
    """Ready configs shipped with the package: name -> text. The ready chains first, named by file stem
    (``default``); then the examples' files, named by their path, a YAML file without its extension
    (``examples/README.md``, ``examples/fluent-bit/querylog``, ``examples/fluent-bit/fluent-bit.conf``)."""
    folder = resources.files(CONFIG_PACKAGE)
    configs = {
        entry.name.rsplit(".", 1)[0]: entry.read_text(encoding="utf-8")
        for entry in sorted(folder.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".yaml")
    }
    examples = folder / EXAMPLES
    for entry in sorted(examples.iterdir(), key=lambda e: e.name) if examples.is_dir() else ():
        files = sorted(entry.iterdir(), key=lambda e: e.name) if entry.is_dir() else [entry]
        prefix = f"{EXAMPLES}/{entry.name}/" if entry.is_dir() else f"{EXAMPLES}/"
        for file in files:
            if file.is_file():
                configs[prefix + file.name.removesuffix(".yaml")] = file.read_text(encoding="utf-8")
    return configs


@click.group("config")
def config_group() -> None:
    """The ready configs and pipeline examples shipped with the package (copy one to start from)."""


@config_group.command("list")
def config_list() -> None:
    """Names of the shipped configs, one per line: the ready chains, then the examples' files."""
    for name in shipped_configs():
        click.echo(name)


@config_group.command("show")
@click.argument("name")
def config_show(name: str) -> None:
    """Print a shipped config (e.g. `querylog config show default > querylog.yaml`, or an example's file:
    `querylog config show examples/fluent-bit/querylog`)."""
    configs = shipped_configs()
    if name not in configs:
        click.echo(f"no shipped config {name!r} (have: {', '.join(configs)})", err=True)
        sys.exit(EXIT_USAGE)
    click.echo(configs[name], nl=False)
