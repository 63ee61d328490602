"""The example plugins of ``example_plugins/`` installed as a distribution with entry points, like any third party's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sidecar.api import CODECS, FILTERS, SINKS, SOURCES
from sidecar.registry import plugins

EXAMPLES = Path(__file__).with_name("example_plugins")
KV = "querylog_examples_kv"
NET = "querylog_examples_net"
ENTRY_POINTS = f"""\
[{FILTERS}]
redact_digits = {KV}:RedactDigitsFilter
hold_until_final = {KV}:HoldUntilFinalFilter

[{SOURCES}]
lines = {KV}:LinesSource
line_server = {NET}:LineServerSource

[{SINKS}]
json_lines = {KV}:JsonLinesSink
line_peer = {NET}:LinePeerSink

[{CODECS}]
kv = {KV}:KvCodec
"""


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    """The example plugins installed as the distribution ``querylog-examples`` (entry points only); yields the
    folders to put on ``PYTHONPATH`` for a ``querylog`` subprocess to find them."""
    dist = tmp_path / "site" / "querylog_examples-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: querylog-examples\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(ENTRY_POINTS)
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    plugins.cache_clear()
    yield [tmp_path / "site", EXAMPLES]
    plugins.cache_clear()
