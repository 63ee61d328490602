"""`querylog serve` reloads on SIGHUP (issue 26 item 2): the chain is swapped between batches keeping what the state
store holds, a refused config leaves the running chain serving (counted), file sinks reopen their file (logrotate's
move + HUP), and SIGHUP never ends the process.

Each test runs serve in a subprocess with an ``http`` source on port 0 and a JSON-lines file sink; a client thread
posts bodies of new records (each its own user, query text and ``id``) and keeps the ids of the acknowledged ones.
Nothing here prints a record value.
"""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from faults.faultkit import JsonlOutput, held_ids
from helpers import QUERYLOG, cli_env, exited, wait_until
from helpers.httptest import lines, post
from helpers.serving import ServeLog, events

from sidecar.api import RecordBatch
from sidecar.config import load_config
from sidecar.pipeline import Pipeline

BODY = 10
CATEGORIES = 3


def _config(path: Path, filters: list[dict[str, Any]], **top: Any) -> Path:
    cfg = {
        "state_dir": "state",
        "logging": {"level": "info", "format": "json"},  # the listening events name the bound ports
        "metrics_listen": "127.0.0.1:0",
        "flush_interval_seconds": 0.2,
        "sources": [{"http": {"listen": "127.0.0.1:0"}}],
        "filters": filters,
        "sinks": [{"file": {"path": "out.jsonl", "format": "jsonl"}}],
        **top,
    }
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return path


def _buffer(k: int) -> list[dict[str, Any]]:
    return [{"category_buffer": {"k": k, "category_field": "cat", "time": "query"}}]


class Client(threading.Thread):
    """Posts bodies of BODY new records until stopped or refused; ``acked``: the ids of bodies answered 200 with
    every record taken."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.sent = 0
        self.acked: list[str] = []
        self.refused: list[str] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            records = [
                {"id": f"e{n}", "AnonID": f"user-{n}", "Query": f"query number {n}", "cat": f"c{n % CATEGORIES}"}
                for n in range(self.sent, self.sent + BODY)
            ]
            self.sent += BODY
            try:
                answer = post(self.port, lines(*records))
            except (OSError, http.client.HTTPException) as exc:
                self.refused.append(type(exc).__name__)
                return
            if answer.status != 200 or answer.body.get("accepted") != BODY:
                self.refused.append(str(answer.status))
                return
            self.acked.extend(r["id"] for r in records)

    def more(self, count: int, proc: subprocess.Popen[str]) -> None:
        """Wait until ``count`` more records were acknowledged."""
        target = len(self.acked) + count
        wait_until(lambda: len(self.acked) >= target or self.refused, what=f"{count} more records", abort=exited(proc))
        assert not self.refused, self.refused

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=60)


class Served:
    """serve in a subprocess; its http and metrics ports read from its log."""

    def __init__(self, config: Path, env: dict[str, str] | None = None) -> None:
        self.config = config
        self.proc = subprocess.Popen(
            [QUERYLOG, "serve", "-c", str(config)], stderr=subprocess.PIPE, text=True, cwd=config.parent, env=env
        )
        self.log = ServeLog(self.proc)
        (self.port,) = self.log.ports("http")
        self.metrics_port = self.log.metrics_port()

    def hup(self, outcome: str, count: int = 1) -> dict[str, Any]:
        """SIGHUP; wait for the ``count``-th reload log event ``outcome`` (config_reloaded, config_reload_refused)."""
        self.proc.send_signal(signal.SIGHUP)
        return wait_until(
            lambda: (found := events(self.log.snapshot(), outcome)) and len(found) >= count and found[count - 1],
            what=f"serve to log {outcome}",
            abort=exited(self.proc),
        )

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as answer:
            return str(answer.read().decode())

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGTERM)
        text = self.log.text()
        assert self.proc.returncode == 0, text[-3000:]
        return text


@pytest.fixture
def served(tmp_path: Path) -> Any:
    started: list[Served] = []

    def start(config: Path, env: dict[str, str] | None = None) -> Served:
        started.append(Served(config, env))
        return started[-1]

    yield start
    for s in started:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()


@pytest.mark.slow  # a serve subprocess (3-6 s)
def test_sighup_under_load_swaps_the_chain_keeping_held_events(tmp_path: Path, served: Any) -> None:
    """k 5 -> 2 through category_buffer while a client posts: the reload is swapped in between batches, every
    acknowledged event is in the output or still held (none twice), and what was held at k 5 is released at k 2."""
    config = _config(tmp_path / "sidecar.yaml", _buffer(5))
    serve = served(config)
    client = Client(serve.port)
    client.start()
    try:
        client.more(200, serve.proc)
        held_before = _gauge(serve.metrics(), "querylog_events_held")
        assert held_before == CATEGORIES * 4  # each category holds k - 1
        _config(config, _buffer(2))
        serve.hup("config_reloaded")
        client.more(200, serve.proc)
    finally:
        client.stop()
    body = serve.metrics()
    err = serve.stop()
    assert not client.refused, client.refused
    assert 'querylog_config_reloads_total{result="success"} 1.0' in body
    assert 'querylog_config_reloads_total{result="failure"} 0.0' in body
    out = JsonlOutput.read(tmp_path / "out.jsonl")
    held = held_ids(tmp_path / "state" / "querylog.db")
    assert out.broken == 0 and not out.ends_mid_line
    assert all(n == 1 for n in out.ids.values()), "an event was delivered twice"
    assert not set(out.ids) & set(held), "an event is both delivered and held"
    lost = set(client.acked) - set(out.ids) - set(held)
    assert not lost, f"{len(lost)} acknowledged events lost"
    assert sum(held.values()) == CATEGORIES * 1  # k 2 applies to what was held: each category holds k - 1
    assert "Traceback" not in err


@pytest.mark.slow  # a serve subprocess (3-6 s)
def test_an_invalid_reload_keeps_serving_and_is_counted(tmp_path: Path, served: Any) -> None:
    """A config check-config refuses: logged with its file and line, counted as a failure; the old chain (k 3)
    goes on taking and releasing events. A change a reload cannot apply (a sink) is refused the same way."""
    config = _config(tmp_path / "sidecar.yaml", _buffer(3))
    serve = served(config)
    client = Client(serve.port)
    client.start()
    try:
        client.more(60, serve.proc)
        good = config.read_text(encoding="utf-8")
        config.write_text(good.replace("k: 3", "k: 1"), encoding="utf-8")
        refused = serve.hup("config_reload_refused")
        assert refused["file"] == str(config) and refused["key"] == "filters[0].category_buffer.k"
        assert refused["line"] == good.splitlines().index("    k: 3") + 1
        config.write_text(good.replace("out.jsonl", "other.jsonl"), encoding="utf-8")
        refused = serve.hup("config_reload_refused", count=2)
        assert refused["key"] == "sinks" and "restart serve" in refused["error"]
        client.more(60, serve.proc)
    finally:
        client.stop()
    body = serve.metrics()
    serve.stop()
    assert 'querylog_config_reloads_total{result="failure"} 2.0' in body
    assert 'querylog_config_reloads_total{result="success"} 0.0' in body
    out = JsonlOutput.read(tmp_path / "out.jsonl")
    held = held_ids(tmp_path / "state" / "querylog.db")
    assert not set(client.acked) - set(out.ids) - set(held)
    assert sum(held.values()) == CATEGORIES * 2  # still k 3
    assert not (tmp_path / "other.jsonl").exists()


@pytest.mark.slow  # a serve subprocess (3-6 s)
def test_logrotate_move_and_hup_yields_a_new_file(tmp_path: Path, served: Any) -> None:
    """The output is moved aside while a client posts, then SIGHUP: new records go to a new file at the path,
    and every acknowledged record is in one of the two files, once."""
    config = _config(tmp_path / "sidecar.yaml", [])
    serve = served(config)
    client = Client(serve.port)
    client.start()
    out, rotated = tmp_path / "out.jsonl", tmp_path / "out.jsonl.1"
    try:
        client.more(100, serve.proc)
        out.rename(rotated)
        client.more(30, serve.proc)  # still written into the moved file until the HUP
        serve.hup("config_reloaded")
        client.more(100, serve.proc)
    finally:
        client.stop()
    serve.stop()
    old, new = JsonlOutput.read(rotated), JsonlOutput.read(out)
    assert old.ids and new.ids
    assert old.broken == new.broken == 0 and not old.ends_mid_line and not new.ends_mid_line
    assert not set(old.ids) & set(new.ids)
    assert all(n == 1 for n in (old.ids + new.ids).values())
    assert set(client.acked) <= set(old.ids) | set(new.ids)


@pytest.mark.slow  # a serve subprocess (3-6 s)
def test_sighup_never_ends_serve(tmp_path: Path, served: Any) -> None:
    """Several SIGHUPs in a row (an unchanged config): serve keeps serving and exits 0 on SIGTERM."""
    config = _config(tmp_path / "sidecar.yaml", [])
    serve = served(config)
    for n in range(1, 4):
        serve.hup("config_reloaded", count=n)
    answer = post(serve.port, lines({"id": "e1", "AnonID": "u", "Query": "q", "cat": "c0"}))
    assert answer.status == 200
    assert serve.proc.poll() is None
    serve.stop()


def test_a_removed_buffering_filter_that_holds_events_is_refused(tmp_path: Path) -> None:
    """In process: removing category_buffer while it holds events is refused with the reason, nothing changes;
    an unchanged filter is the very same object after a reload, a changed one is rebuilt with its held events."""
    config = _config(tmp_path / "sidecar.yaml", [{"truncate_url": {}}, *_buffer(5)])
    pipeline = Pipeline(load_config(config))
    try:
        truncate, buffer = pipeline.filters
        records = [{"AnonID": f"u{n}", "Query": f"q{n}", "cat": "c0", "id": f"e{n}"} for n in range(3)]
        codec = pipeline.ctx.codec_for("jsonl")
        assert codec is not None
        pipeline.receive(RecordBatch([json.dumps(r) for r in records], codec, "test"))
        assert pipeline.held() == 3
        _config(config, [{"truncate_url": {}}])
        with pytest.raises(Exception, match="removes category_buffer, which holds 3 events") as refused:
            pipeline.reload(load_config(config))
        assert getattr(refused.value, "line", None) is not None
        assert pipeline.filters == [truncate, buffer] and pipeline.reloads["failure"] == 1
        _config(config, [{"truncate_url": {}}, *_buffer(2)])
        pipeline.reload(load_config(config))
        assert pipeline.filters[0] is truncate and pipeline.filters[1] is not buffer
        assert pipeline.held() == 3 and pipeline.reloads["success"] == 1
    finally:
        pipeline.close()


def _post_reload(port: int, token: str | None) -> int:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/-/reload", data=b"", method="POST")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


@pytest.mark.slow  # serve subprocesses (3-6 s)
def test_post_reload_needs_the_configured_token(tmp_path: Path, served: Any) -> None:
    """``POST /-/reload`` on metrics_listen: no such route without a reload token configured; with one, 401
    without it or with another, 200 with it (the chain swapped, counted), 422 when the config is refused."""
    plain = served(_config(tmp_path / "plain.yaml", []))
    assert _post_reload(plain.metrics_port, "anything") in (404, 405)  # no such route: any other POST's answer
    assert 'querylog_config_reloads_total{result="success"} 0.0' in plain.metrics()
    plain.stop()
    config = _config(tmp_path / "sidecar.yaml", _buffer(3), state_dir="state2")
    config.write_text(
        config.read_text(encoding="utf-8") + "metrics: {reload_token_env: QUERYLOG_TEST_RELOAD_TOKEN}\n",
        encoding="utf-8",
    )
    serve = served(config, cli_env(QUERYLOG_TEST_RELOAD_TOKEN="reload-token-0123456789"))
    assert _post_reload(serve.metrics_port, None) == 401
    assert _post_reload(serve.metrics_port, "another-token") == 401
    config.write_text(config.read_text(encoding="utf-8").replace("k: 3", "k: 4"), encoding="utf-8")
    assert _post_reload(serve.metrics_port, "reload-token-0123456789") == 200
    config.write_text(config.read_text(encoding="utf-8").replace("k: 4", "k: 1"), encoding="utf-8")
    assert _post_reload(serve.metrics_port, "reload-token-0123456789") == 422
    body = serve.metrics()
    err = serve.stop()
    assert 'querylog_config_reloads_total{result="success"} 1.0' in body
    assert 'querylog_config_reloads_total{result="failure"} 1.0' in body
    assert "reload-token-0123456789" not in err


def _gauge(body: str, name: str) -> float:
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in the scrape")
