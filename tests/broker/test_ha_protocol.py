"""Master-slave replication over RocketMQ 4.9.8's HA protocol: the master service and slave client.

rmq's master service (``rmqcli.broker.ha.master``) and slave client (``rmqcli.broker.ha.slave``) over
loopback sockets on free ports, with the store written by a real 4.9.8 broker
(``../shared/fixtures/real/basic-1``, five 1 MiB CommitLog files) as the master's CommitLog:

* the slave's files come out byte for byte the master's, and the store's own dispatcher, fed by the
  slave's reput, builds consume-queue files equal to the real broker's;
* a slave asking for 0 gets the last file only, as 4.9.8's master serves it (``full_sync_empty_slave``
  serves everything);
* appends made through ``StoreWriter`` while the slave is connected are streamed and acknowledged
  (the SYNC_MASTER wait is True; it is False after its timeout, and ``is_slave_ok`` is False without
  a slave or too far behind);
* a slave closed mid-record and opened again reports the end of its last whole record and resumes
  from there;
* a slave ahead of its master, or whose records lie elsewhere than the master's, or served from
  past its end, stops with one line naming both offsets and writes nothing.

Bad peers are in ``test_ha_bad_peers.py``, the real 4.9.8 broker's side in
``test_ha_protocol_java.py``, whole ``rmq serve`` groups in ``test_ha_serve.py``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest

from formats import ha as hfmt
from rmqcli.broker.ha.appender import QueueAppender
from rmqcli.broker.ha.config import HAConfig, ha_config_from_properties
from rmqcli.broker.ha.master import HAMaster
from rmqcli.broker.ha.reput import ReplicaReput
from rmqcli.broker.ha.slave import HASlave, SlaveState
from rmqcli.broker.ha.source import StoreFilesSource, WriterSource
from rmqcli.store.mapped import MappedFileQueue
from rmqcli.store.read.commitlog import CommitLog
from rmqcli.store.write.dispatch import Dispatcher
from rmqcli.store.write.messages import Message
from rmqcli.store.write.writer import StoreWriter
from tests.support.ha import (
    FAST,
    FILE,
    MASTER_LOG,
    REAL,
    REAL_END,
    SETTINGS,
    SLAVE_LOG,
    Replication,
    commitlog_files,
    lines,
    needs_real,
    run,
    until,
    writable_copy,
)


# --- the frames --------------------------------------------------------------------------------------
def test_frames_are_declared_once_and_big_endian() -> None:
    push = hfmt.Transfer.build({"start_offset": 4194304, "body": b"abc"})
    assert push == bytes.fromhex("000000000040000000000003") + b"abc"
    assert push[: hfmt.TRANSFER_HEADER_SIZE] == hfmt.TRANSFER_HEADER_STRUCT.pack(4194304, 3)
    parsed = hfmt.Transfer.parse(push)
    assert (parsed.start_offset, parsed.body_size, parsed.body) == (4194304, 3, b"abc")
    heartbeat = hfmt.Transfer.build({"start_offset": 7, "body": b""})
    assert heartbeat == hfmt.TRANSFER_HEADER_STRUCT.pack(7, 0) and len(heartbeat) == 12
    assert hfmt.SlaveReport.build({"max_offset": REAL_END}) == REAL_END.to_bytes(8, "big")
    assert hfmt.SLAVE_REPORT_STRUCT.pack(REAL_END) == REAL_END.to_bytes(8, "big")
    assert hfmt.MAX_BODY_SIZE == 4 * 1024 * 1024 - 12


def test_config_keys_and_4_9_8_defaults() -> None:
    default = ha_config_from_properties({})
    assert (default.ha_send_heartbeat_interval, default.ha_housekeeping_interval) == (5000, 20000)
    assert (default.ha_transfer_batch_size, default.ha_slave_fallbehind_max) == (32768, 256 * 1024 * 1024)
    assert (default.slave_timeout, default.ha_listen_port, default.ha_master_address) == (3000, 10912, None)
    conf = ha_config_from_properties(
        {"listenPort": "20911", "haMasterAddress": "10.0.0.1:10912", "haTransferBatchSize": "65536"}
    )
    assert (conf.ha_listen_port, conf.ha_master_address, conf.ha_transfer_batch_size) == (
        20912,
        "10.0.0.1:10912",
        65536,
    )
    assert ha_config_from_properties({"haMasterAddress": "x:1"}).ha_master_address is None  # < 6 chars


# --- rmq master + rmq slave --------------------------------------------------------------------------
@needs_real
@pytest.mark.parametrize("sync_flush", [False, True], ids=["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_rmq_slave_replicates_the_real_store_byte_for_byte(tmp_path: Path, sync_flush: bool) -> None:
    """Five files equal to the real broker's; the reput over them builds its consume queues."""
    master_copy = writable_copy(REAL, tmp_path / "master")
    source = StoreFilesSource(master_copy)
    assert source.max_offset() == REAL_END
    slave_dir = tmp_path / "slave"
    dispatcher = Dispatcher(slave_dir, SETTINGS, lambda _ts: "20250101000000000")
    reput: list[ReplicaReput] = []

    async def scenario() -> None:
        rep = Replication(
            source, slave_dir, sync_flush=sync_flush, on_appended=lambda end: reput[0].dispatch_to(end)
        )
        await rep.start_master()
        rep.start_slave()
        assert rep.appender is not None
        reput.append(ReplicaReput(rep.appender.queue, dispatcher.dispatch_record, 0))
        await rep.caught_up(REAL_END)
        await until(lambda: rep.master.push_to_slave_max_offset == REAL_END, 5, "the acknowledgement")
        (info,) = rep.master.slaves()
        assert (info.request_offset, info.ack_offset, info.gap) == (0, REAL_END, 0)
        assert rep.master.slave_fall_behind() == 0
        assert await rep.stop_slave() is SlaveState.CLOSED
        await rep.master.close()

    run(scenario())
    source.close()
    assert commitlog_files(slave_dir / "commitlog") == commitlog_files(REAL / "commitlog")
    assert reput[0].next == REAL_END and reput[0].broken is None and reput[0].dispatched == 3005
    dispatcher.close()
    real_cq = sorted(p.relative_to(REAL) for p in (REAL / "consumequeue").rglob("*") if p.is_file())
    slave_cq = sorted(
        p.relative_to(slave_dir) for p in (slave_dir / "consumequeue").rglob("*") if p.is_file()
    )
    assert slave_cq == real_cq and len(real_cq) == 30
    for rel in real_cq:
        assert (slave_dir / rel).read_bytes() == (REAL / rel).read_bytes(), rel


@needs_real
def test_slave_appends_to_a_store_writer_whose_recovery_then_agrees(tmp_path: Path) -> None:
    """The slave side inside a broker: the appender writes the ``StoreWriter``'s own CommitLog
    queue, the reput hands records to its dispatcher; reopened, the store recovers to the same end
    with nothing left to dispatch and its queue offsets continue from the replicated records."""
    source = StoreFilesSource(writable_copy(REAL, tmp_path / "master"))
    slave_dir = tmp_path / "slave"
    writer = StoreWriter(slave_dir, SETTINGS)
    appender = QueueAppender(writer.commitlog)
    reput = ReplicaReput(writer.commitlog, writer.dispatcher.dispatch_record, writer.max_offset)

    async def scenario() -> None:
        master = HAMaster(source, FAST, host="127.0.0.1", port=0, full_sync_empty_slave=True)
        await master.start()
        slave = HASlave(
            appender, FAST, master_address=f"127.0.0.1:{master.port}", on_appended=reput.dispatch_to
        )
        task = asyncio.ensure_future(slave.run())
        await until(lambda: writer.max_offset == REAL_END, 20, "replication")
        await slave.close()
        await task
        await master.close()

    run(scenario())
    source.close()
    appender.release()
    assert reput.dispatched == 3005
    writer.close()
    assert commitlog_files(slave_dir / "commitlog") == commitlog_files(REAL / "commitlog")
    for rel in (p.relative_to(REAL) for p in (REAL / "consumequeue").rglob("*") if p.is_file()):
        assert (slave_dir / rel).read_bytes() == (REAL / rel).read_bytes(), rel
    queue = b"".join(p.read_bytes() for p in sorted((REAL / "consumequeue" / "OrderTopic" / "0").iterdir()))
    units = sum(1 for i in range(0, len(queue), 20) if any(queue[i : i + 20]))
    with StoreWriter(slave_dir, SETTINGS) as reopened:
        assert reopened.max_offset == REAL_END
        assert reopened.queue_offsets[("OrderTopic", 0)] == units == 65


@needs_real
def test_an_idle_connection_lives_on_heartbeats_and_follows_a_new_address(tmp_path: Path) -> None:
    """Both sides close a connection silent for haHousekeepingInterval (300 ms here): the master's
    empty headers and the slave's reports keep an idle one up for 1.5 s. A slave without an address
    waits; given one (``updateHaMasterAddress``), it replicates."""
    source = StoreFilesSource(writable_copy(REAL, tmp_path / "master"))
    config = HAConfig(ha_send_heartbeat_interval=100, ha_housekeeping_interval=300)

    async def scenario() -> None:
        rep = Replication(source, tmp_path / "slave", config=config)
        await rep.start_master()
        slave = rep.start_slave()
        slave.update_master_address(None)
        # nothing to connect to: a slave that tried would be seen by the master at once; a
        # housekeeping interval (300 ms) with no connection shows it waits
        await asyncio.sleep(0.3)
        assert slave.state is SlaveState.IDLE and rep.master.connection_count == 0
        slave.update_master_address(f"127.0.0.1:{rep.master.port}")
        await rep.caught_up(REAL_END)
        # idle from now on: five housekeeping intervals (a silent connection is closed after one),
        # kept up only by the heartbeats (every 100 ms); checked below by the slave's reconnects
        # and the master's connected_seconds, not by the sleep's length
        await asyncio.sleep(1.5)
        assert slave.state is SlaveState.CONNECTED and slave.reconnects == 0
        (info,) = rep.master.slaves()
        assert info.connected_seconds >= 1.5 and info.ack_offset == REAL_END
        await rep.stop_slave()
        await rep.master.close()

    run(scenario())
    source.close()


@needs_real
def test_empty_slave_is_served_from_the_last_file_as_4_9_8_serves_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=MASTER_LOG)
    source = StoreFilesSource(writable_copy(REAL, tmp_path / "master"))

    async def scenario() -> None:
        rep = Replication(source, tmp_path / "slave", full=False)
        await rep.start_master()
        rep.start_slave()
        await rep.caught_up(REAL_END)
        await rep.stop_slave()
        await rep.master.close()

    run(scenario())
    source.close()
    last = "00000000000004194304"
    assert commitlog_files(tmp_path / "slave" / "commitlog") == {
        last: (REAL / "commitlog" / last).read_bytes()
    }
    assert any(
        "master transfer data from 4194304 to slave[" in m for m in lines(caplog, MASTER_LOG, logging.INFO)
    )


@needs_real
def test_appends_while_connected_are_streamed_and_acknowledged(tmp_path: Path) -> None:
    """Appends through ``StoreWriter`` roll into a sixth file; every one reaches the slave, and the
    SYNC_MASTER wait is answered by its acknowledgements."""
    writer = StoreWriter(writable_copy(REAL, tmp_path / "master"), SETTINGS)
    assert writer.max_offset == REAL_END
    source = WriterSource(writer.commitlog)
    config = HAConfig(
        ha_send_heartbeat_interval=200, ha_housekeeping_interval=1000, ha_slave_fallbehind_max=FILE
    )

    async def scenario() -> None:
        rep = Replication(source, tmp_path / "slave", config=config)
        await rep.start_master()
        master = rep.master
        assert not master.is_slave_ok(writer.max_offset)  # no slave: SLAVE_NOT_AVAILABLE
        rep.start_slave()
        await rep.caught_up(REAL_END)
        for i in range(400):
            body = (f"streamed-{i}-".encode() * 200)[: 1000 + i]
            writer.append(
                Message("TopicHA", i % 4, body, {"KEYS": f"k{i}"}, born_timestamp=1_700_000_000_000)
            )
            master.notify_append()
            if i % 50 == 0:  # a SYNC_MASTER send: wait for the slave to hold it
                put_where = writer.max_offset
                assert master.is_slave_ok(put_where)
                assert await master.wait_for_slave(put_where, timeout=5)
        put_where = writer.max_offset
        assert put_where > 5 * FILE  # rolled into a sixth file
        assert await master.wait_for_slave(put_where, timeout=5)
        assert rep.appender is not None and rep.appender.max_offset == put_where
        # nothing can acknowledge an offset nobody holds: FLUSH_SLAVE_TIMEOUT after the timeout
        started = time.monotonic()
        assert not await master.wait_for_slave(put_where + 1, timeout=0.2)
        assert time.monotonic() - started >= 0.19
        assert not master.is_slave_ok(put_where + FILE)  # too far behind (haSlaveFallbehindMax)
        await rep.stop_slave()
        await until(lambda: master.connection_count == 0, 5, "the master to see the slave go")
        assert not master.is_slave_ok(put_where)
        await master.close()

    run(scenario())
    writer.close()
    master_files = commitlog_files(tmp_path / "master" / "commitlog")
    assert len(master_files) == 6
    assert commitlog_files(tmp_path / "slave" / "commitlog") == master_files


@needs_real
def test_restarted_slave_resumes_from_its_own_offset(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The master first holds bytes up to 100 bytes into a record (a master caught mid-write); the
    slave closed there and opened again counts the whole records only, asks for the offset of the
    cut record, and gets the rest once the master holds it."""
    caplog.set_level(logging.INFO, logger=MASTER_LOG)
    source = StoreFilesSource(writable_copy(REAL, tmp_path / "master"))
    cut = next(r for r in _records(REAL) if r.physical_offset > 2_500_000 and r.total_size > 200)
    capped = CappedSource(source, cut.physical_offset + 100)
    ends: dict[str, int] = {}

    async def scenario() -> None:
        rep = Replication(capped, tmp_path / "slave")
        await rep.start_master()
        rep.start_slave()
        await rep.caught_up(capped.cap)
        assert rep.appender is not None
        ends["closed"] = rep.appender.max_offset
        await rep.stop_slave()
        rep.start_slave()
        ends["reopened"] = rep.appender.max_offset
        await until(lambda: rep.master.slaves() and rep.master.slaves()[0].ack_offset >= 0, 5, "a report")
        capped.cap = REAL_END
        rep.master.notify_append()
        await rep.caught_up(REAL_END)
        await until(lambda: rep.master.slaves()[0].ack_offset == REAL_END, 5, "the acknowledgement")
        assert rep.master.slaves()[0].request_offset == ends["reopened"]
        await rep.stop_slave()
        await rep.master.close()

    run(scenario())
    source.close()
    assert ends == {"closed": cut.physical_offset + 100, "reopened": cut.physical_offset}
    assert commitlog_files(tmp_path / "slave" / "commitlog") == commitlog_files(REAL / "commitlog")
    requests = [m for m in lines(caplog, MASTER_LOG, logging.INFO) if " request offset " in m]
    assert [int(m.rsplit(" ", 1)[1]) for m in requests] == [0, cut.physical_offset]


class CappedSource:
    """A master's CommitLog that holds the bytes of ``source`` below ``cap`` (raised by the test)."""

    def __init__(self, source: StoreFilesSource, cap: int):
        self.source = source
        self.cap = cap
        self.file_size = source.file_size

    def min_offset(self) -> int:
        return self.source.min_offset()

    def max_offset(self) -> int:
        return min(self.cap, self.source.max_offset())

    def read(self, offset: int, limit: int) -> bytes:
        return self.source.read(offset, min(limit, self.max_offset() - offset))


def _records(store: Path):  # type: ignore[no-untyped-def]
    reader = CommitLog(MappedFileQueue.open(store / "commitlog", FILE))
    try:
        return list(reader.records())
    finally:
        reader.close()


@needs_real
def test_slave_ahead_of_its_master_stops_with_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    names = sorted(p.name for p in (REAL / "commitlog").iterdir())
    source = StoreFilesSource(writable_copy(REAL, tmp_path / "master", only=names[:3]))
    master_end = source.max_offset()
    assert 2 * FILE < master_end < 3 * FILE
    slave_dir = writable_copy(REAL, tmp_path / "slave", only=names)
    before = commitlog_files(slave_dir / "commitlog")

    async def scenario() -> None:
        rep = Replication(source, slave_dir)
        await rep.start_master()
        rep.start_slave()
        assert rep.task is not None
        assert await asyncio.wait_for(rep.task, 10) is SlaveState.STOPPED
        assert rep.slave is not None and rep.appender is not None
        assert f"SLAVE: {REAL_END} MASTER: {master_end}" in (rep.slave.stop_reason or "")
        rep.appender.close()
        await rep.master.close()

    run(scenario())
    source.close()
    (line,) = lines(caplog, SLAVE_LOG, logging.ERROR)
    assert line.startswith(
        f"master pushed offset not equal the max phy offset in slave, SLAVE: {REAL_END} MASTER:"
    )
    assert "ahead of its master" in line
    assert any("ahead of its master" in m for m in lines(caplog, MASTER_LOG))
    assert commitlog_files(slave_dir / "commitlog") == before


@needs_real
def test_slave_whose_records_differ_stops_and_writes_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A slave written elsewhere (its own 50 records) ends at an offset where no record of the
    master's starts: the first push is refused."""
    slave_dir = tmp_path / "slave"
    with StoreWriter(slave_dir, SETTINGS) as other:
        for i in range(50):
            other.append(Message("TopicOther", 0, b"x" * (700 + i), born_timestamp=1_700_000_000_000))
        end = other.max_offset
    assert end not in {r.physical_offset for r in _records(REAL)}
    before = commitlog_files(slave_dir / "commitlog")
    source = StoreFilesSource(writable_copy(REAL, tmp_path / "master"))

    async def scenario() -> None:
        rep = Replication(source, slave_dir)
        await rep.start_master()
        rep.start_slave()
        assert rep.task is not None and rep.appender is not None
        assert rep.appender.max_offset == end
        assert await asyncio.wait_for(rep.task, 10) is SlaveState.STOPPED
        rep.appender.close()
        await rep.master.close()

    run(scenario())
    source.close()
    (line,) = lines(caplog, SLAVE_LOG, logging.ERROR)
    assert f"({end})" in line and "the two CommitLogs differ" in line
    assert commitlog_files(slave_dir / "commitlog") == before
