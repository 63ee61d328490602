"""docs/STACK.md's recipes run as written: each ``<!-- recipe: NAME -->`` block is read from the page.

nginx: the page's ``log_format``/``access_log`` lines go into a real nginx (helpers.nginx); the page's sidecar config
and command (paths moved into a temporary folder) replay what nginx wrote. Apache: the page's ``LogFormat`` is the
config's ``apache_format`` and lines are written as mod_log_config writes them (Apache cannot listen on port 0 or a
socket here)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers import QUERYLOG, ROOT
from helpers.nginx import NGINX, nginx_access_log

from adapters.accesslog.codec import AccessLogCodec
from adapters.accesslog.formats import apache_layout
from sidecar.api import SchemaConfig

PAGE = ROOT / "docs" / "STACK.md"
SSN = "536-22-8751"
ENV = {**os.environ, "QUERYLOG_HMAC_KEY": "a-test-key-of-enough-bytes-0123456789"}


def recipes() -> dict[str, str]:
    text = PAGE.read_text(encoding="utf-8")
    return {m[1]: m[2] for m in re.finditer(r"<!-- recipe: (.+?) -->\n```\w*\n(.*?)```", text, re.DOTALL)}


def run_recipe(tmp_path: Path, config_name: str, command_name: str, log: Path) -> tuple[Path, str]:
    """The page's config (state_dir in ``tmp_path``) and command (its input and output moved there)."""
    found = recipes()
    config = yaml.safe_load(found[config_name])
    config["state_dir"] = str(tmp_path / "state")
    path = tmp_path / config_name
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    words = shlex.split(found[command_name])
    assert words[0].startswith("QUERYLOG_HMAC_KEY=") and words[1:4] == ["querylog", "replay", "--config"]
    assert words[4] == config_name and words[6] == "-o"
    out = tmp_path / "out.log"
    run = subprocess.run(
        [QUERYLOG, *words[2:4], str(path), str(log), "-o", str(out)],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    return out, run.stderr


def test_the_page_has_every_recipe() -> None:
    assert set(recipes()) >= {  # the web-server recipes (other sections may add theirs)
        "nginx.conf",
        "querylog-nginx.yaml",
        "nginx command",
        "apache2.conf",
        "querylog-apache.yaml",
        "apache command",
    }


@pytest.mark.skipif(not Path(NGINX).exists(), reason="nginx is not installed")
def test_the_nginx_recipe(tmp_path: Path) -> None:
    found = recipes()
    logging = found["nginx.conf"].replace("/var/log/nginx/search.log", "{log}")
    sent = [
        ("/search?q=cheap+flights", ["-b", "sid=s1", "-A", "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Firefox/120.0"]),
        (f"/search?q=ssn+{SSN}", ["-b", "sid=s2", "-u", "bob:pw"]),
        ("/product/7", ["-b", "sid=s2", "-e", f"http://localhost/search?q=ssn+{SSN}"]),
    ]
    log = nginx_access_log(tmp_path, logging, sent)
    schema_text = yaml.safe_load(found["querylog-nginx.yaml"])["schema"]["log_format"]
    assert re.sub(r"'\s+'", "", logging.split("log_format search ", 1)[1].split(";")[0]).strip("'") == schema_text
    out, _ = run_recipe(tmp_path, "querylog-nginx.yaml", "nginx command", log)
    text = out.read_text(encoding="utf-8")
    assert SSN not in text and "bob" not in text and "sid=" not in text
    lines = text.splitlines()
    assert len(lines) == 3
    assert '"Firefox 120"' in lines[0] and '"http://localhost/search?q=ssn"' in lines[2]
    assert all(" - - [" in x for x in lines)  # remote_user dropped


APACHE_LINES = [
    # what mod_log_config writes: %b is - for no body, \" inside a quoted value, \xhh for bytes outside ASCII
    '198.51.100.7 - - [10/Oct/2000:13:55:36 -0700] "GET /search?q=caf\\xc3\\xa9 HTTP/1.1" 200 - "-" '
    '"Mozilla/5.0 \\"quoted\\""',
    f'198.51.100.7 - - [10/Oct/2000:13:55:40 -0700] "GET /search?q=my+ssn+{SSN}&page=2 HTTP/1.1" 200 512 '
    f'"http://localhost/search?q=caf%C3%A9" "curl/8"',
    '198.51.100.7 - - [10/Oct/2000:13:55:41 -0700] "GET /search?q=flu HTTP/1.1" 200 512 '
    f'"http://localhost/search?q=my+ssn+{SSN}&page=2" "curl/8"',
]


def test_the_apache_recipe(tmp_path: Path) -> None:
    found = recipes()
    log_format = re.match(r'LogFormat "(.*)" combined$', found["apache2.conf"].splitlines()[0])
    assert log_format is not None and apache_layout(log_format[1]) == apache_layout("combined")
    assert yaml.safe_load(found["querylog-apache.yaml"])["schema"]["apache_format"] == "combined"
    log = tmp_path / "search.log"
    log.write_text("\n".join(APACHE_LINES) + "\n", encoding="utf-8")
    out, _ = run_recipe(tmp_path, "querylog-apache.yaml", "apache command", log)
    lines = out.read_text(encoding="utf-8").splitlines()
    assert SSN not in "\n".join(lines) and len(lines) == 3
    codec = AccessLogCodec(SchemaConfig(format="access_log", apache_format="combined"))
    bad: list[tuple[int, str]] = []
    events = codec.decode_many(lines, "\n", bad)
    assert bad == [] and [e.query for e in events] == ["café", "my ssn", "flu"]
    assert len({e.user for e in events}) == 1 and events[0].user != "198.51.100.7"  # pseudonymized
    assert codec.get_field(events[0], "http_user_agent") == 'Mozilla/5.0 "quoted"'
    assert codec.get_field(events[2], "http_referer") == "http://localhost/search?q=my+ssn&page=2"
    assert lines[0].split(" ", 1)[1] == APACHE_LINES[0].split(" ", 1)[1]  # only the user changed
