"""A real nginx (Debian's) writes the access log; the sidecar replays it.

nginx listens on a UNIX socket (no port to pick) with a custom ``log_format`` (combined plus ``$http_x_user_id``,
the user: a UNIX-socket client has no address) and a static ``/search``; curl sends searches with ``+`` and
``%20`` spaces, ``%2B``, raw and percent-encoded UTF-8, an SSN and an e-mail address, and referers of the search
path. Passthrough gives nginx's own file back byte for byte; hipaa_scrub removes the planted identifiers from the
requests and from the referers that carried them.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers import QUERYLOG
from helpers.nginx import NGINX, nginx_access_log

from adapters.accesslog.codec import AccessLogCodec
from sidecar.api import RolesConfig, SchemaConfig

LOG_FORMAT = (
    '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" '
    '"$http_user_agent" "$http_x_user_id"'
)
SSN = "536-22-8751"  # a valid-looking SSN (the scrubber knows 123-45-6789 is not one)
#: (user, target, referer)
REQUESTS = [
    ("u1", "/search?q=cheap+flights&page=2", None),
    ("u1", "/search?q=cheap%20flights&page=3", "http://localhost/search?q=cheap+flights&page=2"),
    ("u2", "/search?q=a%2Bb+plus", None),
    ("u2", "/search?q=caf\u00e9+au+lait", None),  # raw UTF-8 on the wire: nginx logs \xC3\xA9
    ("u2", "/search?q=%E2%9C%93+check", "http://localhost/search?q=caf\u00e9+au+lait"),
    ("u3", f"/search?q=my+ssn+{SSN}+help", None),
    ("u3", "/search?q=flu&page=1", f"http://localhost/search?q=my+ssn+{SSN}+help"),
    ("u4", "/search?q=email+jane.doe%40example.com", None),
    ("u4", "/static/app.css", "http://localhost/search?q=email+jane.doe%40example.com"),
]
CONFIG = """\
state_dir: state
schema:
  format: access_log
  log_format: '{fmt}'
  search_path: /search
  roles: {{user: http_x_user_id, query: request.q, time: time_local, rank: null, url: null}}
filters: {filters}
"""

pytestmark = pytest.mark.skipif(not Path(NGINX).exists(), reason="nginx is not installed")


@pytest.fixture(scope="module")
def nginx_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The access log nginx wrote for :data:`REQUESTS`."""
    requests = [(t, ["-H", f"X-User-Id: {u}", *(["-e", r] if r else [])]) for u, t, r in REQUESTS]
    logging = f"log_format search '{LOG_FORMAT}';\n  access_log {{log}} search;"
    return nginx_access_log(tmp_path_factory.mktemp("nginx"), logging, requests)


def replay(tmp_path: Path, log: Path, filters: str) -> bytes:
    config = tmp_path / "querylog.yaml"
    config.write_text(CONFIG.format(fmt=LOG_FORMAT, filters=filters), encoding="utf-8")
    out = tmp_path / "out.log"
    run = subprocess.run(
        [QUERYLOG, "replay", "--config", str(config), str(log), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    return out.read_bytes()


def test_nginx_logged_what_the_test_sent(nginx_log: Path) -> None:
    text = nginx_log.read_text(encoding="utf-8")
    assert "q=caf\\xC3\\xA9+au+lait" in text  # raw UTF-8 escaped by nginx
    assert text.count(SSN) == 2 and text.count("jane.doe%40example.com") == 2


def test_passthrough_is_nginxs_file_byte_for_byte(nginx_log: Path, tmp_path: Path) -> None:
    assert replay(tmp_path, nginx_log, "[]") == nginx_log.read_bytes()


def test_hipaa_scrub_removes_the_planted_identifiers_from_request_and_referer(nginx_log: Path, tmp_path: Path) -> None:
    out = replay(tmp_path, nginx_log, "[{hipaa_scrub: {}}]").decode("utf-8")
    assert SSN not in out and "jane.doe" not in out and "example.com" not in out
    original = nginx_log.read_text(encoding="utf-8").splitlines()
    lines = out.splitlines()
    assert len(lines) == len(original)
    for before, after, (_, target, referer) in zip(original, lines, REQUESTS, strict=True):
        planted = SSN in target or "jane.doe" in target or (referer and (SSN in referer or "jane.doe" in referer))
        assert (before == after) != bool(planted), (target, referer)
    schema = SchemaConfig(
        format="access_log", log_format=LOG_FORMAT, roles=RolesConfig(user="http_x_user_id", rank=None, url=None)
    )
    codec = AccessLogCodec(schema)
    bad: list[tuple[int, str]] = []
    events = codec.decode_many(lines, "\n", bad)
    assert bad == []
    assert [e.query for e in events][5:9] == ["my ssn help", "flu", "email", ""]
    assert codec.get_field(events[6], "http_referer") == "http://localhost/search?q=my+ssn+help"
    assert codec.get_field(events[8], "http_referer") == "http://localhost/search?q=email"
