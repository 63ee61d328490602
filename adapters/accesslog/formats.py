"""Access-log format strings -> a layout: literal text and named variables, in order.

Two syntaxes. nginx ``log_format``: ``$name`` or ``${name}`` (names of letters, digits and ``_``), everything else
literal. Apache ``LogFormat``: ``%`` directives (``%h``, ``%>s``, ``%{Referer}i``; status-conditional forms such
as ``%400,501{User-agent}i`` are read as the plain directive), ``%%`` a percent sign, ``\\"`` a quote as in the
Apache config file. Apache directives are named as nginx names the same value, so roles read the same in both:
``%h`` is ``remote_addr`` (the client address with ``HostnameLookups Off``, Apache's default), ``%t`` is
``[`` ``time_local`` ``]``, ``%{Name}i`` is ``http_name`` (lower case, ``-`` as ``_``), ``%{Name}C`` is
``cookie_Name``. See :data:`APACHE_NAMES` for the rest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["APACHE_BUILTIN", "APACHE_NAMES", "NGINX_BUILTIN", "FormatError", "Layout", "apache_layout", "nginx_layout"]

NGINX_BUILTIN = {
    "combined": '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
    '"$http_referer" "$http_user_agent"',
}
"""nginx's predefined formats (``combined`` is the only one)."""

APACHE_BUILTIN = {
    "common": '%h %l %u %t "%r" %>s %b',
    "combined": '%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-agent}i"',
}
"""The formats of Apache's default configuration (``LogFormat ... common`` / ``combined``)."""

APACHE_NAMES = {
    "a": "client_addr",
    "A": "server_addr",
    "b": "body_bytes_sent",
    "B": "body_bytes_sent",
    "D": "request_time_us",
    "f": "request_filename",
    "h": "remote_addr",
    "H": "server_protocol",
    "I": "request_length",
    "k": "keepalive_requests",
    "l": "remote_logname",
    "L": "log_id",
    "m": "request_method",
    "O": "bytes_sent",
    "p": "server_port",
    "P": "pid",
    "q": "query_string",
    "r": "request",
    "R": "handler",
    "s": "status",
    "S": "bytes_transferred",
    "T": "request_time",
    "u": "remote_user",
    "U": "uri",
    "v": "server_name",
    "V": "host",
    "X": "connection_status",
}
"""Apache directives without an argument, by the name their value goes by (nginx's where nginx has one)."""

_APACHE_ARG = {"i": "http_", "o": "sent_http_", "C": "cookie_", "e": "env_", "n": "note_"}
_APACHE_DIRECTIVE = re.compile(r"%(?:[<>]?)(?:!?\d{3}(?:,\d{3})*)?(?:\{([^}]*)\})?([<>]?)([a-zA-Z%])")
_NGINX_VAR = re.compile(r"\$(?:\{([A-Za-z0-9_]+)\}|([A-Za-z0-9_]+))")


class FormatError(ValueError):
    """A format string that cannot describe a log line; ``position`` is the 1-based character of the problem."""

    def __init__(self, problem: str, position: int) -> None:
        super().__init__(f"{problem} (character {position})")
        self.position = position


@dataclass(frozen=True)
class Layout:
    """A format as alternating parts: ``literals[0] var[0] literals[1] var[1] ... literals[n]``."""

    #: the text before, between and after the variables (one more than ``variables``)
    literals: tuple[str, ...]
    #: the variable of each slot, in line order (a name may occur twice: the same value both times)
    variables: tuple[str, ...]
    #: ``nginx`` or ``apache``: how values are escaped in the line
    dialect: str

    @property
    def names(self) -> tuple[str, ...]:
        """Each variable once, in order of first occurrence."""
        return tuple(dict.fromkeys(self.variables))


def nginx_layout(text: str) -> Layout:
    """The layout of an nginx ``log_format`` string (or the name of a built-in one)."""
    text = NGINX_BUILTIN.get(text, text)
    literals: list[str] = []
    variables: list[str] = []
    positions: list[int] = []
    pos = 0
    for m in _NGINX_VAR.finditer(text):
        literals.append(text[pos : m.start()])
        variables.append(m.group(1) or m.group(2))
        positions.append(m.start() + 1)
        pos = m.end()
    if "${" in text[pos:]:
        raise FormatError("an unclosed ${", text.index("${", pos) + 1)
    literals.append(text[pos:])
    return _checked(literals, variables, positions, "nginx")


def apache_layout(text: str) -> Layout:
    """The layout of an Apache ``LogFormat`` string (or ``common``/``combined``)."""
    text = APACHE_BUILTIN.get(text, text)
    literals: list[str] = []
    variables: list[str] = []
    positions: list[int] = []
    buf: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            buf.append({"n": "\n", "t": "\t"}.get(text[i + 1], text[i + 1]))
            i += 2
            continue
        if c != "%":
            buf.append(c)
            i += 1
            continue
        m = _APACHE_DIRECTIVE.match(text, i)
        if m is None:
            raise FormatError("a % directive that Apache's LogFormat does not define", i + 1)
        arg, _, letter = m.groups()
        if letter == "%":
            buf.append("%")
        elif letter == "t" and arg is None:  # [10/Oct/2000:13:55:36 -0700], as nginx's [$time_local]
            literals.append("".join(buf) + "[")
            variables.append("time_local")
            positions.append(i + 1)
            buf = ["]"]
        else:
            literals.append("".join(buf))
            variables.append(_apache_name(letter, arg, i + 1))
            positions.append(i + 1)
            buf = []
        i = m.end()
    literals.append("".join(buf))
    return _checked(literals, variables, positions, "apache")


def _apache_name(letter: str, arg: str | None, position: int) -> str:
    if arg is None:
        if letter not in APACHE_NAMES:
            raise FormatError(
                f"the directive %{letter} is not supported (supported: {''.join(APACHE_NAMES)})", position
            )
        return APACHE_NAMES[letter]
    if letter in _APACHE_ARG and arg:
        name = arg.lower().replace("-", "_") if letter in "io" else arg
        return _APACHE_ARG[letter] + re.sub(r"\W", "_", name)
    if letter == "a" and arg == "c":
        return "peer_addr"
    if letter == "p" and arg in ("canonical", "local", "remote"):
        return {"canonical": "server_port", "local": "local_port", "remote": "remote_port"}[arg]
    raise FormatError(f"the directive %{{{arg}}}{letter} is not supported", position)


def _checked(literals: list[str], variables: list[str], positions: list[int], dialect: str) -> Layout:
    if not variables:
        raise FormatError("the format has no variable", 1)
    for i in range(1, len(variables)):
        if literals[i] == "":
            raise FormatError(
                f"{variables[i - 1]} and {variables[i]} are adjacent: a line cannot be split between them",
                positions[i],
            )
    return Layout(tuple(literals), tuple(variables), dialect)
