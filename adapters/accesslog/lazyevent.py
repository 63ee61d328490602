"""An access-log event that is split into its values only when something reads them.

A passthrough, or a chain that reads no role, never needs a line's values: the codec checks the line against its
format when it decodes it (a line that does not match is a dead letter there and then) and keeps the match.
:class:`LazyEvent` holds that match in the ``record`` slot; reading or setting any role or the record makes the
codec fill every slot (:meth:`~adapters.accesslog.codec.AccessLogCodec.materialize`), after which the event is a
plain :class:`~sidecar.api.Event` (its class is switched: the slots are the same), so later reads cost what they
cost on any event. An event nobody touched is written back as its line by
:meth:`~adapters.accesslog.codec.AccessLogCodec.encode`, without being split.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, cast

from sidecar.api import NO_META, Event

if TYPE_CHECKING:
    from adapters.accesslog.codec import AccessLogCodec

__all__ = ["LazyEvent", "lazy_event"]

_RECORD_SLOT = cast(Any, Event.__dict__["record"])


def _lazy(name: str) -> Any:
    def get(self: LazyEvent) -> Any:
        self.codec_of().materialize(self)
        return getattr(self, name)

    def put(self: LazyEvent, value: Any) -> None:
        self.codec_of().materialize(self)
        setattr(self, name, value)

    return property(get, put, doc=f"The event's {name} (the line is split when it is first read or set).")


class LazyEvent(Event):
    """An event of an access-log line not split yet; see the module documentation. ``LazyEvent()`` is an empty
    event (no ``__init__`` of its own: one call less a line) whose slots the codec fills (:func:`lazy_event`)."""

    __slots__ = ()  # no slot of its own: materialize() switches the class to Event

    if TYPE_CHECKING:

        def __init__(self) -> None: ...

        @property
        def match(self) -> re.Match[str]:
            """The match of the event's line (without its ``\\r``), while the event is lazy."""

        @match.setter
        def match(self, value: re.Match[str]) -> None: ...

    else:
        __init__ = object.__init__
        #: the ``record`` slot under a name the properties below do not cover: read and set as a plain slot
        match = _RECORD_SLOT

    def codec_of(self) -> AccessLogCodec:
        """The codec that decoded the event (the one that can split it)."""
        return cast("AccessLogCodec", self.codec)

    user = _lazy("user")
    query = _lazy("query")
    time = _lazy("time")
    rank = _lazy("rank")
    url = _lazy("url")
    record = _lazy("record")


def lazy_event(raw: str, match: re.Match[str], codec: AccessLogCodec, eol: str) -> LazyEvent:
    """The lazy event of line ``raw`` (``match``: its fast pattern's match, without its ``\\r``)."""
    ev = LazyEvent()
    ev.raw = raw
    ev.match = match
    ev.codec = codec
    ev.eol = eol
    ev.meta = NO_META
    return ev
