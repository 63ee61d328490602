"""kill -9 of `querylog serve` behind the real syslog-ng loses no line (issue 27 item 2).

syslog-ng 3.38 (Debian; its own config, pid file, control socket, persist file and disk-buffer folder in tmp,
never the system instance) tails a TSV query log (``file()`` with ``flags(no-parse)``: the line is the message)
and POSTs it to our ``http`` source with its ``http()`` destination: ``Content-Type: text/plain``, ``body("${MSG}")``
one record per line, batches of 100 lines, a reliable ``disk-buffer()``. The sidecar (hipaa_scrub, a file sink)
starts on port 0 (the port read from its ``listening`` log event; syslog-ng's config is written after), is
SIGKILLed mid-stream, and while it is down the second half of the log is appended (syslog-ng keeps it in its disk
buffer and retries every ``time-reopen``). It restarts on the port of its first run, which syslog-ng knows: if
another process took that port in between, serve exits at once (address in use) and the test starts it again
until it binds. Every line must arrive scrubbed (the planted phone numbers, emails and SSNs gone); duplicates are
counted (at least once: a batch whose answer the kill cut off is sent again whole, so at most a batch per kill).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import yaml
from helpers import QUERYLOG
from helpers.planted_log import SCRUB, assert_scrubbed, delivered_ids, log_line
from helpers.serving import listening_ports
from helpers.waiting import exited, wait_until

SYSLOG_NG = shutil.which("syslog-ng") or "/usr/sbin/syslog-ng"
LINES = 20_000
BATCH = 100
KILL_AT = 3_000

pytestmark = pytest.mark.skipif(not os.path.isfile(SYSLOG_NG), reason="syslog-ng is not installed (Debian syslog-ng)")

SYSLOG_NG_CONF = """\
@version: 3.38
options {{ stats-freq(0); time-reopen(1); }};
source s_log {{ file("{input}" flags(no-parse) follow-freq(1)); }};
destination d_querylog {{
  http(url("http://127.0.0.1:{port}/") method("POST") headers("Content-Type: text/plain")
       body("${{MSG}}") delimiter("\\n") batch-lines({batch}) batch-timeout(200)
       disk-buffer(reliable(yes) dir("{buffer}") disk-buf-size(104857600)));
}};
log {{ source(s_log); destination(d_querylog); }};
"""


def _serve(config: Path, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    """Start serve (its JSON log appended to ``log``) until it logged ``listening``: the process and its port.
    A start that exits first (the port of the config taken by another process meanwhile) is tried again."""

    def start() -> tuple[subprocess.Popen[bytes], int] | None:
        before = len(listening_ports(log.read_text(encoding="utf-8").splitlines())) if log.exists() else 0
        with log.open("ab") as err:
            proc = subprocess.Popen([QUERYLOG, "serve", "--config", str(config)], stderr=err)

        def bound() -> list[int] | None:
            found = listening_ports(log.read_text(encoding="utf-8").splitlines())
            return found[before:] or None

        waited = wait_until(lambda: bound() or proc.poll() is not None, what="serve's listening event")
        if waited is True:  # exited before it listened
            return None
        return proc, waited[0]

    return wait_until(start, what="serve to start on its port", interval=0.5)


@pytest.mark.slow
def test_syslog_ng_http_disk_buffer_survives_kill9(tmp_path: Path) -> None:
    """syslog-ng file() → http() with a reliable disk-buffer → serve (http source, hipaa_scrub, file sink), serve
    SIGKILLed mid-stream and restarted on its port: every line arrives scrubbed; duplicates at most a batch."""
    source = tmp_path / "queries.tsv"
    half = LINES // 2
    source.write_text("".join(log_line(seq) for seq in range(half)), encoding="utf-8")
    out = tmp_path / "scrubbed.tsv"
    config = tmp_path / "querylog.yaml"
    body = {
        "state_dir": str(tmp_path / "state"),
        "logging": {"level": "info", "format": "json"},  # info: the listening event names the bound port
        "schema": {"format": "tsv", "header": False},
        "sources": [{"http": {"listen": "127.0.0.1:0"}}],
        "filters": [SCRUB],
        "sinks": [{"file": {"path": str(out)}}],
    }
    config.write_text(yaml.safe_dump(body, sort_keys=False), encoding="utf-8")
    serve_log = tmp_path / "serve.log"
    sidecar, port = _serve(config, serve_log)
    body["sources"] = [{"http": {"listen": f"127.0.0.1:{port}"}}]  # restarts: the port syslog-ng sends to
    config.write_text(yaml.safe_dump(body, sort_keys=False), encoding="utf-8")
    (tmp_path / "buffer").mkdir()
    conf = tmp_path / "syslog-ng.conf"
    conf.write_text(
        SYSLOG_NG_CONF.format(input=source, port=port, batch=BATCH, buffer=tmp_path / "buffer"), encoding="utf-8"
    )
    args = [SYSLOG_NG, "-F", "-e", "--no-caps", "-f", str(conf), "-p", str(tmp_path / "syslog-ng.pid")]
    args += ["-c", str(tmp_path / "syslog-ng.ctl"), "-R", str(tmp_path / "syslog-ng.persist")]
    with (tmp_path / "syslog-ng.log").open("wb") as sng_log:
        syslog_ng = subprocess.Popen(args, stdout=sng_log, stderr=subprocess.STDOUT)
    try:
        wait_until(
            lambda: sum(delivered_ids(out).values()) >= KILL_AT,
            what=f"{KILL_AT} lines delivered",
            abort=exited(syslog_ng),
        )
        sidecar.send_signal(signal.SIGKILL)
        sidecar.wait()
        at_kill = sum(delivered_ids(out).values())
        with source.open("a", encoding="utf-8") as more:  # written while the sidecar is down
            more.write("".join(log_line(seq) for seq in range(half, LINES)))
        sidecar, again = _serve(config, serve_log)
        assert again == port
        wait_until(
            lambda: len(delivered_ids(out)) >= LINES, what=f"all {LINES} lines delivered", abort=exited(syslog_ng)
        )
        sidecar.send_signal(signal.SIGTERM)
        assert sidecar.wait(60) == 0
    finally:
        syslog_ng.send_signal(signal.SIGTERM)
        try:
            syslog_ng.wait(30)
        except subprocess.TimeoutExpired:
            syslog_ng.kill()
            syslog_ng.wait()
        if sidecar.poll() is None:
            sidecar.kill()
            sidecar.wait()
    got: Counter[int] = delivered_ids(out)
    lost = sorted(set(range(LINES)) - set(got))
    duplicates = sum(n - 1 for n in got.values())
    print(
        f"syslog-ng http() + disk-buffer -> serve (http source): lines={LINES} kill -9 after {at_kill} delivered "
        f"(the other {LINES - half} appended while down); delivered={sum(got.values())} distinct={len(got)} "
        f"lost={len(lost)} duplicates={duplicates}"
    )
    assert lost == []
    assert at_kill < half  # the kill came mid-stream
    assert duplicates <= BATCH  # the batch whose answer the kill cut off, sent again
    assert_scrubbed(out)
