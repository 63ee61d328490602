"""Empty queries (issue 11, defects 12 and 13).

An empty query is a valid record: the passthrough chain gives it back byte for byte in
TSV, JSON lines and over gRPC (golden inputs below, each its own expected output). A
query scrubbed to nothing is what each ready chain says (``hipaa_scrub`` ``emptied``):
the k-anonymity chain drops and counts it, and releases none; ``querylog audit`` reads a
record with an empty query as a record and counts it (``empty_queries``), never as an
undecodable line.
"""

from __future__ import annotations

import io
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers.kb import kb_file

import sidecar.drive as replay_module
from adapters.grpc.codec import EventBatch
from filters.hipaa_scrub import Scrubber
from sidecar.config import load_config
from sidecar.drive import ReplaySummary, replay
from sidecar.pipeline import Pipeline
from sidecar.tools.audit import report
from sidecar.tools.generate.synthetic import generate_log
from sidecar.tools.send import send_file

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "config"
READY = ("passthrough", "default", "hipaa", "k-anonymity")

# Golden inputs: empty and blank queries among ordinary ones, CRLF lines, empty fields, no final newline.
TSV_GOLDEN = (
    b"AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n"
    b"1\t\t2006-03-01 07:17:12\t\t\n"
    b"1\tweather\t2006-03-01 07:18:00\t1\thttp://www.example.com\n"
    b"2\t   \t2006-03-02 10:00:00\t10\thttp://jobs.example.org\r\n"
    b"3\t\t\t\t\n"
    b"4\t\xe3\x80\x80\t2006-03-03 11:00:00\t\t\n"  # an ideographic space alone
    b"5\t\t2006-03-03 11:00:01\t2\thttp://www.example.net"
)
JSONL_GOLDEN = (
    b'{"AnonID": 1, "Query": "", "QueryTime": "2006-03-01 07:17:12"}\n'
    b'{"AnonID":"2","Query":"  ","ItemRank":3,"x":[1,2]}\r\n'
    b'{"AnonID": 3, "Query": "maps"}\n'
    b'{"Query": "", "AnonID": 4, "ClickURL": null, "n": {"deep": ""}}'
)


def ready_chain(tmp_path: Path, name: str) -> Path:
    """A copy of ``config/NAME.yaml`` in tmp_path (its state_dir is relative to the file: kept out of the repo)."""
    dst = tmp_path / f"{name}.yaml"
    shutil.copy(CONFIG / f"{name}.yaml", dst)
    return dst


def run_replay(config: Path, data: bytes, suffix: str) -> tuple[bytes, ReplaySummary]:
    src, out = config.parent / f"in{suffix}", config.parent / f"out{suffix}"
    src.write_bytes(data)
    summary = replay(load_config(config), str(src), str(out), seed=1)
    return out.read_bytes(), summary


# --- defect 13: passthrough is byte-identical with empty queries ---------------------------------------


@pytest.mark.parametrize(("data", "suffix"), [(TSV_GOLDEN, ".tsv"), (JSONL_GOLDEN, ".jsonl")], ids=["tsv", "jsonl"])
def test_passthrough_keeps_empty_queries_byte_for_byte(tmp_path: Path, data: bytes, suffix: str) -> None:
    """config/passthrough.yaml over a TSV and a JSONL log whose queries are empty or blank: the output is the input,
    byte for byte; every record is an event, none a dead letter."""
    out, summary = run_replay(ready_chain(tmp_path, "passthrough"), data, suffix)
    assert out == data
    records = data.count(b"\n") + 1 - (suffix == ".tsv")  # no final newline; the TSV header is no record
    assert (summary.records_in, summary.events_in, summary.events_out, summary.dead_lettered) == (
        records,
        records,
        records,
        0,
    )


def test_grpc_passthrough_returns_messages_with_empty_queries_unchanged(tmp_path: Path) -> None:
    """Over gRPC with config/passthrough.yaml: each response batch serializes to the bytes of its request (empty
    and blank queries, seq and attributes included), nothing is dead-lettered, and the TSV golden log sent through
    `send` (client -> QueryEvents -> server -> client) comes back byte for byte."""
    from helpers.grpc_sidecar import sidecar

    config = ready_chain(tmp_path, "passthrough")
    first = EventBatch(batch_id="a")
    first.events.add(user="1", query="", time="2006-03-01 07:17:12", seq=1, attributes={"k": "v"})
    first.events.add(user="1", query="weather", rank="1", url="http://www.example.com", seq=2)
    second = EventBatch(batch_id="b")
    second.events.add(user="2", query="   ", seq=3)
    second.events.add(user="", query="", seq=4)
    requests = [first.SerializeToString(), second.SerializeToString()]
    src, out = tmp_path / "in.tsv", tmp_path / "out.tsv"
    src.write_bytes(TSV_GOLDEN)
    with sidecar(config) as sc:
        raw = sc.chan.stream_stream(
            "/querylog.v1.QueryLogFilter/Filter",
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b,
        )
        responses = list(raw(iter(requests)))
        sent = send_file(sc.chan, str(src), str(out), load_config(config).sidecar.schema, 2)
        dead = dict(sc.pipeline.dead.counts)
    assert responses == requests
    assert sent.sent == sent.received == 6
    assert out.read_bytes() == TSV_GOLDEN
    assert dead == {}


# --- defect 12: what each ready chain does with a query scrubbed to nothing --------------------------------


def emptied_policy(name: str) -> str | None:
    """The `emptied` a ready chain sets on its hipaa_scrub, as written in the file (None: no hipaa_scrub)."""
    doc = yaml.safe_load((CONFIG / f"{name}.yaml").read_text(encoding="utf-8"))
    for item in doc.get("filters") or ():
        ((filter_name, options),) = item.items()
        if filter_name == "hipaa_scrub":
            return str(options["emptied"])  # set explicitly: a KeyError here means it is not
    return None


def test_every_ready_chain_says_what_an_emptied_query_becomes() -> None:
    """Each ready chain with hipaa_scrub sets `emptied` explicitly (hipaa keeps, default and k-anonymity drop);
    passthrough has no scrubber, so nothing is emptied there."""
    assert {name: emptied_policy(name) for name in READY} == {
        "passthrough": None,
        "default": "drop",
        "hipaa": "keep",
        "k-anonymity": "drop",
    }


IDENTIFIER_ONLY = ["555-123-4567", "jane.doe@aol.com", "john smith", "192.168.1.20", "mary johnson 555-867-5309"]


def log_with_identifier_queries(users: int, seed: int) -> tuple[bytes, int]:
    """A generated log in which every 6th query is made only of identifiers; and the number of them."""
    buf = io.StringIO()
    generate_log(users, seed, buf, plant_identifiers=False)
    lines = buf.getvalue().split("\n")
    rng = random.Random(seed)
    n = 0
    for i in range(1, len(lines)):
        fields = lines[i].split("\t")
        if len(fields) == 5 and i % 6 == 0:
            fields[1] = rng.choice(IDENTIFIER_ONLY)
            lines[i] = "\t".join(fields)
            n += 1
    return "\n".join(lines).encode("utf-8"), n


def test_k_anonymity_chain_drops_and_counts_emptied_queries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """config/k-anonymity.yaml replayed over a generated log where every 6th query scrubs to nothing: no released
    record has an empty query, each emptied one is dropped and counted (hipaa_scrub dropped_emptied_query, the
    chain's only drop), and the audit of the output finds no empty query and no undecodable line."""
    monkeypatch.setenv("QUERYLOG_KB", str(kb_file()))
    config = ready_chain(tmp_path, "k-anonymity")
    # a generated log in user order inflates k past max_k: hold there, so the scrubber's drops are the only ones
    text = config.read_text(encoding="utf-8").replace("max_k_policy: suppress", "max_k_policy: hold")
    config.write_text(text, encoding="utf-8")
    data, planted = log_with_identifier_queries(60, 3)
    scrub_config = next(s.config for s in load_config(config).filters if s.name == "hipaa_scrub")
    scrubber = Scrubber(scrub_config)
    queries = [line.split("\t")[1] for line in data.decode("utf-8").split("\n")[1:] if line]
    emptied = sum(1 for q in queries if not scrubber.scrub(q)[0].strip())
    assert emptied >= planted > 20  # the planted ones, and any generated query that is only an identifier
    stats: dict[str, Any] = {}

    class Recording(Pipeline):
        def close(self) -> None:
            stats.update(self.stats())
            super().close()

    monkeypatch.setattr(replay_module, "Pipeline", Recording)
    out, summary = run_replay(config, data, ".tsv")
    released = out.decode("utf-8").split("\n")[1:]
    released = [line for line in released if line]
    assert released, "the buffer released something"
    assert all(line.split("\t")[1].strip() for line in released), "an empty query was released"
    scrub_counts = next(f["counts"] for f in stats["filters"] if f["name"] == "hipaa_scrub")
    assert scrub_counts["dropped_emptied_query"] == scrub_counts["emptied_query"] == emptied
    assert summary.events_dropped == emptied and summary.dead_lettered == 0
    assert summary.events_in == summary.events_out + summary.events_held + summary.events_dropped
    result = report.run_audit(
        str(config.parent / "in.tsv"), str(config.parent / "out.tsv"), categorise=lambda qs: [None] * len(qs)
    )
    assert result["empty_queries"] == {"original": 0, "protected": 0}
    assert result["undecodable_lines"] == {"original": 0, "protected": 0}
    assert result["records_protected"] == len(released) == summary.events_out


def test_hipaa_chain_keeps_emptied_queries_and_the_audit_reads_them(tmp_path: Path) -> None:
    """config/hipaa.yaml keeps a record whose query scrubs to nothing (the log keeps its size, the record its
    other fields); `querylog audit` reads each such record as a record with an empty query and counts it, on the
    protected side only (the original queries had content)."""
    config = ready_chain(tmp_path, "hipaa")
    data, _ = log_with_identifier_queries(20, 4)
    scrubber = Scrubber(next(s.config for s in load_config(config).filters if s.name == "hipaa_scrub"))
    queries = [line.split("\t")[1] for line in data.decode("utf-8").split("\n")[1:] if line]
    emptied = sum(1 for q in queries if not scrubber.scrub(q)[0].strip())
    assert emptied > 5  # names and IPs are removed; phones and emails become [PHONE] and [EMAIL] here
    out, summary = run_replay(config, data, ".tsv")
    assert summary.events_out == summary.events_in and summary.events_dropped == 0
    in_lines, out_lines = data.decode().split("\n"), out.decode().split("\n")
    assert len(out_lines) == len(in_lines)
    empty = [i for i, line in enumerate(out_lines[1:], 1) if line and not line.split("\t")[1]]
    assert len(empty) == emptied
    for i in empty:  # user, time, rank and URL of the record are the input's
        before, after = in_lines[i].split("\t"), out_lines[i].split("\t")
        assert before[0] == after[0] and before[2:] == after[2:]
    result = report.run_audit(
        str(config.parent / "in.tsv"), str(config.parent / "out.tsv"), categorise=lambda qs: [None] * len(qs)
    )
    assert result["empty_queries"] == {"original": 0, "protected": len(empty)}
    assert result["undecodable_lines"] == {"original": 0, "protected": 0}
    assert result["records_protected"] == result["records_original"] == summary.events_in
