"""The sources ``serve`` runs, and how a reload rebinds them (a changed listen address, TLS files, a token).

:class:`ServedSources` starts every configured source: a server source returns once it listens, a finite one (a
file) reads on a thread of its own (:class:`Finite`). On a reload, :meth:`ServedSources.plan` compares the new
config's sources with the running ones: a source whose name and options did not change keeps running untouched;
a changed, added or removed one is a :class:`Rebind`.

:meth:`Rebind.apply` swaps them, new first where it can: a new source whose ports (``listen``, a grpc source's
``metrics_listen``) do not collide with a port of a source it replaces is built and started **before** the old
one stops, so that address never stops taking input; one that wants the old one's port (the same ``listen`` with
other TLS files or another token) starts **after** the old one stopped, the gap being the old source's drain
(in-flight requests finish: nothing acknowledged is lost). If a new source cannot be built or bound, what the
rebind started is stopped and the old sources it stopped are started again (built anew from their own spec), and
the reload is refused with a located error (``FILE:LINE: sources[i].NAME.listen: ...``). Readiness ignores the
sources a rebind is replacing, so ``/readyz`` stays 200 through it.

Finite sources are not rebound: a reload that adds, removes or changes one is refused (restart ``serve``).
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, field
from typing import Any

import structlog

from sidecar.api import Listen, Source
from sidecar.building import build_component
from sidecar.config import ComponentSpec, ConfigError, ErrorCollector, LoadedConfig

log = structlog.get_logger("querylog.serve")


class Finite:
    """A finite source read on a thread of its own; ``done`` is set when its input ended (or it failed)."""

    def __init__(self, source: Any, runtime: Any) -> None:
        self.source: Any = source
        self.error: Exception | None = None
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(runtime,), name=f"querylog-{source.NAME}")
        self._thread.start()

    def _run(self, runtime: Any) -> None:
        try:
            self.source.start(runtime)
        except Exception as exc:  # counted and named; the other sources go on
            self.error = exc
            log.error("source_failed", source=self.source.NAME, error=type(exc).__name__)
        finally:
            self.done.set()

    def stop(self) -> None:
        self.source.stop()
        self._thread.join()


@dataclass(eq=False)
class Served:
    """A running server source and the spec it was built from."""

    spec: ComponentSpec
    source: Source[Any]


class ServedSources:
    """Every source of ``serve``: built, started, checked for readiness, rebound on reload, stopped."""

    def __init__(self, runtime: Any, listen: str | None = None) -> None:
        """``listen``: ``serve --listen``, the grpc source's address (it overrides the config's, reloads too)."""
        self.runtime = runtime
        self.listen = listen
        self.servers: list[Served] = []
        self.finite: list[Finite] = []
        self.config: LoadedConfig | None = None
        #: sources a rebind is replacing: readiness does not count them while it runs
        self._replacing: set[int] = set()

    def start(self, cfg: LoadedConfig) -> None:
        """Build and start every source of ``cfg``. Raises what a source raised (a ConfigError, an OSError for a
        port in use): the caller stops what started (:meth:`stop_all`)."""
        self.config = cfg
        for spec in cfg.sources:
            if spec.cls.FINITE:
                source = self.build(spec, cfg)
                self.finite.append(Finite(source, self.runtime))
                self._log_listening(spec, source)
            else:
                self.servers.append(self.start_one(spec, cfg))

    def build(self, spec: ComponentSpec, cfg: LoadedConfig) -> Any:
        source = build_component(spec, self.runtime.ctx, cfg)
        if self.listen is not None and spec.name == "grpc":
            source.listen = self.listen
        return source

    def start_one(self, spec: ComponentSpec, cfg: LoadedConfig, at: str | None = None) -> Served:
        """Build and start one server source (it listens when this returns); ``at``: on this address instead of
        its ``listen`` (a source started again binds the port it had, though its config says port 0)."""
        built = spec
        if at is not None and "listen" in {f.name for f in dataclasses.fields(spec.config)}:
            built = dataclasses.replace(spec, config=dataclasses.replace(spec.config, listen=at))
        source = self.build(built, cfg)
        if at is not None and spec.name == "grpc":
            source.listen = at
        source.start(self.runtime)
        self._log_listening(spec, source)
        return Served(spec, source)

    @staticmethod
    def _log_listening(spec: ComponentSpec, source: Any) -> None:
        for address in source.listening():
            log.info(
                "listening", source=spec.path, address=str(address), port=address.port, auth=source.authentication()
            )

    @property
    def sources(self) -> list[Any]:
        """The running server sources, in order."""
        return [s.source for s in self.servers]

    def not_listening(self) -> list[str]:
        """Readiness: the server sources that listen on nothing (yet, or any more), but those a rebind replaces."""
        return [
            f"source_not_listening:{s.source.NAME}"
            for s in list(self.servers)
            if id(s.source) not in self._replacing and not s.source.listening()
        ]

    def all_finite_ended(self) -> bool:
        return not self.servers and all(f.done.is_set() for f in self.finite)

    def stop_all(self) -> None:
        """Stop every source: finite ones first, then servers, last started first (each lets its in-flight
        batches finish)."""
        for reader in self.finite:
            reader.stop()
        for served in reversed(self.servers):
            served.source.stop()

    def plan(self, new: LoadedConfig) -> Rebind:
        """What a reload to ``new`` changes in the sources (nothing started or stopped yet). :class:`ConfigError`
        (located) when it changes a finite source."""
        old = self.config
        assert old is not None, "start() first"
        running = list(self.servers)
        added: list[ComponentSpec] = []
        errors = ErrorCollector()
        old_finite = [spec for spec in old.sources if spec.cls.FINITE]
        for spec in new.sources:
            if spec.cls.FINITE:
                with errors.guard():
                    if not any(_same(spec, o) for o in old_finite):
                        raise new.doc.error(spec.path, "a finite source cannot change on reload; restart serve")
                continue
            same = next((s for s in running if _same(s.spec, spec)), None)
            if same is None:
                added.append(spec)
            else:
                running.remove(same)
        with errors.guard():
            if len(old_finite) != sum(1 for spec in new.sources if spec.cls.FINITE):
                raise new.doc.error("sources", "removes a finite source: it cannot change on reload; restart serve")
        errors.raise_any()
        return Rebind(self, old, new, removed=running, added=added)


def _same(a: ComponentSpec, b: ComponentSpec) -> bool:
    return (a.name, a.config) == (b.name, b.config)


def wanted_ports(spec: ComponentSpec, listen: str | None = None) -> set[int]:
    """The fixed ports a source's options ask for (``listen``, ``metrics_listen``; ``listen``: serve's
    ``--listen``, which the grpc source takes instead of its own); port 0 asks for none."""
    ports = set()
    for key in ("listen", "metrics_listen"):
        value = getattr(spec.config, key, None)
        if key == "listen" and listen is not None and spec.name == "grpc":
            value = listen
        if isinstance(value, str):
            ports.add(Listen.parse(value, key).port)
    return ports - {0}


def bound_ports(source: Any) -> set[int]:
    """The ports a running source holds (its listening addresses, a grpc source's own metrics port)."""
    return ({address.port for address in source.listening()} | {getattr(source, "metrics_port", None) or 0}) - {0}


@dataclass
class Rebind:
    """The server sources a reload starts and stops (see the module): :meth:`apply`, and :meth:`undo` when the
    rest of the reload is refused."""

    owner: ServedSources
    old: LoadedConfig
    new: LoadedConfig
    removed: list[Served]
    added: list[ComponentSpec]
    started: list[Served] = field(default_factory=list)
    #: the sources :meth:`apply` stopped, with the address each listened on (to start it again there)
    stopped: list[tuple[Served, str | None]] = field(default_factory=list)

    @property
    def changes(self) -> bool:
        return bool(self.removed or self.added)

    def apply(self) -> None:
        """Start the new sources (new first where their ports allow), stop the replaced ones; on a failure undo
        and raise a located :class:`ConfigError`. Then :meth:`commit` (or :meth:`undo`, when the rest of the
        reload is refused). Takes no lock of the runtime's (a stopping source waits for its in-flight batches,
        which need it)."""
        if not self.changes:
            return
        taken: set[int] = set().union(*(bound_ports(s.source) for s in self.removed))
        first = [spec for spec in self.added if not wanted_ports(spec, self.owner.listen) & taken]
        after = [spec for spec in self.added if spec not in first]
        self.owner._replacing |= {id(s.source) for s in self.removed}
        try:
            for spec in first:
                self._start(spec)
            for served in reversed(self.removed):
                bound = served.source.listening()
                served.source.stop()
                self.stopped.append((served, str(bound[0]) if bound else None))
            for spec in after:
                self._start(spec)
        except ConfigError:
            self.undo()
            raise

    def commit(self) -> None:
        """The reload went through: the started sources replace the stopped ones."""
        self.owner.config = self.new
        if not self.changes:
            return
        self.owner.servers = [s for s in self.owner.servers if s not in self.removed] + self.started
        self.owner._replacing -= {id(s.source) for s in self.removed}
        log.info(
            "sources_rebound",
            stopped=[s.spec.path for s in self.removed],
            started=[s.spec.path for s in self.started],
        )

    def _start(self, spec: ComponentSpec) -> None:
        try:
            self.started.append(self.owner.start_one(spec, self.new))
        except ConfigError:
            raise
        except Exception as exc:  # a port in use, a certificate the TLS library refuses...
            problem = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
            key = f"{spec.path}.listen" if isinstance(exc, OSError) else spec.path
            raise self.new.doc.error(key, f"cannot start: {problem}; the running sources serve on") from None

    def undo(self) -> None:
        """Stop what :meth:`apply` started and start again the old sources it stopped (built anew from their
        spec). One that cannot start again is logged and stays in the list: readiness names it."""
        for served in reversed(self.started):
            served.source.stop()
        self.started.clear()
        for served, bound in self.stopped:
            index = self.owner.servers.index(served)
            try:
                self.owner.servers[index] = self.owner.start_one(served.spec, self.old, at=bound)
            except Exception as exc:
                log.error("source_restart_failed", source=served.spec.path, error=type(exc).__name__)
        self.stopped.clear()
        self.owner._replacing -= {id(s.source) for s in self.removed}
