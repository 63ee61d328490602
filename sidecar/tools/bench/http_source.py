"""``querylog bench http``: events/s through the http source (NDJSON POST) -> chain -> file sink.

The sidecar (``querylog serve``, its own process) has an ``http`` source and a ``file`` sink (JSON lines). The
client POSTs NDJSON bodies of ``--batch`` records on ``--concurrency`` keep-alive connections; a 200 is the
sidecar's acknowledgement (the lines are in the file by then, so the file is the downstream: its lines are
counted once every body was answered). See :mod:`sidecar.tools.bench.network` for what is printed.
"""

from __future__ import annotations

import http.client
import json
from pathlib import Path

import click

from sidecar.tools.bench.common import run_clients
from sidecar.tools.bench.network import CHAINS, IO_TIMEOUT, Run, aol_records, print_run, sidecar, temp_folder


def bodies(records: list[dict[str, str]], batch: int) -> list[tuple[bytes, int]]:
    """NDJSON bodies of ``batch`` records each, and how many records each holds."""
    out = []
    for start in range(0, len(records), batch):
        part = records[start : start + batch]
        text = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in part)
        out.append((text.encode("utf-8"), len(part)))
    return out


class _Poster:
    """POSTs its share of the bodies on one keep-alive connection; counts the events of bodies answered 200."""

    def __init__(self, port: int, share: list[tuple[bytes, int]]) -> None:
        self.port = port
        self.share = share
        self.acked = 0
        self.errors: set[str] = set()

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=IO_TIMEOUT)
        headers = {"Content-Type": "application/x-ndjson"}
        try:
            for body, n in self.share:
                conn.request("POST", "/", body=body, headers=headers)
                response = conn.getresponse()
                response.read()
                if response.status == 200:
                    self.acked += n
                else:
                    self.errors.add(f"HTTP {response.status}")
        except (OSError, http.client.HTTPException) as exc:
            self.errors.add(type(exc).__name__)
        finally:
            conn.close()


def run_once(events: int, batch: int, chain: str, seed: int, concurrency: int) -> Run:
    payloads = bodies(aol_records(events, seed), batch)
    total = sum(n for _, n in payloads)
    with temp_folder() as tmp:
        out = Path(tmp) / "out.jsonl"
        sink = {"file": {"path": str(out), "format": "jsonl"}}
        with sidecar(Path(tmp), chain, {"http": {}}, [sink]) as sc:
            posters = [_Poster(sc.port, payloads[i::concurrency]) for i in range(concurrency)]
            return run_clients(posters, out, sc, total, batch, "in the file before each 200")


@click.command("http")
@click.option("--events", default=200_000, show_default=True, help="Events to send.")
@click.option("--batch", default=1000, show_default=True, help="Records per POST body.")
@click.option("--chain", type=click.Choice(CHAINS), default="passthrough", show_default=True, help="Filters to run.")
@click.option("--seed", default=1, show_default=True, help="Seed of the generated records.")
@click.option("--concurrency", default=4, show_default=True, type=click.IntRange(1, 64), help="Client connections.")
def COMMAND(events: int, batch: int, chain: str, seed: int, concurrency: int) -> None:
    """Events/s through http source (NDJSON POST, 200 once durable) -> chain -> file sink, sidecar in its own
    process."""
    run = run_once(events, batch, chain, seed, concurrency)
    print_run(f"http -> {chain} -> file ({concurrency} connections)", run)
