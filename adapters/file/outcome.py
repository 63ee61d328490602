"""A replay that released nothing: one line saying so, with the likeliest cause (``replay``, ``filter``).

A run whose every event was dropped or dead-lettered is almost always a mistake an operator should see at once
(a budget already spent, a schema that does not match the input), so the commands exit :data:`EXIT_EMPTY`
unless ``--allow-empty`` says nothing released is what was meant. Reasons are counts and names only, never a
value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

#: exit status of a run that dropped or dead-lettered every event (without ``--allow-empty``)
EXIT_EMPTY = 5

#: dead-letter reasons that say the input's fields are not what the schema's roles name
_SCHEMA_WORDS = ("missing", "role", "field", "column", "header", "key")


class RunCounts(Protocol):
    records_in: int
    events_out: int
    events_held: int
    events_dropped: int
    dead_lettered: int
    drop_reasons: dict[str, int]
    dead_reasons: dict[str, int]


def _top(counts: Mapping[str, int]) -> str:
    return max(counts.items(), key=lambda kv: (kv[1], kv[0]))[0] if counts else ""


def empty_run(run: RunCounts, input_format: str = "", state_dir: str = "") -> str | None:
    """The one line for a run that read records and released or held none of them (None otherwise)."""
    if run.events_out or run.events_held or not (run.events_dropped or run.dead_lettered):
        return None
    if run.dead_lettered >= run.events_dropped:
        reason = _top(run.dead_reasons)
        what = f"every record was dead-lettered ({run.dead_lettered}, mostly {reason or 'unknown'})"
        read_as = f" read as {input_format}" if input_format else ""
        if any(w in reason for w in _SCHEMA_WORDS):
            cause = (
                f"the input{read_as} does not have the fields the schema's roles name: check schema.roles and "
                "schema.format (or the input's format)"
            )
        else:
            cause = f"the input{read_as} could not be read as records: see the dead-letter file"
    else:
        reason = _top(run.drop_reasons)
        what = f"every event was dropped ({run.events_dropped}, mostly {reason or 'by the chain'})"
        if "budget" in reason:
            where = f" (the ledger in {state_dir})" if state_dir else ""
            cause = f"the users' privacy budget is already spent{where}: releasing them again releases nothing"
        elif reason:
            cause = f"filter {reason.split('.', 1)[0]} dropped them ({reason.split('.', 1)[1]})"
        else:
            cause = "the chain dropped them"
    return f"replay: nothing released: {what}; likeliest cause: {cause}. --allow-empty accepts an empty run (exit 0)"
