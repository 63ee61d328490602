"""Uniform indices from the CSPRNG, fetched in bulk: :class:`.core.RandomPool` (compiled with the buffer's loops)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from filters.category_buffer.buckets import CORE

if TYPE_CHECKING:
    from filters.category_buffer.core import WORDS, RandomPool
else:
    WORDS, RandomPool = CORE.WORDS, CORE.RandomPool

__all__ = ["WORDS", "RandomPool"]
