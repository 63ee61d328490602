"""The value transforms of the keyed and address field policies: ``hash``, ``ip_prefix``, ``ip_encrypt``.

**Keys.** One field key (``schema.field_key_env`` / ``field_key_file``, at least 16 bytes) is never used as it
is: HKDF-SHA256 (RFC 5869, no salt) derives one key per purpose (``info`` ``querylog-sidecar field hash`` and
``querylog-sidecar ip_encrypt``), so a hashed field never equals a ``pseudonymize`` pseudonym made with the same
secret, and the two policies' outputs cannot be linked to each other.

**Addresses.** A value is one address or a comma-separated list of them (``X-Forwarded-For``: ``a, b``); each
may carry a port (``192.0.2.1:8080``, ``[2001:db8::1]:443``) or an IPv6 zone (``fe80::1%eth0``): the port and
the zone are not written (a NAT port narrows a visitor down; a zone names an interface). ``unknown`` and ``-``
items stay as they are. A value holding anything else is not an address: the transforms return None and the
caller removes the field (fail-closed: an unreadable value is never written as it came).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Callable
from typing import Any

from Cryptodome.Cipher import AES

__all__ = ["MIN_KEY_BYTES", "IpEncrypt", "derive_key", "hash_value", "ip_prefix", "map_addresses"]

#: Shortest field key accepted (as pseudonymize's): a shorter one can be guessed, and every hash reversed.
MIN_KEY_BYTES = 16
#: Distinct addresses whose pseudonyms one :class:`IpEncrypt` remembers (Crypto-PAn: about 10 us each).
CACHE_SIZE = 200_000

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def derive_key(key: bytes, purpose: str) -> bytes:
    """32 bytes of HKDF-SHA256 (RFC 5869, no salt) of ``key`` for ``querylog-sidecar <purpose>``."""
    prk = hmac.digest(bytes(32), key, "sha256")
    return hmac.digest(prk, f"querylog-sidecar {purpose}".encode() + b"\x01", "sha256")


def hash_value(key: bytes, value: Any, length: int) -> str:
    """The first ``length`` hex digits of HMAC-SHA256 of the value's text (bytes as they are; a list or mapping
    as its JSON with sorted keys)."""
    if isinstance(value, bytes):
        data = value
    elif isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
    elif isinstance(value, list | dict):
        data = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass")
    else:
        data = str(value).encode("utf-8")
    return hmac.digest(key, data, "sha256").hex()[:length]


def _parse(item: str) -> Address | None:
    """An address without its port or zone, or None."""
    text = item
    if text.startswith("["):  # [v6] or [v6]:port
        end = text.find("]")
        if end < 0 or (end + 1 < len(text) and not (text[end + 1] == ":" and text[end + 2 :].isdigit())):
            return None
        text = text[1:end]
    elif text.count(":") == 1:  # v4:port
        text, _, port = text.partition(":")
        if not port.isdigit():
            return None
    text = text.split("%", 1)[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def map_addresses(value: str, each: Callable[[Address], str]) -> str | None:
    """``value`` with every address replaced by ``each(address)`` (see the module doc), or None when an item is
    not an address."""
    out = []
    for part in value.split(","):
        item = part.strip()
        if item in ("-", "") or item.lower() == "unknown":
            out.append(part)
            continue
        address = _parse(item)
        if address is None:
            return None
        lead = part[: len(part) - len(part.lstrip())]
        out.append(lead + each(address))
    return ",".join(out)


def ip_prefix(value: str, ipv4_bits: int, ipv6_bits: int) -> str | None:
    """Each address of ``value`` cut to its first ``ipv4_bits``/``ipv6_bits`` bits, the rest zero
    (``192.0.2.77`` -> ``192.0.2.0``, ``2001:db8:1:2::5`` -> ``2001:db8:1::``); None when not addresses."""

    def cut(address: Address) -> str:
        bits = ipv4_bits if address.version == 4 else ipv6_bits
        return str(ipaddress.ip_network(f"{address}/{bits}", strict=False).network_address)

    return map_addresses(value, cut)


class IpEncrypt:
    """Crypto-PAn (Xu, Fan, Ammar, Moon, ICNP 2002): a keyed bijection on addresses that keeps prefixes, so two
    addresses sharing exactly their first n bits map to two sharing exactly their first n bits (subnets stay
    subnets; an address is written as it came only by chance, one in 2^32).

    Output bit i is input bit i XOR the first bit of AES(the first i input bits, then the padding's bits), the
    AES key and padding the halves of a 32-byte key (here derived from the field key). The algorithm and key
    schedule are those of PyPI ``yacryptopan`` (the tests check every output against it); its loop calls AES once
    per bit from Python (0.1 ms an IPv4 address, 0.4 ms an IPv6 one), so the blocks of one address are encrypted
    here in one ECB call (pycryptodomex's AES, what ``yacryptopan`` uses), about ten times faster."""

    def __init__(self, key: bytes) -> None:
        material = derive_key(key, "ip_encrypt")
        self._cipher = AES.new(material[:16], AES.MODE_ECB)
        self._pad = int.from_bytes(self._cipher.encrypt(material[16:]), "big")
        self._cache: dict[str, str] = {}

    def anonymize(self, value: int, bits: int) -> int:
        """The pseudonym of an address as an integer of ``bits`` (32 or 128) bits."""
        ext = value << (128 - bits)
        pad = self._pad
        blocks = b"".join(
            ((ext >> (128 - pos) << (128 - pos)) | (pad & (_ALL >> pos))).to_bytes(16, "big") for pos in range(bits)
        )
        out = self._cipher.encrypt(blocks)
        flips = 0
        for pos in range(bits):
            flips = (flips << 1) | (out[16 * pos] >> 7)
        return value ^ flips

    def address(self, address: Address) -> str:
        """The pseudonym address of one address (IPv4 stays IPv4, IPv6 stays IPv6)."""
        text = str(address)
        out = self._cache.get(text)
        if out is None:
            if address.version == 4:
                out = str(ipaddress.IPv4Address(self.anonymize(int(address), 32)))
            else:
                out = str(ipaddress.IPv6Address(self.anonymize(int(address), 128)))
            if len(self._cache) >= CACHE_SIZE:
                self._cache.clear()
            self._cache[text] = out
        return out

    def encrypt(self, value: str) -> str | None:
        """``value`` with each address pseudonymized; None when not addresses."""
        return map_addresses(value, self.address)


_ALL = (1 << 128) - 1
