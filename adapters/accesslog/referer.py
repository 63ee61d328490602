"""The referer's query follows its request's: what the chain released for a query text, by that text.

A line's referer is usually the URL of the user's previous search, so it carries that search's query a second
time. The rule (docs/STACK.md): when a line is written, its own request query's outcome is remembered (original
text -> released text); then a search query in its referer is written as the released text of the same original
text, if one was released (kept as it was when the chain kept it), and as the empty text otherwise (a text the chain
dropped, still holds, or never saw). So a referer shows only texts the chain released for a request.

The memory is bounded and lives in the process: it holds at least the :data:`MEMO_SIZE` most recently requested
texts and at most twice that (two generations of plain dictionaries: when the newer one is full it becomes the older
one and the oldest generation is forgotten at once). A referer to a search older than that, from before a restart,
or released by another process, is emptied. Two generations, not a least-recently-used list: an LRU moves an entry
on every request and its ordered dictionary's inserts and evictions cost a passthrough more than a third of its time
(``querylog bench accesslog``), where a plain dictionary's insert is the only cost here.
"""

from __future__ import annotations

__all__ = ["MEMO_SIZE", "NOT_REMEMBERED", "ReleasedQueries"]

MEMO_SIZE = 65536
"""Query texts in a generation (about 100 bytes each: a few MB, twice that at most)."""

NOT_REMEMBERED: object = object()
"""What ``recent.get(text, NOT_REMEMBERED)`` gives for a text a generation does not hold."""


class ReleasedQueries:
    """Original query text -> the text released for it last, for at least the :data:`MEMO_SIZE` (``size``) most
    recently requested texts, at most twice as many."""

    def __init__(self, size: int = MEMO_SIZE) -> None:
        self.size = size
        #: the texts remembered since the last turn, at most ``size``; looked up first. original -> released text,
        #: None when released as it was (a batch remembers its texts with ``dict.fromkeys``)
        self.recent: dict[str, str | None] = {}
        #: the ``size`` texts remembered in the generation before
        self.older: dict[str, str | None] = {}
        #: referer queries written as their request's released text / emptied as unknown
        self.followed = 0
        self.emptied = 0

    def remember(self, original: str, released: str) -> None:
        """Remember what was released for ``original`` as one of the newest texts. The empty text is no search:
        nothing follows it."""
        if not original:
            return
        recent = self.recent
        value = None if released == original else released
        if recent.get(original, NOT_REMEMBERED) != value:
            recent[original] = value
            if len(recent) >= self.size:
                self.turn()

    def turn(self) -> None:
        """The full newer generation becomes the older one; the older one is forgotten."""
        self.older = self.recent
        self.recent = {}

    def get(self, original: str) -> str | None:
        """The text released last for ``original`` (None: not remembered)."""
        out = self.recent.get(original, NOT_REMEMBERED)
        if out is NOT_REMEMBERED:
            out = self.older.get(original, NOT_REMEMBERED)
            if out is NOT_REMEMBERED:
                return None
        return original if out is None else str(out)

    def released(self, original: str) -> str:
        """What a referer shows for ``original``: its released text, else ``""``."""
        out = self.get(original)
        if out is None:
            self.emptied += 1
            return ""
        if out != original:
            self.followed += 1
        return out

    def __len__(self) -> int:
        """Texts remembered (one held in both generations counted once)."""
        return len(self.recent.keys() | self.older.keys())
