"""The ready access-log config (issue 25 item 4): config/access-log.yaml on a generated nginx ``combined`` log.

What it must do: no planted identifier left (request or referer, raw or URL-decoded), no client address written
as it came, the user agent generalised, every line kept and still an access-log line of the same format.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from urllib.parse import unquote_plus

import pytest
import yaml
from click.testing import CliRunner
from helpers import ROOT
from helpers.access_log import generate, leaks

from sidecar.api import RecordBatch
from sidecar.cli import main
from sidecar.config import load_config
from sidecar.pipeline import Pipeline

CONFIG = ROOT / "config" / "access-log.yaml"
KEY = "access-log-test-key-not-secret-01"


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The ready config with its state in ``tmp_path`` and the field key set."""
    monkeypatch.setenv("QUERYLOG_FIELD_KEY", KEY)
    body = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    body["state_dir"] = str(tmp_path / "state")
    path = tmp_path / "access-log.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False), encoding="utf-8")
    return path


def protect(config: Path, lines: list[str]) -> tuple[list[str], dict[str, int]]:
    """The lines through the config's runtime (as a file source feeds it): the lines out, dead letters."""
    pipeline = Pipeline(load_config(config), with_sinks=False)
    try:
        codec = pipeline.ctx.codec_for("access_log")
        assert codec is not None
        records = [ln.removesuffix("\n") for ln in lines]
        receipt = pipeline.receive(RecordBatch(records, codec, "test", range(1, len(records) + 1)))
        out = [codec.encode(ev) + ev.eol for ev in receipt.delivered]
        return out, dict(receipt.reasons)
    finally:
        pipeline.close()


def test_config_show_and_check_config(config: Path) -> None:
    shown = CliRunner().invoke(main, ["config", "show", "access-log"])
    assert shown.exit_code == 0 and shown.output == CONFIG.read_text(encoding="utf-8")
    sample = config.parent / "sample.log"
    sample.write_text("".join(generate(50).lines), encoding="utf-8")
    checked = CliRunner().invoke(main, ["check-config", str(config), "--sample", str(sample)])
    assert checked.exit_code == 0, checked.output
    assert "has no policy" not in checked.output  # every variable of `combined` is named


def test_generated_log_leaves_no_identifier_and_no_address(config: Path) -> None:
    log = generate(2000, seed=3)
    out, dead = protect(config, log.lines)
    assert dead == {}
    assert len(out) == len(log.lines)  # every line kept
    found, verbatim = leaks(log, out)
    assert log.planted and found == 0
    assert verbatim == 0
    assert not any("Mozilla" in line or "Gecko" in line for line in out)
    again, _ = protect(config, generate(60, seed=9).lines)
    assert len(again) == 60


def test_lines_keep_their_format_and_only_the_protected_parts_change(config: Path) -> None:
    """Every output line is a `combined` line; the time, status, size and request path are the input's; the
    client is the same pseudonym for the same client."""
    log = generate(300, seed=5)
    out, _ = protect(config, log.lines)
    combined = re.compile(r'(\S+) - (\S+) \[([^]]+)\] "GET (\S+) HTTP/1.1" (\d+) (\d+) "([^"]*)" "([^"]*)"\n')
    pseudonym: dict[str, str] = {}
    for before, after in zip(log.lines, out, strict=True):
        a, b = combined.fullmatch(before), combined.fullmatch(after)
        assert a is not None and b is not None
        assert (b[3], b[5], b[6]) == (a[3], a[5], a[6])
        assert b[4].split("?")[0] == a[4].split("?")[0]
        assert pseudonym.setdefault(a[1], b[1]) == b[1] != a[1]
        assert re.fullmatch(r"(Firefox|Chrome|Safari|curl) \d+", b[8])


# ---- a log nginx wrote (data the generator did not make) ------------------------------------------------------
#: (client address, target, referer, user agent): the address reaches $remote_addr through nginx's realip module
#: (the test talks to nginx on a UNIX socket, whose clients have no address).
NGINX_REQUESTS = [
    ("203.0.113.7", "/search?q=cheap+flights&page=2", None, "curl/8.5.0"),
    ("203.0.113.7", "/search?q=call+555-867-5309+today", "http://localhost/search?q=cheap+flights&page=2", "Wget/1.21"),
    ("203.0.113.99", "/search?q=mail%20jane.doe%40example.com", None, "Mozilla/5.0 (X11; rv:121.0) Firefox/121.0"),
    ("2001:db8:1::42", "/search?q=ssn+536-22-8751+form", None, "python-requests/2.31"),
    ("2001:db8:1::43", "/static/app.css", "http://localhost/search?q=ssn+536-22-8751+form", "curl/7.88.1"),
    ("198.51.100.5", "/search?q=weather", "https://social.example.org/profile/jane.doe", "okhttp/4.12"),
]
NGINX_PLANTED = ["555-867-5309", "jane.doe@example.com", "jane.doe", "536-22-8751"]


@pytest.mark.skipif(not Path("/usr/sbin/nginx").exists(), reason="nginx is not installed")
def test_a_log_nginx_wrote(config: Path, tmp_path: Path) -> None:
    """The ready config on nginx's own `combined` log: every line kept, no planted identifier and no client
    address left, prefixes kept (203.0.113.7 and .99 share their first 25 bits; so do their pseudonyms)."""
    from helpers.nginx import nginx_access_log

    requests = [
        (t, ["-H", f"X-Forwarded-For: {a}", "-A", ua, *(["-e", r] if r else [])]) for a, t, r, ua in NGINX_REQUESTS
    ]
    realip = "set_real_ip_from unix:; real_ip_header X-Forwarded-For;\n  access_log {log} combined;"
    (tmp_path / "nginx").mkdir()
    log = nginx_access_log(tmp_path / "nginx", realip, requests)
    written = log.read_text(encoding="utf-8").splitlines(keepends=True)
    assert [ln.split(" ", 1)[0] for ln in written] == [a for a, *_ in NGINX_REQUESTS]
    out, dead = protect(config, written)
    assert dead == {} and len(out) == len(written)
    text = "".join(out)
    for planted in NGINX_PLANTED:
        assert planted not in text and planted not in unquote_plus(text)
    clients = [ln.split(" ", 1)[0] for ln in out]
    assert not set(clients) & {a for a, *_ in NGINX_REQUESTS}
    first, second = (int(ipaddress.ip_address(c)) for c in clients[1:3])
    assert 32 - (first ^ second).bit_length() == 25
    assert ipaddress.ip_address(clients[3]).version == 6
