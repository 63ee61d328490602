"""The live audit of `serve` (issue 22 item 8): re-created pairs, identifiers in and out, the sampled linkage
estimate, bounded memory and CPU, its config, and its series on /metrics (never a value).

The chains run in process with the audit on every batch (``cpu_share: 1``); the last tests run `querylog serve`.
The generated users and queries are synthetic (``user17``, ``topic3 word12``).
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import QUERYLOG, ROOT, cli_env, exited, wait_until
from helpers.httptest import lines, post
from helpers.kb import kb_file
from helpers.serving import ServeLog
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from filters.dp_replace.budget import Ledger, spending
from sidecar.api import Event, RecordBatch
from sidecar.config import ConfigError, load_config
from sidecar.config.live_audit import LiveAuditConfig
from sidecar.linkage import COMMON_SENDERS, LinkageEstimate
from sidecar.liveaudit import CORES, LiveAudit, NoAudit, build_live_audit
from sidecar.metrics import PipelineCollector
from sidecar.pipeline import Pipeline
from sidecar.state import StateStore

KEY = "k" * 32
PSEUDONYMIZE = {"pseudonymize": {"role": "user", "key_env": "QUERYLOG_TEST_AUDIT_KEY"}}
K_ANONYMITY = {"category_buffer": {"k": 5, "category_field": "cat"}}


def _records(users: int = 60, per_user: int = 8, seed: int = 1) -> list[dict[str, Any]]:
    """Users of 3 categories, each sending ``per_user`` queries of a topic shared by a seventh of the users."""
    rng = random.Random(seed)
    out = [
        {"AnonID": f"user{u}", "Query": f"topic{u % 7} word{rng.randrange(40)}", "cat": f"c{u % 3}"}
        for u in range(users)
        for _ in range(per_user)
    ]
    rng.shuffle(out)
    return out


def _write(path: Path, filters: list[dict[str, Any]], **top: Any) -> Path:
    cfg = {
        "state_dir": "state",
        "filters": filters,
        "sinks": [{"file": {"path": "out.jsonl", "format": "jsonl"}}],
        "live_audit": {"enabled": "on", "cpu_share": 1, "refresh_seconds": 0.001, "scan_per_second": 1e6},
        **top,
    }
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return path


def _run(tmp_path: Path, filters: list[dict[str, Any]], records: list[dict[str, Any]]) -> dict[str, Any]:
    """The pipeline's stats after ``records`` went through in batches of 50 and a final release."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    cfg = load_config(_write(tmp_path / "sidecar.yaml", filters))
    pipeline = Pipeline(cfg)
    try:
        pipeline.audit = build_live_audit(cfg.sidecar.live_audit, None)
        codec = pipeline.ctx.codec_for("jsonl")
        assert codec is not None
        for i in range(0, len(records), 50):
            pipeline.receive(RecordBatch([json.dumps(r) for r in records[i : i + 50]], codec, "test"))
        pipeline.release(True)
        return pipeline.stats()
    finally:
        pipeline.close()


@pytest.fixture
def key_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUERYLOG_TEST_AUDIT_KEY", KEY)


def test_passthrough_recreates_every_pair_and_links_every_user(tmp_path: Path) -> None:
    s = _run(tmp_path, [], _records())
    audit = s["live_audit"]
    assert audit["events"] == {"in": 480, "out": 480}
    assert audit["recreated_pairs"] == 480
    assert audit["linkage"]["assessed"] == 60 and audit["linkage"]["share"] == 1.0


def test_a_pseudonymizing_chain_recreates_no_pair_but_every_user_links(tmp_path: Path, key_env: None) -> None:
    """The query is kept, the user replaced: not the same pair, yet each trail sits under one pseudonym."""
    audit = _run(tmp_path, [PSEUDONYMIZE], _records())["live_audit"]
    assert audit["events"]["out"] == 480 and audit["recreated_pairs"] == 0
    assert audit["linkage"]["assessed"] == 60 and audit["linkage"]["share"] == 1.0


def test_a_k_anonymity_chain_recreates_no_pair_and_links_no_user_beyond_chance(tmp_path: Path) -> None:
    s = _run(tmp_path, [K_ANONYMITY], _records())
    audit = s["live_audit"]
    assert audit["events"]["out"] > 400  # released by the final flush, audited on the bucket's credit
    assert audit["recreated_pairs"] == 0
    assert audit["linkage"]["assessed"] >= 30
    assert audit["linkage"]["share"] <= 1 / 5


def test_identifiers_in_and_out(tmp_path: Path) -> None:
    """The detector counts by type what comes in; a passthrough releases it (out), hipaa_scrub does not."""
    records = [{"AnonID": f"u{n}", "Query": f"call 555-123-{4000 + n} now", "cat": "c0"} for n in range(20)]
    leak = _run(tmp_path / "a", [], records)["live_audit"]["identifiers"]
    assert leak["in"].get("phone") == 20 and leak["out"].get("phone") == 20
    scrubbed = _run(tmp_path / "b", [{"hipaa_scrub": {}}], records)["live_audit"]["identifiers"]
    assert scrubbed["in"].get("phone") == 20 and scrubbed["out"] == {}


def _event(user: int, query: int) -> Event:
    return Event(f"user{user}", f"query {query}")


def test_memory_is_bounded_by_the_window_and_the_reservoir() -> None:
    """A stream far larger than every size: the window, the reservoir, each sampled user's queries and candidates
    and the query index stay within their bounds; the distinct users are all counted."""
    config = LiveAuditConfig(
        enabled="on", cpu_share=1, window_pairs=500, reservoir_users=20, queries_per_user=5, candidates_per_user=3
    )
    audit = LiveAudit(config, randbelow=random.Random(3).randrange)
    rng = random.Random(2)
    for _ in range(100):
        batch = [_event(rng.randrange(5000), rng.randrange(20000)) for _ in range(500)]
        assert audit.incoming(batch)
        audit.outgoing([Event(f"other{rng.randrange(50)}", e.query) for e in batch], True)
        assert len(audit.window) <= 500
    link = audit.linkage
    assert len(link.slots) == 20 and len(link.by_user) == 20
    assert all(len(s.queries) <= 5 and len(s.candidates) <= 3 for s in link.slots)
    assert sum(len(v) for v in link.index.values()) <= sum(len(s.queries) for s in link.slots) <= 100
    assert 4900 <= link.users_seen <= 5000  # the seen-users filter's false positives skip a few
    assert audit.recreated == 0  # every release was under another id


def test_a_query_many_sampled_users_sent_is_matched_for_its_first_senders_only() -> None:
    """40 users each send a common query and 3 of their own: the index keeps 16 senders of the common one (each of
    its releases costs at most 16 steps); a release of the common query alone assesses nobody; every user still
    links by their own queries."""
    audit = LiveAudit(LiveAuditConfig(enabled="on", cpu_share=1, detector=None))
    sent = [_event(u, q) for u in range(40) for q in (0, 100 + 3 * u, 101 + 3 * u, 102 + 3 * u)]
    audit.incoming(sent)
    link = audit.linkage
    assert len(link.index[audit._hash(b"q", "query 0")]) == COMMON_SENDERS
    audit.outgoing([_event(u, 0) for u in range(40)], True)
    assert audit.estimate().assessed == 0
    audit._refreshed = None
    audit.outgoing(sent, True)
    assert audit.estimate() == LinkageEstimate(40, 40, 40)


def test_the_window_forgets_pairs_older_than_its_seconds() -> None:
    now = [0.0]
    audit = LiveAudit(LiveAuditConfig(enabled="on", cpu_share=1, window_seconds=10), clock=lambda: now[0])
    audit.incoming([_event(1, 1)])
    now[0] = 5.0
    audit.incoming([_event(2, 2)])
    now[0] = 12.0
    audit.incoming([_event(3, 3)])
    assert len(audit.window) == 2  # the first is older than 10 s
    audit.outgoing([_event(1, 1), _event(2, 2), _event(3, 3)], True)
    assert audit.recreated == 2


def test_the_reservoir_is_a_uniform_sample_of_distinct_users() -> None:
    """Algorithm R over distinct users (a heavy user is no likelier to be sampled): the mean rank of the sampled
    users is that of all of them, whatever order and repetition they come in."""
    ranks = []
    for seed in range(40):
        audit = LiveAudit(
            LiveAuditConfig(enabled="on", cpu_share=1, reservoir_users=50), randbelow=random.Random(seed).randrange
        )
        users = list(range(1000))
        # the first 100 users send 20 events each, the rest one
        stream = [_event(u, 0) for u in users for _ in range(20 if u < 100 else 1)]
        random.Random(seed).shuffle(stream)
        audit.incoming(stream)
        sampled = {audit._hash(b"u", f"user{u}"): u for u in users}
        ranks.extend(sampled[slot.user] for slot in audit.linkage.slots)
    heavy = sum(1 for r in ranks if r < 100) / len(ranks)
    assert 0.07 <= heavy <= 0.13  # 10% of the users, not the 69% of the events they sent


def test_cpu_share_bounds_the_time_spent() -> None:
    """With a 2% share most batches pass unaudited, and the audit's CPU seconds stay within the share of the
    process's CPU time (plus the bucket's burst and one batch)."""
    audit = LiveAudit(LiveAuditConfig(enabled="on", cpu_share=0.02, detector=None))
    batch = [_event(n, n) for n in range(1000)]
    t0 = time.process_time()
    audited = 0
    for _ in range(300):
        sampled = audit.incoming(batch)
        audit.outgoing(batch, sampled)
        audited += sampled
        sum(i * i for i in range(20000))  # the rest of the pipeline's work on the batch
    spent = time.process_time() - t0
    assert 0 < audited <= 100  # auditing a batch costs more than the rest of its work: 1 in 3 would be 2% alone
    # the share of the CPU time, the bucket's 10 ms of credit at the start, and the last batch's overrun (a batch
    # costs about 3 ms; every batch audited would be about 1 s)
    assert audit.seconds <= 0.02 * spent + 0.01 + 0.1


def test_an_overdrawn_bucket_reads_no_cpu_clock_until_it_can_have_refilled() -> None:
    """After an audit overdraws the bucket, batches pass on the monotonic clock alone until the process, on every
    core, can have earned the deficit back; then the CPU time is read and the next batch is audited."""
    wall, cpu, reads = [0.0], [0.0], [0]

    def process_time() -> float:
        reads[0] += 1
        return cpu[0]

    thread = iter([0.0, 0.06])  # the audit of one batch takes 0.06 CPU s: 0.05 overdrawn
    audit = LiveAudit(
        LiveAuditConfig(enabled="on", cpu_share=0.02, detector=None),
        clock=lambda: wall[0],
        process_clock=process_time,
        cpu_clock=lambda: next(thread),
    )
    assert audit.incoming([_event(1, 1)])
    reads[0] = 0
    for t in range(100):
        wall[0] = cpu[0] = t * 0.01  # under 2.5 / CORES s: the deficit of 0.05 s at 2% needs 2.5 CPU s
        if wall[0] < 2.5 / CORES:
            assert not audit.incoming([_event(1, 1)])
    assert reads[0] == 0
    wall[0] = cpu[0] = 3.0  # the process did spend 3 CPU s: the bucket is full again
    thread = iter([0.0, 0.001])
    assert audit.incoming([_event(1, 1)]) and reads[0] == 1


def test_no_audit_does_nothing() -> None:
    off = build_live_audit(LiveAuditConfig(), None)  # auto without metrics_listen
    assert isinstance(off, NoAudit) and not off.incoming([_event(1, 1)]) and off.stats() == {}
    assert isinstance(build_live_audit(LiveAuditConfig(enabled="off"), "127.0.0.1:0"), NoAudit)
    assert isinstance(build_live_audit(LiveAuditConfig(detector=None), "127.0.0.1:0"), LiveAudit)


@pytest.mark.parametrize(
    ("block", "key"),
    [
        ({"detector": "drop"}, "live_audit.detector"),
        ({"detector": "hipaa_scrb"}, "live_audit.detector"),
        ({"cpu_share": 0}, "live_audit.cpu_share"),
        ({"cpu_share": 1.5}, "live_audit.cpu_share"),
        ({"enabled": "yes"}, "live_audit.enabled"),
        ({"window_pairs": 0}, "live_audit.window_pairs"),
    ],
)
def test_check_config_locates_a_bad_live_audit_block(tmp_path: Path, block: dict[str, Any], key: str) -> None:
    path = tmp_path / "sidecar.yaml"
    path.write_text(f"state_dir: state\nfilters: []\nlive_audit:\n  {json.dumps(block)[1:-1]}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert err.value.key == key and err.value.line == 4
    run = subprocess.run([QUERYLOG, "check-config", str(path)], capture_output=True, text=True, env=cli_env())
    assert run.returncode == 2 and f"sidecar.yaml:4: {key}" in run.stderr


def _families(stats: dict[str, Any]) -> dict[str, Any]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PipelineCollector(lambda: stats))
    text = generate_latest(registry).decode()
    return {"text": text, **{f.name: f for f in text_string_to_metric_families(text)}}


def _value(families: dict[str, Any], name: str, **labels: str) -> float:
    for sample in families[name].samples:
        if all(sample.labels.get(k) == v for k, v in labels.items()) and not sample.name.endswith("_created"):
            return float(sample.value)
    raise KeyError(name)


def test_the_series_on_metrics_carry_no_value(tmp_path: Path) -> None:
    records = [*_records(), {"AnonID": "user1", "Query": "mail me at someone@example.org", "cat": "c0"}]
    stats = _run(tmp_path, [K_ANONYMITY], records)
    f = _families(stats)
    smallest_k = min(stats["filters"][0]["k_per_category"].values())
    assert _value(f, "querylog_live_audit_recreated_pairs") == 0
    assert _value(f, "querylog_live_audit_events", side="in") == 481
    assert _value(f, "querylog_live_audit_identifiers", side="in", type="email") == 1
    assert smallest_k >= 5  # raised where no valid pair was found at 5
    assert _value(f, "querylog_live_audit_linkage_chance_ratio") == pytest.approx(1 / smallest_k)
    assert _value(f, "querylog_category_buffer_max_k", category="c0") >= 5
    assert "querylog_category_buffer_held" in f and "querylog_queries_withheld" in f
    for value in ("user1", "topic", "word", "example.org"):
        assert value not in f["text"]


# ---- serve ---------------------------------------------------------------------------------------------------


def _serve_config(tmp_path: Path, filters: list[dict[str, Any]]) -> Path:
    return _write(
        tmp_path / "sidecar.yaml",
        filters,
        logging={"level": "info", "format": "json"},
        metrics_listen="127.0.0.1:0",
        flush_interval_seconds=0.2,
        sources=[{"http": {"listen": "127.0.0.1:0"}}],
        live_audit={"refresh_seconds": 0.2, "cpu_share": 1},  # enabled: auto (metrics_listen is set)
    )


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    procs: list[subprocess.Popen[str]] = []

    def start(filters: list[dict[str, Any]]) -> tuple[ServeLog, int, int]:
        cmd = [QUERYLOG, "serve", "-c", str(_serve_config(tmp_path, filters))]
        proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=cli_env())
        procs.append(proc)
        log = ServeLog(proc)
        return log, log.ports("http")[0], log.metrics_port()

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)


def _scrape(port: int) -> dict[str, Any]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {"text": text, **{f.name: f for f in text_string_to_metric_families(text)}}


def _post_all(port: int, records: list[dict[str, Any]]) -> None:
    for i in range(0, len(records), 40):
        assert post(port, lines(*records[i : i + 40])).status == 200


def test_serve_with_a_leaking_chain_raises_the_recreated_pair_and_linkage_metrics(serve: Any) -> None:
    log, http_port, metrics_port = serve([])
    assert _value(_scrape(metrics_port), "querylog_live_audit_recreated_pairs") == 0
    _post_all(http_port, _records())
    families = wait_until(
        lambda: (f := _scrape(metrics_port)) and _value(f, "querylog_live_audit_linkage_ratio") > 0.2 and f,
        what="the linkage gauge to rise above 1/k",
        abort=exited(log.proc),
    )
    assert _value(families, "querylog_live_audit_recreated_pairs") == 480
    assert _value(families, "querylog_live_audit_linkage_ratio") == 1.0
    assert "user1" not in families["text"] and "topic" not in families["text"]


def test_serve_with_a_k_anonymity_chain_keeps_the_recreated_pair_counter_at_zero(serve: Any) -> None:
    log, http_port, metrics_port = serve([K_ANONYMITY])
    _post_all(http_port, _records())
    families = wait_until(
        lambda: (f := _scrape(metrics_port)) and _value(f, "querylog_live_audit_events", side="out") >= 300 and f,
        what="the timed releases to be audited",
        abort=exited(log.proc),
    )
    assert _value(families, "querylog_live_audit_recreated_pairs") == 0
    assert _value(families, "querylog_live_audit_linkage_ratio") <= _value(
        families, "querylog_live_audit_linkage_chance_ratio"
    )


def test_the_dp_ledger_reports_users_at_budget_and_spent_quantiles(tmp_path: Path) -> None:
    """dp_replace's stats read its ledger: users of the window, those who cannot afford one more concept, the
    epsilon-spent quantiles (stream mode: 1 epsilon, 10 concepts of 1/10)."""
    state = StateStore(tmp_path)
    ledger = Ledger(state, bytes)  # a zero salt: the test's own ledger
    try:
        cost = Fraction(1, 10)
        accounts = ledger.accounts([ledger.key(f"user{n}") for n in range(10)], 0)
        for n, acc in enumerate(sorted(accounts.values(), key=id)):
            acc.price(cost, Fraction(1), 0.1)
            acc.spend(10 if n < 3 else n)  # three at the budget (1), the others at 0.3 ... 0.9
        ledger.commit(0)
        out = spending(ledger, 0, Fraction(1), cost)
        assert out["users"] == 10 and out["users_at_budget"] == 3
        assert out["spent_quantiles"] == {"0.5": 0.7, "0.9": 1.0, "0.99": 1.0, "1.0": 1.0}
        assert spending(ledger, 1, Fraction(1), cost) == {"users": 0, "users_at_budget": 0, "spent_quantiles": {}}
    finally:
        ledger.close()
        state.close()


# ---- independent data: the real AOL excerpt (skipped when /work/shared/data is absent) ----------------------------

AOL = ROOT.parent / "shared" / "data" / "aol-sample.tsv"


def _replay_tsv(tmp_path: Path, filters: list[dict[str, Any]], path: Path) -> dict[str, Any]:
    """The live audit's stats after the log went through in time order (users interleaved), batches of 1000."""
    header, *body = path.read_text(encoding="utf-8", errors="surrogateescape").splitlines()
    body.sort(key=lambda line: [*line.split("\t"), "", "", ""][2])
    tmp_path.mkdir(parents=True, exist_ok=True)
    cfg = load_config(_write(tmp_path / "sidecar.yaml", filters, schema={"format": "tsv"}))
    pipeline = Pipeline(cfg)
    try:
        pipeline.audit = build_live_audit(cfg.sidecar.live_audit, None)
        codec = pipeline.ctx.codec_for("tsv")
        assert codec is not None
        codec.accept_header(header)
        for i in range(0, len(body), 1000):
            pipeline.receive(RecordBatch(body[i : i + 1000], codec, "test"))
        pipeline.release(True)
        return dict(pipeline.stats()["live_audit"])
    finally:
        pipeline.close()


@pytest.mark.skipif(not AOL.is_file(), reason="shared data absent")
def test_on_the_real_sample_the_audit_tells_the_chains_apart(tmp_path: Path, key_env: None) -> None:
    """Data not generated by us (39,092 real events of 132 users): a passthrough re-creates every pair and links
    every assessed user; pseudonymizing re-creates none and still links them all; the shipped k-anonymity chain
    (scrub, classify, category_buffer k=5) re-creates none, releases no identifier its detectors find, and links
    below 1/5 (measured 0.031). Counts only: nothing of the log is printed or kept."""
    passthrough = _replay_tsv(tmp_path / "a", [], AOL)
    assert passthrough["recreated_pairs"] == passthrough["events"]["out"] == 39092
    assert passthrough["linkage"]["share"] == 1.0 and passthrough["linkage"]["assessed"] >= 120
    pseudonymized = _replay_tsv(tmp_path / "b", [PSEUDONYMIZE], AOL)
    assert pseudonymized["recreated_pairs"] == 0 and pseudonymized["linkage"]["share"] == 1.0
    shipped = yaml.safe_load((ROOT / "config" / "k-anonymity.yaml").read_text(encoding="utf-8"))["filters"]
    for f in shipped:
        if "classify" in f:
            f["classify"] = {**(f["classify"] or {}), "kb_path": str(kb_file()), "rebuild": False}
    k_anonymous = _replay_tsv(tmp_path / "c", shipped, AOL)
    assert k_anonymous["recreated_pairs"] == 0 and k_anonymous["events"]["out"] > 30000
    assert sum(k_anonymous["identifiers"]["in"].values()) > 0 and k_anonymous["identifiers"]["out"] == {}
    assert k_anonymous["linkage"]["assessed"] >= 100 and k_anonymous["linkage"]["share"] < 1 / 5
