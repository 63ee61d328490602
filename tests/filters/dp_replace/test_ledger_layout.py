"""Where the budget ledger lives: one per state folder, whatever the partitioning (issue 24 item 2)."""

from __future__ import annotations

import secrets
from pathlib import Path

from filters.dp_replace.budget import LEDGER_FILE, Ledger, ledger_folder
from sidecar.state import StateStore


class TestLedgerFolder:
    def test_a_partition_folder_charges_the_base_folder(self, tmp_path: Path) -> None:
        for part in ("0000-of-0002", "0002-of-0003", "0000-of-0001"):
            assert ledger_folder(tmp_path / "partitions" / part) == tmp_path

    def test_any_other_folder_charges_itself(self, tmp_path: Path) -> None:
        assert ledger_folder(tmp_path) == tmp_path
        assert ledger_folder(tmp_path / "elsewhere" / "0000-of-0002") == tmp_path / "elsewhere" / "0000-of-0002"
        assert ledger_folder(tmp_path / "partitions" / "run-of-0002") == tmp_path / "partitions" / "run-of-0002"

    def test_partitions_of_two_counts_share_one_ledger_and_its_salt(self, tmp_path: Path) -> None:
        """A user charged in partition 1 of 2 is seen spent from partition 0 of 3 (and from the base folder)."""
        stores = [StateStore(tmp_path / "partitions" / p) for p in ("0001-of-0002", "0000-of-0003")]
        stores.append(StateStore(tmp_path))
        ledgers = [Ledger(s, secrets.token_bytes) for s in stores]
        try:
            assert {lg.path for lg in ledgers} == {tmp_path / LEDGER_FILE}
            first, second, base = ledgers
            key = first.key("u1")
            assert second.key("u1") == key == base.key("u1")  # one salt
            first.accounts([key], 0)[key].spend(3)
            first.commit(0)
            assert second.accounts([key], 0)[key].units == 3
            assert base.accounts([key], 0)[key].units == 3
        finally:
            for lg in ledgers:
                lg.close()
            for s in stores:
                s.close()
        assert not list((tmp_path / "partitions").glob("*/" + LEDGER_FILE))
