"""kill -9 of `querylog filter --confirm` under the real rsyslogd loses no message (issue 27 item 3).

rsyslogd (Debian's 8.2302, unpacked beside syslog-ng; its own config, pid file and work folder in tmp, no network
port, the system instance untouched) tails a TSV query log with ``imfile`` and hands each line to ``omprog`` with
``confirmMessages="on"``: the program is ``querylog filter --confirm`` (hipaa_scrub, a file sink), which answers
``OK`` per message once it is durable. The sidecar is SIGKILLed mid-stream (at a seeded point of each part of the
log; the next part is written after the kill); rsyslog starts it again and sends the unconfirmed message again
(``action.resumeRetryCount="-1"``: it never gives a message up). Every line must
arrive, scrubbed (the planted phone numbers, emails and SSNs gone); duplicates are counted: at most one per kill,
since rsyslog sends one message at a time and waits for its ``OK``.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
import yaml
from helpers import QUERYLOG
from helpers.planted_log import SCRUB, assert_scrubbed, delivered_ids, log_line
from helpers.waiting import exited, wait_until

RSYSLOG = Path(os.environ.get("QUERYLOG_RSYSLOG_ROOT", "/opt/querylog-peers/rsyslog"))
RSYSLOGD = RSYSLOG / "usr" / "sbin" / "rsyslogd"
MODULES = RSYSLOG / "usr" / "lib" / "x86_64-linux-gnu" / "rsyslog"
LINES = 6000
KILLS = 2
SEED = int(os.environ.get("QUERYLOG_KILL9_SEED", "27"))

pytestmark = pytest.mark.skipif(
    not RSYSLOGD.is_file(), reason=f"rsyslogd not unpacked at {RSYSLOG} (./run setup unpacks it)"
)


RSYSLOG_CONF = """\
global(workDirectory="{work}")
module(load="imfile" mode="polling" PollingInterval="1")
module(load="omprog")
input(type="imfile" file="{input}" tag="querylog" ruleset="toquerylog" freshStartTail="off")
template(name="msgonly" type="string" string="%msg%\\n")
ruleset(name="toquerylog") {{
  action(type="omprog" binary="{querylog} filter --confirm -c {config}" template="msgonly"
         confirmMessages="on" confirmTimeout="60000" reportFailures="on" output="{omprog_log}"
         action.resumeInterval="1" action.resumeRetryCount="-1")
}}
*.* action(type="omfile" file="{internal}")
"""


def _children(rsyslogd: subprocess.Popen[bytes]) -> list[psutil.Process]:
    """The running `querylog filter --confirm` processes rsyslogd started."""
    try:
        kids = psutil.Process(rsyslogd.pid).children()
    except psutil.NoSuchProcess:
        return []
    out = []
    for kid in kids:
        try:
            if "--confirm" in kid.cmdline() and kid.status() != psutil.STATUS_ZOMBIE:
                out.append(kid)
        except psutil.NoSuchProcess:
            continue
    return out


@pytest.mark.slow
def test_rsyslog_omprog_confirm_survives_kill9(tmp_path: Path) -> None:
    """rsyslogd imfile → omprog → `filter --confirm` (hipaa_scrub → file), the sidecar SIGKILLed at KILLS points:
    every line arrives scrubbed, duplicates at most one per kill."""
    rng = random.Random(SEED)
    work = tmp_path / "rsyslog-work"
    work.mkdir()
    # the log grows in KILLS + 1 parts, the next one written after each kill: rsyslog always has a message to
    # send to the killed sidecar, so it starts it again even when the kill came after the part's last line
    ends = [LINES * (i + 1) // (KILLS + 1) for i in range(KILLS + 1)]
    source = tmp_path / "queries.tsv"
    source.write_text("".join(log_line(seq) for seq in range(ends[0])), encoding="utf-8")
    out = tmp_path / "scrubbed.tsv"
    config = tmp_path / "querylog.yaml"
    body = {
        "state_dir": str(tmp_path / "state"),
        "logging": {"level": "info", "format": "json"},
        "schema": {"format": "tsv", "header": False},
        "filters": [SCRUB],
        "sinks": [{"file": {"path": str(out)}}],
    }
    config.write_text(yaml.safe_dump(body, sort_keys=False), encoding="utf-8")
    conf = tmp_path / "rsyslog.conf"
    conf.write_text(
        RSYSLOG_CONF.format(
            work=work,
            input=source,
            querylog=QUERYLOG,
            config=config,
            omprog_log=tmp_path / "omprog.log",
            internal=tmp_path / "rsyslog-internal.log",
        ),
        encoding="utf-8",
    )
    args = [str(RSYSLOGD), "-n", "-f", str(conf), "-i", str(tmp_path / "rsyslogd.pid"), "-M", str(MODULES)]
    started = time.monotonic()
    rsyslogd = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    begins = [0, *ends[:-1]]
    kill_points = [
        rng.randrange(begin + (end - begin) // 10, end) for begin, end in zip(begins[:-1], ends[:-1], strict=True)
    ]
    killed: list[int] = []
    try:
        for point, end, following in zip(kill_points, ends[:-1], ends[1:], strict=True):
            child = wait_until(
                lambda p=point: sum(delivered_ids(out).values()) >= p and _children(rsyslogd),
                what=f"{point} lines written by a running sidecar",
                abort=exited(rsyslogd),
            )[0]
            child.send_signal(signal.SIGKILL)
            child.wait(30)
            killed.append(sum(delivered_ids(out).values()))
            with source.open("a", encoding="utf-8") as more:
                more.write("".join(log_line(seq) for seq in range(end, following)))
            # rsyslog starts a new one for the unconfirmed (or the next) message, after action.resumeInterval
            wait_until(
                lambda pid=child.pid: [k for k in _children(rsyslogd) if k.pid != pid],
                what="rsyslog to start the sidecar again",
                abort=exited(rsyslogd),
            )
        wait_until(
            lambda: len(delivered_ids(out)) >= LINES, what=f"all {LINES} lines in the output", abort=exited(rsyslogd)
        )
        seconds = time.monotonic() - started
    finally:
        rsyslogd.send_signal(signal.SIGTERM)
        try:
            rsyslogd.wait(30)
        except subprocess.TimeoutExpired:
            rsyslogd.kill()
            rsyslogd.wait()
    got = delivered_ids(out)
    lost = sorted(set(range(LINES)) - set(got))
    duplicates = sum(n - 1 for n in got.values())
    print(
        f"rsyslog omprog -> filter --confirm: lines={LINES} in parts ending at {ends}, kill -9 after {killed} "
        f"lines written; "
        f"delivered={sum(got.values())} distinct={len(got)} lost={len(lost)} duplicates={duplicates} "
        f"({LINES / seconds:,.0f} lines/s overall, kills and restarts included)"
    )
    assert lost == []
    assert duplicates <= KILLS  # one message in flight at a time: only it can be written and sent again
    assert_scrubbed(out)
