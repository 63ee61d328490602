"""CLI commands that live in their own modules; each module exposes ``COMMANDS``.

Adding a command: write ``sidecar/commands/<name>.py`` with a ``COMMANDS`` list
of click commands and add the module name to ``MODULES``.
"""

from __future__ import annotations

import importlib

import click

MODULES: tuple[str, ...] = ("docs", "generate", "grpc", "demo", "profiles", "audit", "kb", "scrub")
"""Command modules (their COMMANDS lists are added to `querylog`)."""


def all_commands() -> list[click.Command]:
    out: list[click.Command] = []
    for name in MODULES:
        out.extend(importlib.import_module(f"sidecar.commands.{name}").COMMANDS)
    return out
