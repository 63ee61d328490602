"""YAML loading with line numbers, and validation of config dataclasses.

Errors read ``FILE:LINE: KEY: problem (allowed: ...)`` so an operator can jump
to the line. Values from the file are never echoed for keys that may hold
secrets; for other keys the offending value is shown (it is configuration, not
a query or a user id).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import os
import re
import types
import typing
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml

from sidecar.api import ConfigValueError, Listen


class ConfigError(Exception):
    """A located configuration error; ``str()`` is the operator-facing message."""

    def __init__(self, file: str, line: int | None, key: str, problem: str, allowed: Sequence[Any] | None = None):
        self.file, self.line, self.key, self.problem, self.allowed = file, line, key, problem, allowed
        where = f"{file}:{line}" if line else file
        msg = f"{where}: {key}: {problem}" if key else f"{where}: {problem}"
        if allowed:
            msg += f" (allowed: {', '.join(str(a) for a in allowed)})"
        super().__init__(msg)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled with its fields (a Dask worker's error reaches the driver as itself, not a TypeError)."""
        return (ConfigError, (self.file, self.line, self.key, self.problem, self.allowed))


class ConfigErrors(ConfigError):
    """Several located errors found in one pass, reported together in file order (one per line of ``str()``);
    attributes ``file``/``line``/``key``/``problem`` are those of the first."""

    def __init__(self, errors: Sequence[ConfigError]):
        flat: list[ConfigError] = []
        for e in errors:
            flat.extend(e.errors if isinstance(e, ConfigErrors) else (e,))
        flat.sort(key=lambda e: e.line or 0)
        first = flat[0]
        super().__init__(first.file, first.line, first.key, first.problem, first.allowed)
        self.errors: tuple[ConfigError, ...] = tuple(flat)
        self.args = ("\n".join(str(e) for e in flat),)

    def __reduce__(self) -> tuple[Any, ...]:
        return (ConfigErrors, (self.errors,))


class ErrorCollector:
    """Collects located errors so validation goes on after the first: ``with errors.guard(): ...`` per part,
    then :meth:`raise_any`."""

    def __init__(self) -> None:
        self.errors: list[ConfigError] = []

    @contextmanager
    def guard(self) -> Iterator[None]:
        try:
            yield
        except ConfigError as exc:
            self.errors.append(exc)

    def raise_any(self) -> None:
        """Raise what was collected: the error itself when there is one, :class:`ConfigErrors` for several."""
        if len(self.errors) == 1:
            raise self.errors[0]
        if self.errors:
            raise ConfigErrors(self.errors)


class Located:
    """A loaded YAML document plus the line of every key path (``a.b[2].c``)."""

    def __init__(self, file: str, data: Any, lines: dict[str, int]):
        self.file, self.data, self.lines = file, data, lines

    def line(self, path: str) -> int | None:
        while path:
            if path in self.lines:
                return self.lines[path]
            cut = max(path.rfind("."), path.rfind("["))
            if cut <= 0:
                break
            path = path[:cut]
        return self.lines.get(path)

    def error(self, path: str, problem: str, allowed: Sequence[Any] | None = None) -> ConfigError:
        return ConfigError(self.file, self.line(path), path, problem, allowed)


def _construct(node: yaml.Node, path: str, lines: dict[str, int], loader: yaml.SafeLoader) -> Any:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = str(loader.construct_object(key_node))
            sub = f"{path}.{key}" if path else key
            lines[sub] = key_node.start_mark.line + 1
            if key in out:
                raise ConfigError("", key_node.start_mark.line + 1, sub, "duplicate key")
            out[key] = _construct(value_node, sub, lines, loader)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_construct(item, f"{path}[{i}]", lines, loader) for i, item in enumerate(node.value)]
    return loader.construct_object(node)


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def interpolate(text: str, file: str) -> str:
    """``${VAR}`` and ``${VAR:-default}`` replaced from the environment before the YAML is parsed (as Vector
    and Fluent Bit do), so a value keeps its YAML type; ``$${`` is a literal ``${`` and comment lines are left
    alone. An unset variable without a default, or a value with a line break, is an error naming the
    variable and the line (never the value)."""
    if "${" not in text:
        return text
    out = []
    for number, line in enumerate(text.split("\n"), start=1):
        if "${" in line and not line.lstrip().startswith("#"):
            line = "${".join(_VAR.sub(functools.partial(_lookup, file=file, line=number), p) for p in line.split("$${"))
        out.append(line)
    return "\n".join(out)


def _lookup(m: re.Match[str], *, file: str, line: int) -> str:
    name, default = m.group(1), m.group(2)
    found = os.environ.get(name)
    if found is None or (found == "" and default is not None):
        if default is None:
            raise ConfigError(file, line, "", f"environment variable {name} is not set (or give ${{{name}:-default}})")
        found = default
    if "\n" in found or "\r" in found:
        raise ConfigError(file, line, "", f"environment variable {name} holds a line break")
    return found


def load_yaml(path: Path | str, text: str | None = None) -> Located:
    """Parse a YAML file, keeping the line of every key."""
    file = str(path)
    if text is None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(file, None, "", f"cannot read config: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise ConfigError(file, None, "", "config is not valid UTF-8") from None
    text = interpolate(text, file)
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        lines: dict[str, int] = {}
        data = {} if node is None else _construct(node, "", lines, loader)
    except ConfigError as exc:
        raise ConfigError(file, exc.line, exc.key, exc.problem) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise ConfigError(file, line, "", f"invalid YAML: {getattr(exc, 'problem', None) or exc}") from None
    finally:
        loader.dispose()
    return Located(file, data, lines)


# --- dataclass validation -------------------------------------------------------------


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``", did you mean X?"`` for the closest of ``choices`` to a mistyped ``word``; empty when none is close."""
    close = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.75)
    return f", did you mean {close[0]}?" if close else ""


def _is_dataclass(obj: Any) -> bool:
    """``dataclasses.is_dataclass`` without its narrowing to ``DataclassInstance | type[DataclassInstance]``:
    the hints and defaults examined here stay ``Any``, as the loader treats them."""
    return dataclasses.is_dataclass(obj)


def _type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(map(str, get_args(tp)))
    if origin in (tuple, Sequence):
        return f"list of {_type_name(get_args(tp)[0])}"
    if origin in (dict, Mapping):
        return "mapping"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in get_args(tp) if a is not type(None))
    if _is_dataclass(tp):
        return "mapping"
    return {str: "string", int: "integer", float: "number", bool: "boolean"}.get(tp, getattr(tp, "__name__", str(tp)))


def _takes_mapping(tp: Any) -> bool:
    """True for an option type written as a YAML mapping (a dataclass, a mapping)."""
    return _is_dataclass(tp) or get_origin(tp) in (dict, Mapping)


def _convert(tp: Any, value: Any, key: str, doc: Located, path: str) -> Any:
    origin = get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = get_args(tp)
        if value is None and type(None) in args:
            return None
        failed: list[tuple[Any, ConfigError]] = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(arg, value, key, doc, path)
            except ConfigError as exc:
                failed.append((arg, exc))
        # a mapping given for a union with one mapping type (`name | {policy: ..., options}`): that type's error
        shaped = [exc for arg, exc in failed if _takes_mapping(arg) == isinstance(value, dict)]
        if len(failed) == 1 or len(shaped) == 1:
            raise (failed[0][1] if len(failed) == 1 else shaped[0])
        raise doc.error(path, f"must be {_type_name(tp)}")
    if origin is Literal:
        allowed = get_args(tp)
        if value not in allowed:
            raise doc.error(path, f"unknown value {value!r}", allowed)
        return value
    if origin in (tuple, Sequence):
        if not isinstance(value, list):
            raise doc.error(path, f"must be a list of {_type_name(get_args(tp)[0])}")
        (item_tp, *_rest) = get_args(tp)
        errors = ErrorCollector()
        items = []
        for i, v in enumerate(value):
            with errors.guard():
                items.append(_convert(item_tp, v, key, doc, f"{path}[{i}]"))
        errors.raise_any()
        return tuple(items)
    if origin in (dict, Mapping):
        if not isinstance(value, dict):
            raise doc.error(path, "must be a mapping")
        _, vt = get_args(tp)
        errors = ErrorCollector()
        converted = {}
        for k, v in value.items():
            with errors.guard():
                converted[k] = _convert(vt, v, key, doc, f"{path}.{k}")
        errors.raise_any()
        return types.MappingProxyType(converted)
    if _is_dataclass(tp):
        return build_config(tp, value, doc, path)
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise doc.error(path, f"must be true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise doc.error(path, f"must be an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise doc.error(path, f"must be a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise doc.error(path, f"must be a string, got {value!r}")
        return value
    raise doc.error(path, f"unsupported option type {tp!r}")


def _check(meta: Mapping[str, Any], value: Any, doc: Located, path: str) -> None:
    if value is None:
        return
    if "choices" in meta and value not in meta["choices"]:
        raise doc.error(path, f"unknown value {value!r}", meta["choices"])
    if "min" in meta and value < meta["min"]:
        raise doc.error(path, f"must be >= {meta['min']}, got {value!r}")
    if "max" in meta and value > meta["max"]:
        raise doc.error(path, f"must be <= {meta['max']}, got {value!r}")
    if "gt" in meta and value <= meta["gt"]:
        raise doc.error(path, f"must be > {meta['gt']}, got {value!r}")
    if meta.get("listen"):
        try:
            Listen.parse(value)
        except ConfigValueError as exc:
            raise doc.error(path, exc.problem) from None


def build_config(cls: type[Any], data: Any, doc: Located, path: str) -> Any:
    """Build the frozen dataclass ``cls`` from ``data``, or raise a located ConfigError (:class:`ConfigErrors`
    when several keys are wrong: every one is reported, not only the first)."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise doc.error(path, "must be a mapping")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    errors = ErrorCollector()
    for key in (k for k in data if k not in fields):
        sub = f"{path}.{key}" if path else key
        errors.errors.append(doc.error(sub, "unknown key" + did_you_mean(key, fields), sorted(fields)))
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        sub = f"{path}.{name}" if path else name
        with errors.guard():
            if name not in data:
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    raise doc.error(sub, "required key is missing")
                continue
            value = _convert(hints[name], data[name], name, doc, sub)
            _check(f.metadata, value, doc, sub)
            kwargs[name] = value
    errors.raise_any()
    try:
        return cls(**kwargs)
    except ConfigValueError as exc:
        sub = f"{path}.{exc.key}" if path else exc.key
        raise doc.error(sub, exc.problem, exc.allowed) from None


def describe_config(cls: type[Any]) -> list[dict[str, Any]]:
    """The documentation of a config dataclass: one dict per option (for docs and `filters`)."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        default: Any
        if _is_dataclass(f.default):
            default = "(see nested options)"
        elif f.default is not dataclasses.MISSING:
            default = (
                [dataclasses.asdict(d) if _is_dataclass(d) else d for d in f.default]
                if isinstance(f.default, tuple)
                else f.default
            )
        elif f.default_factory is not dataclasses.MISSING:
            default = "(see nested options)"
        else:
            default = None
        entry: dict[str, Any] = {
            "key": f.name,
            "type": _type_name(hints[f.name]),
            "default": default,
            "required": f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
            "doc": f.metadata.get("doc", ""),
        }
        if "choices" in f.metadata:
            entry["allowed"] = list(f.metadata["choices"])
        tp = hints[f.name]
        if get_origin(tp) in (tuple, Sequence) and _is_dataclass(get_args(tp)[0]):
            tp = get_args(tp)[0]
            entry["key"] = f"{f.name}[]"
        if _is_dataclass(tp):
            entry["options"] = describe_config(tp)
        out.append(entry)
    return out
