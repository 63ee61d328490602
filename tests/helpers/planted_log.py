"""A TSV query log with planted HIPAA identifiers, for the tests that ship it through real log shippers
(syslog-ng, rsyslog): each line's AnonID is its number, so what arrived, what was lost and what came twice is
counted from the output alone."""

from __future__ import annotations

from collections import Counter
from pathlib import Path


def planted(seq: int) -> tuple[str, str, str]:
    """The identifiers planted in line ``seq``'s query: a phone number, an email, an SSN (valid area and group)."""
    phone = f"555-{100 + seq % 900:03d}-{1000 + seq % 9000:04d}"
    return phone, f"patient{seq}@example.com", f"{100 + seq % 500:03d}-{10 + seq % 80:02d}-{1000 + seq % 8000:04d}"


def log_line(seq: int) -> str:
    """An AOL-style TSV record (AnonID = seq, unique) whose query carries the identifiers of :func:`planted`."""
    phone, email, ssn = planted(seq)
    query = f"call {phone} or mail {email} about claim ssn {ssn} weather"
    return f"{seq}\t{query}\t2006-03-01 07:17:12\t\t\n"


#: hipaa_scrub's policies for the planted types: phone and email become tokens, the SSN goes.
SCRUB = {"hipaa_scrub": {"policies": {"phone": "replace", "email": "replace", "ssn": "remove"}}}


def delivered_ids(out: Path) -> Counter[int]:
    """AnonIDs of the whole lines written to ``out`` so far (a line still being written is not counted)."""
    if not out.exists():
        return Counter()
    text = out.read_text(encoding="utf-8")
    return Counter(int(line.split("\t", 1)[0]) for line in text.splitlines(keepends=True) if line.endswith("\n"))


def assert_scrubbed(out: Path) -> None:
    """Every row of ``out`` has its five columns, the tokens of its planted phone and email, and none of its
    planted identifiers in any column."""
    for line in out.read_text(encoding="utf-8").splitlines():
        row = line.split("\t")
        assert len(row) == 5 and "[PHONE]" in row[1] and "[EMAIL]" in row[1], f"line {row[0]}: not scrubbed"
        assert not any(value in line for value in planted(int(row[0]))), f"line {row[0]}: an identifier survived"
