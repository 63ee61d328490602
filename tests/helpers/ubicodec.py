"""The UBI codec under its format name, for tests outside tests/adapters/ubi (whose conftest does the same), until
the project registers it as an entry point."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from adapters.ubi.codec import UbiCodec
from sidecar.api import CODECS
from sidecar.registry import plugins


@contextmanager
def ubi_codec_registered() -> Iterator[None]:
    """``ubi`` in the codec registry (the cached one ``plugins`` returns), removed after when it was added."""
    found = plugins(CODECS)
    added = "ubi" not in found
    if added:
        found["ubi"] = UbiCodec
    try:
        yield
    finally:
        if added:
            del found["ubi"]


def golden_ubi(name: str) -> str:
    """A golden output of tests/adapters/ubi/testdata (``passthrough.jsonl``, ``pseudonymized.jsonl``): what the
    spec fixtures become through a passthrough and through the keyed chain of test_jsonl_output."""
    from helpers.ubipipe import FIXTURES

    return (FIXTURES.parent / "testdata" / name).read_text(encoding="utf-8")


#: the keyed chain of the pseudonymized golden file (with UBI_KEY set to KEY) and its schema lines
KEYED_CHAIN = "  - hipaa_scrub: {}\n  - pseudonymize: {key_env: UBI_KEY}\n"
KEYED_SCHEMA = "  fields:\n    event_attributes.object.description: scrub\n"
KEY = "k" * 32
