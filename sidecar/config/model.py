"""The sidecar's configuration file: schema, limits, state, sources, filter chain, sinks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sidecar.api import (
    FILTERS,
    SINKS,
    SOURCES,
    BearerToken,
    BuildContext,
    ConfigValueError,
    Filter,
    ServerTls,
    option,
)
from sidecar.codecs import SchemaConfig
from sidecar.config.live_audit import LiveAuditConfig
from sidecar.config.loader import ConfigError, ErrorCollector, Located, build_config, did_you_mean, load_yaml
from sidecar.registry import PluginError, plugins
from sidecar.textcodecs import BUILTIN_TEXT_FORMATS, text_codec


@dataclass(frozen=True)
class LimitsConfig:
    """Bounds on input and batching."""

    max_record_bytes: int = option(
        65536, "Records longer than this (bytes, without newline) are dead-lettered.", min=16
    )
    batch_size: int = option(1000, "Events per batch through the chain (file replay).", min=1, max=100000)


@dataclass(frozen=True)
class LoggingConfig:
    """The sidecar's own logs (structlog). They never contain queries, user ids or record values."""

    level: Literal["debug", "info", "warning", "error"] = option("info", "Lowest level written.")
    format: Literal["auto", "json", "console"] = option("auto", "json, console, or auto (console on a terminal).")


@dataclass(frozen=True, kw_only=True)
class MetricsConfig(ServerTls, BearerToken):
    """Access to the /metrics endpoint of `metrics_listen`: TLS (mutual TLS with a client CA) and a bearer token.
    Prometheus sends the token with `authorization: {credentials_file: ...}` in its scrape config."""

    reload_token_file: str | None = option(
        None,
        "File holding the token `POST /-/reload` asks for (`Authorization: Bearer <token>`, else 401; relative to "
        "the config file): it reloads the config as SIGHUP does. Unset (and no reload_token_env): no HTTP reload. "
        "Use TLS with it outside loopback.",
        secret_ref=True,
    )
    reload_token_env: str | None = option(
        None, "Environment variable holding the reload token (instead of reload_token_file).", secret_ref=True
    )

    def __post_init__(self) -> None:
        if self.reload_token_file is not None and self.reload_token_env is not None:
            raise ConfigValueError("reload_token_file", "Set reload_token_file or reload_token_env, not both")
        super().__post_init__()

    def reload_token(self, ctx: BuildContext) -> bytes | None:
        """The token of ``POST /-/reload`` (None: no HTTP reload); a problem is reported at the option's key."""
        if self.reload_token_env is None and self.reload_token_file is None:
            return None
        try:
            return ctx.secret(self.reload_token_env, self.reload_token_file, "reload token").strip()
        except ConfigValueError as exc:
            key = "reload_token_env" if self.reload_token_env is not None else "reload_token_file"
            raise ConfigValueError(key, exc.problem) from None

    @property
    def secured(self) -> bool:
        return self.tls_enabled or self.auth_token_file is not None or self.auth_token_env is not None

    def auth_kinds(self) -> list[str]:
        """How a scraper proves itself: ``mtls``, ``token``, else ``none`` (as sources say in `listening`)."""
        kinds = ["mtls"] if self.tls_client_ca_file is not None else []
        if self.auth_token_file is not None or self.auth_token_env is not None:
            kinds.append("token")
        return kinds or ["none"]


@dataclass(frozen=True)
class SidecarConfig:
    """Top level of a sidecar config file."""

    state_dir: str = option(".querylog-state", "Folder of the SQLite state database (relative to the config file).")
    dead_letter_file: str | None = option(
        "dead-letter.jsonl", "Dead-letter file (relative to state_dir); null: count and log only."
    )
    dead_letter_max_bytes: int = option(
        64 * 1024 * 1024,
        "Size at which the dead-letter file is rotated (renamed to FILE.1, replacing an older one): "
        "the two files together never hold much more than twice this.",
        min=4096,
    )
    flush_interval_seconds: float = option(
        1.0,
        "How often buffering filters are asked to release what their policy lets go (max_hold) into the sinks: "
        "by `serve`, and by `replay`/`filter` reading a pipe (their --flush-interval overrides it).",
        gt=0,
    )
    drain_seconds: float = option(
        0.0,
        "On SIGTERM `serve` first turns /readyz (and gRPC health) to not ready, keeps its sources taking input "
        "this many seconds (so load balancers and Kubernetes stop sending), then stops them. A second SIGTERM or "
        "SIGINT ends the wait. 0: stop at once. Under Kubernetes, a few seconds (5) more than the readiness "
        "probe's period.",
        min=0,
    )
    metrics_listen: str | None = option(
        None,
        "host:port of a Prometheus /metrics endpoint while `serve` runs (counts and reasons only: events, dead "
        "letters, filters, sinks and their outboxes); port 0: any free port, given in the `serving` log event; "
        "null: off. Plaintext and open unless `metrics:` sets TLS or a token.",
    )
    metrics: MetricsConfig = option(
        MetricsConfig(),
        "TLS (tls_cert_file, tls_key_file, tls_client_ca_file) and a bearer token (auth_token_file or "
        "auth_token_env: `Authorization: Bearer`, else 401) for the endpoint of metrics_listen.",
    )
    live_audit: LiveAuditConfig = option(
        LiveAuditConfig(),
        "The running audit `serve` keeps of what it releases, on /metrics: re-created pairs, identifiers in and "
        "out, a sampled linkage estimate (docs/OPERATIONS.md, Live audit).",
    )
    schema: SchemaConfig = option(SchemaConfig(), "Record schema of the input (and so of the output).")
    limits: LimitsConfig = option(LimitsConfig(), "Input bounds and batching.")
    sources: tuple[Any, ...] = option(
        (), "Where `querylog serve` takes events from (it runs every one): `source_name: {options}`."
    )
    server: dict[str, Any] | None = option(
        None,
        "Deprecated spelling of `sources: [{grpc: {...}}]`: the options of the `grpc` source (see Sources below).",
    )
    logging: LoggingConfig = option(LoggingConfig(), "Own logs.")
    filters: tuple[Any, ...] = option((), "The chain: a list of one-key mappings `filter_name: {options}`.")
    sinks: tuple[Any, ...] = option((), "Where `serve` Ingest and `replay` without -o deliver: `sink_name: {options}`.")

    def __post_init__(self) -> None:
        if self.metrics_listen is not None:
            host, _, port = self.metrics_listen.rpartition(":")
            if not host or not port.isdigit():
                raise ConfigValueError("metrics_listen", f"must be host:port, got {self.metrics_listen!r}")
        elif self.metrics.secured or self.metrics.reload_token_file or self.metrics.reload_token_env:
            raise ConfigValueError(
                "metrics", "TLS or a token for metrics needs metrics_listen (the endpoint's address)"
            )


@dataclass(frozen=True)
class ComponentSpec:
    """One configured filter or sink: its name, class and validated config."""

    name: str
    cls: Any
    config: Any
    path: str


@dataclass(frozen=True)
class LoadedConfig:
    file: Path
    sidecar: SidecarConfig
    filters: tuple[ComponentSpec, ...]
    sinks: tuple[ComponentSpec, ...]
    #: Configured sources: the ``sources:`` list, plus the ``grpc`` source of the deprecated ``server:``
    #: section; with neither, the ``grpc`` source with its defaults.
    sources: tuple[ComponentSpec, ...]
    #: The parsed file with the line of every key, for errors found when components are built.
    doc: Located = field(compare=False, repr=False)

    def source(self, name: str) -> ComponentSpec | None:
        """The configured source called ``name``, if any."""
        return next((s for s in self.sources if s.name == name), None)

    @property
    def config_dir(self) -> Path:
        return self.file.parent

    def resolve(self, path: str) -> Path:
        p = Path(path).expanduser()
        return p if p.is_absolute() else (self.config_dir / p)

    @property
    def state_dir(self) -> Path:
        return self.resolve(self.sidecar.state_dir)

    @property
    def dead_letter_max_bytes(self) -> int:
        return self.sidecar.dead_letter_max_bytes

    @property
    def dead_letter_path(self) -> Path | None:
        if self.sidecar.dead_letter_file is None:
            return None
        p = Path(self.sidecar.dead_letter_file)
        return p if p.is_absolute() else self.state_dir / p


def _components(doc: Located, key: str, items: tuple[Any, ...], group: str) -> tuple[ComponentSpec, ...]:
    try:
        registry = plugins(group)
    except PluginError as exc:
        raise doc.error(key, str(exc)) from None
    out = []
    errors = ErrorCollector()
    for i, item in enumerate(items):
        path = f"{key}[{i}]"
        with errors.guard():
            if not isinstance(item, dict) or len(item) != 1:
                raise doc.error(path, "must be a mapping with exactly one key, the component name", sorted(registry))
            ((name, options),) = item.items()
            if name not in registry:
                raise doc.error(f"{path}.{name}", "unknown component" + did_you_mean(name, registry), sorted(registry))
            cls = registry[name]
            config = build_config(cls.Config, options, doc, f"{path}.{name}")
            out.append(ComponentSpec(name, cls, config, f"{path}.{name}"))
    errors.raise_any()
    return tuple(out)


def load_config(path: Path | str, text: str | None = None) -> LoadedConfig:
    """Load and validate a config file; raises :class:`ConfigError` with FILE:LINE: KEY, or
    :class:`~sidecar.config.loader.ConfigErrors` listing every error found (top level, filters, sinks, server)."""
    doc = load_yaml(path, text)
    if not isinstance(doc.data, dict):
        raise ConfigError(doc.file, 1, "", "the config must be a mapping")
    errors = ErrorCollector()
    sidecar_cfg: SidecarConfig | None = None
    with errors.guard():
        sidecar_cfg = build_config(SidecarConfig, doc.data, doc, "")
    filters: tuple[ComponentSpec, ...] = ()
    sinks: tuple[ComponentSpec, ...] = ()
    sources: tuple[ComponentSpec, ...] = ()
    with errors.guard():
        filters = _components(doc, "filters", _section(doc, sidecar_cfg, "filters"), FILTERS)
    with errors.guard():
        sinks = _components(doc, "sinks", _section(doc, sidecar_cfg, "sinks"), SINKS)
    with errors.guard():
        sources = _components(doc, "sources", _section(doc, sidecar_cfg, "sources"), SOURCES)
    with errors.guard():
        _check_detector(doc, sidecar_cfg)
    with errors.guard():
        _check_schema(doc, sidecar_cfg)
    with errors.guard():
        server = sidecar_cfg.server if sidecar_cfg is not None else doc.data.get("server")
        if server is not None or not sources:
            sources += _server_source(doc, server if isinstance(server, Mapping) else None, sources)
    errors.raise_any()
    assert sidecar_cfg is not None  # no error was collected
    return LoadedConfig(Path(path).resolve(), sidecar_cfg, filters, sinks, sources, doc)


def _check_schema(doc: Located, cfg: SidecarConfig | None) -> None:
    """A plugin's text format (``access_log``) checks its own schema keys (a format string, the roles) here, so a
    mistake is reported at its line before anything runs."""
    if cfg is None or cfg.schema.format in BUILTIN_TEXT_FORMATS or cfg.schema.format == "auto":
        return
    try:
        text_codec(cfg.schema, None)
    except ConfigValueError as exc:
        raise doc.error(f"schema.{exc.key}", exc.problem, exc.allowed) from None


def _check_detector(doc: Located, cfg: SidecarConfig | None) -> None:
    """``live_audit.detector`` names an installed filter that offers an identifier detector."""
    name = cfg.live_audit.detector if cfg is not None else None
    if name is None:
        return
    try:
        registry = plugins(FILTERS)
    except PluginError as exc:
        raise doc.error("live_audit.detector", str(exc)) from None
    offering = sorted(n for n, cls in registry.items() if offers_detector(cls))
    if name not in offering:
        raise doc.error("live_audit.detector", "not a filter with an identifier detector", offering)


def offers_detector(cls: Any) -> bool:
    """Whether filter class ``cls`` overrides :meth:`Filter.identifier_detector` (the contract's offers none)."""
    return any("identifier_detector" in vars(c) for c in getattr(cls, "__mro__", ()) if c is not Filter)


def _section(doc: Located, cfg: SidecarConfig | None, key: str) -> tuple[Any, ...]:
    """The ``filters``/``sinks`` list, from the built config, or from the raw file when the top level had errors
    (so a filter's own errors are reported with the top level's)."""
    if cfg is not None:
        return tuple(getattr(cfg, key))
    raw = doc.data.get(key)
    return tuple(raw) if isinstance(raw, list) else ()


def _server_source(doc: Located, options: Any, listed: tuple[ComponentSpec, ...]) -> tuple[ComponentSpec, ...]:
    """The deprecated ``server:`` section, validated as the options of the registered ``grpc`` source; with
    neither ``server:`` nor ``sources:``, the ``grpc`` source with its defaults (what ``serve`` always ran)."""
    try:
        registry = plugins(SOURCES)
    except PluginError as exc:
        raise doc.error("server", str(exc)) from None
    if options is not None and any(spec.name == "grpc" for spec in listed):
        raise doc.error("server", "the grpc source is configured twice: keep `sources: [{grpc: ...}]` only")
    cls = registry.get("grpc")
    if cls is None:
        if options is not None:
            raise doc.error("server", "no source named grpc is installed", sorted(registry))
        return ()
    config = build_config(cls.Config, {} if options is None else dict(options), doc, "server")
    return (ComponentSpec("grpc", cls, config, "server"),)
