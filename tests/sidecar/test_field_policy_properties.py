"""Field policies' invariants (hypothesis): released fields are roles or declared, Crypto-PAn keeps prefixes and is
keyed (and equals PyPI yacryptopan), the user-agent policy writes only a family and digits, and a record no
policy changed is written byte for byte."""

from __future__ import annotations

import ipaddress
import json
import re
from typing import Any

import pytest
import yacryptopan  # type: ignore[import-untyped]
from helpers.fields import KEY, KEY_ENV, ROLES, json_line, run_records, write_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.fieldvalues import IpEncrypt, derive_key
from sidecar.useragent import generalise


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


# ---- properties ----------------------------------------------------------------------------------------------
NAMES = st.text(alphabet="abcdefghij_", min_size=1, max_size=6).filter(lambda n: n not in ("uid", "q", "t"))
VALUES = st.one_of(st.text(max_size=12), st.integers(), st.none(), st.booleans())
POLICIES = st.sampled_from(["keep", "drop", "hash", "ip_prefix", "ip_encrypt", "user_agent"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    declared=st.dictionaries(NAMES, POLICIES, max_size=4),
    records=st.lists(st.dictionaries(NAMES, VALUES, max_size=5), min_size=1, max_size=6),
    unlisted=st.sampled_from(["drop", "error"]),
)
def test_released_fields_are_roles_or_declared(
    tmp_path_factory: pytest.TempPathFactory, declared: dict[str, str], records: list[dict[str, Any]], unlisted: str
) -> None:
    """With unlisted drop or error, every field of a released record is a role or has a policy; with error, a
    record is released exactly when all its fields are declared."""
    tmp = tmp_path_factory.mktemp("prop")
    lines = [json_line(**r) for r in records]
    schema = {"roles": ROLES, "format": "jsonl", "fields": declared, "unlisted": unlisted}
    out, pipeline = run_records(write_config(tmp, schema), lines, "jsonl")
    pipeline.close()
    for line in out:
        assert set(json.loads(line)) <= {"uid", "q", "t", *declared}
    if unlisted == "error":
        assert len(out) == sum(1 for r in records if set(r) <= set(declared))
    else:
        assert len(out) == len(records)


def _common_prefix(a: int, b: int, bits: int) -> int:
    return bits - (a ^ b).bit_length()


@settings(max_examples=200, deadline=None)
@given(a=st.integers(0, 2**32 - 1), b=st.integers(0, 2**32 - 1))
def test_ip_encrypt_preserves_prefixes_exactly(a: int, b: int) -> None:
    enc = IpEncrypt(KEY.encode())
    x, y = (ipaddress.IPv4Address(v) for v in (a, b))
    ex, ey = (int(ipaddress.IPv4Address(enc.address(v))) for v in (x, y))
    assert _common_prefix(ex, ey, 32) == _common_prefix(a, b, 32)


@settings(max_examples=60, deadline=None)
@given(a=st.integers(0, 2**128 - 1), b=st.integers(0, 2**128 - 1))
def test_ip_encrypt_preserves_ipv6_prefixes(a: int, b: int) -> None:
    enc = IpEncrypt(KEY.encode())
    ex, ey = (int(ipaddress.IPv6Address(enc.address(ipaddress.IPv6Address(v)))) for v in (a, b))
    assert _common_prefix(ex, ey, 128) == _common_prefix(a, b, 128)


@settings(max_examples=100, deadline=None)
@given(v4=st.integers(0, 2**32 - 1), v6=st.integers(0, 2**128 - 1))
def test_ip_encrypt_is_yacryptopan(v4: int, v6: int) -> None:
    """The batched Crypto-PAn writes what PyPI yacryptopan (the reference implementation) writes."""
    reference = yacryptopan.CryptoPAn(derive_key(KEY.encode(), "ip_encrypt"))
    enc = IpEncrypt(KEY.encode())
    assert enc.anonymize(v4, 32) == reference.anonymize_bin(v4, 4)
    assert enc.anonymize(v6, 128) == reference.anonymize_bin(v6, 6)


@settings(max_examples=100, deadline=None)
@given(address=st.integers(0, 2**32 - 1))
def test_ip_encrypt_is_keyed(address: int) -> None:
    """Same key, same pseudonym (two instances); another key, another one."""
    text = str(ipaddress.IPv4Address(address))
    one, same = IpEncrypt(KEY.encode()).encrypt(text), IpEncrypt(KEY.encode()).encrypt(text)
    other = IpEncrypt(b"a-different-key-for-the-test-0001").encrypt(text)
    assert one == same and one != other


@given(st.text(max_size=200))
def test_user_agent_writes_only_a_family_and_digits(text: str) -> None:
    assert re.fullmatch(r"[A-Za-z -]+?( \d{1,4})?", generalise(text))
    assert generalise(text) == "Other" or any(c.isalpha() for c in text)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    records=st.lists(
        st.fixed_dictionaries(
            {},
            optional={
                "page": st.integers(),
                "ip": st.sampled_from(["-", "", None]),
                "ua": st.sampled_from(["-", ""]),
                "sid": st.just(None),
            },
        ),
        min_size=1,
        max_size=5,
    ),
    spaces=st.booleans(),
)
def test_records_no_policy_changed_are_written_byte_for_byte(
    tmp_path_factory: pytest.TempPathFactory, records: list[dict[str, Any]], spaces: bool
) -> None:
    """The identity rule: policies that change nothing (keep, empty values, absent fields) leave the line as it
    came, its own spacing included."""
    tmp = tmp_path_factory.mktemp("ident")
    sep = (", ", ": ") if spaces else (",", ":")
    lines = [json.dumps({"uid": "u", "q": "x", "t": "1", **r}, separators=sep) for r in records]
    schema = {
        "roles": ROLES,
        "format": "jsonl",
        "fields": {"page": "keep", "ip": "ip_encrypt", "ua": "user_agent", "sid": "hash", "gone": "drop"},
        "unlisted": "drop",
    }
    out, pipeline = run_records(write_config(tmp, schema), lines, "jsonl")
    pipeline.close()
    assert out == lines
