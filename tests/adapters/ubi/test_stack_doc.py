"""docs/STACK.md's UBI recipe runs as written (its config and command, paths moved into a temporary folder), and UBI
lines reach the runtime over HTTP as ``text/plain`` (the schema's format)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import yaml
from click.testing import CliRunner
from helpers import ROOT
from helpers.httptest import post
from helpers.kb import kb_file
from helpers.ubistream import ubi_stream

from adapters.http.config import HttpSourceConfig
from adapters.http.source import HttpSource
from sidecar.cli import main
from sidecar.config import load_config
from sidecar.drive import replay
from sidecar.pipeline import Pipeline

PAGE = ROOT / "docs" / "STACK.md"
FIXTURES = Path(__file__).parent / "fixtures"


def recipes() -> dict[str, str]:
    text = PAGE.read_text(encoding="utf-8")
    return {m[1]: m[2] for m in re.finditer(r"<!-- ubi-recipe: (.+?) -->\n```\w*\n(.*?)```", text, re.DOTALL)}


def test_the_ubi_recipe_protects_queries_and_their_events(tmp_path: Path) -> None:
    found = recipes()
    assert set(found) == {"querylog-ubi.yaml", "ubi command"}
    config = yaml.safe_load(found["querylog-ubi.yaml"])
    config["state_dir"] = str(tmp_path / "state")
    for spec in config["filters"]:
        if "classify" in spec:
            spec["classify"] = {"kb_path": str(kb_file())}
    out = tmp_path / "released.jsonl"
    config["sinks"] = [{"file": {"path": str(out)}}]
    path = tmp_path / "querylog-ubi.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    words = shlex.split(found["ubi command"])
    assert words[:4] == ["querylog", "replay", "--config", "querylog-ubi.yaml"] and words[5] == "-o"
    assert words[6].endswith(".jsonl")  # a JSON-lines output writes UBI records under their own keys
    log = tmp_path / "ubi.log"
    spec_lines = [
        *(FIXTURES / "queries.jsonl").read_text(encoding="utf-8").splitlines(),
        *(FIXTURES / "events.jsonl").read_text(encoding="utf-8").splitlines(),
    ]
    log.write_text("\n".join([*spec_lines, *ubi_stream(5, users=40, queries=600).lines]) + "\n", encoding="utf-8")
    checked = CliRunner().invoke(main, ["check-config", str(path)])  # serve's sources too: http, never grpc
    assert checked.exit_code == 0, checked.output
    assert [next(iter(s)) for s in config["sources"]] == ["http"]
    replay(load_config(path), str(log), None, seed=1)
    text = out.read_text(encoding="utf-8")
    records = [json.loads(x) for x in text.splitlines()]
    released = {r["query_id"]: r["client_id"] for r in records if "user_query" in r}
    clicks = [r for r in records if "action_name" in r]
    assert released and clicks
    assert all(released.get(r["query_id"]) == r["client_id"] for r in clicks)
    assert "@example.com" not in text and "session_id" not in text


def test_ubi_lines_over_http_text_plain(tmp_path: Path) -> None:
    out = tmp_path / "out.log"
    config = tmp_path / "q.yaml"
    config.write_text(
        f"state_dir: state\nschema: {{format: ubi}}\nfilters: []\nsinks:\n  - file: {{path: {out}}}\n",
        encoding="utf-8",
    )
    pipeline = Pipeline(load_config(config))
    source = HttpSource(HttpSourceConfig(listen="127.0.0.1:0"), pipeline.ctx)
    source.start(pipeline)
    try:
        events = (FIXTURES / "events.jsonl").read_text(encoding="utf-8").splitlines()
        queries = (FIXTURES / "queries.jsonl").read_text(encoding="utf-8").splitlines()
        body = "\n".join([events[0], queries[0]]) + "\n"
        answer = post(source.port, body.encode(), headers={"Content-Type": "text/plain"})
        assert answer.status == 200, answer.body
        assert out.read_text(encoding="utf-8").splitlines() == [queries[0], events[0]]
    finally:
        source.stop(grace=2)
        pipeline.close()
