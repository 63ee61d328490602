"""What a client is told when a batch could not be made durable: what and what to do, never a server path (the
server's own log line keeps the path)."""

from __future__ import annotations

import errno
import re
from pathlib import Path

import grpc
import pytest
import structlog
from helpers.grpc_sidecar import sidecar, write_config

from adapters.grpc.stubs.querylog.v1.querylog_pb2 import EventBatch, QueryEvent
from adapters.grpc.stubs.querylog.v1.querylog_pb2_grpc import QueryLogFilterStub
from sidecar.api import Event, Filter, FilterConfig
from sidecar.failures import describe_failure
from sidecar.state import StateError

ABSOLUTE = re.compile(r"(^|[\s(])/\w")


class FullDisk(Filter):
    """Test filter: every batch fails as an output file on a full disk would."""

    NAME = "full_disk"

    def __init__(self, path: Path) -> None:
        super().__init__(FilterConfig(), None)  # a fake: no BuildContext
        self.path = path

    def process(self, batch: list[Event]) -> list[Event]:
        raise OSError(errno.ENOSPC, "No space left on device", str(self.path))


@pytest.mark.parametrize(
    ("exc", "says"),
    [
        (OSError(errno.ENOSPC, "No space left on device", "/srv/querylog/out.jsonl"), "output file"),
        (StateError(Path("/srv/querylog/state/querylog.db"), "cannot be written (disk I/O error)"), "state database"),
    ],
)
def test_the_client_message_names_no_server_path(exc: BaseException, says: str) -> None:
    """The client's message says "output file"/"state database" and what to do; the server's detail has the path."""
    failure = describe_failure(exc)
    assert failure.kind == "unavailable"
    assert says in failure.message and "/srv/querylog" not in failure.message
    assert not ABSOLUTE.search(failure.message), failure.message
    assert "/srv/querylog" in failure.detail


def test_a_failed_ingest_tells_the_client_without_the_path_and_logs_it(tmp_path: Path) -> None:
    """Ingest on a full output disk: UNAVAILABLE saying "output file" and to free space, no absolute path; the
    server's `rpc_failed` log line names the file."""
    out = tmp_path / "deep" / "out.jsonl"
    config = write_config(tmp_path, "filters: []\nsinks:\n  - file: {path: out.tsv}\n")
    batch = EventBatch(events=[QueryEvent(user="u-1", query="secret query", time="t")])
    with (
        structlog.testing.capture_logs() as logs,
        sidecar(config, extra_filters=(FullDisk(out),)) as sc,
        pytest.raises(grpc.RpcError) as err,
    ):
        QueryLogFilterStub(sc.chan).Ingest(iter([batch]), timeout=30)
    details = err.value.details() or ""
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "output file" in details and "free space" in details
    assert str(tmp_path) not in details and not ABSOLUTE.search(details), details
    failed = [e for e in logs if e["event"] == "rpc_failed"]
    assert failed and str(out) in repr(failed)
    assert "secret query" not in repr(logs) + details
