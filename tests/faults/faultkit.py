"""Tools of the fault-injection tests: small tmpfs mounts, a `querylog serve` subprocess, an Ingest client
that keeps what was acknowledged, and readers for what a run left behind (output, held events, integrity).

Nothing here prints or logs a record value: the tests report counts only.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from helpers import QUERYLOG, WaitTimeout, exited, wait_until
from helpers.serving import bound_ports

from adapters.grpc.client import channel, wait_serving
from adapters.grpc.codec import EventBatch, QueryEvent
from adapters.grpc.stubs.querylog.v1.querylog_pb2_grpc import QueryLogFilterStub
from filters.category_buffer.store import unpack_event
from sidecar.codecs import SchemaConfig
from sidecar.pipeline import codec_lookup

MiB = 1 << 20


# --- a small file system that fills up ------------------------------------------------------------


class MountRefused(Exception):
    """A tmpfs cannot be mounted here (not root, no CAP_SYS_ADMIN, no `mount`)."""


class Tmpfs:
    """A tmpfs of a given size mounted on ``path``; :meth:`fill` leaves only a few bytes free."""

    def __init__(self, path: Path, size: int) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        if shutil.which("mount") is None:
            raise MountRefused("no `mount` command")
        run = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
            capture_output=True,
            text=True,
        )
        if run.returncode != 0:
            raise MountRefused(run.stderr.strip() or f"mount exited {run.returncode}")
        self.filler = path / "filler.bin"

    def free(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def resize(self, size: int) -> None:
        """Grow (or shrink) the file system in place: what is on it stays."""
        subprocess.run(["mount", "-o", f"remount,size={size}", str(self.path)], check=True, capture_output=True)

    def fill(self, leave: int) -> None:
        """Write a filler file so that only about ``leave`` bytes stay free."""
        with open(self.filler, "ab") as fh:
            while self.free() > leave:
                try:
                    fh.write(b"\0" * min(self.free() - leave, MiB))
                    fh.flush()
                except OSError:
                    break

    def unfill(self) -> None:
        """Free the space the filler took (what an operator does: delete something)."""
        self.filler.unlink(missing_ok=True)

    def unmount(self) -> None:
        """Unmount; a process that used the file system may still be exiting (busy): retry a while, then detach
        it lazily."""

        def unmounted() -> bool:
            return subprocess.run(["umount", str(self.path)], capture_output=True).returncode == 0

        try:
            wait_until(unmounted, what=f"{self.path} to unmount", timeout=5, interval=0.1)
        except WaitTimeout:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True)


# --- `querylog serve` in a subprocess -------------------------------------------------------------


#: Numbers each serve's stderr file (``serve-N.err``): the port is known only once the process bound it.
_STARTS = itertools.count(1)


class Serve:
    """`querylog serve --config CONFIG --listen 127.0.0.1:0`; stderr goes to a file. The fault configs log at
    warning, which hides serve's ``listening`` event: the port is the one the process listens on
    (:func:`helpers.serving.bound_ports`), known once it started (``wait``)."""

    def __init__(self, config: Path, *extra: str, wait: bool = True) -> None:
        self.port = 0
        self.address = ""
        self._chan: grpc.Channel | None = None
        self.err_path = config.with_name(f"serve-{next(_STARTS)}.err")
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(
                [QUERYLOG, "serve", "--config", str(config), "--listen", "127.0.0.1:0", *extra],
                stdout=subprocess.DEVNULL,
                stderr=err,
                cwd=config.parent,
            )
        if wait:
            self._wait_serving(120)

    @property
    def chan(self) -> grpc.Channel:
        assert self._chan is not None, "the sidecar is not serving (Serve(..., wait=False))"
        return self._chan

    @property
    def stub(self) -> QueryLogFilterStub:
        return QueryLogFilterStub(self.chan)

    def _close_channel(self) -> None:
        if self._chan is not None:
            self._chan.close()

    def _wait_serving(self, timeout: float) -> None:
        """Until the process listens and its health service says SERVING; fails at once if the process exits
        first (a start-up error used to cost the whole timeout), else after ``timeout`` seconds (generous: a slow
        machine still starts)."""
        try:
            (self.port,) = wait_until(
                lambda: bound_ports(self.proc.pid),
                what="the sidecar to listen",
                timeout=timeout,
                abort=exited(self.proc),
            )
            self.address = f"127.0.0.1:{self.port}"
            chan = self._chan = channel(self.address)
            wait_until(
                lambda: wait_serving(chan, 1),
                what="the sidecar to serve",
                timeout=timeout,
                interval=0,  # wait_serving itself waits up to a second
                abort=exited(self.proc),
            )
        except WaitTimeout:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            raise AssertionError(
                f"the sidecar did not start (exit {self.proc.returncode}): {self.stderr()[-2000:]}"
            ) from None

    def stderr(self) -> str:
        return self.err_path.read_text(encoding="utf-8", errors="replace")

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM and wait: the exit status."""
        self._close_channel()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def wait(self, timeout: float = 60) -> int:
        """Wait for the process to end by itself (a start-up failure): the exit status."""
        self._close_channel()
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise


@contextlib.contextmanager
def serving(config: Path, *extra: str) -> Iterator[Serve]:
    """A running sidecar, killed if the block fails before stopping it."""
    serve = Serve(config, *extra)
    try:
        yield serve
    finally:
        if serve.proc.poll() is None:
            serve.proc.kill()
            serve.proc.wait()


# --- an Ingest client that keeps what was acknowledged --------------------------------------------


@dataclass
class Refusal:
    """An Ingest RPC that got no OK: its status and details (the server's words, never a record value)."""

    code: grpc.StatusCode
    details: str


@dataclass
class Ingester:
    """Sends Ingest RPCs of uniquely numbered events (id and category in ``attributes``)."""

    stub: QueryLogFilterStub
    rng: random.Random = field(default_factory=lambda: random.Random(11))
    next_id: int = 0
    padding: int = 100
    categories: tuple[str, ...] = ("Arts", "Sports", "Health", "News")
    acked: list[str] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)

    def _batch(self, ids: list[str]) -> EventBatch:
        batch = EventBatch()
        for i in ids:
            batch.events.append(
                QueryEvent(
                    user=f"user-{self.rng.randrange(10**12):032d}",
                    query=f"query {i} " + "x" * self.padding,
                    attributes={"id": i, "cat": self.rng.choice(self.categories)},
                )
            )
        return batch

    def rpc(self, batches: int = 3, per_batch: int = 40) -> bool:
        """One Ingest RPC; True when it was acknowledged (then its events count as acknowledged)."""
        ids = [str(self.next_id + j) for j in range(batches * per_batch)]
        self.next_id += len(ids)
        requests = [self._batch(ids[k : k + per_batch]) for k in range(0, len(ids), per_batch)]
        try:
            self.stub.Ingest(iter(requests), timeout=30)
        except grpc.RpcError as exc:
            self.refused.append(Refusal(exc.code(), exc.details() or ""))
            return False
        self.acked.extend(ids)
        return True


# --- what a run left behind -----------------------------------------------------------------------


def integrity(db: Path) -> str:
    """``PRAGMA integrity_check`` of a state database, read-only ("ok" when sound)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute("PRAGMA integrity_check").fetchall()
    finally:
        conn.close()
    return "; ".join(str(r[0]) for r in rows)


def held_ids(db: Path, key: str = "id") -> Counter[str]:
    """Ids of the events whose query half category_buffer still holds (read-only)."""
    lookup = codec_lookup(SchemaConfig())
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT query_bucket, event FROM category_buffer_held").fetchall()
    finally:
        conn.close()
    ids: Counter[str] = Counter()
    for query_bucket, blob in rows:
        if query_bucket is None:
            continue  # only the user half is held: the query left (it is in the output)
        ev, _ = unpack_event(blob, lambda fmt: lookup(fmt) if fmt else None)
        record = ev.record
        value = record.attributes[key] if isinstance(record, QueryEvent) else record[key]
        ids[str(value)] += 1
    return ids


@dataclass
class JsonlOutput:
    """The ids in a JSON-lines output file, and the lines that are not a whole JSON object (glued, cut)."""

    ids: Counter[str]
    broken: int
    ends_mid_line: bool

    @classmethod
    def read(cls, path: Path, key: str = "id") -> JsonlOutput:
        data = path.read_bytes() if path.exists() else b""
        ids: Counter[str] = Counter()
        broken = 0
        for line in data.split(b"\n"):
            if not line:
                continue
            try:
                obj = json.loads(line)
                ids[str(obj[key])] += 1
            except (ValueError, KeyError, TypeError):
                broken += 1
        return cls(ids, broken, bool(data) and not data.endswith(b"\n"))


def non_json_lines(stderr: str) -> list[str]:
    """The lines of a command's stderr that are not structured log lines (its messages to the operator)."""
    out = []
    for line in stderr.splitlines():
        if not line.strip():
            continue
        with contextlib.suppress(ValueError):
            if isinstance(json.loads(line), dict):
                continue
        out.append(line)
    return out
