"""Properties of the pieces that need no server: the ack subject parser and the partition subjects."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from adapters.file.scale.partition import DEFAULT_KEY, owner
from adapters.nats.jetstream import delivery
from adapters.nats.partition import subject_for

tokens = st.text(st.characters(min_codepoint=48, max_codepoint=122, categories=["Ll", "Lu", "Nd"]), min_size=1)
counts = st.integers(min_value=1, max_value=2**63 - 1)


class FakeMsg:
    def __init__(self, reply: str) -> None:
        self.reply = reply


@given(tokens, tokens, counts, counts, counts, counts, counts)
def test_the_v1_ack_subject_gives_sequence_and_deliveries(
    stream: str, consumer: str, delivered: int, sseq: int, cseq: int, ts: int, pending: int
) -> None:
    reply = f"$JS.ACK.{stream}.{consumer}.{delivered}.{sseq}.{cseq}.{ts}.{pending}"
    assert delivery(FakeMsg(reply)) == (sseq, delivered)  # type: ignore[arg-type]


@given(tokens, tokens, tokens, tokens, counts, counts, counts, counts, counts, tokens)
def test_the_v2_ack_subject_gives_sequence_and_deliveries(
    domain: str,
    acc: str,
    stream: str,
    consumer: str,
    delivered: int,
    sseq: int,
    cseq: int,
    ts: int,
    pending: int,
    tok: str,
) -> None:
    reply = f"$JS.ACK.{domain}.{acc}.{stream}.{consumer}.{delivered}.{sseq}.{cseq}.{ts}.{pending}.{tok}"
    assert delivery(FakeMsg(reply)) == (sseq, delivered)  # type: ignore[arg-type]


@given(st.one_of(st.none(), st.text(max_size=30)))
def test_anything_else_is_a_first_delivery_without_a_sequence(reply: Any) -> None:
    if reply is not None and reply.startswith("$JS.ACK."):
        reply = "x" + reply  # not an ack subject
    assert delivery(FakeMsg(reply)) == (0, 1)  # type: ignore[arg-type]


@given(st.one_of(st.text(), st.integers(), st.none()), st.integers(min_value=1, max_value=256))
def test_a_user_subject_is_its_owner_partition_of_the_replay(user: Any, n: int) -> None:
    subject = subject_for(user, "querylog.in", n, DEFAULT_KEY)
    prefix, _, p = subject.rpartition(".")
    assert prefix == "querylog.in" and int(p) == owner(user, n, DEFAULT_KEY) and 0 <= int(p) < n
