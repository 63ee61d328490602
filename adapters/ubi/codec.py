"""User Behavior Insights records <-> events (``format: ubi``): JSON lines of UBI query and event records.

The record shapes are the published UBI schema (o19s/ubi, the ``query.request.schema.json`` and
``event.schema.json`` of its ``schema/1.x`` folder; OpenSearch 2.15+ ``ubi_queries`` / ``ubi_events``, Solr):

* a **query** record: ``query_id``, ``client_id``, ``user_query``, ``timestamp``, ``query_attributes``,
  ``query_response_id``, ``query_response_hit_ids``;
* an **event** record: ``action_name``, ``query_id``, ``client_id``, ``session_id``, ``timestamp``,
  ``message_type``, ``message``, ``event_attributes`` (``object`` {``object_id``, ``object_id_field``,
  ``description``...}, ``position`` {``ordinal``...}).

Roles: ``user`` is ``client_id``, ``query`` is ``user_query``, ``time`` is ``timestamp`` (a role left at its TSV
default reads these; set ``schema.roles`` to read other keys). A query record is an event of the chain. An event
record is an event *attached* to its query by ``query_id`` (:meth:`UbiCodec.join_of`): the runtime's join stage
(:mod:`sidecar.joins`) keeps it out of the chain and gives it its query's outcome; its query role is the empty
text and is never written.

Fields: every leaf of a nested object is a field named by its dotted path (``event_attributes.object.object_id``,
``query_attributes.lang``), so ``schema.fields`` gives the clicked object a policy (``hash``, ``drop``, ``url``,
``scrub``...) like any top-level key; a list (``query_response_hit_ids``) is one field. An event written by another
format carries these dotted names as its keys.

Records are JSON lines (files, the ``nats`` source's message lines), or JSON objects a network source already
parsed (:attr:`UbiCodec.json_records`: the ``http`` source's NDJSON, JSON-array and msgpack bodies, the ``forward``
source's maps, a Vector log's map, an OTLP log record's body, through :class:`sidecar.objectrecords.ObjectRecords`),
read as their JSON line. Sinks that find ``json_records`` on an event's codec write the record itself (:meth:`encode`:
its own keys, order and nesting): file, http, forward, nats, s3, vector, otlp.

Bad records: ``invalid_json``, ``json_too_deep``, ``json_not_object``, ``not_json`` (a parsed object with a value
JSON cannot carry, such as msgpack bin), ``missing_query_id`` (no non-empty
``query_id`` text: nothing to join, and a UBI event with no query is not protected by any query's outcome),
``not_ubi_record`` (neither ``user_query`` nor ``action_name``), ``query_not_string``, ``missing_user``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from adapters.ubi.paths import MISSING, get_path, leaves, with_path, without_path
from sidecar.api import ROLES, BadRecord, Codec, Event, FieldError, RolesConfig, SchemaConfig

__all__ = ["JOIN_KEY", "UbiCodec"]

JOIN_KEY = "query_id"
"""The key by which an event record names its query."""
ACTION = "action_name"
_UBI_DEFAULTS: dict[str, str | None] = {
    "user": "client_id",
    "query": "user_query",
    "time": "timestamp",
    "rank": None,
    "url": None,
}
_AOL_DEFAULTS = RolesConfig().mapping()
#: Characters a JSON line may hold raw that a line reader could take for a line end: written as escapes.
_BREAKS = {"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"}


def _dumps(record: Mapping[str, Any]) -> str:
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    if any(ch in text for ch in _BREAKS):
        for ch, esc in _BREAKS.items():
            text = text.replace(ch, esc)
    return text


def _object_line(record: dict[str, Any]) -> str:
    """A parsed record as its JSON line, decoded from it as any line is; ``not_json`` for a value JSON cannot
    carry (msgpack bin), ``json_too_deep``."""
    try:
        return _dumps(record)
    except (TypeError, ValueError):
        raise BadRecord("not_json") from None
    except RecursionError:
        raise BadRecord("json_too_deep") from None


class UbiCodec(Codec):
    """UBI query and event records as JSON lines; see the module documentation."""

    format = "ubi"
    #: Each record is one JSON object: a source that receives JSON objects (the http source's JSON and msgpack
    #: bodies, the forward source's maps) gives them to this codec when it is the schema's format.
    json_records = True

    def __init__(self, schema: SchemaConfig | None = None) -> None:
        self.schema = schema or SchemaConfig()
        keys = self.schema.roles.mapping()
        self.keys = {r: (_UBI_DEFAULTS[r] if keys[r] == _AOL_DEFAULTS.get(r) else keys[r]) for r in ROLES}
        self.pairs = tuple((role, key) for role, key in self.keys.items() if key is not None)
        self._role_keys = frozenset(key for _, key in self.pairs)
        self._query_key = self.keys["query"]

    # ---- the join (sidecar.joins) -------------------------------------------------------------------
    def join_of(self, event: Event) -> tuple[str, bool] | None:
        """``(query_id, is_query)`` of a UBI record: a query (the event the chain decides for) or an event
        record attached to that query; None for a record that is neither (another format's event)."""
        record = event.record
        if not isinstance(record, dict):
            return None
        key = record.get(JOIN_KEY)
        if not isinstance(key, str) or not key:
            return None
        if self._query_key in record:
            return key, True
        return (key, False) if ACTION in record else None

    # ---- records -----------------------------------------------------------------------------------
    def _decode(self, line: str, eol: str) -> Event:
        body = line[:-1] if line.endswith("\r") else line
        try:
            record = json.loads(body)
        except ValueError:
            raise BadRecord("invalid_json") from None
        except RecursionError:
            raise BadRecord("json_too_deep") from None
        if not isinstance(record, dict):
            raise BadRecord("json_not_object")
        key = record.get(JOIN_KEY)
        if not isinstance(key, str) or not key:
            raise BadRecord("missing_query_id")
        values = {role: record.get(k) for role, k in self.pairs}
        if self._query_key in record:
            query = values.get("query")
            if not isinstance(query, str):
                raise BadRecord("query_not_string")
        elif ACTION in record:
            query = ""  # an attached event: it has no query of its own, and none is ever written into it
        else:
            raise BadRecord("not_ubi_record")
        if values.get("user") is None:
            raise BadRecord("missing_user")
        if any(ch in body for ch in _BREAKS):  # valid JSON, but a line reader would split it: written escaped
            line = _dumps(record)
        get = values.get
        return Event(get("user"), query, get("time"), get("rank"), get("url"), record, line, self, eol)

    def decode_many(self, records: Sequence[Any], eol: str, bad: list[tuple[int, str]]) -> list[Event]:
        out: list[Event] = []
        for i, line in enumerate(records):
            try:
                if isinstance(line, dict):  # a JSON object a network source parsed (a forward map)
                    text = _object_line(line)
                else:
                    text = line.decode("utf-8") if isinstance(line, bytes) else str(line)
                out.append(self._decode(text, eol))
            except UnicodeDecodeError:
                bad.append((i, "not_utf8"))
            except BadRecord as exc:
                bad.append((i, exc.reason))
        return out

    def _writes(self, record: Mapping[str, Any], role: str, key: str, value: Any) -> bool:
        """Whether role ``role`` is written into ``record``: when the record has its key, or the value is set and
        the record is a query (an attached event never gets a query key)."""
        return key in record or (value is not None and not (role == "query" and self._query_key not in record))

    def encode(self, event: Event) -> str:
        record = event.record
        if not isinstance(record, dict):  # an event of another format: its roles and fields as a UBI-shaped object
            out = {key: getattr(event, role) for role, key in self.pairs if getattr(event, role) is not None}
            if event.codec is not None:
                out.update(event.codec.fields(event))
            return _dumps(out)
        changed = event.raw is None
        for role, key in self.pairs:
            value = getattr(event, role)
            if self._writes(record, role, key, value) and record.get(key) != value:
                changed = True
                break
        if not changed and event.raw is not None:
            return event.raw
        record = dict(record)
        for role, key in self.pairs:
            value = getattr(event, role)
            if self._writes(record, role, key, value):
                record[key] = value
        return _dumps(record)

    def json_line(self, event: Event) -> str:
        """The record as one JSON line under its own UBI keys, nesting kept (what :meth:`encode` writes): a
        JSON-lines output (a ``.jsonl`` file, the s3 sink) writes a UBI record in the schema it came in,
        not its roles under ``schema.roles``' keys and its nested fields flattened."""
        return self.encode(event)

    # ---- fields (schema.fields; other formats) -----------------------------------------------------
    def fields(self, event: Event) -> Mapping[str, Any]:
        if not isinstance(event.record, dict):
            return {}
        return dict(leaves(event.record, self._role_keys))

    def get_field(self, event: Event, name: str) -> Any:
        if not isinstance(event.record, dict):
            raise FieldError("unsupported_codec")
        value = get_path(event.record, name)
        if value is MISSING:
            raise FieldError("no_such_field")
        return value

    def _check(self, event: Event, name: str) -> dict[str, Any]:
        if not isinstance(event.record, dict):
            raise FieldError("unsupported_codec")
        if name in self._role_keys:
            raise FieldError("field_is_role")
        return event.record

    def set_field(self, event: Event, name: str, value: Any) -> None:
        record = with_path(self._check(event, name), name, value)
        if record is None:
            record = {**event.record, name: value}  # a new top-level key
        self._store(event, record)

    def remove_field(self, event: Event, name: str) -> None:
        record = self._check(event, name)
        new = without_path(record, name)
        if new is not record:
            self._store(event, new)

    @staticmethod
    def _store(event: Event, record: dict[str, Any]) -> None:
        """The edited record, with ``raw`` in step (the identity rule): written afresh."""
        event.record = record
        if event.raw is not None:
            event.raw = _dumps(record)
