"""Reloads and third-party plugins (issue 26): ``Sink.reopen`` is on the contract (logrotate's move + HUP for any
sink that writes a file), and ``--reload-flush`` lets a reload remove a buffering filter that holds events by
flushing it through the rest of the running chain into the sinks.

The example plugins (``example_plugins/``) are installed with entry points by conftest.py's ``installed``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import QUERYLOG, cli_env, exited, wait_until
from helpers.httptest import lines, post
from helpers.serving import ServeLog, events

from sidecar.api import SINKS, RecordBatch, Sink
from sidecar.config import ConfigError, load_config
from sidecar.pipeline import Pipeline
from sidecar.registry import plugins
from sidecar.reload import reload_file

CATEGORIES = 3


def _records(first: int, count: int) -> list[str]:
    return [
        json.dumps({"id": f"e{n}", "AnonID": f"user-{n}", "Query": f"query number {n}", "cat": f"c{n % CATEGORIES}"})
        for n in range(first, first + count)
    ]


def _write(path: Path, filters: str, sinks: str = "  - json_lines: {path: out.jsonl}\n", top: str = "") -> Path:
    path.write_text(f"state_dir: state\n{top}filters:\n{filters}sinks:\n{sinks}", encoding="utf-8")
    return path


BUFFER = "  - category_buffer: {k: 2, category_field: cat, time: query}\n"
HOLD = "  - hold_until_final: {}\n"
TRUNCATE = "  - truncate_url: {}\n"


def _ids(path: Path) -> list[str]:
    return [json.loads(json.loads(line)["record"])["id"] for line in path.read_text(encoding="utf-8").splitlines()]


def test_reopen_is_on_the_sink_contract() -> None:
    """``Sink.reopen`` exists with a default that does nothing; every registered sink has it; the file sink (the
    one built-in that writes a file) overrides it."""
    assert Sink.reopen.__doc__ is not None and "reopen" in Sink.reopen.__doc__
    assert Sink.reopen(object.__new__(Sink)) is None
    registered = plugins(SINKS)
    assert all(callable(getattr(cls, "reopen", None)) for cls in registered.values())
    assert registered["file"].reopen is not Sink.reopen


@pytest.mark.usefixtures("installed")
def test_a_third_party_sink_reopens_its_file_on_reload(tmp_path: Path) -> None:
    """A reload calls the contract's ``reopen``: after the file was moved aside, new events go to a new file at
    the path, the events before to the moved one, each once."""
    config = tmp_path / "c.yaml"
    config.write_text("state_dir: state\nsinks:\n  - json_lines: {path: out.jsonl}\n", encoding="utf-8")
    pipeline = Pipeline(load_config(config))
    try:
        codec = pipeline.ctx.codec_for("jsonl")
        assert codec is not None
        pipeline.receive(RecordBatch(_records(0, 5), codec, "test"))
        (tmp_path / "out.jsonl").rename(tmp_path / "out.jsonl.1")
        assert reload_file(pipeline, config)
        pipeline.receive(RecordBatch(_records(5, 5), codec, "test"))
    finally:
        pipeline.close()
    assert _ids(tmp_path / "out.jsonl.1") == [f"e{n}" for n in range(5)]
    assert _ids(tmp_path / "out.jsonl") == [f"e{n}" for n in range(5, 10)]


@pytest.mark.usefixtures("installed")
def test_reload_flush_releases_a_removed_buffering_filter(tmp_path: Path) -> None:
    """category_buffer (k 2) then hold_until_final then truncate_url: 30 events, 3 held by category_buffer, 27
    by hold_until_final. A reload without it is refused naming --reload-flush (nothing changed); with ``flush`` its
    27 events run through truncate_url into the sink, category_buffer keeps its 3, the kept filters are the same
    objects."""
    config = _write(tmp_path / "c.yaml", BUFFER + HOLD + TRUNCATE)
    pipeline = Pipeline(load_config(config))
    try:
        codec = pipeline.ctx.codec_for("jsonl")
        assert codec is not None
        pipeline.receive(RecordBatch(_records(0, 30), codec, "test"))
        buffer, hold, truncate = pipeline.filters
        assert (buffer.held(), hold.held(), pipeline.stats()["events_out"]) == (3, 27, 0)
        _write(config, BUFFER + TRUNCATE)
        with pytest.raises(ConfigError, match="removes hold_until_final, which holds 27 events") as refused:
            pipeline.reload(load_config(config))
        assert "--reload-flush" in str(refused.value) and refused.value.key == "filters"
        assert pipeline.filters == [buffer, hold, truncate] and hold.held() == 27
        in_before = pipeline.chain.per_filter_in["truncate_url"]
        pipeline.reload(load_config(config), flush=True)
        assert pipeline.filters == [buffer, truncate] and pipeline.held() == 3
        assert pipeline.chain.per_filter_in["truncate_url"] == in_before + 27  # through the rest of the chain
        stats = pipeline.stats()
        assert (stats["events_out"], stats["events_dropped"]) == (27, 0)
        assert pipeline.reloads == {"failure": 1, "success": 1}
    finally:
        pipeline.close()
    delivered = _ids(tmp_path / "out.jsonl")
    assert len(delivered) == len(set(delivered)) == 27


@pytest.mark.usefixtures("installed")
def test_reload_flush_waits_for_a_full_outbox(tmp_path: Path) -> None:
    """A flush needs the sinks: while the outbox of an http sink whose peer is down is full, the reload is refused
    (located, naming the outbox), nothing is flushed, the filter keeps its events."""
    dead = socket.socket()  # bound, never listening: a connection to it is refused
    dead.bind(("127.0.0.1", 0))
    sink = (
        f"  - http: {{url: 'http://127.0.0.1:{dead.getsockname()[1]}/', outbox_max_batches: 1, "
        "retry_initial_seconds: 30, close_drain_seconds: 0}\n"
    )
    config = _write(tmp_path / "c.yaml", BUFFER + HOLD, sinks=sink)
    pipeline = Pipeline(load_config(config))
    try:
        codec = pipeline.ctx.codec_for("jsonl")
        assert codec is not None
        pipeline.receive(RecordBatch(_records(0, 6), codec, "test"))
        with pipeline.transaction():  # one batch of another event into the outbox: it is full
            pipeline.deliver(codec.decode_many(_records(100, 1), "\n", []))
            pipeline.flush_sinks()
        assert pipeline.backpressure() is not None
        held = pipeline.filters[1].held()
        _write(config, BUFFER, sinks=sink)
        with pytest.raises(ConfigError, match="is full") as refused:
            pipeline.reload(load_config(config), flush=True)
        assert refused.value.key == "filters" and refused.value.line is not None
        assert len(pipeline.filters) == 2 and pipeline.filters[1].held() == held
    finally:
        pipeline.close()
        dead.close()


@pytest.mark.slow  # a serve subprocess (3-6 s)
def test_serve_reload_flush_option(installed: list[Path], tmp_path: Path) -> None:
    """``serve --reload-flush``: SIGHUP with hold_until_final removed flushes its events into the sink (every
    acknowledged event is in the output or held by category_buffer), and serve goes on taking input."""
    config = _write(
        tmp_path / "c.yaml",
        BUFFER + HOLD,
        top="logging: {level: info, format: json}\nsources:\n  - http: {listen: '127.0.0.1:0'}\n",
    )
    path = os.pathsep.join([*map(str, installed), os.environ.get("PYTHONPATH", "")])
    proc = subprocess.Popen(
        [QUERYLOG, "serve", "--reload-flush", "-c", str(config)],
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=cli_env(PYTHONPATH=path),
    )
    log = ServeLog(proc)
    try:
        (port,) = log.ports("http")
        body: Any = "\n".join(_records(0, 30)).encode() + b"\n"
        assert post(port, body).status == 200
        assert not (tmp_path / "out.jsonl").exists() or not _ids(tmp_path / "out.jsonl")
        _write(
            config, BUFFER, top="logging: {level: info, format: json}\nsources:\n  - http: {listen: '127.0.0.1:0'}\n"
        )
        proc.send_signal(signal.SIGHUP)
        (flushed,) = wait_until(lambda: events(log.snapshot(), "reload_flushed"), what="a flush", abort=exited(proc))
        assert flushed["released"] == 27 and flushed["filters"] == ["hold_until_final"]
        assert post(port, lines({"id": "e30", "AnonID": "user-30", "Query": "q", "cat": "c0"})).status == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        err = log.text()
    assert proc.returncode == 0, err
    assert events(err.splitlines(), "config_reloaded")
    delivered = _ids(tmp_path / "out.jsonl")
    assert len(delivered) == len(set(delivered)) >= 27
    assert "query number" not in err
