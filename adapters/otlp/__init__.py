"""OpenTelemetry logs (OTLP): the ``otlp`` source, the ``otlp`` sink and the ``otlp`` codec.

An application instrumented with an OpenTelemetry SDK (or a Collector) exports its logs with OTLP; pointing
its OTLP log exporter at the sidecar puts the filter chain in front of the real receiver, with nothing else
changed::

    app (OTLPLogExporter -> SIDECAR:4317 or http://SIDECAR:4318/v1/logs) -> sidecar (source otlp, chain,
    sink otlp -> COLLECTOR) -> Collector / backend

**Records and roles** (:mod:`adapters.otlp.codec`, :mod:`adapters.otlp.values`): a record is one log record
with its resource and scope. Roles are ``body``, ``attributes.<key>`` (the rest of the name is the key, dots
included), ``resource.<key>`` and ``time_unix_nano``; a bare name is an attribute key. With Python's
``LoggingHandler`` the message is the body and ``extra={...}`` are attributes, so e.g.::

    schema:
      roles: {user: attributes.user_id, query: body, time: null, rank: null, url: null}

**Same schema.** A record leaves as it came: its ``LogRecord`` bytes as sent (attributes in order, timestamps,
severity, trace and span ids) when unchanged, only its changed role values rewritten otherwise, with its
resource and scope. A file sink writes OTLP/JSON, one export request of one record per line.

**Delivery** (:mod:`adapters.otlp.server`, :mod:`adapters.otlp.sink`): an export is answered only once its
records are durable; bad records are dead-lettered and counted in ``partial_success`` (a count and reasons),
never failing the export, so the exporter does not resend the good ones. A full outbox answers
RESOURCE_EXHAUSTED with a ``google.rpc.RetryInfo`` / 503 with ``Retry-After``, which the exporters wait for
(:mod:`adapters.otlp.throttle`); OTLP/HTTP holds at most ``max_connections`` connections
(:mod:`sidecar.boundedhttp`). The sink batches through a durable outbox, honours ``Retry-After`` and
``RetryInfo``, and presents a client certificate where the receiver wants one. At least once, end to end.
"""
