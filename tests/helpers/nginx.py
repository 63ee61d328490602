"""A real nginx (Debian's) writing an access log: on a UNIX socket (no port to pick), unprivileged, in a folder.

``logging`` is the ``log_format``/``access_log`` part of ``http { }``; ``{log}`` in it is replaced by the log's
path. Requests are sent with curl (headers as given) and the log is returned once it has a line for each."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from helpers.waiting import exited, wait_until

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def nginx_access_log(folder: Path, logging: str, requests: Sequence[tuple[str, Sequence[str]]]) -> Path:
    """Serve a static ``/search`` (200) and 404 elsewhere; send ``(target, curl options)`` for each request."""
    sock, log = folder / "nginx.sock", folder / "access.log"
    temps = " ".join(f"{k}_temp_path {folder}/{k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    logging = logging.replace("{log}", str(log))
    (folder / "nginx.conf").write_text(
        f"""daemon off; master_process off; pid {folder}/nginx.pid; error_log {folder}/error.log;
events {{}}
http {{
  {temps}
  {logging}
  server {{
    listen unix:{sock};
    location /search {{ default_type text/plain; return 200 "results\\n"; }}
    location / {{ return 404; }}
  }}
}}
""",
        encoding="utf-8",
    )
    conf = folder / "nginx.conf"
    proc = subprocess.Popen([NGINX, "-p", str(folder), "-c", str(conf), "-e", str(folder / "error.log")])
    try:
        wait_until(sock.exists, what="nginx's socket", abort=exited(proc))
        for target, options in requests:
            cmd = ["curl", "-sS", "-o", "/dev/null", "--unix-socket", str(sock), *options, f"http://localhost{target}"]
            subprocess.run(cmd, check=True, timeout=30)
        wait_until(lambda: log.read_bytes().count(b"\n") == len(requests), what="nginx's log lines")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return log
