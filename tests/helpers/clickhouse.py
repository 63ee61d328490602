"""A real ClickHouse server for the tests: ``clickhouse-server --config-file=F`` on loopback with its data in a
temporary folder (the Debian package ``clickhouse-server`` 18.16; ``./run setup`` installs it)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from helpers.waiting import wait_until

BINARY = shutil.which("clickhouse-server") or "/usr/sbin/clickhouse-server"
PACKAGED_USERS = Path("/etc/clickhouse-server/users.xml")
#: A second user, with a password, for the authentication tests (a test value, not a secret).
USER, PASSWORD = "sidecar", "test-password-not-secret"

CONFIG = """<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>{dir}/log/server.log</log><errorlog>{dir}/log/error.log</errorlog>
    <size>10M</size><count>1</count><console>0</console></logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>{http_port}</http_port>
  <tcp_port>{tcp_port}</tcp_port>
  <path>{dir}/data/</path>
  <tmp_path>{dir}/tmp/</tmp_path>
  <user_files_path>{dir}/user_files/</user_files_path>
  <format_schema_path>{dir}/format_schemas/</format_schema_path>
  <users_config>{dir}/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <timezone>UTC</timezone>
  <mark_cache_size>67108864</mark_cache_size>
  <max_concurrent_queries>50</max_concurrent_queries>
  <keep_alive_timeout>1</keep_alive_timeout>
</yandex>
"""

EXTRA_USER = f"""
        <{USER}>
            <password>{PASSWORD}</password>
            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
        </{USER}>
    </users>"""


def free_port() -> int:
    """A port free now, for ClickHouse's config. The one pick-then-bind left in the tests, on purpose:
    clickhouse-server takes its ports from config.xml and reports none it bound (port 0 would leave the test no
    way to reach it), and a restart (``stop``/``start``) must come back on the same ports."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def available() -> str | None:
    """None when the server can run here, else why not."""
    if not os.access(BINARY, os.X_OK):
        return f"{BINARY} is not installed (Debian package clickhouse-server; `./run setup` installs it)"
    if not PACKAGED_USERS.is_file():
        return f"{PACKAGED_USERS} is missing (Debian package clickhouse-server)"
    return None


class ClickHouse:
    """One server process; ``stop``/``start`` restart it on the same ports and data."""

    def __init__(self, folder: Path) -> None:
        self.dir = folder
        self.http_port = free_port()
        self.tcp_port = free_port()
        for sub in ("log", "data", "tmp", "user_files", "format_schemas"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        users = PACKAGED_USERS.read_text(encoding="utf-8").replace("</users>", EXTRA_USER, 1)
        (folder / "users.xml").write_text(users, encoding="utf-8")
        self.config = folder / "config.xml"
        self.config.write_text(
            CONFIG.format(dir=folder, http_port=self.http_port, tcp_port=self.tcp_port), encoding="utf-8"
        )
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def start(self, timeout: float = 120.0) -> None:
        """Start the server and wait until it answers ``/ping`` (at once a failure when it exits first)."""
        out = (self.dir / "log" / "stdout.log").open("ab")
        proc = self.proc = subprocess.Popen(
            [BINARY, f"--config-file={self.config}"], stdout=out, stderr=subprocess.STDOUT, cwd=self.dir
        )
        out.close()

        def exited() -> str | None:
            if proc.poll() is None:
                return None
            log = (self.dir / "log" / "stdout.log").read_text(errors="replace")[-2000:]
            return f"clickhouse-server exited with {proc.returncode}: {log}"

        wait_until(self._pings, what="clickhouse-server to answer /ping", timeout=timeout, interval=0.05, abort=exited)

    def _pings(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/ping", timeout=1) as resp:
                return bool(resp.read() == b"Ok.\n")
        except OSError:
            return False

    @contextlib.contextmanager
    def down(self) -> Iterator[None]:
        """The server stopped for the block and started again after it, whatever the block raised."""
        self.stop()
        try:
            yield
        finally:
            self.start()

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.proc = None

    def query(self, sql: str, **settings: Any) -> str:
        """Run ``sql``; the answer's text (an error raises with ClickHouse's message: test data only)."""
        query = f"?{urllib.parse.urlencode(settings)}" if settings else ""
        req = urllib.request.Request(f"{self.url}/{query}", data=sql.encode("utf-8"), method="POST")
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return str(resp.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"ClickHouse: {exc.read().decode(errors='replace')}") from None

    def rows(self, sql: str) -> list[dict[str, Any]]:
        """``sql`` (without FORMAT) as JSONEachRow rows (64-bit integers as numbers)."""
        text = self.query(f"{sql} FORMAT JSONEachRow", output_format_json_quote_64bit_integers=0)
        return [json.loads(line) for line in text.split("\n") if line.strip()]

    def columns(self, table: str) -> dict[str, str]:
        return {r["name"]: r["type"] for r in self.rows(f"DESCRIBE TABLE {table}")}
