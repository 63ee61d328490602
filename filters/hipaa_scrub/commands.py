"""``querylog scrub``: HIPAA-scrub lines of text from stdin to stdout, one line out per line in."""

from __future__ import annotations

import json
import sys
from collections import Counter
from typing import Any

import click


def _scrub_config(config_file: str | None) -> Any:
    """The ``hipaa_scrub`` options of a config file's chain (its first hipaa_scrub), or the defaults."""
    from filters.hipaa_scrub import HipaaScrubConfig

    if config_file is None:
        return HipaaScrubConfig()
    from sidecar.commandkit import load

    cfg = load(config_file)
    for spec in cfg.filters:
        if spec.name == "hipaa_scrub":
            return spec.config
    click.echo(f"{config_file}: no hipaa_scrub filter in its chain", err=True)
    sys.exit(2)


def _keys(config: Any, config_file: str | None, needed: bool) -> Any:
    """The operator keys of the config's secret (None when no policy needs them and ``needed`` is false)."""
    from pathlib import Path

    from filters.hipaa_scrub import operator_keys
    from filters.hipaa_scrub.operators import OperatorKeys
    from sidecar.api import BuildContext, ConfigValueError

    ctx = BuildContext(config_dir=Path(config_file).parent if config_file else Path("."))
    try:
        if needed:
            if config.key_env is None and config.key_file is None:
                raise ConfigValueError("key_env", "--decrypt needs a config whose hipaa_scrub has key_env or key_file")
            return OperatorKeys.derive(
                ctx.secret(config.key_env, config.key_file, "hipaa_scrub secret"), config.operator_key_id()
            )
        return operator_keys(config, ctx)
    except (ConfigValueError, ValueError) as exc:
        click.echo(f"{config_file or 'scrub'}: {exc}", err=True)
        sys.exit(2)


def _decrypt(keys: Any) -> None:
    """Copy stdin to stdout with the encryption tokens of ``keys`` opened; the count on stderr."""
    from filters.hipaa_scrub.operators import decrypt_tokens

    opened = 0
    out = sys.stdout.buffer
    for raw in sys.stdin.buffer:
        text, n = decrypt_tokens(keys, raw.decode("utf-8", errors="surrogateescape"))
        opened += n
        out.write(text.encode("utf-8", errors="surrogateescape"))
    out.flush()
    click.echo(json.dumps({"decrypted_tokens": opened}), err=True)


@click.command("scrub")
@click.option(
    "--config",
    "-c",
    "config_file",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="Config file whose hipaa_scrub filter gives the policies (default: built-in policies).",
)
@click.option("--stats/--no-stats", default=False, help="Print per-type counts (JSON, never values) on stderr.")
@click.option(
    "--explain",
    is_flag=True,
    help="Write one JSON object per input line instead of the scrubbed line: the scrubbed text and, per "
    "finding, its type, span (character offsets, never the value), detector and policy. To stdout only; "
    "nothing of it is logged.",
)
@click.option(
    "--decrypt",
    is_flag=True,
    help="Instead of scrubbing, write each line with the encryption tokens of the config's secret (the encrypt "
    "policy) replaced by their values: for key holders investigating abuse. Needs --config.",
)
def scrub(config_file: str | None, stats: bool, explain: bool, decrypt: bool) -> None:
    """Scrub HIPAA identifiers from each line of stdin; write one scrubbed line per input line."""
    from filters.hipaa_scrub.scrubber import Scrubber
    from sidecar.logs import configure_logging

    configure_logging("warning", "json")
    config = _scrub_config(config_file)
    keys = _keys(config, config_file, decrypt)
    if decrypt:
        _decrypt(keys)
        return
    scrubber = Scrubber(config, keys=keys)
    totals: Counter[str] = Counter()
    lines = changed = bad = 0
    out = sys.stdout.buffer
    for raw in sys.stdin.buffer:
        lines += 1
        body = raw[:-1] if raw.endswith(b"\n") else raw
        eol = "\n" if raw.endswith(b"\n") else ""
        if body.endswith(b"\r"):
            body, eol = body[:-1], "\r" + eol
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            bad += 1
            text = body.decode("utf-8", errors="replace")
        new, counts = scrubber.scrub(text)
        totals.update(counts)
        changed += new != text
        if explain:
            explained, findings = scrubber.explain(text)
            record = {"line": lines, "scrubbed": explained, "findings": findings}
            out.write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8", errors="surrogateescape"))
            continue
        out.write((new + eol).encode("utf-8", errors="surrogateescape"))
    out.flush()
    if stats:
        summary = {"lines": lines, "changed": changed, "bad_utf8": bad, "found": dict(sorted(totals.items()))}
        click.echo(json.dumps(summary), err=True)
