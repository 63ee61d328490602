"""A process that archives numbered records into S3 for the kill -9 test: prints ``acked <n>`` once ``receive``
returned for the first n records (durable: what a source would acknowledge), forever, until it is killed.

Usage: python s3_writer.py FOLDER ENDPOINT BUCKET (credentials in QUERYLOG_TEST_S3_KEY / _SECRET)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from conftest import add_sink, pipeline

from sidecar.api import RecordBatch
from sidecar.codecs import codec_for

HEADER = "AnonID\tQuery\tQueryTime\tItemRank\tClickURL"


def main() -> None:
    folder, url, bucket = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    pipe = pipeline(folder)
    add_sink(pipe, url, bucket, max_object_bytes=4096)
    codec = codec_for(replace(pipe.config.sidecar.schema, format="tsv"), None)
    codec.accept_header(HEADER)
    n = 0
    while True:
        lines = [f"{i % 11}\tkill test record {i}\t2006-03-01 07:00:00\t\t" for i in range(n, n + 50)]
        pipe.receive(RecordBatch(lines, codec, "kill", last_eol="\n"))
        n += len(lines)
        print(f"acked {n}", flush=True)


if __name__ == "__main__":
    main()
