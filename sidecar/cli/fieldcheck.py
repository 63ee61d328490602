"""``check-config --sample FILE``: the fields of sample records that ``schema.fields`` gives no policy."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import click

from sidecar.api import BuildContext, SchemaConfig
from sidecar.codecs import format_from_path

#: Records of the sample read (the first ones).
SAMPLE_RECORDS = 1000


def unpolicied_fields(schema: SchemaConfig, ctx: BuildContext, path: Path) -> tuple[Counter[str], int]:
    """Non-role fields of the sample's records without a policy, with the number of records carrying each, and
    the number of records read. Raises :class:`click.UsageError` for a sample that cannot be read."""
    fmt = schema.format if schema.format != "auto" else (format_from_path(str(path)) or "tsv")
    codec = ctx.codec_for(fmt)
    if codec is None:
        raise click.UsageError(f"--sample: no codec for format {fmt}")
    try:
        with path.open("r", encoding="utf-8", newline="") as f:
            lines = [line.rstrip("\n") for _, line in zip(range(SAMPLE_RECORDS + 1), f, strict=False)]
    except (OSError, UnicodeDecodeError) as exc:
        raise click.UsageError(f"--sample: cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if fmt == "tsv" and schema.header and lines:
        codec.accept_header(lines.pop(0))
    events = codec.decode_many([ln for ln in lines[:SAMPLE_RECORDS] if ln], "\n", [])
    declared = set(schema.fields or {})
    missing: Counter[str] = Counter()
    for ev in events:
        missing.update(name for name in codec.fields(ev) if name not in declared)
    return missing, len(events)


def report_sample(schema: SchemaConfig, ctx: BuildContext, sample: str) -> bool:
    """Print the sample's fields without a policy (stderr); True when ``unlisted: error`` would dead-letter their
    records (check-config then fails)."""
    missing, read = unpolicied_fields(schema, ctx, Path(sample))
    outcome = {
        "keep": "kept as they are (unlisted: keep)",
        "drop": "removed (unlisted: drop)",
        "error": "dead-lettered as undeclared_field (unlisted: error)",
    }[schema.unlisted]
    for name, n in sorted(missing.items()):
        click.echo(
            f"{sample}: field {name!r} has no policy in schema.fields ({n} of {read} records): {outcome}", err=True
        )
    return bool(missing) and schema.unlisted == "error"
