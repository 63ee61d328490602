"""What a network source served on the shared host (:class:`sidecar.serving.ServerHost`) answers alike."""

from __future__ import annotations

from typing import Protocol

from sidecar.api.options import Listen, TlsFiles, client_authentication


class ListeningHost(Protocol):
    """The part of the shared host a source reads: where it listens, and its counters."""

    listening: list[Listen]

    def count(self, key: str, n: int = 1) -> None: ...

    def stats(self) -> dict[str, int]: ...


class HostedSource:
    """A mixin, before :class:`~sidecar.api.Source` in the bases, for a source served on the shared host
    (``self.host`` once started): the addresses it listens on, its first bound port, how a client proves itself
    (``self.tls``: server TLS files, with a client CA for mutual TLS; ``self.token``: a bearer token, None when
    none is configured), and its refusals counted by reason."""

    host: ListeningHost | None
    tls: TlsFiles | None
    token: bytes | None

    def listening(self) -> list[Listen]:
        return list(self.host.listening) if self.host is not None else []

    @property
    def port(self) -> int:
        """The first bound port (useful with ``listen: host:0``)."""
        assert self.host is not None and self.host.listening, "start() first"
        return self.host.listening[0].port

    def authentication(self) -> list[str]:
        """How a client proves itself: ``mtls`` (client certificates), ``token`` (bearer token), else ``none``."""
        return client_authentication(
            mtls=self.tls is not None and self.tls.client_ca is not None, token=self.token is not None
        )

    def _refused(self, reason: str) -> int:
        """Count a request refused (``requests_<reason>``, e.g. ``requests_wrong_token``): the count so far."""
        host = self.host
        if host is None:
            return 1
        host.count(f"requests_{reason}")
        return host.stats().get(f"requests_{reason}", 1)
