"""The UBI codec under its format name for these tests, until the project registers it (entry point)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from adapters.ubi.codec import UbiCodec
from sidecar.api import CODECS
from sidecar.registry import plugins


@pytest.fixture(autouse=True)
def ubi_registered() -> Iterator[None]:
    """``ubi`` in the codec registry (the cached one ``plugins`` returns), removed after when it was added."""
    found = plugins(CODECS)
    added = "ubi" not in found
    if added:
        found["ubi"] = UbiCodec
    yield
    if added:
        del found["ubi"]
