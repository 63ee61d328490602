import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ValueNull(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NULL_VALUE: _ClassVar[ValueNull]
NULL_VALUE: ValueNull

class EventWrapper(_message.Message):
    __slots__ = ("log", "metric", "trace")
    LOG_FIELD_NUMBER: _ClassVar[int]
    METRIC_FIELD_NUMBER: _ClassVar[int]
    TRACE_FIELD_NUMBER: _ClassVar[int]
    log: Log
    metric: Metric
    trace: Trace
    def __init__(self, log: _Optional[_Union[Log, _Mapping]] = ..., metric: _Optional[_Union[Metric, _Mapping]] = ..., trace: _Optional[_Union[Trace, _Mapping]] = ...) -> None: ...

class Log(_message.Message):
    __slots__ = ("fields", "value", "metadata", "metadata_full")
    class FieldsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    METADATA_FULL_FIELD_NUMBER: _ClassVar[int]
    fields: _containers.MessageMap[str, Value]
    value: Value
    metadata: Value
    metadata_full: Metadata
    def __init__(self, fields: _Optional[_Mapping[str, Value]] = ..., value: _Optional[_Union[Value, _Mapping]] = ..., metadata: _Optional[_Union[Value, _Mapping]] = ..., metadata_full: _Optional[_Union[Metadata, _Mapping]] = ...) -> None: ...

class Metadata(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Metric(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Trace(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Value(_message.Message):
    __slots__ = ("raw_bytes", "timestamp", "integer", "float", "boolean", "map", "array", "null")
    RAW_BYTES_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    INTEGER_FIELD_NUMBER: _ClassVar[int]
    FLOAT_FIELD_NUMBER: _ClassVar[int]
    BOOLEAN_FIELD_NUMBER: _ClassVar[int]
    MAP_FIELD_NUMBER: _ClassVar[int]
    ARRAY_FIELD_NUMBER: _ClassVar[int]
    NULL_FIELD_NUMBER: _ClassVar[int]
    raw_bytes: bytes
    timestamp: _timestamp_pb2.Timestamp
    integer: int
    float: float
    boolean: bool
    map: ValueMap
    array: ValueArray
    null: ValueNull
    def __init__(self, raw_bytes: _Optional[bytes] = ..., timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., integer: _Optional[int] = ..., float: _Optional[float] = ..., boolean: _Optional[bool] = ..., map: _Optional[_Union[ValueMap, _Mapping]] = ..., array: _Optional[_Union[ValueArray, _Mapping]] = ..., null: _Optional[_Union[ValueNull, str]] = ...) -> None: ...

class ValueMap(_message.Message):
    __slots__ = ("fields",)
    class FieldsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    fields: _containers.MessageMap[str, Value]
    def __init__(self, fields: _Optional[_Mapping[str, Value]] = ...) -> None: ...

class ValueArray(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[Value]
    def __init__(self, items: _Optional[_Iterable[_Union[Value, _Mapping]]] = ...) -> None: ...
