"""The ``http`` sink: events as newline-delimited JSON, POSTed in batches through a durable outbox.

``write`` encodes each event as one JSON line in the input's schema (JSON-lines input keeps its lines byte for
byte, as does a format whose records are JSON objects, ``json_records``: a UBI record keeps its own keys; other
input becomes a fresh object of its fields) and cuts batches of ``batch_max_events`` /
``batch_max_bytes``; ``flush`` (inside the runtime's transaction) puts them into the sink's outbox
(``ctx.outbox``, the contract's :class:`~sidecar.api.Outbox`), so an acknowledgement upstream waits only for
that. The outbox's sender thread POSTs each batch, oldest first:

* **2xx**: delivered.
* **5xx, 408, 429**, a connection error or a timeout, and **401, 403, 404** (a wrong token or URL: an
  operator fixes it, and nothing is lost meanwhile): sent again after an exponential backoff with jitter
  (``retry_initial_seconds`` doubling up to ``retry_max_seconds``), for as long as it takes; meanwhile the
  outbox fills up to its bounds and then the sources stop acknowledging (backpressure), never dropping. The
  log says ``http_batch_retried`` with the status.
* **any other status** (400, 413, 422...): the peer refuses this batch's content for good. Sending it again
  cannot help, so its events are dead-lettered (reason ``rejected_by_peer``, counted, the lines in the
  dead-letter file) and the sender goes on with the next batch.

Logs carry the peer (scheme, host, port), statuses and counts, never a line, a header value or the peer's
answer.
"""

from __future__ import annotations

import gzip
from collections import Counter
from typing import Any

import structlog

from adapters.http.config import HttpSinkConfig
from sidecar.api import BadRecord, BuildContext, Codec, ConfigValueError, Event, Outbox, Sink
from sidecar.netsink import (
    HttpClient,
    LineBatcher,
    PeerUnavailable,
    basic_auth,
    close_outbox,
    dead_letter_event,
    dead_letter_payload,
    outbox_stats,
    read_secret,
)

log = structlog.get_logger("querylog.http")

#: Statuses worth sending the same batch again for; other non-2xx statuses refuse it for good.
#: 4xx answers that say the request, not its content, was wrong: retried, never dead-lettered
RETRY_STATUSES = frozenset({401, 403, 404, 408, 429})


def secret_headers(ctx: BuildContext, config: HttpSinkConfig) -> dict[str, str]:
    """The configured headers, the secret ones read from their environment variables and files."""
    out = dict(config.headers or {})
    for key, sources in (("headers_env", config.headers_env), ("headers_file", config.headers_file)):
        for name, ref in (sources or {}).items():
            env, file = (ref, None) if key == "headers_env" else (None, ref)
            secret = read_secret(ctx, env, file, key, key, f"header {name}")
            assert secret is not None
            text = secret.decode("latin-1")
            if "\r" in text or "\n" in text:
                raise ConfigValueError(key, f"the value of header {name} holds a line break (the value is not shown)")
            out[name] = text
    for name, value in out.items():
        if "\r" in value or "\n" in value:
            raise ConfigValueError("headers", f"the value of header {name} holds a line break")
    return out


class HttpSink(Sink[HttpSinkConfig]):
    """NDJSON POSTs in batches, retried with backoff, through a durable outbox (see the module docstring)."""

    NAME = "http"
    Config = HttpSinkConfig
    SUMMARY = (
        "POST events as NDJSON in batches (gzip, auth) through a durable outbox; 5xx/401/403/404/408/429/no "
        "answer: retried with backoff and jitter; other 4xx: the batch is dead-lettered (rejected_by_peer)"
    )

    def __init__(self, config: HttpSinkConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        headers = secret_headers(ctx, config)
        token = read_secret(
            ctx, config.bearer_token_env, config.bearer_token_file, "bearer_token_env", "bearer_token_file", "token"
        )
        if token is not None:
            headers["Authorization"] = "Bearer " + token.decode("latin-1").strip()
        password = read_secret(
            ctx,
            config.basic_password_env,
            config.basic_password_file,
            "basic_password_env",
            "basic_password_file",
            "Basic authentication password",
        )
        if config.basic_user is not None:
            headers["Authorization"] = basic_auth(config.basic_user, password or b"")
        if config.tls_ca_file is not None and not ctx.resolve(config.tls_ca_file).is_file():
            raise ConfigValueError("tls_ca_file", f"no such file: {ctx.resolve(config.tls_ca_file)}")
        headers["Content-Type"] = config.content_type
        if config.compression == "gzip":
            headers["Content-Encoding"] = "gzip"
        self.client = HttpClient(
            config.url,
            timeout=config.timeout_seconds,
            headers=headers,
            ca_file=str(ctx.resolve(config.tls_ca_file)) if config.tls_ca_file else None,
        )
        self.target = self.client.path + (f"?{self.client.query}" if self.client.query else "")
        self.codec: Codec | None = None
        #: Counters (no values): events dead-lettered by reason, batches refused by status.
        self.counts: Counter[str] = Counter()
        self.outbox: Outbox | None = None
        self.batcher: LineBatcher | None = None
        if not ctx.validate_only and ctx.state is not None:
            self.outbox = ctx.outbox(f"http_{self.client.host}_{self.client.port}_{self.client.path}", config)
            self.batcher = LineBatcher(self.outbox, config.batch_max_events, config.batch_max_bytes)
            self.outbox.start(self.send)  # batches an earlier run left go out now

    # ---- the runtime's side ---------------------------------------------------------------------
    def start(self, header: str | None, codec: Codec | None) -> None:
        """JSON lines keep their codec; events of another format are written by the configured JSON-lines codec."""
        self.codec = codec if codec is not None and codec.format == "jsonl" else self.ctx.codec_for("jsonl")
        if self.codec is None:
            raise RuntimeError("the http sink needs the runtime's JSON-lines codec (ctx.codec_for('jsonl'))")

    def write(self, events: list[Event]) -> None:
        if not events:
            return
        if self.codec is None:
            self.start(None, None)
        assert self.codec is not None
        if self.batcher is None:
            raise RuntimeError("the http sink was built to check a config only")
        encode = self.codec.encode
        first = events[0].codec  # a codec whose records are JSON objects (format: ubi) writes them with their keys
        own = first if first is not None and getattr(first, "json_records", False) else None
        add = self.batcher.add
        for ev in events:
            try:
                text = own.encode(ev) if own is not None and ev.codec is own else encode(ev)
                line = (text[:-1] if text.endswith("\r") else text).encode("utf-8")  # a CRLF input: LF-framed here
            except (BadRecord, TypeError, ValueError) as exc:  # a value JSON cannot carry, a lone surrogate...
                self._reject(ev, exc.reason if isinstance(exc, BadRecord) else "unencodable_record")
                continue
            add(line)
            self.written += 1

    def _reject(self, ev: Event, reason: str) -> None:
        self.counts[reason] += 1
        dead_letter_event(self.ctx.dead_letters, reason, f"sink:{self.NAME}", ev)

    def flush(self) -> None:
        if self.batcher is not None:
            self.batcher.flush()  # Backpressure goes to the runtime: the batch is not acknowledged

    # ---- the sender's side ------------------------------------------------------------------------
    def send(self, payload: bytes) -> None:
        """POST one batch (called by the outbox's sender thread); raises :class:`PeerUnavailable` to retry it."""
        body = gzip.compress(payload, 6) if self.config.compression == "gzip" else payload
        answer = self.client.request("POST", self.target, body)
        status = answer.status
        if 200 <= status < 300:
            return
        if status >= 500 or status in RETRY_STATUSES or status < 400:
            if status in RETRY_STATUSES:
                log.warning("http_batch_retried", peer=self.client.peer, status=status)
            raise PeerUnavailable(f"{self.client.peer} answered {status}")
        n = dead_letter_payload(self.ctx.dead_letters, "rejected_by_peer", f"sink:{self.NAME}", payload)
        self.counts["rejected_by_peer"] += n
        self.counts[f"batches_refused_{status}"] += 1
        log.warning("http_batch_rejected", peer=self.client.peer, status=status, events=n, reason="rejected_by_peer")

    def stats(self) -> dict[str, Any]:
        """The outbox's counters and this sink's dead letters (counts only)."""
        return outbox_stats(self.counts, self.outbox)

    def close(self) -> None:
        """Put what is buffered into the outbox, keep sending for ``close_drain_seconds``, stop the sender."""
        if self.outbox is None:
            return
        outbox, self.outbox = self.outbox, None
        left = close_outbox(outbox, self.batcher, self.config.close_drain_seconds, self.client)
        if left is not None:
            log.warning(
                "http_sink_closed_with_pending", peer=self.client.peer, batches=left.batches, events=left.events
            )
