"""`querylog serve` reloads on SIGHUP (issue 26 item 2): the chain is swapped between batches keeping what the state
store holds, a refused config leaves the running chain serving (counted), file sinks reopen their file (logrotate's
move + HUP), and SIGHUP never ends the process.

Each test runs serve in a subprocess with an ``http`` source on port 0 and a JSON-lines file sink; a client thread
posts bodies of new records (each its own user, query text and ``id``) and keeps the ids of the acknowledged ones.
Nothing here prints a record value.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from faults.faultkit import JsonlOutput, held_ids
from helpers import cli_env
from helpers.httptest import lines, post
from helpers.reloading import CATEGORIES, Client, Readiness, Served, buffered, serves, write_config

from sidecar.api import RecordBatch
from sidecar.config import load_config
from sidecar.pipeline import Pipeline


@pytest.fixture
def served() -> Iterator[Callable[..., Served]]:
    with serves() as start:
        yield start


@pytest.mark.slow  # a serve subprocess (3-6 s)
def test_sighup_under_load_swaps_the_chain_keeping_held_events(tmp_path: Path, served: Any) -> None:
    """k 5 -> 2 through category_buffer while a client posts: the reload is swapped in between batches, every
    acknowledged event is in the output or still held (none twice), and what was held at k 5 is released at k 2."""
    config = write_config(tmp_path / "sidecar.yaml", buffered(5))
    serve = served(config)
    client = Client(serve.port)
    client.start()
    try:
        client.more(200, serve.proc)
        held_before = _gauge(serve.metrics(), "querylog_events_held")
        assert held_before == CATEGORIES * 4  # each category holds k - 1
        write_config(config, buffered(2))
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
    goes on taking and releasing events. A change a reload cannot apply (a sink) is refused the same way, saying
    why. /readyz answers 200 all along."""
    config = write_config(tmp_path / "sidecar.yaml", buffered(3))
    serve = served(config)
    ready = Readiness(serve.metrics_port)
    ready.start()
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
        assert "outbox" in refused["error"]
        client.more(60, serve.proc)
    finally:
        client.stop()
        statuses = ready.stop()
    body = serve.metrics()
    serve.stop()
    assert statuses and set(statuses) == {200}, sorted(set(statuses))
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
    config = write_config(tmp_path / "sidecar.yaml", [])
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
    config = write_config(tmp_path / "sidecar.yaml", [])
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
    config = write_config(tmp_path / "sidecar.yaml", [{"truncate_url": {}}, *buffered(5)])
    pipeline = Pipeline(load_config(config))
    try:
        truncate, buffer = pipeline.filters
        records = [{"AnonID": f"u{n}", "Query": f"q{n}", "cat": "c0", "id": f"e{n}"} for n in range(3)]
        codec = pipeline.ctx.codec_for("jsonl")
        assert codec is not None
        pipeline.receive(RecordBatch([json.dumps(r) for r in records], codec, "test"))
        assert pipeline.held() == 3
        write_config(config, [{"truncate_url": {}}])
        with pytest.raises(Exception, match="removes category_buffer, which holds 3 events") as refused:
            pipeline.reload(load_config(config))
        assert getattr(refused.value, "line", None) is not None
        assert pipeline.filters == [truncate, buffer] and pipeline.reloads["failure"] == 1
        write_config(config, [{"truncate_url": {}}, *buffered(2)])
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
    plain = served(write_config(tmp_path / "plain.yaml", []))
    assert _post_reload(plain.metrics_port, "anything") in (404, 405)  # no such route: any other POST's answer
    assert 'querylog_config_reloads_total{result="success"} 0.0' in plain.metrics()
    plain.stop()
    config = write_config(tmp_path / "sidecar.yaml", buffered(3), state_dir="state2")
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
