"""The base install is the sidecar: the wheel installed without extras serves, replays, filters and checks configs.

``pip install querylog-sidecar`` (no extras) into a fresh venv, dependencies resolved by pip (pinned to this
interpreter's versions), run from a folder outside the repository: ``serve`` (an HTTP source on port 0, stopped
with SIGTERM), ``replay``, ``filter`` and ``check-config`` work; matplotlib and scipy are not installed; a command
whose extra is missing says which one to install, in one line, exit 2.
"""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from tests.packaging.wheelkit import Installed, Wheel, install

pytestmark = pytest.mark.slow

#: What only the offline tools need: none of it is in the base install.
EXTRAS_ONLY = {"matplotlib", "scipy", "presidio-analyzer", "spacy", "dask", "distributed"}
#: The sidecar's own dependencies, which are.
BASE = {"grpcio", "protobuf", "numpy", "structlog", "sqlite-utils", "pyyaml", "click", "wordfreq", "nltk"}
HEADER = "AnonID\tQuery\tQueryTime\tItemRank\tClickURL"
ROWS = (
    "142\tstaple remover\t2006-03-01 07:20:41\t1\thttp://www.staples.com/office/remover?id=7",
    "217\tcall 555-867-5309 tonight\t2006-03-02 11:01:05\t\t",
    "993\tbasketball scores\t2006-03-03 19:45:30\t2\thttp://www.espn.go.com/nba/scores",
)
CHAIN = (
    "filters:\n"
    "  - hipaa_scrub: {fields: [query]}\n"  # names, places and word lists: base dependencies
    "  - truncate_url: {}\n"
)


@pytest.fixture(scope="module")
def base(wheel: Wheel, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """A venv in tmp with ``pip install WHEEL``: the wheel and its dependencies, no extras."""
    installed = install(wheel, tmp_path_factory.mktemp("base"), linked=False)
    (installed.work / "in.tsv").write_text("\n".join([HEADER, *ROWS]) + "\n", encoding="utf-8")
    (installed.work / "chain.yaml").write_text(
        "state_dir: state/chain\nschema: {format: tsv, header: true}\n" + CHAIN, encoding="utf-8"
    )
    return installed


def _installed_names(base: Installed) -> set[str]:
    listing = base.run("python", "-m", "pip", "list", "--format=json", "--disable-pip-version-check")
    assert listing.returncode == 0, listing.stderr[-2000:]
    return {entry["name"].lower().replace("_", "-") for entry in json.loads(listing.stdout)}


def test_no_extra_is_installed(base: Installed) -> None:
    """pip list shows the sidecar's dependencies and none of matplotlib, scipy, Presidio, spaCy or Dask."""
    names = _installed_names(base)
    assert "querylog-sidecar" in names
    assert names >= BASE, sorted(BASE - names)
    assert not EXTRAS_ONLY & names, sorted(EXTRAS_ONLY & names)


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (("audit", "--help"), "audit"),
        (("audit", "--original", "a.tsv", "--protected", "b.tsv"), "audit"),
        (("eval", "dp", "log.tsv"), "audit"),
        (("microaggregate", "-k", "3", "log.tsv"), "microaggregate"),
        (("bench", "microaggregate"), "microaggregate"),
        (("bench", "anonymity"), "audit"),
    ],
)
def test_a_command_without_its_extra_names_it(base: Installed, args: tuple[str, ...], extra: str) -> None:
    """One line naming the extra and how to install it, exit 2, no traceback."""
    run = base.run("querylog", *args)
    command = " ".join(args[: 2 if args[0] == "bench" else 1])
    assert (run.returncode, run.stdout) == (2, ""), run.stderr[-3000:]
    assert run.stderr == f"querylog {command}: needs the [{extra}] extra: pip install 'querylog-sidecar[{extra}]'\n"


def test_help_lists_every_command(base: Installed) -> None:
    """querylog --help lists every command, the ones whose extra is missing saying which."""
    run = base.run("querylog", "--help")
    assert run.returncode == 0, run.stderr[-3000:]
    lines = {line.split()[0]: line for line in run.stdout.splitlines() if line.startswith("  ")}
    assert {"serve", "replay", "filter", "check-config", "audit", "microaggregate", "bench"} <= set(lines)
    assert "(needs the [audit] extra)" in lines["audit"]
    assert "(needs the [microaggregate] extra)" in lines["microaggregate"]
    assert "needs the" not in lines["serve"] + lines["replay"]


def test_check_config_replay_and_filter(base: Installed) -> None:
    """check-config, replay (file to file) and filter (stdin to stdout) run the same chain, from outside the repo."""
    check = base.run("querylog", "check-config", "chain.yaml")
    assert check.returncode == 0, check.stderr[-3000:]
    assert check.stdout.startswith("chain.yaml: ok (2 filters: hipaa_scrub -> truncate_url"), check.stdout

    replay = base.run("querylog", "replay", "--config", "chain.yaml", "in.tsv", "-o", "out.tsv")
    assert replay.returncode == 0, replay.stderr[-3000:]
    replayed = (base.work / "out.tsv").read_text(encoding="utf-8")
    header, *lines = replayed.splitlines()
    assert header == HEADER
    fields = [line.split("\t") for line in lines]
    assert [f[0] for f in fields] == ["142", "217", "993"]
    assert [f[4] for f in fields] == ["http://www.staples.com", "", "http://www.espn.go.com"]
    assert "867-5309" not in replayed and fields[2][1] == "basketball scores"

    filtered = subprocess.run(
        base.command("querylog", "filter", "--config", "chain.yaml"),
        cwd=base.work,
        env=base.environ(),
        input=(base.work / "in.tsv").read_text(encoding="utf-8"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert filtered.returncode == 0, filtered.stderr[-3000:]
    assert filtered.stdout == replayed


@dataclass
class Served:
    """A running ``querylog serve``: its process, the port it bound, and its stderr lines read on a thread."""

    proc: subprocess.Popen[str]
    lines: queue.Queue[str | None] = field(default_factory=queue.Queue)
    seen: list[str] = field(default_factory=list)
    port: int = 0

    def read(self) -> None:
        """Put every stderr line on ``lines`` as it comes, then None (runs on a thread)."""
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line)
        self.lines.put(None)

    def next_line(self) -> str | None:
        try:
            line = self.lines.get(timeout=120)
        except queue.Empty:
            raise AssertionError("serve printed nothing for 120 s:\n" + self.stderr()) from None
        if line is not None:
            self.seen.append(line)
        return line

    def listening_port(self) -> int:
        """The port of serve's ``listening`` log event (JSON lines on a pipe)."""
        while (line := self.next_line()) is not None:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("event") == "listening":
                return int(event["port"])
        raise AssertionError("serve ended before it listened:\n" + self.stderr())

    def stderr(self) -> str:
        """What serve printed so far (the lines already read, and those waiting), for an assertion's message."""
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                break
            if line is not None:
                self.seen.append(line)
        return "".join(self.seen)[-3000:]


@pytest.fixture
def serving(base: Installed) -> Iterator[Served]:
    """``querylog serve`` with an HTTP source on 127.0.0.1:0 and a file sink, once it listens."""
    (base.work / "serve.yaml").write_text(
        "state_dir: state/serve\nsources:\n  - http: {listen: '127.0.0.1:0'}\n" + CHAIN + "sinks:\n"
        "  - file: {path: served.jsonl}\n",
        encoding="utf-8",
    )
    proc = subprocess.Popen(
        base.command("querylog", "serve", "--config", "serve.yaml"),
        cwd=base.work,
        env=base.environ(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    served = Served(proc)
    try:
        threading.Thread(target=served.read, daemon=True).start()
        served.port = served.listening_port()
        yield served
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)


def test_serve_takes_records_and_stops_on_sigterm(base: Installed, serving: Served) -> None:
    """serve listens on the port it bound, delivers what the HTTP source acknowledged, and exits 0 on SIGTERM."""
    body = b'{"AnonID": "1", "Query": "football scores", "ClickURL": "http://www.espn.go.com/nfl/a"}\n'
    request = urllib.request.Request(
        f"http://127.0.0.1:{serving.port}/", data=body, headers={"Content-Type": "application/x-ndjson"}
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        assert answer.status == 200
        assert json.loads(answer.read())["accepted"] == 1
    serving.proc.send_signal(signal.SIGTERM)
    assert serving.proc.wait(timeout=60) == 0, serving.stderr()
    (record,) = [json.loads(line) for line in (base.work / "served.jsonl").read_text(encoding="utf-8").splitlines()]
    assert record == {"AnonID": "1", "Query": "football scores", "ClickURL": "http://www.espn.go.com"}
