"""Entry-point group names: components register under these, built-ins included."""

from __future__ import annotations

FILTERS = "querylog.filters"
"""Filter classes, by the name used in the YAML chain."""
SOURCES = "querylog.sources"
"""Source classes (the gRPC service is the source ``grpc``; files are ``file``)."""
SINKS = "querylog.sinks"
"""Sink classes."""
CODECS = "querylog.codecs"
"""Codec classes of record formats that are not configured text (e.g. ``proto``, ``forward``), by ``Codec.format``;
built with no argument, or with ``schema=`` (the configured :class:`SchemaConfig`) when the constructor takes it."""
COMMANDS = "querylog.commands"
"""click commands (or groups) added to the ``querylog`` command line."""
