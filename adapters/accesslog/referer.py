"""The referer's query follows its request's: what the chain released for a query text, by that text.

A line's referer is usually the URL of the user's previous search, so it carries that search's query a second
time. The rule (docs/STACK.md): when a line is written, its own request query's outcome is remembered (original
text -> released text); then a search query in its referer is written as the released text of the same original
text, if one was released (kept as it was when the chain kept it), and as the empty text otherwise (a text the chain
dropped, still holds, or never saw). So a referer shows only texts the chain released for a request.

The memory is bounded (:data:`MEMO_SIZE` texts, the least recently requested forgotten first) and lives in the
process: a referer to a search older than that, from before a restart, or released by another process, is emptied.
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["MEMO_SIZE", "ReleasedQueries"]

MEMO_SIZE = 65536
"""Query texts remembered (about 100 bytes each: a few MB)."""


class ReleasedQueries:
    """Original query text -> the text released for it last, for the most recent :data:`MEMO_SIZE` texts."""

    def __init__(self, size: int = MEMO_SIZE) -> None:
        self.size = size
        #: original text -> released text, in the order first remembered
        self.texts: OrderedDict[str, str] = OrderedDict()
        #: referer queries written as their request's released text / emptied as unknown
        self.followed = 0
        self.emptied = 0

    def remember(self, original: str, released: str) -> None:
        """Remember what was released for ``original`` as the newest text; past :attr:`size` texts the least
        recently remembered goes (a popular text stays). The empty text is no search: nothing follows it."""
        if not original:
            return
        memo = self.texts
        was = memo.get(original)
        if was is None:
            memo[original] = released
            if len(memo) > self.size:
                memo.popitem(last=False)
        else:
            if was != released:
                memo[original] = released
            memo.move_to_end(original)

    def released(self, original: str) -> str:
        """What a referer shows for ``original``: its released text, else ``""``."""
        out = self.texts.get(original)
        if out is None:
            self.emptied += 1
            return ""
        if out != original:
            self.followed += 1
        return out

    def __len__(self) -> int:
        return len(self.texts)
