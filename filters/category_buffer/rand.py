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
        #: the current block of 64-bit words and the next unused position (hot paths read them directly,
        #: call :meth:`below` when fewer words are left than they need)
        self.words = array("Q")
        self.i = 0

    def _refill(self) -> None:
        self.words = array("Q", self._token_bytes(8 * WORDS))
        self.i = 0

    def below(self, n: int) -> int:
        if self.i >= len(self.words):
            self._refill()
        w = self.words[self.i]
        self.i += 1
        return w % n
