"""Repairs of a DLedger CommitLog store with several data files, laid out by rmq's DLedger writer
(``rmqcli.store.write.dledger_log``) from the records of a store rmq's writer wrote: ``rmq clean``
by DLedger's ``CleanSpaceService`` rules, ``rmq recover`` across files, ``rmq truncate`` and
``rmq rebuild``. The real broker's side of these commands is in tests/store/test_dledger_real.py."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from formats import commitlog as fmt
from rmqcli.ops import clean_dledger as dl
from rmqcli.store import Store
from rmqcli.store import retention as rules
from rmqcli.store.write.dledger_log import Placed, write_log
from tests.support.cli import invoke_rmq
from tests.support.retention import TOPIC, build_store
from tests.support.stores import converges_at_every_crash_point, store_state

DATA_SIZE = 16 * 1024
INDEX_SIZE = 32 * 64  # 64 units a file
HOUR = 3600 * 1000


def _dledger_store(tmp_path: Path, count: int = 120) -> tuple[Path, list[Placed]]:
    """A store whose ``dledger-n0`` holds ``count`` messages (500-byte bodies, 2 queues) in 16 KiB
    data files, with its consume queues and index rebuilt by ``rmq rebuild``."""
    source = tmp_path / "source"
    build_store(source, count=count)
    store = Store.open(source)
    raw = []
    for rec in store.commitlog.records():
        mf = store.commitlog.queue.find(rec.position)
        raw.append(bytes(mf.read(rec.position - mf.from_offset, rec.total_size)))
    store.close()

    def encoder(record: bytes):
        def encode(physical: int) -> bytes:
            out = bytearray(record)
            fmt.PHYSICAL_OFFSET_STRUCT.pack_into(out, fmt.PHYSICAL_OFFSET_AT, physical)
            return bytes(out)

        return encode

    root = tmp_path / "store"
    placed = write_log(
        root / "dledger-n0", [encoder(r) for r in raw], file_size=DATA_SIZE, index_file_size=INDEX_SIZE
    )
    shutil.copytree(source / "config", root / "config")
    result = invoke_rmq("rebuild", str(root), "--yes")
    assert result.exit_code == 0, result.output
    return root, placed


def _data(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "dledger-n0" / "data").iterdir())


def _age(root: Path, names: list[str], millis: int) -> None:
    for name in names:
        os.utime(root / "dledger-n0" / "data" / name, (millis / 1000, millis / 1000))


def test_the_writer_gives_a_store_rmq_verifies(tmp_path: Path) -> None:
    root, placed = _dledger_store(tmp_path)
    assert len(_data(root)) >= 4
    assert invoke_rmq("verify", str(root)).exit_code == 0
    rows = json.loads(invoke_rmq("dump-commitlog", str(root), "--json").stdout)
    assert [(r["entryIndex"], r["entryPos"]) for r in rows] == [(p.index, p.pos) for p in placed]


def test_clean_deletes_expired_data_files_by_dledgers_rules(tmp_path: Path) -> None:
    now = int(time.time() * 1000)  # at the test's start: a long run must not age the files
    root, placed = _dledger_store(tmp_path)
    names = _data(root)
    # fileReservedTime=1 is 2 hours in DLedger: a file 90 minutes old stays, one 3 hours old goes
    _age(root, names[:2], now - 3 * HOUR)
    _age(root, names[2:3], now - 90 * 60 * 1000)
    plan = json.loads(
        invoke_rmq(
            "clean", str(root), "--manual", "--reserved-hours", "1", "--disk-ratio", "0.1", "--json"
        ).stdout
    )
    assert [f["file"] for f in plan["details"]["commitLogFiles"]] == names[:2]
    result = invoke_rmq(
        "clean", str(root), "--manual", "--reserved-hours", "1", "--disk-ratio", "0.1", "--yes"
    )
    assert result.exit_code == 0, result.output
    assert _data(root) == names[2:]
    first_kept = next(p for p in placed if p.pos >= int(names[2]))
    index_files = sorted(p.name for p in (root / "dledger-n0" / "index").iterdir())
    # reviseLedgerBeginIndex: the entry-index files wholly below the first entry left are gone
    assert index_files == [n for n in index_files if int(n) + INDEX_SIZE > first_kept.index * 32]
    assert int(index_files[0]) <= first_kept.index * 32
    rows = json.loads(invoke_rmq("dump-commitlog", str(root), "--json").stdout)
    assert rows[0]["entryIndex"] == first_kept.index
    stats = json.loads(invoke_rmq("stats", str(root), "--json").stdout)
    for q in stats["queues"]:
        assert q["topic"] == TOPIC and q["maxQueueOffset"] + 1 == len(placed) // 2


def test_clean_waits_for_the_hour_or_the_disk(tmp_path: Path) -> None:
    now = int(time.time() * 1000)  # at the test's start: a long run must not age the files
    root, _ = _dledger_store(tmp_path)
    before = store_state(root)
    _age(root, _data(root), now - 500 * HOUR)
    hour = time.localtime(now / 1000).tm_hour
    conf = tmp_path / "broker.conf"
    conf.write_text(f"deleteWhen={(hour + 12) % 24:02d}\ndiskMaxUsedSpaceRatio=75\n")
    plan = json.loads(
        invoke_rmq("clean", str(root), "--config", str(conf), "--disk-ratio", "0.5", "--json").stdout
    )
    assert plan["details"]["commitLogFiles"] == [] and store_state(root) == before
    # above diskMaxUsedSpaceRatio (isNeedCheckExpired), expired files go, never the last
    plan = json.loads(
        invoke_rmq("clean", str(root), "--config", str(conf), "--disk-ratio", "0.8", "--json").stdout
    )
    assert [f["file"] for f in plan["details"]["commitLogFiles"]] == _data(root)[:-1]


def test_the_round_rules() -> None:
    now = int(time.time() * 1000)  # at the test's start: a long run must not age the files
    config = rules.RetentionConfig(file_reserved_time=0, delete_when="04", disk_max_used_space_ratio=75)
    assert dl.reserved_ms(config) == HOUR  # fileReservedTime + 1 hours
    quiet = dl.decide(config, 3, rules.Disk(0.5, 0.5), manual=False)
    assert not quiet.deletes and not quiet.force
    assert dl.decide(config, 4, rules.Disk(0.5, 0.5), manual=False).time_up
    full = dl.decide(config, 3, rules.Disk(0.5, 0.9), manual=False)
    assert full.check_expired and full.force  # the store's disk above 0.85, forced cleaning enabled
    files = [
        rules.CommitLogFile(Path(str(i)), i * DATA_SIZE, DATA_SIZE, now - (30 - i) * HOUR) for i in range(15)
    ]
    assert len(dl.expired(files, now, config, force=True)) == dl.BATCH_MAX
    young = [*files[:3], rules.CommitLogFile(Path("y"), 3 * DATA_SIZE, DATA_SIZE, now), *files[4:6]]
    assert dl.expired(young, now, config, force=False) == files[:3]


def test_recover_cuts_a_bad_entry_in_a_middle_file_and_later_files(tmp_path: Path) -> None:
    root, placed = _dledger_store(tmp_path)
    names = _data(root)
    victim = next(p for p in placed if p.pos > int(names[-2]) + 100)  # an entry in the second-last file
    data = root / "dledger-n0" / "data" / names[-2]
    with open(data, "r+b") as f:
        f.seek(victim.pos - int(names[-2]))
        f.write((7).to_bytes(4, "big"))
    result = invoke_rmq("recover", str(root), "--yes", "--json")
    assert result.exit_code == 0, result.output
    details = json.loads(result.stdout)["details"]
    assert (details["end"], details["lastIndex"]) == (victim.pos, victim.index - 1)
    assert _data(root) == names[:-1]  # the last file starts past the end: deleted (backed up)
    assert invoke_rmq("verify", str(root)).exit_code == 0
    rows = json.loads(invoke_rmq("dump-commitlog", str(root), "--json").stdout)
    assert [r["entryIndex"] for r in rows] == list(range(victim.index))
    units = sum(q["messages"] for q in json.loads(invoke_rmq("stats", str(root), "--json").stdout)["queues"])
    assert units == victim.index
    assert "nothing to do" in invoke_rmq("recover", str(root), "--yes").stdout


@pytest.mark.parametrize("lost", ["consumequeue", "index"])
def test_rebuild_restores_what_was_lost(tmp_path: Path, lost: str) -> None:
    root, _ = _dledger_store(tmp_path)
    before = store_state(root / "consumequeue")
    shutil.rmtree(root / lost)
    assert invoke_rmq("rebuild", str(root), "--yes").exit_code == 0
    assert store_state(root / "consumequeue") == before
    assert invoke_rmq("verify", str(root)).exit_code == 0


def test_killed_at_any_point_a_re_run_finishes_the_recovery(tmp_path: Path) -> None:
    root, placed = _dledger_store(tmp_path / "made", count=60)
    victim = placed[40]
    names = _data(root)
    holder = max(n for n in names if int(n) <= victim.pos)
    with open(root / "dledger-n0" / "data" / holder, "r+b") as f:
        f.seek(victim.pos - int(holder))
        f.write((7).to_bytes(4, "big"))
    (root / "dledger-n0" / "index" / "00000000000000000000").open("r+b").write(b"\0" * 4)  # unit 0: magic 0
    points, done = converges_at_every_crash_point(["recover"], root, tmp_path)
    assert points >= 5
    rows = json.loads(invoke_rmq("dump-commitlog", str(done), "--json").stdout)
    assert [r["entryIndex"] for r in rows] == list(range(40))
    assert invoke_rmq("verify", str(done)).exit_code == 0


def test_backups_lists_the_changes_of_a_dledger_store(tmp_path: Path) -> None:
    from rmqcli.store.store import BACKUP_DIR

    root, placed = _dledger_store(tmp_path)
    shutil.rmtree(root / BACKUP_DIR)  # the rebuild that made it: a store no rmq command changed yet
    result = invoke_rmq("backups", str(root), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == []
    assert invoke_rmq("truncate", str(root), "--offset", str(placed[-1].pos + 48), "--yes").exit_code == 0
    listed = json.loads(invoke_rmq("backups", str(root), "--json").stdout)
    assert [b["command"] for b in listed] == ["truncate"]
