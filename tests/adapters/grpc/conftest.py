"""Fixtures of the gRPC tests: the profile reader's token (GetProfile answers the configured reader only)."""

from __future__ import annotations

import pytest

#: the environment variable of ``server.profile_reader_token_env`` in the tests' configs
READER_ENV = "QUERYLOG_TEST_READER"


@pytest.fixture
def reader(monkeypatch: pytest.MonkeyPatch) -> str:
    """The profile reader's token, set in ``QUERYLOG_TEST_READER`` (a test value, never a real secret)."""
    token = "reader-t0ken-for-tests-5d2e"
    monkeypatch.setenv(READER_ENV, token)
    return token
