"""Every field accounted for: the runtime applies ``schema.fields`` and ``schema.unlisted`` to every decoded event.

**Where.** A stage of the runtime, right after a batch is decoded and before the chain (``Pipeline._decode``),
for every source and format whose codec implements the field methods (TSV by column name, JSON lines, forward,
Vector, gRPC attributes, the access log): the chain, the state store (held events) and every sink only ever see
a record whose non-role fields went through their policies. The query's field takes no policy (the filters own
it); the field of another role may take a value policy (``hash``, ``ip_prefix``, ``ip_encrypt``, ``user_agent``),
which sets the role's value before any filter (an access log's user is its client address: ``remote_addr:
ip_encrypt``); the codec writes the role back as it writes any changed role.

**What.** Each non-role field gets its policy (:class:`~sidecar.api.config.FieldPolicy`): ``keep``; ``drop``
(``codec.remove_field``: removed from a JSON object, forward or Vector map; a format with fixed columns writes
its placeholder, empty in TSV); ``hash``, ``ip_prefix``, ``ip_encrypt`` (:mod:`sidecar.fieldvalues`);
``user_agent`` (:mod:`sidecar.useragent`); ``url`` and ``scrub``, which run the registered ``truncate_url`` and
``hipaa_scrub`` filters (defaults) on the field's text, got through the plugin registry (the runtime imports no
filter). A field the schema does not name gets ``unlisted``: ``keep``, ``drop``, or ``error``: the record is
dead-lettered (``undeclared_field``, the dead-letter entry names the first such field) and counted by field name
(fail-closed, as the OpenTelemetry redaction processor's ``allowed_keys``).

**Values.** An empty value (null, ``""``, ``-``) stays as it is: nothing to hide, and a hash of nothing would look
like a value. A value a policy cannot read (``ip_prefix`` of a text that is not an address, ``user_agent`` of a
number, a list for ``url``) is removed (counted ``unreadable_removed``), never written as it came. A value the
codec cannot write back (a TSV value with a tab) dead-letters the record (``field_policy_failed``).

**Identity.** A field is written only when its policy changed its value, so a record no policy changed keeps its
original bytes (the identity rule). Counts by field and outcome (``changed``, ``removed``,
``unreadable_removed``, ``unlisted_dropped``, ``undeclared``) never hold a value; a name that does not look like a
field name (or past the 64th distinct one) is counted as ``_other``.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from sidecar.api import FILTERS, BuildContext, ConfigValueError, Event, FieldError, Filter, RecordBatch, SchemaConfig
from sidecar.api.config import KEYED_POLICIES, FieldPolicy
from sidecar.building import record_bytes
from sidecar.config import ConfigError, LoadedConfig
from sidecar.deadletter import DeadLetters
from sidecar.fieldvalues import MIN_KEY_BYTES, IpEncrypt, derive_key, hash_value, ip_prefix
from sidecar.registry import PluginError, plugins
from sidecar.useragent import generalise

__all__ = ["FieldPolicies", "field_policies"]

#: Values no policy touches: there is nothing in them to hide.
EMPTY = (None, "", "-")
#: A field name counted under its own name (anything else, or past MAX_NAMES distinct ones, is ``_other``).
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,63}")
MAX_NAMES = 64
#: Distinct values whose result a value policy remembers (then it starts afresh).
MEMO_SIZE = 100_000
#: What a transform returns for a value it cannot read: the field is removed.
UNREADABLE = object()
#: What a transform returns to remove the field.
REMOVE = object()


class FieldPolicies:
    """The field policies of one runtime (see the module doc); :meth:`build` gives None when there is nothing
    to do (no ``fields`` and ``unlisted: keep``), so such a runtime pays nothing."""

    def __init__(self, schema: SchemaConfig, ctx: BuildContext, dead: DeadLetters) -> None:
        self.policies: dict[str, FieldPolicy] = schema.policies()
        self.unlisted = schema.unlisted
        self.dead = dead
        self.counts: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()  # the counts, the memos and the url/scrub filters: one batch at a time
        self._names: set[str] = set()
        #: each value policy's results by value (user agents, addresses): "" for a value it cannot read
        self._memo: dict[FieldPolicy, dict[str, str]] = {}
        role_of = {name: role for role, name in schema.roles.mapping().items() if name is not None}
        #: (role, its field's name, policy): a value policy on a role's field (not the query's) sets the role
        self._roles = [
            (role_of[name], name, p) for name, p in self.policies.items() if name in role_of and p.policy != "keep"
        ]
        used = {p.policy for p in self.policies.values()}
        key = self._key(schema, ctx) if used & KEYED_POLICIES else b""
        self._hash_key = derive_key(key, "field hash") if key else b""
        self._ip = IpEncrypt(key) if "ip_encrypt" in used else None
        #: the registered filters that run the url and scrub policies, by policy, with the role they read
        self._filters: dict[str, tuple[Filter[Any], str]] = {}
        for policy, name, role in (("url", "truncate_url", "url"), ("scrub", "hipaa_scrub", "query")):
            if policy in used:
                self._filters[policy] = (self._plugin(name, policy, ctx), role)

    @classmethod
    def build(cls, schema: SchemaConfig, ctx: BuildContext, dead: DeadLetters) -> FieldPolicies | None:
        if not schema.fields and schema.unlisted == "keep":
            return None
        return cls(schema, ctx, dead)

    def _key(self, schema: SchemaConfig, ctx: BuildContext) -> bytes:
        where = "field_key_env" if schema.field_key_env is not None else "field_key_file"
        try:
            key = ctx.secret(schema.field_key_env, schema.field_key_file, "field key")
        except ConfigValueError as exc:
            raise ConfigValueError(where, exc.problem) from None
        if len(key) < MIN_KEY_BYTES:
            raise ConfigValueError(where, f"the field key has {len(key)} bytes; at least {MIN_KEY_BYTES} are needed")
        return key

    def _plugin(self, name: str, policy: str, ctx: BuildContext) -> Filter[Any]:
        """The registered filter ``name`` with its default options (a missing one is a config error)."""
        field = next(f for f, p in self.policies.items() if p.policy == policy)
        try:
            cls = plugins(FILTERS).get(name)
        except PluginError as exc:
            raise ConfigValueError(f"fields.{field}", str(exc)) from None
        if cls is None:
            raise ConfigValueError(f"fields.{field}", f"the {policy} policy needs the {name} filter (not installed)")
        built: Filter[Any] = cls(cls.Config(), ctx)
        return built

    # ---- the stage ---------------------------------------------------------------------------------
    def apply(
        self, events: list[Event], batch: RecordBatch, bad: Sequence[tuple[int, str]], reasons: Counter[str]
    ) -> list[Event]:
        """``events`` with their fields through their policies; the records refused are dead-lettered (counted
        in ``reasons``) and left out. ``bad``: the batch's records the codec refused (to locate the others).
        Thread-safe: a request/response source decodes outside the runtime's lock (``Runtime.transform``)."""
        with self._lock:
            out, refused = self._apply(events)
            if refused:
                self._dead_letter(events, refused, batch, bad, reasons)
        return out

    def first_pass(self, events: list[Event]) -> list[Event]:
        """``apply`` for the first pass of ``--prescan``: the same events come out (so a prescanning filter
        learns the users and fields the real pass will see), nothing is counted or dead-lettered (the real pass
        reports each record once)."""
        with self._lock:
            counts = Counter(self.counts)
            out, _ = self._apply(events)
            self.counts = counts
        return out

    def _apply(self, events: list[Event]) -> tuple[list[Event], list[tuple[int, str, str]]]:
        """The events kept, and those refused as (index in ``events``, reason, field)."""
        out: list[Event] = []
        later: dict[str, list[tuple[Event, str]]] = {}  # url/scrub: run through their filter once per batch
        refused: list[tuple[int, str, str]] = []
        for i, ev in enumerate(events):
            if self._roles:
                self._set_roles(ev)
            codec = ev.codec
            fields = codec.fields(ev) if codec is not None else None
            if not fields:
                out.append(ev)
                continue
            failed = self._one(ev, fields, later)
            if failed is None:
                out.append(ev)
            else:
                refused.append((i, *failed))
        if later:
            failed_ids = self._run_filters(later)
            if failed_ids:
                kept = []
                for ev in out:
                    if id(ev) in failed_ids:
                        refused.append((events.index(ev), "field_policy_failed", failed_ids[id(ev)]))
                    else:
                        kept.append(ev)
                out = kept
        return out, refused

    def _one(
        self, ev: Event, fields: Mapping[str, Any], later: dict[str, list[tuple[Event, str]]]
    ) -> tuple[str, str] | None:
        """Apply the policies to one event's fields; (reason, field) when the record is refused."""
        policies = self.policies
        if self.unlisted == "error":
            undeclared = [name for name in fields if name not in policies]
            if undeclared:
                for name in undeclared:
                    self.counts[(self._label(name), "undeclared")] += 1
                return "undeclared_field", self._label(undeclared[0])
        codec = ev.codec
        assert codec is not None
        for name, value in list(fields.items()):
            policy = policies.get(name)
            if policy is None:
                if self.unlisted == "drop":
                    new: Any = REMOVE
                    outcome = "unlisted_dropped"
                else:
                    continue
            elif policy.policy == "keep" or _empty(value):
                continue
            elif policy.policy in self._filters:
                if not isinstance(value, str):
                    new, outcome = REMOVE, "unreadable_removed"
                else:
                    later.setdefault(policy.policy, []).append((ev, name))
                    continue
            else:
                new = self._transform(policy, value)
                if new is REMOVE:
                    outcome = "removed"
                elif new is UNREADABLE:
                    new, outcome = REMOVE, "unreadable_removed"
                elif new == value and type(new) is type(value):
                    continue
                else:
                    outcome = "changed"
            try:
                if new is REMOVE:
                    codec.remove_field(ev, name)
                else:
                    codec.set_field(ev, name, new)
            except FieldError:
                return "field_policy_failed", self._label(name)
            self.counts[(self._label(name), outcome)] += 1
        return None

    def _set_roles(self, ev: Event) -> None:
        """The value policies of role fields, on the event's role values (an unreadable value becomes None)."""
        for role, name, policy in self._roles:
            value = getattr(ev, role)
            if _empty(value):
                continue
            new = self._transform(policy, value)
            if new is UNREADABLE:
                new, outcome = None, "unreadable_removed"
            elif new == value:
                continue
            else:
                outcome = "changed"
            setattr(ev, role, new)
            self.counts[(name, outcome)] += 1

    def _transform(self, policy: FieldPolicy, value: Any) -> Any:
        """The new value of a field under a value policy (REMOVE, UNREADABLE, or the value)."""
        kind = policy.policy
        if kind == "drop":
            return REMOVE
        if kind == "hash":
            return hash_value(self._hash_key, value, policy.length)
        if not isinstance(value, str):
            return UNREADABLE
        memo = self._memo.setdefault(policy, {})  # a log repeats its agents and addresses: one look-up each
        out = memo.get(value)
        if out is None:
            if kind == "user_agent":
                out = generalise(value)
            elif kind == "ip_prefix":
                out = ip_prefix(value, policy.ipv4_prefix, policy.ipv6_prefix) or ""
            else:
                assert kind == "ip_encrypt" and self._ip is not None
                out = self._ip.encrypt(value) or ""
            if len(memo) >= MEMO_SIZE:
                memo.clear()
            memo[value] = out
        return out or UNREADABLE  # "" here: not addresses (an empty value never comes here)

    def _run_filters(self, later: dict[str, list[tuple[Event, str]]]) -> dict[int, str]:
        """Run the url/scrub fields through their filters (one proxy event per field value, the value in the
        role the filter reads); write the results back. The events whose write failed, by id, with the field."""
        failed: dict[int, str] = {}
        for policy, items in later.items():
            filt, role = self._filters[policy]
            proxies = []
            for ev, name in items:
                assert ev.codec is not None
                proxy = Event("", "")
                setattr(proxy, role, ev.codec.get_field(ev, name))
                proxies.append(proxy)
            filt.process(list(proxies))  # both filters edit in place and drop nothing (hipaa_scrub: emptied keep)
            for (ev, name), proxy in zip(items, proxies, strict=True):
                assert ev.codec is not None
                value, new = ev.codec.get_field(ev, name), getattr(proxy, role)
                if new == value:
                    continue
                try:
                    if _empty(new) or (type(new) is str and new.isspace()):  # emptied: the format's placeholder
                        ev.codec.remove_field(ev, name)
                    else:
                        ev.codec.set_field(ev, name, new)
                except FieldError:
                    failed[id(ev)] = self._label(name)
                    continue
                self.counts[(self._label(name), "changed")] += 1
        return failed

    # ---- refusals and counts -----------------------------------------------------------------------
    def _dead_letter(
        self,
        events: list[Event],
        refused: list[tuple[int, str, str]],
        batch: RecordBatch,
        bad: Sequence[tuple[int, str]],
        reasons: Counter[str],
    ) -> None:
        skip = {i for i, _ in bad}
        index = [i for i in range(len(batch.records)) if i not in skip]  # event i came from record index[i]
        for i, reason, name in sorted(refused):
            ev = events[i]
            record = index[i] if i < len(index) else None
            pos = batch.positions[record] if batch.positions is not None and record is not None else None
            raw = batch.records[record] if record is not None else None
            kept = raw if isinstance(raw, str | bytes) else record_bytes(ev)
            self.dead.add(reason, batch.origin, pos, kept, field=name)
            reasons[reason] += 1

    def _label(self, name: str) -> str:
        """A field's name as counted: itself when it looks like a name and fewer than MAX_NAMES are counted."""
        if name in self._names or name in self.policies:
            return name
        if NAME.fullmatch(name) and len(self._names) < MAX_NAMES:
            self._names.add(name)
            return name
        return "_other"

    def stats(self) -> dict[str, dict[str, int]]:
        """Counts by field name and outcome (never a value)."""
        out: dict[str, dict[str, int]] = {}
        with self._lock:
            counts = list(self.counts.items())
        for (name, outcome), n in counts:
            out.setdefault(name, {})[outcome] = n
        return out


def field_policies(config: LoadedConfig, ctx: BuildContext, dead: DeadLetters) -> FieldPolicies | None:
    """The runtime's field policies (None: nothing to do); a problem (a missing key) is located at ``schema.*``."""
    try:
        return FieldPolicies.build(config.sidecar.schema, ctx, dead)
    except ConfigValueError as exc:
        key = f"schema.{exc.key}"
        raise ConfigError(str(config.file), config.doc.line(key), key, exc.problem, exc.allowed) from None


def _empty(value: Any) -> bool:
    """True for a value with nothing to hide (see :data:`EMPTY`)."""
    return value is None or (type(value) is str and value in EMPTY)
