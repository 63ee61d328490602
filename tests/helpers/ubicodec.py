"""What the UBI tests outside tests/adapters/ubi share: the golden outputs and the keyed chain that makes them."""

from __future__ import annotations


def golden_ubi(name: str) -> str:
    """A golden output of tests/adapters/ubi/testdata (``passthrough.jsonl``, ``pseudonymized.jsonl``): what the
    spec fixtures become through a passthrough and through the keyed chain of test_jsonl_output."""
    from helpers.ubipipe import FIXTURES

    return (FIXTURES.parent / "testdata" / name).read_text(encoding="utf-8")


#: the keyed chain of the pseudonymized golden file (with UBI_KEY set to KEY) and its schema lines
KEYED_CHAIN = "  - hipaa_scrub: {}\n  - pseudonymize: {key_env: UBI_KEY}\n"
KEYED_SCHEMA = "  fields:\n    event_attributes.object.description: scrub\n"
KEY = "k" * 32
