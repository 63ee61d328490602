"""kill -9 of `querylog serve` between two real forward peers loses no acknowledged event (issue 12, Numbers).

Peers nobody here wrote: npm ``@fluent-org/logger``'s ``FluentClient`` (PackedForward, ``requireAckResponse``
acks, its own event retries and reconnects) sends N uniquely numbered events to `querylog serve` (forward
source → the default chain of config/default.yaml → forward sink with ``require_ack``), whose sink delivers
into the same package's ``FluentServer``, which records every entry it receives. The sidecar is killed with
SIGKILL at a random point of the stream (seeded), restarted on the same state folder and port (the port it bound
at the first start, read from its ``listening`` log event), and the
client's retries finish. Then every event the client saw acknowledged must have reached the FluentServer at
least once (from the outbox before the kill, or resent from it after the restart); duplicates are counted and
printed. Skipped only where node/npm are absent (the package is installed into tests/.npm-cache).
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import sqlite3
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import QUERYLOG, ROOT, TEST_KEY
from helpers.forward import fluent_logger_node, node_env
from helpers.kb import kb_file
from helpers.serving import listening_ports
from helpers.waiting import exited, wait_until

from sidecar.state import DB_NAME

EVENTS = 100_000
#: The kill points and outages are drawn from this seed (set QUERYLOG_KILL9_SEED to try others).
SEED = int(os.environ.get("QUERYLOG_KILL9_SEED", "12"))
KILLS = 2

# FluentClient with acks and its own retries: emits events in rounds, at most WINDOW unsettled at a time; prints
# {"acked": n} as acknowledgements come in, {"errors": n} on each connection error, and at the end writes the
# acknowledged and failed seqs to spec.out.
CLIENT_JS = r"""
"use strict";
const fs = require("fs");
const { FluentClient, EventTime } = require("@fluent-org/logger");
const spec = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const WORDS = spec.words;

function record(seq) {
  const w = (k) => WORDS[(seq * 7 + k * 13) % WORDS.length];
  return {
    AnonID: String(1000 + (seq % 5000)),
    Query: `${w(1)} ${w(2)} ${w(3)}`,
    QueryTime: "2006-03-01 07:17:12",
    ItemRank: seq % 3 ? String(1 + (seq % 10)) : "",
    ClickURL: seq % 3 ? `http://www.example${seq % 97}.com/path/page?id=${seq}` : "",
    seq,
  };
}

async function main() {
  const client = new FluentClient("app", {
    eventMode: "PackedForward",
    socket: {
      host: "127.0.0.1", port: spec.port, timeout: -1,
      reconnect: { delay: 100, backoff: 1.5, maxDelay: 500 },
    },
    ack: { ackTimeout: spec.ackTimeout },
    eventRetry: { attempts: spec.attempts, delay: 100, backoff: 2, maxDelay: 1000, onError: () => {} },
    flushInterval: 0,
    disconnect: { waitForPending: true, waitForPendingDelay: 60000 },
  });
  let errors = 0;  // connection errors (refused while the sidecar is down), reported as {"errors": n}
  client.socketOn("error", () => {
    errors += 1;
    process.stdout.write(JSON.stringify({ errors }) + "\n");
  });
  const acked = [];
  const failed = [];
  let pending = 0;
  let reported = 0;
  let wake = null;
  const settled = () => {
    pending -= 1;
    if (wake !== null) {
      const w = wake;
      wake = null;
      w();
    }
  };
  const settle = () => new Promise((r) => { wake = r; });
  for (let start = 0; start < spec.events; start += spec.batch) {
    while (pending > spec.window - spec.batch) await settle();
    const end = Math.min(spec.events, start + spec.batch);
    for (let seq = start; seq < end; seq++) {
      pending += 1;
      client.emit("search", record(seq), new EventTime(1141196400 + seq, 0)).then(
        () => {
          acked.push(seq);
          if (acked.length - reported >= spec.report) {
            reported = acked.length;
            process.stdout.write(JSON.stringify({ acked: acked.length }) + "\n");
          }
          settled();
        },
        () => { failed.push(seq); settled(); },
      );
    }
    await new Promise((r) => setImmediate(r));
  }
  while (pending > 0) await settle();
  fs.writeFileSync(spec.out, JSON.stringify({ acked, failed }));
  await client.disconnect();
  process.stdout.write(JSON.stringify({ done: true, acked: acked.length, failed: failed.length }) + "\n");
  process.exit(0);
}

main().catch((e) => {
  process.stdout.write(JSON.stringify({ crashed: String(e && e.stack) }) + "\n");
  process.exit(2);
});
"""

# FluentServer (handshake-free, acks every chunk): prints {"port": N}, then one line [seq, AnonID, ClickURL] per entry.
SERVER_JS = r"""
"use strict";
const { FluentServer } = require("@fluent-org/logger");
async function main() {
  const server = new FluentServer({ listenOptions: { host: "127.0.0.1", port: 0 } });
  server.on("entry", (tag, time, record) => {
    process.stdout.write(JSON.stringify([record.seq, record.AnonID, record.ClickURL, tag]) + "\n");
  });
  await server.listen();
  process.stdout.write(JSON.stringify({ port: server.port }) + "\n");
  process.stdin.on("end", async () => { await server.close(); process.exit(0); });
  process.stdin.resume();
}
main();
"""

WORDS = ["weather", "cheap", "flights", "lyrics", "recipes", "used", "cars", "hotels", "maps", "news", "jobs",
         "pizza", "scores", "garden", "tickets", "movies", "school", "music", "games", "football"]  # fmt: skip


@pytest.fixture(scope="module")
def fluent_node() -> Path:
    """node_modules/@fluent-org/logger, installed once into tests/.npm-cache (as the forward interop tests do)."""
    return fluent_logger_node("to drive @fluent-org/logger's FluentClient and FluentServer")


def _default_chain() -> list[Any]:
    """config/default.yaml's filters, classify on the session's KB."""
    filters: list[Any] = yaml.safe_load((ROOT / "config" / "default.yaml").read_text(encoding="utf-8"))["filters"]
    for f in filters:
        if "classify" in f:
            f["classify"] = {**(f["classify"] or {}), "kb_path": str(kb_file()), "rebuild": False}
    return filters


class Lines:
    """A process's stdout lines, parsed as JSON, collected in ``items`` by a thread."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.items: list[Any] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.items.append(json.loads(line))


def _stalled(progress: Callable[[], int], stall: float) -> Callable[[], str | None]:
    """An ``abort`` for :func:`wait_until`: gives up once ``progress()`` has stood still for ``stall`` seconds (a
    slow machine takes longer but keeps moving: no fixed deadline for the whole stream)."""
    last, moved = progress(), time.monotonic()

    def check() -> str | None:
        nonlocal last, moved
        now = progress()
        if now != last:
            last, moved = now, time.monotonic()
        elif time.monotonic() - moved > stall:
            return f"no progress for {stall:g} s (at {now})"
        return None

    return check


def _wait_moving(cond: Callable[[], object], progress: Callable[[], int], what: str, stall: float = 60.0) -> None:
    """Until ``cond()``; fails once ``progress()`` has stood still for ``stall`` seconds."""
    wait_until(cond, what=what, timeout=math.inf, abort=_stalled(progress, stall))


def _outbox_events(state: Path) -> int:
    """Events in the forward sink's outbox (undelivered, to be sent after the restart), read while it is down."""
    db = sqlite3.connect(state / DB_NAME)
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE name LIKE 'outbox_%'")]
        return sum(int(db.execute(f"SELECT COALESCE(SUM(events), 0) FROM {t}").fetchone()[0]) for t in tables)
    finally:
        db.close()


def _listening_ports(log: Path) -> list[int]:
    """The ports of every ``listening`` event in serve's JSON log so far (one per start)."""
    return listening_ports(log.read_text(encoding="utf-8", errors="replace").splitlines())


def _serve(config: Path, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    """Start serve (its JSON log appended to ``log``); once it logged ``listening``: the process and its port."""
    env = dict(os.environ, QUERYLOG_HMAC_KEY=TEST_KEY)
    started = len(_listening_ports(log)) if log.exists() else 0
    with log.open("ab") as err:
        proc = subprocess.Popen([QUERYLOG, "serve", "--config", str(config)], env=env, stderr=err)
    ports = wait_until(
        lambda: (found := _listening_ports(log))[started:] and found,
        what="serve's listening event",
        abort=exited(proc),
    )
    return proc, ports[started]


@pytest.mark.slow
def test_every_acknowledged_event_reaches_fluent_server_across_kill9(fluent_node: Path, tmp_path: Path) -> None:
    """FluentClient (acks, retries) → serve (default chain, forward sink with require_ack) → FluentServer; the
    sidecar is SIGKILLed at KILLS random points (seeded) and restarted on the same state and port: every event the
    client saw acknowledged arrives at the FluentServer at least once; duplicates are counted."""
    rng = random.Random(SEED)
    env = node_env(fluent_node)
    (tmp_path / "server.js").write_text(SERVER_JS, encoding="utf-8")
    (tmp_path / "client.js").write_text(CLIENT_JS, encoding="utf-8")
    server = subprocess.Popen(
        ["node", str(tmp_path / "server.js")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    sidecar: subprocess.Popen[bytes] | None = None
    client: subprocess.Popen[str] | None = None
    try:
        downstream = Lines(server)
        wait_until(lambda: downstream.items, what="FluentServer's port", abort=exited(server))
        server_port = int(downstream.items.pop(0)["port"])

        config = tmp_path / "sidecar.yaml"
        sink = {"address": f"127.0.0.1:{server_port}", "require_ack": True, "ack_timeout_seconds": 5,
                "retry_initial_seconds": 0.05, "retry_max_seconds": 0.5}  # fmt: skip
        body = {
            "state_dir": "state",
            "logging": {"level": "info", "format": "json"},  # info: the listening event names the bound port
            "sources": [{"forward": {"listen": "127.0.0.1:0"}}],
            "filters": _default_chain(),
            "sinks": [{"forward": sink}],
        }
        config.write_text(yaml.safe_dump(body, sort_keys=False), encoding="utf-8")
        sidecar, port = _serve(config, tmp_path / "sidecar.err")
        body["sources"] = [{"forward": {"listen": f"127.0.0.1:{port}"}}]  # restarts: the port the client knows
        config.write_text(yaml.safe_dump(body, sort_keys=False), encoding="utf-8")

        out = tmp_path / "client-result.json"
        spec = {"port": port, "events": EVENTS, "batch": 500, "window": 5000, "ackTimeout": 5000, "attempts": 100,
                "report": 500, "out": str(out), "words": WORDS}  # fmt: skip
        (tmp_path / "client.json").write_text(json.dumps(spec), encoding="utf-8")
        client = subprocess.Popen(
            ["node", str(tmp_path / "client.js"), str(tmp_path / "client.json")],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        progress = Lines(client)

        def acked_so_far() -> int:
            return max((int(x.get("acked", 0)) for x in progress.items if "done" not in x), default=0)

        def errors_so_far() -> int:
            return max((int(x.get("errors", 0)) for x in list(progress.items)), default=0)

        in_outbox: list[int] = []
        kill_points = sorted(int(EVENTS * rng.uniform(0.15, 0.85)) for _ in range(KILLS))
        for point in kill_points:
            _wait_moving(
                lambda p=point: acked_so_far() >= p or client.poll() is not None,
                acked_so_far,
                what=f"{point} acknowledgements (no acknowledgement for 60 s fails)",
            )
            assert client.poll() is None, f"the client ended before the kill at {point}: {progress.items[-1:]}"
            sidecar.send_signal(signal.SIGKILL)
            sidecar.wait()
            in_outbox.append(_outbox_events(tmp_path / "state"))
            # down for a while: until the client was refused a random 1-4 more times (it reconnects and retries)
            refused = errors_so_far() + rng.randint(1, 4)
            wait_until(lambda r=refused: errors_so_far() >= r, what=f"the client's connection error {refused}")
            sidecar, _ = _serve(config, tmp_path / "sidecar.err")

        _wait_moving(lambda: client.poll() is not None, acked_so_far, what="the client to end (it stalled for 60 s)")
        assert client.wait() == 0, progress.items[-3:]
        result = json.loads(out.read_text(encoding="utf-8"))
        acked = set(result["acked"])

        def delivered() -> Counter[int]:
            return Counter(int(item[0]) for item in list(downstream.items))

        def all_arrived() -> bool:  # the cheap count first: the set of 100,000 ids only once it can hold
            return len(downstream.items) >= len(acked) and acked <= set(delivered())

        _wait_moving(
            all_arrived,
            lambda: len(downstream.items),
            what="every acknowledged event downstream (nothing arrived for 30 s fails)",
            stall=30,
        )
        sidecar.send_signal(signal.SIGTERM)
        assert sidecar.wait(timeout=60) == 0
        sidecar = None
        assert server.stdin is not None
        server.stdin.close()  # FluentServer closes and exits: the reader has every line it printed
        server.wait(60)
        downstream.thread.join(60)
        assert not downstream.thread.is_alive()
        got = delivered()
        missing = sorted(acked - set(got))
        duplicates = sum(n - 1 for n in got.values())
        print(
            f"kill -9 at {kill_points} acknowledged events (outbox then held {in_outbox} events); "
            f"sent={EVENTS} acknowledged={len(acked)} "
            f"failed={len(result['failed'])} delivered={sum(got.values())} distinct={len(got)} "
            f"duplicates={duplicates} lost={len(missing)}"
        )
        assert missing == [], f"{len(missing)} acknowledged events never reached the FluentServer"
        assert len(acked) > kill_points[-1]
        # the default chain ran on what arrived: user ids pseudonymized, clicked URLs cut to scheme + host
        sample = [item for item in downstream.items[:2000] if item[2]]
        assert sample and all("/path" not in item[2] for item in sample)
        assert all(item[3] == "app.search" for item in downstream.items[:2000])
        assert all(not (1000 <= int(item[1]) < 6000) for item in downstream.items[:2000])
    finally:
        for proc in (client, sidecar):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
        if server.stdin is not None:
            server.stdin.close()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
