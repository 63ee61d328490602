from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class QueryEvent(_message.Message):
    __slots__ = ("user", "query", "time", "rank", "url", "attributes", "seq")
    class AttributesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    USER_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    user: str
    query: str
    time: str
    rank: str
    url: str
    attributes: _containers.ScalarMap[str, str]
    seq: int
    def __init__(self, user: _Optional[str] = ..., query: _Optional[str] = ..., time: _Optional[str] = ..., rank: _Optional[str] = ..., url: _Optional[str] = ..., attributes: _Optional[_Mapping[str, str]] = ..., seq: _Optional[int] = ...) -> None: ...

class EventBatch(_message.Message):
    __slots__ = ("events", "batch_id")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[QueryEvent]
    batch_id: str
    def __init__(self, events: _Optional[_Iterable[_Union[QueryEvent, _Mapping]]] = ..., batch_id: _Optional[str] = ...) -> None: ...

class IngestResponse(_message.Message):
    __slots__ = ("accepted", "delivered", "held", "dropped", "dead_lettered")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    DELIVERED_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTERED_FIELD_NUMBER: _ClassVar[int]
    accepted: int
    delivered: int
    held: int
    dropped: int
    dead_lettered: int
    def __init__(self, accepted: _Optional[int] = ..., delivered: _Optional[int] = ..., held: _Optional[int] = ..., dropped: _Optional[int] = ..., dead_lettered: _Optional[int] = ...) -> None: ...

class ProfileRequest(_message.Message):
    __slots__ = ("user",)
    USER_FIELD_NUMBER: _ClassVar[int]
    user: str
    def __init__(self, user: _Optional[str] = ...) -> None: ...

class ProfileResponse(_message.Message):
    __slots__ = ("user", "counts", "weights", "total")
    class CountsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class WeightsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    USER_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    user: str
    counts: _containers.ScalarMap[str, int]
    weights: _containers.ScalarMap[str, float]
    total: int
    def __init__(self, user: _Optional[str] = ..., counts: _Optional[_Mapping[str, int]] = ..., weights: _Optional[_Mapping[str, float]] = ..., total: _Optional[int] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class FilterStats(_message.Message):
    __slots__ = ("name", "events_in", "events_out", "held", "counts", "extra")
    class CountsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    EVENTS_IN_FIELD_NUMBER: _ClassVar[int]
    EVENTS_OUT_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    EXTRA_FIELD_NUMBER: _ClassVar[int]
    name: str
    events_in: int
    events_out: int
    held: int
    counts: _containers.ScalarMap[str, int]
    extra: _struct_pb2.Struct
    def __init__(self, name: _Optional[str] = ..., events_in: _Optional[int] = ..., events_out: _Optional[int] = ..., held: _Optional[int] = ..., counts: _Optional[_Mapping[str, int]] = ..., extra: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class StatsResponse(_message.Message):
    __slots__ = ("events_in", "events_out", "events_held", "events_dropped", "events_dead_lettered", "dead_letters", "filters", "uptime_seconds", "rpcs_refused")
    class DeadLettersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class RpcsRefusedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    EVENTS_IN_FIELD_NUMBER: _ClassVar[int]
    EVENTS_OUT_FIELD_NUMBER: _ClassVar[int]
    EVENTS_HELD_FIELD_NUMBER: _ClassVar[int]
    EVENTS_DROPPED_FIELD_NUMBER: _ClassVar[int]
    EVENTS_DEAD_LETTERED_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTERS_FIELD_NUMBER: _ClassVar[int]
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    UPTIME_SECONDS_FIELD_NUMBER: _ClassVar[int]
    RPCS_REFUSED_FIELD_NUMBER: _ClassVar[int]
    events_in: int
    events_out: int
    events_held: int
    events_dropped: int
    events_dead_lettered: int
    dead_letters: _containers.ScalarMap[str, int]
    filters: _containers.RepeatedCompositeFieldContainer[FilterStats]
    uptime_seconds: float
    rpcs_refused: _containers.ScalarMap[str, int]
    def __init__(self, events_in: _Optional[int] = ..., events_out: _Optional[int] = ..., events_held: _Optional[int] = ..., events_dropped: _Optional[int] = ..., events_dead_lettered: _Optional[int] = ..., dead_letters: _Optional[_Mapping[str, int]] = ..., filters: _Optional[_Iterable[_Union[FilterStats, _Mapping]]] = ..., uptime_seconds: _Optional[float] = ..., rpcs_refused: _Optional[_Mapping[str, int]] = ...) -> None: ...
