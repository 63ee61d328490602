"""The plugin contract: the one page a filter, source, sink or codec author reads.

Everything a third-party component needs is on this page; a plugin imports
``sidecar.api`` and nothing else of the sidecar. The definitions live in the
modules of this package (``events``, ``config``, ``context``, ``components``,
``groups``), each short; import them from here.

**Data.** A source reads *records* (a TSV line, a JSON object, a protobuf
message). A :class:`Codec` decodes them into :class:`Event` objects: the five
roles (``user``, ``query``, ``time``, ``rank``, ``url``) that the schema map
assigns to record fields, plus the untouched original ``record`` and, for text
formats, its original line ``raw``. Filters change role values; the codec writes
them back into the original record, so the output keeps the input's schema.

**The identity rule.** ``Codec.encode`` returns ``event.raw`` unchanged — the
input bytes — when every role value is the very object (TSV, protobuf) or an
equal value (JSON) of what was decoded. So a filter that changes anything that
is *not* a role must say so, or the change is lost:

* to set a non-role field, call ``event.codec.set_field(event, name, value)``:
  it writes the record and keeps ``raw`` in step (or raises :class:`FieldError`
  with a reason slug when the record has no such field, the field is a role, or
  the format cannot carry it);
* a filter that edits ``event.record`` itself calls ``event.mark_changed()``:
  ``raw`` is dropped and the encoder writes the record afresh.

**An empty query is a valid event.** A codec decodes a record whose query is
``""`` (or only spaces) into an event with that query, and dead-letters a record
only when its framing or shape is wrong (a missing query field is; an empty one is
not), so a passthrough chain reproduces it. Every filter copes with an empty query
and documents what it does with one (keeps it, drops it by rule, replaces it);
a filter must not assume a query has a first word.

**Filters** (:class:`Filter`) work on batches: ``process(list[Event]) ->
list[Event]``, ``flush(final)``, ``close()``. Returning fewer events drops them
(count why in ``self.counts``); a buffering filter sets ``BUFFERING``, holds
events and reports ``held()``; a filter that keeps anything between batches (in
memory or in the state store) sets ``STATEFUL``; one that can learn from a first
pass over an archive sets ``PRESCAN`` and implements ``prescan``; one that replaces a
role's values by keyed pseudonyms says which in ``pseudonymized_roles()``; one that keeps
per-user profiles implements :class:`ProfileSource` (``get_profile``); one that can count
identifiers in a text offers the detector to the live audit (``identifier_detector()``). A filter is
generic in its frozen config dataclass: ``class MyFilter(Filter[MyConfig])`` and
``self.config`` is a ``MyConfig``.

**Sources** (:class:`Source`) bring records in: ``start(runtime)`` begins (a
server returns at once and receives on its own threads; a finite source such as a
file sets ``FINITE`` and returns when its input ends or ``stop`` is called); each
batch of records goes to ``runtime.receive(RecordBatch(...))``, which decodes,
dead-letters bad records, runs the chain and delivers to the sinks. **An
acknowledgement is a promise:** when ``receive`` returns, every event of the
batch is delivered (sinks flushed), durably held by a filter, dropped by rule or
dead-lettered — only then may the source acknowledge upstream.

A *server* source declares its address with :func:`listen_option` and reads it with
:meth:`Listen.parse`; ``listen: 127.0.0.1:0`` binds any free port, and
``listening()`` returns the bound addresses (``serve`` logs them as ``listening``).
It decodes with a codec of the runtime (``ctx.codec_for("jsonl")``, or its own).
``receive`` blocks (SQLite, the chain): an event loop calls it on a worker thread
(``asyncio.to_thread``). When it raises :class:`Backpressure`, nothing ran: answer
the client "busy, retry later"; any other exception is answered as an error; in
neither case acknowledge. A record the source cannot even hand over (longer than
``ctx.max_record_bytes``, not UTF-8) goes to ``runtime.dead_letters.add(reason,
origin, position, record)`` — the next ``receive`` flushes it, or call
``runtime.dead_letters.flush()`` before acknowledging — and the good records of
its batch go on. ``stop(grace)`` stops accepting and lets batches in flight finish
within ``grace`` seconds; the runtime runs the release timer, never a source.
``authentication()`` names what a client must present (``none``, ``token``, ``mtls``,
``shared_key``; ``serve`` logs it beside each port).

The runtime owns the rest of the data path, so a source calls it instead of
copying it: ``receive`` returns a :class:`Receipt` (accepted, delivered, held,
dropped, dead-lettered, and ``reasons``: dead letters by reason) to answer the
client from; a request/response protocol (the gRPC ``Filter``) calls
``runtime.transform(batch)`` to get the batch's own events back instead of
delivering them; ``runtime.backpressure()`` names a full outbox before reading
on; a finite source that can resume commits its position with a batch
(``RecordBatch.checkpoint``) and reads it back with ``runtime.checkpoint(key)``;
``runtime.release(final)`` is the runtime's own timer's and shutdown's call.
The state folder has one writer: a second process on it is refused at start.
(The built-in servers share a server host and a few helpers of the runtime,
listed with their reasons in ``tests/sidecar/test_layers.py``; a third party
needs none of them.)

**Sinks** (:class:`Sink`) take events out: ``start(header, codec)`` once,
``write(events)`` (may buffer), ``flush()`` (the delivery point: when it
returns, everything written is durable), ``close()``. A ``stats()`` method, if
present, returns counts (never values) that the runtime exports as metrics.

A *network* sink cannot make its peer durable inside the runtime's transaction,
so its ``flush`` makes the hand-over durable: its config lists
:class:`OutboxOptions` among its bases, and it asks for a durable queue,
``self.outbox = ctx.outbox(name, self.config)`` (:class:`Outbox`; ``name``
stable across restarts, e.g. the sink's name and peer), unless
``ctx.validate_only``. In ``__init__`` it calls ``outbox.start(self.send)``:
``send(payload)`` runs on the outbox's own thread, delivers one batch and returns,
or raises to have it sent again after a backoff (in order, at least once; batches
an earlier run left go first). ``flush`` encodes what was written and calls
``outbox.put(payload, events)``, which commits with the runtime's batch; when it
raises :class:`Backpressure`, keep the data for the next flush (the batch is not
acknowledged). ``close`` flushes, ``drain(config.close_drain_seconds)``, then
``outbox.close(timeout)``: what is left is sent after the next start. The
runtime checks every outbox made this way before a batch runs
(:meth:`Runtime.backpressure`). ``outbox.stats()`` counts ``pending_batches``,
``pending_events``, ``pending_bytes``, ``sent_batches``, ``sent_events``,
``retries``, ``failures`` and ``refused_full``.

**Shared options.** A network component does not declare its own copies of the
common options: a config lists the mixins among its bases and gets their keys,
checks and docs — :class:`ServerTls` (certificate, key, client CA for mutual
TLS; read with ``server_tls(ctx)``), :class:`BearerToken` (``bearer_token(ctx)``,
compare in constant time), :class:`OutboxOptions` — and declares a listen
address with :func:`listen_option`. Its own ``__post_init__`` calls
``super().__post_init__()``.

**Configs.** Every option is declared with :func:`option` (a default, a doc
string, optionally bounds or choices) on a frozen dataclass subclassing
:class:`FilterConfig`, :class:`SourceConfig` or :class:`SinkConfig`. The loader
rejects unknown keys and bad values with ``FILE:LINE: KEY: problem (allowed:
...)``; cross-field rules go in ``__post_init__`` and raise
:class:`ConfigValueError`. Secrets come from :meth:`BuildContext.secret` (an
environment variable or a file), never from the YAML.

**Registration.** Components register through entry points, exactly like the
built-ins: :data:`FILTERS`, :data:`SOURCES`, :data:`SINKS`, :data:`CODECS`
(codecs by format name, used to restore held events), :data:`COMMANDS` (click
commands added to ``querylog``). Two plugins under one name are an error naming
both.

**Threading.** The runtime runs one batch at a time through the chain (it holds
the chain's lock), so a filter's ``process``/``flush``/``prescan`` are never
called concurrently; a filter needs no lock of its own. Several sources may drive
one runtime from any number of threads: every ``Runtime`` method takes the
runtime's re-entrant ``lock``, and a ``transaction()`` block holds it throughout,
so a source's process-deliver-flush is one step with respect to the others (an
event loop tries the lock with ``acquire(blocking=False)`` rather than wait on
it). Sinks are called under the same lock as the chain. ``close`` is called once, after the last batch.

**State store.** ``BuildContext.state`` is one SQLite database (WAL) shared by
every component. Own your tables: create and migrate them with
``state.migrate(component, [step, ...])``. Write a batch's changes inside
``SAVEPOINT <component>`` ... ``RELEASE`` while holding ``state.lock``, never
``BEGIN``/``COMMIT``: the runtime may hold an outer transaction to commit your
state together with the output it delivered (``replay --resume``). Filters that
hold events keep them in the store, so a restart — even ``kill -9`` — resumes
with them.

**Privacy.** Never put a query, user id or record value into a log event, an
exception message or a metric label: counts, field names and reasons only.
Randomness that protects privacy comes from ``BuildContext.rng`` (a CSPRNG unless
a test or benchmark gave a seed).
"""

from sidecar.api.components import (
    Backpressure,
    Filter,
    ProfileSource,
    Receipt,
    RecordBatch,
    Runtime,
    Sink,
    SinkError,
    Source,
)
from sidecar.api.config import (
    AOL_COLUMNS,
    ConfigValueError,
    FilterConfig,
    RolesConfig,
    SchemaConfig,
    SinkConfig,
    SourceConfig,
    option,
)
from sidecar.api.context import BuildContext, DeadLetterSink, Outbox, StateDamaged, StateStoreLike
from sidecar.api.events import NO_META, ROLES, BadRecord, Codec, Event, FieldError
from sidecar.api.groups import CODECS, COMMANDS, FILTERS, SINKS, SOURCES
from sidecar.api.hosted import HostedSource
from sidecar.api.options import (
    LISTEN_DOC,
    BearerToken,
    Listen,
    OutboxOptions,
    ServerTls,
    TlsFiles,
    check_env_name,
    client_authentication,
    listen_option,
)

__all__ = [
    "AOL_COLUMNS",
    "CODECS",
    "COMMANDS",
    "FILTERS",
    "LISTEN_DOC",
    "NO_META",
    "ROLES",
    "SINKS",
    "SOURCES",
    "Backpressure",
    "BadRecord",
    "BearerToken",
    "BuildContext",
    "Codec",
    "ConfigValueError",
    "DeadLetterSink",
    "Event",
    "FieldError",
    "Filter",
    "FilterConfig",
    "HostedSource",
    "Listen",
    "Outbox",
    "OutboxOptions",
    "ProfileSource",
    "Receipt",
    "RecordBatch",
    "RolesConfig",
    "Runtime",
    "SchemaConfig",
    "ServerTls",
    "Sink",
    "SinkConfig",
    "SinkError",
    "Source",
    "SourceConfig",
    "StateDamaged",
    "StateStoreLike",
    "TlsFiles",
    "check_env_name",
    "client_authentication",
    "listen_option",
    "option",
]
