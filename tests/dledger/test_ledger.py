"""The log of a live DLedger member (``rmqcli.dledger.ledger``): what a leader appends reads back
through the store reader that reads the real brokers' DLedger stores (entries, blanks, index units,
the records' physical offsets); a follower fed the leader's entries ends byte for byte the same;
truncation keeps or replaces the suffix as DLedger's ``truncate`` does; the checkpoint and a
reopened log agree."""

from __future__ import annotations

from pathlib import Path

import pytest

from formats import commitlog as fmt
from formats import dledger as dfmt
from rmqcli.dledger import protocol as dp
from rmqcli.dledger.ledger import Ledger, LedgerError
from rmqcli.dledger.member import MemberState, Role
from rmqcli.store import Store
from rmqcli.store.write.records import encode_record

FILE = 4096  # small data files: blanks every few entries
INDEX_FILE = 32 * 64
HOST = (bytes([127, 0, 0, 1]), 10911)


def record(i: int) -> bytes:
    return encode_record(
        sys_flag=0, queue_id=i % 4, flag=0, queue_offset=i // 4, physical_offset=0,
        born_timestamp=1_700_000_000_000 + i, born_host=HOST, store_timestamp=1_700_000_000_000 + i,
        store_host=HOST, reconsume_times=0,
        prepared_transaction_offset=0, body=b"x" * (50 + 37 * (i % 9)), topic=b"TopicL",
        properties=f"KEYS\x01k{i}\x02".encode(),
    )  # fmt: skip


def physical_hook(body: bytearray, pos: int) -> None:
    fmt.PHYSICAL_OFFSET_STRUCT.pack_into(body, fmt.PHYSICAL_OFFSET_AT, pos + dfmt.BODY_OFFSET)


def member(root: Path, ident: str, role: Role = Role.LEADER, term: int = 3) -> tuple[MemberState, Ledger]:
    home = root / "store" / f"dledger-{ident}"
    state = MemberState("RaftNode00", ident, {"n0": "127.0.0.1:1", "n1": "127.0.0.1:2"}, home)
    state.curr_term, state.role = term, role
    return state, Ledger(home, state, FILE, INDEX_FILE)


def files(home: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(home)): p.read_bytes()
        for p in sorted(home.rglob("*"))
        if p.parent.name in ("data", "index")
    }


def test_a_leaders_entries_read_back_as_a_dledger_store(tmp_path: Path) -> None:
    state, ledger = member(tmp_path, "n0")
    placed = [ledger.append_as_leader(3, record(i), physical_hook) for i in range(60)]
    assert ledger.update_committed_index(3, 59)
    ledger.close()
    assert len(list((ledger.home / "data").iterdir())) > 3  # blanks closed some files
    assert (state.ledger_end_index, state.ledger_end_term) == (59, 3)
    store = Store.open(tmp_path / "store")
    try:
        rows = list(store.commitlog.records())
        assert [r.properties["KEYS"] for r in rows] == [f"k{i}" for i in range(60)]
        assert [r.physical_offset for r in rows] == [p.pos + dfmt.BODY_OFFSET for p in placed]
        assert [store.commitlog.record_extra(r)["entryIndex"] for r in rows] == list(range(60))
    finally:
        store.close()
    text = (ledger.home / "checkpoint").read_text()
    assert "committedIndex=59" in text and "endIndex=59" in text
    again = Ledger(ledger.home, state, FILE, INDEX_FILE)
    assert (again.begin_index, again.end_index, again.end_term, again.committed_index) == (0, 59, 3, 59)
    assert again.committed_pos == placed[-1].end
    body = bytearray(record(17))
    physical_hook(body, placed[17].pos)
    assert (again.get(17).pos, again.get(17).body) == (placed[17].pos, bytes(body))
    again.close()


def test_a_follower_fed_the_leaders_entries_is_the_same_bytes(tmp_path: Path) -> None:
    _, leader = member(tmp_path / "a", "n0")
    for i in range(40):
        leader.append_as_leader(3, record(i), physical_hook)
    fstate, follower = member(tmp_path / "b", "n0", Role.FOLLOWER)
    follower.truncate(leader.get(0))  # an empty follower's first entry comes as TRUNCATE
    for i in range(1, 40):
        follower.append_as_follower(leader.get(i))
    with pytest.raises(LedgerError) as err:
        follower.append_as_follower(leader.get(5))
    assert err.value.code == dp.DLedgerResponseCode.INCONSISTENT_INDEX
    leader.close()
    follower.close()
    assert files(leader.home) == files(follower.home)
    assert fstate.ledger_end_index == 39


def test_truncate_keeps_an_entry_it_holds_and_drops_what_follows(tmp_path: Path) -> None:
    _, leader = member(tmp_path / "a", "n0")
    for i in range(30):
        leader.append_as_leader(3, record(i), physical_hook)
    _, follower = member(tmp_path / "b", "n0", Role.FOLLOWER)
    follower.truncate(leader.get(0))
    for i in range(1, 30):
        follower.append_as_follower(leader.get(i))
    follower.update_committed_index(3, 20)
    # an old-term suffix the new leader does not hold: entries 21.. of term 3 on the follower only
    assert follower.truncate(leader.get(21)) == 21  # existed: kept, 22.. go
    assert (follower.end_index, follower.write_pos) == (21, leader.stored(21).end)
    with pytest.raises(LedgerError):
        follower.get(22)
    assert follower.committed_index == 20
    for i in range(22, 30):
        follower.append_as_follower(leader.get(i))
    leader.close()
    follower.close()
    assert files(leader.home) == files(follower.home)


def test_truncate_replaces_a_divergent_entry(tmp_path: Path) -> None:
    _, old = member(tmp_path / "a", "n0", term=3)
    for i in range(12):
        old.append_as_leader(3, record(i), physical_hook)
    _, new = member(tmp_path / "b", "n0", term=4)
    new.state.role = Role.FOLLOWER
    new.truncate(old.get(0))
    for i in range(1, 8):
        new.append_as_follower(old.get(i))
    new.state.role = Role.LEADER
    for i in range(8, 15):  # term 4 writes different entries from index 8 on
        new.append_as_leader(4, record(100 + i), physical_hook)
    # the old leader follows: entry 8 differs (term 4), so it is replaced and 9.. of term 3 go
    old.state.role, old.state.curr_term = Role.FOLLOWER, 4
    assert old.truncate(new.get(8)) == 8
    assert (old.end_index, old.end_term) == (8, 4)
    for i in range(9, 15):
        old.append_as_follower(new.get(i))
    old.close()
    new.close()
    assert files(old.home) == files(new.home)


def test_an_empty_follower_starts_its_files_at_the_leaders_first_entry(tmp_path: Path) -> None:
    """A leader whose older files were cleaned: its first entry is not at 0 (``rebuildWithPos``)."""
    _, leader = member(tmp_path / "a", "n0")
    for i in range(60):
        leader.append_as_leader(3, record(i), physical_hook)
    first = leader.data.files[2]
    begin = next(i for i in range(60) if leader.stored(i).pos >= first.from_offset)
    _, follower = member(tmp_path / "b", "n0", Role.FOLLOWER)
    follower.truncate(leader.get(begin))
    for i in range(begin + 1, 60):
        follower.append_as_follower(leader.get(i))
    assert (follower.begin_index, follower.end_index) == (begin, 59)
    assert follower.data.files[0].from_offset == first.from_offset
    assert follower.get(begin + 3) == leader.get(begin + 3)


def test_the_committed_index_only_moves_forward_within_the_end(tmp_path: Path) -> None:
    state, ledger = member(tmp_path, "n0")
    for i in range(5):
        ledger.append_as_leader(3, record(i), physical_hook)
    assert not ledger.update_committed_index(2, 3)  # an older term
    assert ledger.update_committed_index(3, 9) and ledger.committed_index == 4  # clamped
    assert not ledger.update_committed_index(3, 2)  # backwards
    assert ledger.committed_pos == ledger.stored(4).end
