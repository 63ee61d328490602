"""Fixtures of the fault-injection tests (tools in :mod:`faults.faultkit`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from faults.faultkit import MountRefused, Tmpfs


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[[str, int], Tmpfs]]:
    """``tmpfs(name, size)``: a tmpfs of ``size`` bytes on ``tmp_path/name``, unmounted after the test.
    Skips the test when mounting is not permitted here (the disk-full tests need root or CAP_SYS_ADMIN)."""
    mounted: list[Tmpfs] = []

    def mount(name: str, size: int) -> Tmpfs:
        try:
            fs = Tmpfs(tmp_path / name, size)
        except MountRefused as exc:
            pytest.skip(f"cannot mount a small tmpfs to fill up (needs root / CAP_SYS_ADMIN): {exc}")
        mounted.append(fs)
        return fs

    yield mount
    for fs in reversed(mounted):
        fs.unmount()
