"""Master-slave replication over RocketMQ 4.9.8's HA protocol (issue 16: the standalone core).

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
  past its end, stops with one line naming both offsets and writes nothing;
* bad peers (a web server, a port that closes, a garbage header after valid pushes, a master that
  stalls, a refused connection) give one log line each and a reconnect with growing backoff,
  never a crash, never a byte past a bad frame; the master drops a peer that reports a negative
  offset, one that stays silent, and one that claims more than the master holds.

With Java 17 and ``../shared/rocketmq-4.9.8`` (else skipped): a real 4.9.8 ASYNC_MASTER fed 3,000
messages by ``bin/clienttest`` is replicated by the rmq slave into files equal to the master's
(256 KiB files, so pushes roll files); rmq's master serves the real store to a real 4.9.8 SLAVE,
whose CommitLog and consume queues come out equal to the real store's; and the rmq slave pointed
at the NameServer's remoting port backs off without writing anything.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

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
from tests.support.oracle import HAVE_JAVA, KIT, Jvm, broker_port
from tests.support.realfixtures import REAL_ROOT
from tests.support.serve import free_port
from tests.support.stores import geometry

Reader, Writer = asyncio.StreamReader, asyncio.StreamWriter  # the fake masters' script arguments
REAL = REAL_ROOT / "basic-1" / "store"
FILE = 1024 * 1024
REAL_END = 5239795  # the real store's max physical offset (basic-1/expected.json's records)
SETTINGS = geometry(FILE, 6000, 500, 2000)
FAST = HAConfig(ha_send_heartbeat_interval=200, ha_housekeeping_interval=1000)
SLAVE_LOG = "rmqcli.broker.ha.slave"
MASTER_LOG = "rmqcli.broker.ha.master"

needs_real = pytest.mark.skipif(not REAL.is_dir(), reason="../shared/fixtures/real is absent")


# --- helpers ---------------------------------------------------------------------------------------
def writable_copy(src: Path, dst: Path, only: list[str] | None = None) -> Path:
    """A copy of the store ``src`` (read-only files) that can be written; ``only``: these CommitLog
    files and nothing else."""
    if only is None:
        shutil.copytree(src, dst, copy_function=shutil.copyfile)
    else:
        (dst / "commitlog").mkdir(parents=True)
        for name in only:
            shutil.copyfile(src / "commitlog" / name, dst / "commitlog" / name)
    for path in [dst, *dst.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return dst


def commitlog_files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


async def until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


def lines(caplog: pytest.LogCaptureFixture, logger: str, level: int = logging.WARNING) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == logger and r.levelno >= level]


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 60))  # type: ignore[arg-type]


class Replication:
    """An rmq master over ``source`` and an rmq slave into ``slave_dir`` (``commitlog/`` inside)."""

    def __init__(self, source, slave_dir: Path, *, config: HAConfig = FAST, full: bool = True, **slave):
        self.source = source
        self.master = HAMaster(source, config, host="127.0.0.1", port=0, full_sync_empty_slave=full)
        self.slave_dir = slave_dir
        self.config = config
        self.slave_args = slave
        self.slave: HASlave | None = None
        self.appender: QueueAppender | None = None
        self.task: asyncio.Future[SlaveState] | None = None

    async def start_master(self) -> None:
        await self.master.start()

    def start_slave(self, **extra: Any) -> HASlave:
        self.appender = QueueAppender.open(self.slave_dir / "commitlog", FILE)
        args = {**self.slave_args, **extra}
        self.slave = HASlave(
            self.appender, self.config, master_address=f"127.0.0.1:{self.master.port}", **args
        )
        self.task = asyncio.ensure_future(self.slave.run())
        return self.slave

    async def stop_slave(self) -> SlaveState:
        assert self.slave is not None and self.task is not None and self.appender is not None
        await self.slave.close()
        state = await self.task
        self.appender.close()
        return state

    async def caught_up(self, end: int, timeout: float = 20) -> None:
        await until(
            lambda: self.appender is not None and self.appender.max_offset >= end, timeout, "replication"
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
        await asyncio.sleep(0.3)
        assert slave.state is SlaveState.IDLE and rep.master.connection_count == 0
        slave.update_master_address(f"127.0.0.1:{rep.master.port}")
        await rep.caught_up(REAL_END)
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


# --- bad peers -------------------------------------------------------------------------------------
Script = Callable[["FakeMaster", asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]


class FakeMaster:
    """A TCP server running ``script(self, reader, writer, n)`` for its n-th connection; it records when
    each connection came and the first 8-byte report of each."""

    def __init__(self, script: Script):
        self.script = script
        self.accepted: list[float] = []
        self.reports: list[int] = []
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> FakeMaster:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        n = len(self.accepted)
        self.accepted.append(time.monotonic())
        try:
            await self.script(self, reader, writer, n)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def first_report(self, reader: asyncio.StreamReader) -> int:
        (offset,) = hfmt.SLAVE_REPORT_STRUCT.unpack(await reader.readexactly(8))
        self.reports.append(offset)
        return offset

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()


async def _against(
    tmp_path: Path, script: Script, until_accepts: int, **slave: Any
) -> tuple[FakeMaster, HASlave, QueueAppender]:
    """An rmq slave (empty store) against a fake master until it connected ``until_accepts`` times."""
    fake: FakeMaster
    fake = await FakeMaster(script).start()
    appender = QueueAppender.open(tmp_path / "slave" / "commitlog", FILE)
    config = slave.pop("config", FAST)
    ha = HASlave(
        appender, config, master_address=f"127.0.0.1:{fake.port}", backoff=0.05, backoff_max=0.2, **slave
    )
    task = asyncio.ensure_future(ha.run())
    await until(lambda: len(fake.accepted) >= until_accepts, 20, f"{until_accepts} connections")
    assert not task.done()  # no crash, still trying
    await ha.close()
    assert await task is SlaveState.CLOSED
    appender.close()
    await fake.close()
    return fake, ha, appender


def test_a_web_server_is_no_ha_port(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def web(fake: FakeMaster, reader: Reader, writer: Writer, n: int) -> None:
        await reader.read(100)
        writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()

    fake, slave, appender = run(_against(tmp_path, web, 3))
    warned = lines(caplog, SLAVE_LOG)
    assert len(warned) >= 2 and all("sent a header that is no HA push" in m for m in warned[:2])
    assert len(warned) in (slave.reconnects, slave.reconnects + 1)  # one line per failed connection
    assert appender.max_offset == 0 and not any((tmp_path / "slave" / "commitlog").iterdir())


def test_a_port_that_closes_backs_off_longer_each_time(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def close(fake: FakeMaster, reader: Reader, writer: Writer, n: int) -> None:
        return

    fake, slave, appender = run(_against(tmp_path, close, 5))
    warned = lines(caplog, SLAVE_LOG)
    assert warned[0].endswith(
        "closed the connection before its first push: is it the master's HA port?; reconnecting in 0.1 s"
    )
    assert warned[-1].endswith("; reconnecting in 0.2 s")  # 0.05 s doubled, at most backoff_max
    gaps = [b - a for a, b in zip(fake.accepted, fake.accepted[1:], strict=False)]
    assert gaps[0] >= 0.045 and gaps[-1] >= 0.19  # 0.05 s doubling up to 0.2 s
    assert appender.max_offset == 0


@needs_real
def test_garbage_header_after_valid_pushes(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Two valid pushes are kept, nothing of the bad frame or after it is written, and the next
    connection asks for the offset after the valid pushes."""
    head = (REAL / "commitlog" / "00000000000000000000").read_bytes()[:5000]

    async def script(fake: FakeMaster, reader: Reader, writer: Writer, n: int) -> None:
        await fake.first_report(reader)
        if n == 0:
            writer.write(hfmt.TRANSFER_HEADER_STRUCT.pack(0, 3000) + head[:3000])
            writer.write(hfmt.TRANSFER_HEADER_STRUCT.pack(3000, 2000) + head[3000:])
            writer.write(b"\xff" * 12 + b"more bytes that must not be written")
            await writer.drain()
        await reader.read(100)

    master, slave, appender = run(_against(tmp_path, script, 2))
    assert master.reports[:2] == [0, 5000]
    data = (tmp_path / "slave" / "commitlog" / "00000000000000000000").read_bytes()
    assert data[:5000] == head and not any(data[5000:])
    assert "sent a header that is no HA push (start offset -1, body size -1)" in lines(caplog, SLAVE_LOG)[0]


def test_a_stalled_master_is_left_after_the_housekeeping_interval(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def stall(fake: FakeMaster, reader: Reader, writer: Writer, n: int) -> None:
        await reader.read(8)
        await asyncio.sleep(30)

    config = HAConfig(ha_send_heartbeat_interval=100, ha_housekeeping_interval=300)
    fake, slave, appender = run(_against(tmp_path, stall, 2, config=config))
    assert fake.accepted[1] - fake.accepted[0] >= 0.3
    assert lines(caplog, SLAVE_LOG)[0].startswith(
        f"HA: master 127.0.0.1:{fake.port} sent nothing for 300 ms (haHousekeepingInterval)"
    )
    assert appender.max_offset == 0


def test_master_pushing_from_past_the_slave_end_stops_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> tuple[HASlave, QueueAppender]:
        appender = QueueAppender.open(tmp_path / "slave" / "commitlog", FILE)
        appender.append(0, b"\x01" * 100)

        async def gap(fake: FakeMaster, reader: Reader, writer: Writer, n: int) -> None:
            await reader.readexactly(8)
            writer.write(hfmt.TRANSFER_HEADER_STRUCT.pack(200, 4) + b"abcd")
            await writer.drain()
            await reader.read(100)

        fake = await FakeMaster(gap).start()
        slave = HASlave(appender, FAST, master_address=f"127.0.0.1:{fake.port}")
        assert await asyncio.wait_for(slave.run(), 10) is SlaveState.STOPPED
        await fake.close()
        appender.close()
        return slave, appender

    slave, appender = run(scenario())
    assert appender.max_offset == 100
    (line,) = lines(caplog, SLAVE_LOG)
    assert "SLAVE: 100 MASTER: 200: the master pushes from past the slave's end" in line


@needs_real
def test_refused_then_a_master_appears(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()
    source = StoreFilesSource(writable_copy(REAL, tmp_path / "master"))

    async def scenario() -> None:
        appender = QueueAppender.open(tmp_path / "slave" / "commitlog", FILE)
        slave = HASlave(appender, FAST, master_address=f"127.0.0.1:{port}", backoff=0.05, backoff_max=0.2)
        task = asyncio.ensure_future(slave.run())
        await until(lambda: slave.reconnects >= 3, 10, "three refusals")
        master = HAMaster(source, FAST, host="127.0.0.1", port=port, full_sync_empty_slave=True)
        await master.start()
        await until(lambda: appender.max_offset == REAL_END, 20, "replication")
        await slave.close()
        assert await task is SlaveState.CLOSED
        appender.close()
        await master.close()

    run(scenario())
    source.close()
    assert lines(caplog, SLAVE_LOG)[0].startswith(f"HA: cannot connect to master 127.0.0.1:{port}")
    assert commitlog_files(tmp_path / "slave" / "commitlog") == commitlog_files(REAL / "commitlog")


@needs_real
def test_master_drops_peers_that_are_no_slaves(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    source = StoreFilesSource(writable_copy(REAL, tmp_path / "master"))
    config = HAConfig(ha_send_heartbeat_interval=100, ha_housekeeping_interval=300)

    async def closed_by_master(payload: bytes, port: int) -> float:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        started = time.monotonic()
        writer.write(payload)
        with contextlib.suppress(ConnectionError):
            while await asyncio.wait_for(reader.read(1 << 20), 5):
                pass
        writer.close()
        return time.monotonic() - started

    async def scenario() -> None:
        master = HAMaster(source, config, host="127.0.0.1", port=0)
        await master.start()
        assert await closed_by_master(hfmt.SLAVE_REPORT_STRUCT.pack(-5), master.port) < 0.3
        assert await closed_by_master(b"", master.port) >= 0.29  # silent: housekeeping
        # a slave that later claims more than the master holds
        reader, writer = await asyncio.open_connection("127.0.0.1", master.port)
        writer.write(hfmt.SLAVE_REPORT_STRUCT.pack(REAL_END))
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(hfmt.SLAVE_REPORT_STRUCT.pack(REAL_END + 1))
        with contextlib.suppress(ConnectionError):
            while await asyncio.wait_for(reader.read(1 << 20), 5):
                pass
        writer.close()
        await until(lambda: master.connection_count == 0, 5, "no connection left")
        assert master.push_to_slave_max_offset == REAL_END  # the bad report was never counted
        await master.close()

    run(scenario())
    source.close()
    warned = lines(caplog, MASTER_LOG)
    assert any("reported offset -5: not a slave" in m for m in warned)
    assert any(m.startswith("ha housekeeping, found this connection[") for m in warned)
    assert any(
        f"request offset={REAL_END + 1} greater than local commitLog offset={REAL_END}" in m for m in warned
    )


# --- interop with the real 4.9.8 broker --------------------------------------------------------------
SMALL = 256 * 1024  # the real master's CommitLog files: 3,000 messages fill three of them


class LoopThread:
    """An asyncio loop in a thread, for rmq's side while the JVMs run."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def call(self, coro: Awaitable[Any], timeout: float = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)  # type: ignore[arg-type]

    def spawn(self, coro: Awaitable[Any]) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)  # type: ignore[arg-type]

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class Kit:
    def __init__(self, tmp: Path, env: dict[str, str], ns: str, master_port: int, loop: LoopThread):
        self.tmp = tmp
        self.env = env
        self.ns = ns
        self.master_port = master_port
        self.loop = loop
        self.rmq_master: HAMaster | None = None
        self.served = tmp / "served"
        self.real_slave_store = tmp / "real-slave"
        self.real_master_store = tmp / "real-master"


def _conf(path: Path, **keys: object) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in keys.items()))
    return path


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kit]:
    """A NameServer, a real ASYNC_MASTER (group ``ha-real``) and a real SLAVE (group ``ha-rmq``)
    whose master is rmq's HA service over a copy of the real store; started together."""
    if not HAVE_JAVA or not REAL.is_dir():
        pytest.skip("Java 17, ../shared/rocketmq-4.9.8 or ../shared/fixtures/real is missing")
    tmp = tmp_path_factory.mktemp("ha-kit")
    env = {k: v for k, v in os.environ.items() if k != "JAVA_OPT_EXT"}
    env["ORACLE_STATE_DIR"] = str(tmp / "state")
    ns_port, master_port, slave_port = free_port(), broker_port(), broker_port()
    ns = f"127.0.0.1:{ns_port}"
    loop = LoopThread()
    state = Kit(tmp, env, ns, master_port, loop)
    writable_copy(REAL, state.served)
    source = StoreFilesSource(state.served)
    state.rmq_master = HAMaster(source, HAConfig(), host="127.0.0.1", port=0, full_sync_empty_slave=True)
    loop.call(state.rmq_master.start())
    common = dict(
        brokerClusterName="HaCluster", namesrvAddr=ns, brokerIP1="127.0.0.1", brokerIP2="127.0.0.1",
        flushDiskType="ASYNC_FLUSH", autoCreateTopicEnable="true", diskMaxUsedSpaceRatio=95,
    )  # fmt: skip
    master_conf = _conf(
        tmp / "master.conf", brokerName="ha-real", brokerId=0, brokerRole="ASYNC_MASTER",
        listenPort=master_port, storePathRootDir=state.real_master_store, mappedFileSizeCommitLog=SMALL,
        **common,
    )  # fmt: skip
    slave_conf = _conf(
        tmp / "slave.conf", brokerName="ha-rmq", brokerId=1, brokerRole="SLAVE", listenPort=slave_port,
        storePathRootDir=state.real_slave_store, mappedFileSizeCommitLog=FILE,
        mappedFileSizeConsumeQueue=6000, haSendHeartbeatInterval=1000,
        haMasterAddress=f"127.0.0.1:{state.rmq_master.port}", **common,
    )  # fmt: skip
    jvms = [
        Jvm([str(KIT / "bin" / "namesrv"), "-p", str(ns_port)], tmp / "namesrv.out", env),
        Jvm([str(KIT / "bin" / "broker"), "-c", str(master_conf)], tmp / "master.out", env),
        Jvm([str(KIT / "bin" / "broker"), "-c", str(slave_conf)], tmp / "slave.out", env),
    ]
    try:
        jvms[0].wait_for("The Name Server boot success")
        jvms[1].wait_for("boot success")
        jvms[2].wait_for("boot success")
        yield state
    finally:
        for jvm in jvms:
            jvm.terminate()
        for jvm in jvms:
            jvm.wait()
        loop.call(state.rmq_master.close())
        loop.stop()
        source.close()


def _wait_equal(
    left: Callable[[], dict[str, bytes]], right: dict[str, bytes], timeout: float, what: str
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        got = left()
        if got == right:
            return
        if time.monotonic() > deadline:
            names = sorted(set(got) | set(right))
            diff = [n for n in names if got.get(n) != right.get(n)]
            raise AssertionError(f"{what}: files differ: {diff}")
        time.sleep(0.25)


@pytest.mark.java
def test_rmq_slave_of_a_real_4_9_8_master(kit: Kit) -> None:
    """``bin/clienttest`` sends 3,000 messages to the real master; rmq's slave, connected before
    the first one (an empty slave is served from the start of the master's last file: 0), holds
    the same files (all but the one the master mapped ahead, empty)."""
    slave_dir = kit.tmp / "rmq-slave"
    appender = QueueAppender.open(slave_dir / "commitlog", SMALL)
    slave = HASlave(appender, HAConfig(), master_address=f"127.0.0.1:{kit.master_port + 1}")
    running = kit.loop.spawn(slave.run())
    try:
        sent = subprocess.run(
            [str(KIT / "bin" / "clienttest"), kit.ns, "TopicHA", "3000", "send", "60"],
            capture_output=True, text=True, env=kit.env, cwd=kit.tmp, timeout=120,
        )  # fmt: skip
        assert "RESULT sent=3000 sendOk=3000" in sent.stdout, sent.stdout[-2000:] + sent.stderr[-2000:]
        master_dir = kit.real_master_store / "commitlog"

        def master_end() -> int:
            reader = CommitLog(MappedFileQueue.open(master_dir, SMALL))
            try:
                return reader.max_offset()
            finally:
                reader.close()

        end = master_end()
        assert end > 2 * SMALL  # the pushes rolled files
        deadline = time.monotonic() + 30
        while appender.max_offset < end:
            assert time.monotonic() < deadline, f"rmq slave at {appender.max_offset}, master at {end}"
            assert not running.done(), running.result()
            time.sleep(0.05)
        assert slave.stop_reason is None
    finally:
        kit.loop.call(slave.close())
        running.result(10)
        kit.loop.call(_noop())
        appender.close()
    # the real master maps its next file ahead of time (AllocateMappedFileService): it holds nothing
    master_files = commitlog_files(master_dir)
    ahead = {name: data for name, data in master_files.items() if int(name) >= end}
    assert all(not any(data) for data in ahead.values())
    held = {name: data for name, data in master_files.items() if int(name) < end}
    assert len(held) == len(master_files) - len(ahead) >= 3
    assert commitlog_files(slave_dir / "commitlog") == held


async def _noop() -> None:
    return None


@pytest.mark.java
def test_real_4_9_8_slave_of_the_rmq_master(kit: Kit) -> None:
    """The real slave's CommitLog files come out equal to the served store's, and its reput over
    them builds the real store's consume queues."""
    real = commitlog_files(REAL / "commitlog")
    directory = kit.real_slave_store / "commitlog"

    def held() -> dict[str, bytes]:  # the slave maps its next file ahead too: only empty ones are left out
        files = commitlog_files(directory) if directory.is_dir() else {}
        return {n: d for n, d in files.items() if int(n) < REAL_END or any(d)}

    _wait_equal(held, real, 30, "real slave CommitLog")
    assert kit.rmq_master is not None
    deadline = time.monotonic() + 10
    while not any(s.ack_offset == REAL_END for s in kit.rmq_master.slaves()):
        assert time.monotonic() < deadline, kit.rmq_master.slaves()
        time.sleep(0.1)
    cq = sorted(p.relative_to(REAL) for p in (REAL / "consumequeue").rglob("*") if p.is_file())

    def slave_cq() -> dict[str, bytes]:
        out = {}
        for rel in cq:
            path = kit.real_slave_store / rel
            out[str(rel)] = path.read_bytes() if path.is_file() else b""
        return out

    _wait_equal(
        slave_cq, {str(rel): (REAL / rel).read_bytes() for rel in cq}, 20, "real slave consume queues"
    )


@pytest.mark.java
def test_rmq_slave_pointed_at_a_remoting_port(kit: Kit, caplog: pytest.LogCaptureFixture) -> None:
    """The NameServer's remoting port is no HA port: the slave backs off, writes nothing."""
    slave_dir = kit.tmp / "rmq-slave-wrong"
    appender = QueueAppender.open(slave_dir / "commitlog", FILE)
    config = HAConfig(ha_send_heartbeat_interval=200, ha_housekeeping_interval=1000)
    slave = HASlave(appender, config, master_address=kit.ns, backoff=0.05, backoff_max=0.2)
    running = kit.loop.spawn(slave.run())
    deadline = time.monotonic() + 15
    while slave.reconnects < 2:
        assert time.monotonic() < deadline and not running.done()
        time.sleep(0.05)
    kit.loop.call(slave.close())
    assert running.result(10) is SlaveState.CLOSED
    appender.close()
    assert appender.max_offset == 0 and not any((slave_dir / "commitlog").iterdir())
    warned = lines(caplog, SLAVE_LOG)
    assert len(warned) >= 2 and all(kit.ns in m for m in warned)
