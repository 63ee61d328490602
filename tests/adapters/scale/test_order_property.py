"""The merge invariant, on generated inputs: a passthrough chain over any number of partitions and any
chunking gives the input back byte for byte (every record once, in input order, the final newline kept)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.file.scale import inputs
from adapters.file.scale.replay import scaled_replay
from sidecar.records import LINE_BREAKS

HEADER = "AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n"
#: TSV field text: no tab and no line-breaking code point (a TSV record holding one is dead-lettered)
text = st.text(st.characters(codec="utf-8", exclude_characters="\t" + LINE_BREAKS), max_size=12)
record = st.tuples(st.sampled_from(["1", "2", "3", "42", "ünï", ""]), text, text).map(
    lambda r: f"{r[0]}\t{r[1]}\t{r[2]}\t\t"
)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(record, min_size=0, max_size=60),
    st.integers(min_value=1, max_value=5),
    st.integers(min_value=16, max_value=400),
    st.booleans(),
)
def test_passthrough_gives_the_input_back(records: list[str], workers: int, chunk: int, final_newline: bool) -> None:
    body = "\n".join(records) + ("\n" if final_newline and records else "")
    with (
        tempfile.TemporaryDirectory() as tmp,
        mock.patch.object(inputs, "MIN_CHUNK_BYTES", chunk),
        mock.patch.object(inputs, "MAX_CHUNK_BYTES", chunk),
    ):
        folder = Path(tmp)
        cfg = folder / "c.yaml"
        cfg.write_text("state_dir: state\nfilters: []\n", encoding="utf-8")
        src = folder / "in.tsv"
        src.write_bytes((HEADER + body).encode("utf-8"))
        out = folder / "out.tsv"
        s = scaled_replay(str(cfg), str(src), str(out), workers=workers, scheduler="synchronous")
        assert out.read_bytes() == src.read_bytes()
        assert s.records_in == len(records)
