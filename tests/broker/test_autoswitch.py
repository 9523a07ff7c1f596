"""Controller mode's pieces in one process (docs/controller.md §6-§7): the epoch file as 5.1.1
writes it, the AutoSwitchHA frames of §6.8's worked example, the consistent point, a running
store cut at an offset with its consume queues, and an rmq master and slave replicating over a
real socket: an empty replica gets the master's bytes and epochs, and a replica that wrote past the
failover is cut back to the point both share and then holds the new master's bytes."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

from formats import autoswitch as wire
from formats.epoch import EpochEntry
from rmqcli.broker.autoswitch.epochs import EpochCache
from rmqcli.broker.autoswitch.hamaster import AutoSwitchMaster
from rmqcli.broker.autoswitch.haslave import AutoSwitchSlave
from rmqcli.broker.ha.appender import QueueAppender
from rmqcli.broker.ha.config import HAConfig
from rmqcli.broker.ha.source import WriterSource
from rmqcli.broker.services.indexbehind import build_backlog
from rmqcli.ops.safety import BACKUP_DIR
from rmqcli.store.settings import StoreSettings
from rmqcli.store.store import Store
from rmqcli.store.write.messages import Message
from rmqcli.store.write.truncate import truncate_store
from rmqcli.store.write.writer import StoreWriter
from tests.support.cli import run_rmq

FILE = 64 * 1024


def test_the_epoch_file_is_5_1_1_s_and_keeps_its_previous_text(tmp_path: Path) -> None:
    path = tmp_path / "epochFileCheckpoint"
    cache = EpochCache(path)
    assert cache.append(EpochEntry(1, 0)) and cache.append(EpochEntry(2, 1200))
    # §7.1's bytes: the count, crc32(b"1-0\n2-1200\n") & 0x7FFFFFFF, the entries
    assert path.read_bytes() == bytes.fromhex("320a313538333633303532300a312d300a322d313230300a")
    assert (tmp_path / "epochFileCheckpoint.bak").read_bytes() == b"1\n1725254278\n1-0\n"
    assert not cache.append(EpochEntry(3, 1200))  # not past the last start: refused, as 5.1.1 does
    assert not cache.append(EpochEntry(2, 1500))  # not a newer epoch
    assert EpochCache.load(path).entries == [EpochEntry(1, 0), EpochEntry(2, 1200)]


def test_the_consistent_point_of_the_worked_example() -> None:
    """§6.8: A wrote epoch 1 to 1500, B took over at 1200 and wrote to 1800: A keeps 1200."""
    a = EpochCache(None, [EpochEntry(1, 0)])
    b = [EpochEntry(1, 0), EpochEntry(2, 1200)]
    assert a.consistent_point(1500, b, 1800) == 1200
    assert a.consistent_point(1000, b, 1800) == 1000  # A behind: nothing to cut
    assert EpochCache(None, [EpochEntry(1, 5)]).consistent_point(1500, b, 1800) == -1  # no shared start


def test_the_frames_of_the_worked_example() -> None:
    assert (
        wire.SLAVE_HANDSHAKE_STRUCT.pack(wire.HANDSHAKE, 0, 0, 1).hex() == "00000001000000000000000000000001"
    )
    answer = wire.HANDSHAKE_ANSWER_STRUCT.pack(wire.HANDSHAKE, 24, 1800, 2) + b"".join(
        wire.EPOCH_ENTRY_STRUCT.pack(e, s) for e, s in ((1, 0), (2, 1200))
    )
    assert answer.hex() == (
        "00000001000000180000000000000708000000020000000100000000000000000000000200000000000004b0"
    )
    assert wire.SLAVE_REPORT_STRUCT.pack(wire.TRANSFER, 1200).hex() == "0000000200000000000004b0"
    header = wire.TRANSFER_HEADER_STRUCT.pack(wire.TRANSFER, 600, 1200, 2, 1200, 1800)
    assert header.hex() == "000000020000025800000000000004b00000000200000000000004b00000000000000708"


def _writer(root: Path) -> StoreWriter:
    return StoreWriter(root, StoreSettings(mapped_file_size_commitlog=FILE))


def _send(writer: StoreWriter, count: int, tag: str) -> None:
    for i in range(count):
        writer.append(
            Message("TopicAS", i % 2, f"{tag}-{i}".encode() * 20, {"TAGS": tag, "KEYS": f"{tag}{i}"})
        )


def test_a_running_store_is_cut_with_its_consume_queues(tmp_path: Path) -> None:
    with _writer(tmp_path / "s") as writer:
        _send(writer, 40, "a")
        middle = writer.max_offset
        _send(writer, 2000, "b")  # past the first 64 KiB file
        end = writer.max_offset
        cut = truncate_store(writer, middle)
        assert (cut.commitlog_bytes, writer.max_offset) == (end - middle, middle)
        assert writer.queue_offsets == {("TopicAS", 0): 20, ("TopicAS", 1): 20}
        _send(writer, 4, "c")  # the writer goes on from the cut
    store = Store(tmp_path / "s")
    units = [u for q in (0, 1) for u in store.consume_queue("TopicAS", q).units()]
    assert len(units) == 44 and max(u.commitlog_offset for u in units) < store.commitlog.max_offset()
    kept = sorted((tmp_path / "s" / BACKUP_DIR).iterdir())[0] / "commitlog"
    assert sum(p.stat().st_size for p in kept.iterdir()) >= end - middle - FILE  # every byte cut is kept
    verify = run_rmq("verify", str(tmp_path / "s"))  # queues and index name only records it holds
    assert verify.returncode == 0, verify.stdout[-3000:]


def test_a_cut_while_the_index_is_built_behind_reaches_the_index(tmp_path: Path) -> None:
    """A replica restarted after a crash rebuilds its index behind the CommitLog (``indexbehind``);
    the rejoin's cut came before that worker was done (a loaded machine): the worker had indexed
    the records cut, and the records appended since had no keys. The cut now waits for the
    index to be caught up."""
    root = tmp_path / "s"
    settings = StoreSettings(mapped_file_size_commitlog=FILE)
    with _writer(root) as writer:
        _send(writer, 40, "a")
        middle = writer.max_offset
        _send(writer, 60, "b")
        end = writer.max_offset
    shutil.rmtree(root / "index")  # lost with the crash: rmq serve builds it behind
    with StoreWriter(root, settings, index_behind=True) as writer:
        built = build_backlog(root, settings, writer.index_namer, 0, end)  # the worker, every record
        cut = truncate_store(writer, middle)  # before the writer hears the worker is done
        assert cut.commitlog_bytes == end - middle
        _send(writer, 10, "c")
        writer.index_caught_up(built)
        _send(writer, 3, "d")
    verify = run_rmq("verify", str(root))  # no key of a record cut, every key of the records since
    assert verify.returncode == 0, verify.stdout[-3000:]


def _replicate(master_root: Path, slave_root: Path, until: int) -> list[EpochEntry]:
    """Run a master over ``master_root`` and a slave over ``slave_root`` until the slave holds
    ``until`` bytes; the slave's epochs."""
    config = HAConfig(ha_send_heartbeat_interval=200, ha_listen_port=0)

    async def scenario() -> list[EpochEntry]:
        with _writer(master_root) as mw, _writer(slave_root) as sw:
            m_epochs = EpochCache.load(master_root / "epochFileCheckpoint")
            master = AutoSwitchMaster(
                WriterSource(mw.commitlog), m_epochs, config, lambda: mw.max_offset, host="127.0.0.1"
            )
            master.serving = True
            await master.start()
            s_epochs = EpochCache.load(slave_root / "epochFileCheckpoint")
            appender = QueueAppender(sw.commitlog)
            slave = AutoSwitchSlave(
                appender, s_epochs, config, 2, lambda at: truncate_store(sw, at), lambda _e, _c: None
            )
            slave.set_master(f"127.0.0.1:{master.port}")
            task = asyncio.create_task(slave.run())
            for _ in range(200):
                if appender.max_offset >= until:
                    break
                await asyncio.sleep(0.05)
            await slave.close()
            await task
            appender.release()
            await master.close()
            return s_epochs.entries

    return asyncio.run(scenario())


def _diverged(tmp_path: Path) -> tuple[Path, Path, int, int]:
    """§6.8's story: A is master in epoch 1, B replicates it (empty at first), A writes on alone,
    then B is elected in epoch 2 and writes; ``(a, b, the shared end, B's end)``."""
    a, b = tmp_path / "a", tmp_path / "b"
    with _confirmed(a) as writer:
        EpochCache(a / "epochFileCheckpoint").append(EpochEntry(1, 0))
        _send(writer, 300, "one")
        shared = writer.max_offset
    assert _replicate(a, b, shared) == [EpochEntry(1, 0)]  # B, empty, gets A's epoch 1
    with _confirmed(a) as writer:
        _send(writer, 100, "lost")
    with _confirmed(b) as writer:
        EpochCache.load(b / "epochFileCheckpoint").append(EpochEntry(2, writer.max_offset))
        _send(writer, 200, "two")
        b_end = writer.max_offset
    return a, b, shared, b_end


def _confirmed(root: Path) -> StoreWriter:
    """A writer whose checkpoint says every record is confirmed (a master alone in its set)."""
    writer = _writer(root)
    writer.dispatch_bound = lambda: writer.max_offset
    return writer


def test_an_empty_replica_then_a_diverged_one_follow_the_master(tmp_path: Path) -> None:
    a, b, shared, b_end = _diverged(tmp_path)
    assert _replicate(b, a, b_end) == [EpochEntry(1, 0), EpochEntry(2, shared)]  # A rejoins as B's slave
    data = [b"".join(p.read_bytes() for p in sorted((r / "commitlog").iterdir()))[:b_end] for r in (a, b)]
    assert data[0] == data[1]
    backups = list((a / BACKUP_DIR).iterdir())
    assert len(backups) == 1  # A's bytes of the lost messages, kept


def test_diff_stores_says_which_epoch_and_what_a_rejoin_cuts(tmp_path: Path) -> None:
    a, b, shared, b_end = _diverged(tmp_path)
    a_end = Store(a).commitlog.max_offset()
    proc = run_rmq("diff-stores", str(a), str(b), "--json")
    assert proc.returncode == 4, proc.stderr  # diverged
    out = json.loads(proc.stdout)
    assert out["summary"]["verdict"] == "diverged" and out["summary"]["divergence"]["recordA"] == shared
    epochs = out["epochs"]
    assert epochs["a"] == [{"epoch": 1, "startOffset": 0, "endOffset": a_end}]
    assert epochs["b"] == [
        {"epoch": 1, "startOffset": 0, "endOffset": shared},
        {"epoch": 2, "startOffset": shared, "endOffset": b_end},
    ]
    assert (epochs["divergenceEpochA"], epochs["divergenceEpochB"]) == (1, 2)
    assert epochs["rejoin"] == [
        {"side": "a", "point": shared, "cutBytes": a_end - shared, "cutRecords": 100},
        {"side": "b", "point": shared, "cutBytes": b_end - shared, "cutRecords": 200},
    ]
    text = run_rmq("diff-stores", str(a), str(b)).stdout
    assert f"A rejoining B as its slave cuts at {shared}: {a_end - shared} bytes, 100 records" in text
