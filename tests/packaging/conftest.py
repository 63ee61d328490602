"""The wheel, built once per session for the packaging tests that install it."""

from __future__ import annotations

import pytest

from tests.packaging.wheelkit import Wheel, build_wheel


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Wheel:
    """The project's wheel built from a copy of the working tree."""
    return build_wheel(tmp_path_factory.mktemp("build"))
