"""Exact uniform integers from the CSPRNG, fetched in bulk.

The pool reads 32 KiB of CSPRNG output at a time (``BuildContext.token_bytes``:
``secrets.token_bytes`` in production, the seeded RNG only when a test or a
benchmark gave a seed) and turns 64-bit words into uniform integers by
**rejection**, never by modulo: ``below(n)`` masks a word to ``n``'s bit length
and retries while the value is ``>= n`` (fewer than two words on average). Every
integer in ``[0, n)`` is then exactly equally likely, which the exactness of the
sampler (:mod:`.mechanism`) relies on.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable

WORDS = 4096
LIMIT = 1 << 64


class RandomPool:
    """``below(n)``: an exactly uniform integer in ``[0, n)`` for ``0 < n <= 2**64``."""

    def __init__(self, token_bytes: Callable[[int], bytes]) -> None:
        self._token_bytes = token_bytes
        self._words = array("Q")
        self._i = 0

    def word(self) -> int:
        """64 fresh random bits."""
        if self._i >= len(self._words):
            self._refill()
        w = self._words[self._i]
        self._i += 1
        return w

    def _refill(self) -> None:
        self._words = array("Q", self._token_bytes(8 * WORDS))
        self._i = 0

    def below(self, n: int) -> int:
        if not 0 < n <= LIMIT:
            raise ValueError("below(n) needs 0 < n <= 2**64")
        if n == 1:
            return 0
        mask = (1 << (n - 1).bit_length()) - 1
        while True:
            v = self.word() & mask
            if v < n:
                return v
