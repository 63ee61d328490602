"""The ``file`` source: a log file (TSV or JSON lines, plain or gzip; ``-`` is stdin) into the runtime."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Literal

from adapters.file.reader import open_log
from sidecar.api import BuildContext, RecordBatch, Runtime, Source, SourceConfig, option
from sidecar.codecs import SchemaConfig


@dataclass(frozen=True)
class FileSourceConfig(SourceConfig):
    """Read a log file once, from start to end."""

    path: str = option(doc="Input path (relative to the config file); .gz is read compressed; `-` is stdin.")
    format: Literal["auto", "tsv", "jsonl"] = option("auto", "Record format; auto: the schema's, else by extension.")
    batch_size: int = option(1000, "Records per batch.", min=1, max=100_000)
    max_record_bytes: int = option(65536, "Longer records are dead-lettered.", min=16)


class FileSource(Source[FileSourceConfig]):
    """Reads a file in batches; each batch is delivered (``runtime.receive``) before the next is read."""

    NAME = "file"
    Config = FileSourceConfig
    SUMMARY = "read a log file or stdin (TSV/JSONL, .gz) once, batch by batch"
    FINITE = True

    def __init__(self, config: FileSourceConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        path = config.path
        if path != "-" and not os.path.isabs(path):
            path = str(ctx.config_dir / path)
        self.path = path
        self._stopped = False
        self.records = 0

    def start(self, runtime: Runtime) -> None:
        """Read the whole input; returns at its end or after :meth:`stop`."""
        schema: SchemaConfig = self.ctx.schema or SchemaConfig()
        if self.config.format != "auto":
            schema = dataclasses.replace(schema, format=self.config.format)
        log_in = open_log(
            self.path,
            schema,
            runtime.dead_letters,
            self.config.max_record_bytes,
            self.config.batch_size,
            stop=lambda: self._stopped,
        )
        codec, batches = log_in.codec, log_in.batches
        for batch in batches:
            positions = [batch.line_number(i) for i in range(len(batch.lines))]
            runtime.receive(RecordBatch(batch.lines, codec, self.path, positions, batch.last_eol))
            self.records += len(batch.lines)
            if self._stopped:
                break
        runtime.dead_letters.flush()  # lines the reader dead-lettered after the last batch (a bad last line)

    def stop(self, grace: float | None = None) -> None:
        self._stopped = True
