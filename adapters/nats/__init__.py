"""NATS JetStream: the ``nats`` source (durable pull consumers, one per partition) and the ``nats`` sink.

A stream of query-log records, partitioned by user, feeds replicas of the sidecar; each replica reads its
partitions, so every user's state (profiles, the dp_replace ledger, category_buffer's held events) lives on one
replica, with no routing client in front::

    producers -> JetStream stream QUERYLOG, subjects querylog.in.<p> (p = keyed user hash of replay --workers)
              -> replica A (partitions [0, 1] of 4), replica B ([2, 3]) -> sink nats / file / ...

**Records.** A message's data is one record line in the schema's format (TSV of ``schema.columns``, a JSON
line, an access-log line); a message holding several lines is several records. The sink writes one record
per message, so a ``nats`` sink feeds a ``nats`` source of the same schema.

**Delivery.** The source acknowledges a message once ``Runtime.receive`` returned (its records durable in the
sinks, held, or dead-lettered); a batch the runtime could not take is nak'ed and delivered again. The sink
publishes through a durable outbox and counts a batch delivered once JetStream acknowledged each message;
``Nats-Msg-Id`` lets JetStream drop a resent message within the stream's duplicate window. At least once, end
to end (docs/NATS.md).
"""
