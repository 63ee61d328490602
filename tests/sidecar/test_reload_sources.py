"""A reload rebinds the sources whose options changed (issue 26 item 2, "a changed source address rebinds").

serve runs in a subprocess with an ``http`` source on port 0, category_buffer and a JSON-lines file sink; clients
post while it reloads, a thread polls ``/readyz`` meanwhile. A changed source starts before the old one stops when
their ports differ (new first), after it when the port is the same (the old one drains first); one that cannot
bind is refused with a located error and the old one serves on; sources are added and removed the same way; a
finite source cannot change; and a reload with a full outbox still swaps the chain, /readyz naming the outbox.
Nothing here prints a record value.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from faults.faultkit import JsonlOutput, held_ids
from helpers import cli_env, exited, wait_until
from helpers.httptest import lines, post
from helpers.probes import get
from helpers.reloading import Client, Readiness, Served, buffered, serves, write_config
from helpers.serving import events

from sidecar.config import ConfigError, load_config
from sidecar.pipeline import Pipeline
from sidecar.served_sources import ServedSources

TOKEN = "reload-source-token-0123456789"
ONE = {"id": "x1", "AnonID": "user-x", "Query": "query x", "cat": "c0"}


@pytest.fixture
def served() -> Iterator[Callable[..., Served]]:
    with serves() as start:
        yield start


def _sources(config: Path, *sources: dict[str, Any]) -> None:
    """Rewrite the ``sources`` of ``config``, keeping the rest."""
    cfg = yaml.safe_load(config.read_text(encoding="utf-8"))
    cfg["sources"] = list(sources)
    config.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")


def _refused(port: int) -> bool:
    """Nothing listens on 127.0.0.1:``port`` any more."""
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def _nothing_lost(tmp_path: Path, *clients: Client) -> None:
    """Every acknowledged record is in the output or held by category_buffer, and none is in both or twice."""
    out = JsonlOutput.read(tmp_path / "out.jsonl")
    held = held_ids(tmp_path / "state" / "querylog.db")
    assert out.broken == 0 and not out.ends_mid_line
    assert all(n == 1 for n in out.ids.values()), "an event was delivered twice"
    assert not set(out.ids) & set(held), "an event is both delivered and held"
    acked = {i for c in clients for i in c.acked}
    lost = acked - set(out.ids) - set(held)
    assert not lost, f"{len(lost)} acknowledged events lost"


@pytest.mark.slow  # a serve subprocess (3-6 s)
def test_a_changed_source_rebinds_new_first_under_load(tmp_path: Path, served: Any) -> None:
    """The http source's options change (another port, port 0): the new one listens before the old one stops, the
    old one's in-flight requests finish, its port closes; /readyz answers 200 all along; every acknowledged record
    of both clients is delivered or held."""
    config = write_config(tmp_path / "sidecar.yaml", buffered(3))
    serve = served(config)
    ready = Readiness(serve.metrics_port)
    ready.start()
    old = Client(serve.port)
    old.start()
    new = Client(0, first=100_000)
    try:
        old.more(100, serve.proc)
        _sources(config, {"http": {"listen": "127.0.0.1:0", "retry_after_seconds": 3}})
        serve.hup("config_reloaded")
        (rebound,) = _events(serve, "sources_rebound")
        assert rebound["stopped"] == rebound["started"] == ["sources[0].http"]
        _, port = serve.log.ports("http", count=2)
        assert port != serve.port and _refused(serve.port)
        wait_until(lambda: old.refused, what="the old source's client to be refused", abort=exited(serve.proc))
        new.port = port
        new.start()
        new.more(100, serve.proc)
    finally:
        old.stop()
        if new.is_alive():
            new.stop()
        statuses = ready.stop()
    body = serve.metrics()
    serve.stop()
    assert statuses and set(statuses) == {200}, sorted(set(statuses))
    assert 'querylog_config_reloads_total{result="success"} 1.0' in body
    _nothing_lost(tmp_path, old, new)


@pytest.mark.slow  # a serve subprocess (3-6 s)
def test_a_source_that_cannot_bind_is_refused_and_the_old_one_serves_on(tmp_path: Path, served: Any) -> None:
    """A new listen address held by another socket: the reload is refused with FILE:LINE at the listen key,
    counted; the old source never stopped (new first) and takes input; /readyz stays 200 through it and through a
    valid reload (k 3 -> 2) under load."""
    config = write_config(tmp_path / "sidecar.yaml", buffered(3))
    serve = served(config)
    ready = Readiness(serve.metrics_port)
    ready.start()
    client = Client(serve.port)
    client.start()
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        client.more(60, serve.proc)
        good = config.read_text(encoding="utf-8")
        _sources(config, {"http": {"listen": f"127.0.0.1:{busy.getsockname()[1]}"}})
        refused = serve.hup("config_reload_refused")
        assert refused["file"] == str(config) and refused["key"] == "sources[0].http.listen"
        lines_of = config.read_text(encoding="utf-8").splitlines()
        assert refused["line"] == next(n for n, line in enumerate(lines_of, 1) if line.strip().startswith("listen:"))
        assert "running sources serve on" in refused["error"]
        client.more(60, serve.proc)  # the same source, never stopped
        config.write_text(good.replace("k: 3", "k: 2"), encoding="utf-8")
        serve.hup("config_reloaded")
        client.more(60, serve.proc)
    finally:
        client.stop()
        statuses = ready.stop()
        busy.close()
    body = serve.metrics()
    serve.stop()
    assert statuses and set(statuses) == {200}, sorted(set(statuses))
    assert 'querylog_config_reloads_total{result="failure"} 1.0' in body
    assert 'querylog_config_reloads_total{result="success"} 1.0' in body
    assert not _events(serve, "sources_rebound")
    _nothing_lost(tmp_path, client)


@pytest.mark.slow  # a serve subprocess (3-6 s)
def test_same_port_rebind_with_a_token_and_a_source_added_and_removed(tmp_path: Path, served: Any) -> None:
    """The http source on the port it holds, now with a bearer token: the old one stops first (its client's
    acknowledged records all kept), the new one answers 401 without the token and 200 with it on that same port.
    Then a second http source is added (it listens, takes input) and removed again (its port closes)."""
    config = write_config(tmp_path / "sidecar.yaml", buffered(3))
    serve = served(config, cli_env(QUERYLOG_TEST_SOURCE_TOKEN=TOKEN))
    client = Client(serve.port)
    client.start()
    try:
        client.more(60, serve.proc)
        same = {"http": {"listen": f"127.0.0.1:{serve.port}", "auth_token_env": "QUERYLOG_TEST_SOURCE_TOKEN"}}
        _sources(config, same)
        serve.hup("config_reloaded")
        wait_until(lambda: client.refused, what="the client to be refused", abort=exited(serve.proc))
    finally:
        client.stop()
    assert post(serve.port, lines(ONE)).status == 401
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert post(serve.port, lines(ONE), headers=auth).status == 200
    _sources(config, same, {"http": {"listen": "127.0.0.1:0"}})
    serve.hup("config_reloaded", count=2)
    *_, second = serve.log.ports("http", count=3)
    assert post(second, lines({**ONE, "id": "x2"})).status == 200
    _sources(config, same)
    serve.hup("config_reloaded", count=3)
    assert _refused(second)
    assert post(serve.port, lines({**ONE, "id": "x3"}), headers=auth).status == 200
    err = serve.stop()
    assert TOKEN not in err
    _nothing_lost(tmp_path, client)
    out = JsonlOutput.read(tmp_path / "out.jsonl")
    held = held_ids(tmp_path / "state" / "querylog.db")
    assert {"x1", "x2", "x3"} <= set(out.ids) | set(held)


@pytest.mark.slow  # a serve subprocess (3-6 s)
def test_a_reload_with_a_full_outbox(tmp_path: Path, served: Any) -> None:
    """An http sink whose peer is down, its outbox full after one body: /readyz is 503 naming it; a reload of the
    chain goes through all the same (the outbox is not in the way of a swap) and /readyz still names the outbox,
    nothing else; the source answers 503 (retry later) as before."""
    dead = socket.socket()  # bound, never listening: a connection to it is refused
    dead.bind(("127.0.0.1", 0))
    sink = {
        "http": {
            "url": f"http://127.0.0.1:{dead.getsockname()[1]}/",
            "outbox_max_batches": 1,
            "retry_initial_seconds": 30,
            "close_drain_seconds": 0,
        }
    }
    config = write_config(tmp_path / "sidecar.yaml", [], sinks=[sink])
    serve = served(config)
    try:
        assert post(serve.port, lines(ONE)).status == 200
        status, body = get(serve.metrics_port, "/readyz")
        assert status == 503
        (reason,) = json.loads(body)["not_ready"]
        assert reason.startswith("outbox_full:")
        cfg = yaml.safe_load(config.read_text(encoding="utf-8"))
        cfg["filters"] = [{"truncate_url": {}}]
        config.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
        serve.hup("config_reloaded")
        status, body = get(serve.metrics_port, "/readyz")
        assert status == 503 and json.loads(body)["not_ready"] == [reason]
        assert post(serve.port, lines({**ONE, "id": "x2"})).status == 503
    finally:
        serve.stop()
        dead.close()


def test_a_finite_source_cannot_change_on_reload(tmp_path: Path) -> None:
    """In process: a reload that changes, adds or removes a file source is refused at its key, nothing started."""
    (tmp_path / "in.tsv").write_text("AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n", encoding="utf-8")
    config = tmp_path / "c.yaml"
    config.write_text("state_dir: state\nsources:\n  - file: {path: in.tsv}\n", encoding="utf-8")
    cfg = load_config(config)
    pipeline = Pipeline(cfg)
    try:
        sources = ServedSources(pipeline)
        sources.config = cfg  # as start() leaves it, without reading the file
        assert not sources.plan(cfg).changes
        config.write_text("state_dir: state\nsources:\n  - file: {path: other.tsv}\n", encoding="utf-8")
        with pytest.raises(ConfigError, match="finite source cannot change on reload") as refused:
            sources.plan(load_config(config))
        assert refused.value.key == "sources[0].file" and refused.value.line == 3
        config.write_text("state_dir: state\nsources:\n  - http: {listen: '127.0.0.1:0'}\n", encoding="utf-8")
        with pytest.raises(ConfigError, match="removes a finite source"):
            sources.plan(load_config(config))
        assert not sources.servers
    finally:
        pipeline.close()


def _events(serve: Served, name: str) -> list[dict[str, Any]]:
    return events(serve.log.snapshot(), name)


def _in_process(tmp_path: Path, sources: str) -> tuple[Path, Pipeline]:
    config = tmp_path / "c.yaml"
    config.write_text(f"state_dir: state\nsources:\n{sources}sinks:\n  - file: {{path: out.jsonl}}\n", encoding="utf-8")
    return config, Pipeline(load_config(config))


def test_a_source_that_cannot_start_after_the_old_one_stopped_gets_the_old_one_back(tmp_path: Path) -> None:
    """In process: the http source on the port it holds, now with a certificate that cannot be read: the old one
    stops first (same port), the new one fails, the old one is started again on that port (a new instance of the
    old spec) and takes input; the error is located at the TLS key; readiness names nothing."""
    config, pipeline = _in_process(tmp_path, "  - http: {listen: '127.0.0.1:0'}\n")
    sources = ServedSources(pipeline)
    try:
        sources.start(load_config(config))
        (first,) = sources.sources
        port = first.listening()[0].port
        config.write_text(
            config.read_text(encoding="utf-8").replace(
                "listen: '127.0.0.1:0'", f"listen: '127.0.0.1:{port}', tls_cert_file: no.pem, tls_key_file: no.pem"
            ),
            encoding="utf-8",
        )
        rebind = sources.plan(load_config(config))
        with pytest.raises(ConfigError, match="cannot load the TLS certificate") as refused:
            rebind.apply()
        assert refused.value.key == "sources[0].http.tls_cert_file" and refused.value.line == 3
        (again,) = sources.sources
        assert again is not first and not first.listening()
        assert [a.port for a in again.listening()] == [port]
        assert post(port, lines(ONE)).status == 200
        assert sources.not_listening() == []
    finally:
        sources.stop_all()
        pipeline.close()
    assert JsonlOutput.read(tmp_path / "out.jsonl").ids == {"x1": 1}


def test_serve_listen_counts_as_the_grpc_sources_port() -> None:
    """A grpc source run with ``serve --listen`` binds that address: a rebind compares that port, not the
    config's (else a changed token on the same --listen would try to bind the port the old one holds)."""
    from sidecar.served_sources import wanted_ports

    cfg = load_config("c.yaml", "sources:\n  - grpc: {listen: '127.0.0.1:0'}\n  - http: {listen: '127.0.0.1:8081'}\n")
    grpc, http = cfg.sources
    assert wanted_ports(grpc) == set() and wanted_ports(grpc, "127.0.0.1:7000") == {7000}
    assert wanted_ports(http, "127.0.0.1:7000") == {8081}


def test_a_chain_that_cannot_be_built_undoes_the_rebind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In process, through reload_file: the http source changes (new first) and a filter is added whose key is
    not in the environment: the new source had started and the old one stopped, then the chain's build fails;
    the new source is stopped, the old one listens again on its port, the chain is the old one, counted."""
    from sidecar.reload import reload_file

    monkeypatch.delenv("QUERYLOG_TEST_UNSET_KEY", raising=False)
    config, pipeline = _in_process(tmp_path, "  - http: {listen: '127.0.0.1:0'}\n")
    sources = ServedSources(pipeline)
    try:
        sources.start(load_config(config))
        (first,) = sources.sources
        port = first.listening()[0].port
        text = config.read_text(encoding="utf-8").replace(
            "listen: '127.0.0.1:0'", "listen: '127.0.0.1:0', retry_after_seconds: 3"
        )
        config.write_text(text + "filters:\n  - pseudonymize: {key_env: QUERYLOG_TEST_UNSET_KEY}\n", encoding="utf-8")
        assert not reload_file(pipeline, config, sources=sources)
        (again,) = sources.sources
        assert again is not first and [a.port for a in again.listening()] == [port]
        assert pipeline.filters == [] and pipeline.reloads == {"failure": 1}
        assert post(port, lines(ONE)).status == 200
        assert sources.not_listening() == []
    finally:
        sources.stop_all()
        pipeline.close()


class _Hammer(threading.Thread):
    """Posts one record per fresh connection to ``port`` until stopped; counts the answers and refusals (``done``)
    and the requests that got no answer within 2 s (``hung``)."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port, self.done, self.hung = port, 0, 0
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
            try:
                conn.request("POST", "/", body=lines(ONE), headers={"Content-Type": "application/x-ndjson"})
                conn.getresponse().read()
            except TimeoutError:
                self.hung += 1
            except (OSError, http.client.HTTPException):
                pass  # refused or reset while the port changed hands: never acknowledged, sent again by a client
            finally:
                conn.close()
            self.done += 1


def _go_on(hammers: list[_Hammer], count: int) -> None:
    """Wait until every client made ``count`` more requests (a hung one only after its timeout)."""
    marks = [h.done for h in hammers]
    wait_until(lambda: all(h.done >= m + count for h, m in zip(hammers, marks)), what="every client to go on")


@pytest.mark.slow  # 20 rebinds under load (3-5 s)
def test_same_port_rebinds_under_load_leave_no_request_hanging(tmp_path: Path) -> None:
    """In process: 20 stop-first rebinds of the http source on its port while 4 clients post: every request is
    answered, refused or reset; none is left open without an answer (a connection the old server accepted just
    before it closed used to stay open until the client's timeout)."""
    config, pipeline = _in_process(tmp_path, "  - http: {listen: '127.0.0.1:0'}\n")
    sources = ServedSources(pipeline)
    hammers: list[_Hammer] = []
    try:
        sources.start(load_config(config))
        port = sources.sources[0].listening()[0].port
        hammers = [_Hammer(port) for _ in range(4)]
        for h in hammers:
            h.start()
        for n in range(20):
            http = f"{{listen: '127.0.0.1:{port}', retry_after_seconds: {2 + n % 2}}}"
            config.write_text(
                f"state_dir: state\nsources:\n  - http: {http}\nsinks:\n  - file: {{path: out.jsonl}}\n",
                encoding="utf-8",
            )
            rebind = sources.plan(load_config(config))
            rebind.apply()
            rebind.commit()
            _go_on(hammers, 1)
        _go_on(hammers, 3)
    finally:
        for h in hammers:
            h.halt.set()
            h.join()
        sources.stop_all()
        pipeline.close()
    assert sum(h.hung for h in hammers) == 0
