"""Uniform indices from the CSPRNG, fetched in bulk.

``random.SystemRandom.randrange`` makes one ``urandom`` system call per draw
(about 3 us); the buffer needs several draws per event. This pool reads 32 KiB
of CSPRNG output at a time (``BuildContext.token_bytes``: ``secrets`` in
production, the seeded RNG in tests) and maps 64-bit words to indices by
modulo; the modulo bias is below n / 2**64, i.e. negligible for any buffer.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable

WORDS = 4096


class RandomPool:
    """``below(n)``: a uniform integer in [0, n) from a bulk-fetched CSPRNG stream."""

    def __init__(self, token_bytes: Callable[[int], bytes]) -> None:
        self._token_bytes = token_bytes
        self._words = array("Q")
        self._i = 0

    def _refill(self) -> None:
        self._words = array("Q", self._token_bytes(8 * WORDS))
        self._i = 0

    def below(self, n: int) -> int:
        if self._i >= len(self._words):
            self._refill()
        w = self._words[self._i]
        self._i += 1
        return w % n
