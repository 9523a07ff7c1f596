"""The master side of replication: the HA port (``HAService`` + ``HAConnection`` of RocketMQ 4.9.8).

``HAMaster`` listens on the HA port; each slave connection has a reader and a writer
(``ReadSocketService`` / ``WriteSocketService``):

* reader: every 8-byte word is the slave's max offset (the last whole word of what one read
  returns counts). The first is where the slave asks to be served from; each one raises
  ``push_to_slave_max_offset`` (``push2SlaveMaxOffset``: the best acknowledged offset of all
  slaves, never lowered) and wakes the SYNC_MASTER waits. A later word above this master's max
  offset ends the connection ("slave[..] request offset=.. greater than local commitLog
  offset=.."), as does silence for ``haHousekeepingInterval``.
* writer: once the first word is in, pushes from there; from a slave asking for 0, from the start
  of this master's last CommitLog file (``maxOffset - maxOffset % mappedFileSizeCommitLog``), as
  4.9.8 does (a fresh slave gets the last file, not the whole log). Each push is a 12-byte header
  and at most ``haTransferBatchSize`` bytes, never across a file; with nothing to push for
  ``haSendHeartbeatInterval``, an empty header at the next offset is the heartbeat. New bytes are
  pushed when ``notify_append`` is called (``WaitNotifyObject.wakeupAll``), and at the latest
  ``POLL_SECONDS`` after they are written (4.9.8's ``allWaitForRunning(100)``).

Where rmq differs, by choice: with ``full_sync_empty_slave`` a slave asking for 0 is served from
the first byte this master holds (its whole CommitLog; a 4.9.8 slave takes that too, as an empty
4.9.8 slave accepts a first push at any offset). Always: a slave whose first word is above this
master's max offset (a slave ahead of its master, which 4.9.8 serves heartbeats until its next
report) gets one empty header at the master's max offset and the connection is closed; a slave
then stops with "master pushed offset not equal the max phy offset in slave, SLAVE: .. MASTER: .."
(4.9.8's slave logs that line and reconnects). A first word that is negative is no slave's: the
connection is closed.

With ``admit`` set (a broker with ``aclEnable``: ``rmqcli.broker.acl.hagate``), a connection whose
peer it does not admit is closed before a byte is read or sent (4.9.8 admits everyone).

SYNC_MASTER (``GroupTransferService``, ``isSlaveOK``): ``when_acked(next_offset, callback, timeout)``
calls ``callback(True)`` once some slave acknowledged ``next_offset`` (the offset after a
message), ``callback(False)`` after ``timeout``; ``slave_acked`` is the same as a future;
``is_slave_ok(put_where)``: a slave is connected and
``put_where - push_to_slave_max_offset < haSlaveFallbehindMax``.

A SYNC_MASTER's send waits for a slave's round trip, so the steps of that trip are callbacks, not
tasks woken in turn: with ``direct_push``, a writer that is caught up and whose socket buffer is
low pushes the appended bytes from ``notify_append`` itself; an acknowledgement calls its
waiters' callbacks as it is read. (An ASYNC_MASTER leaves the push to the writer's task, which runs
after the send's answer is written.)
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from formats.ha import MASTER_READ_BUFFER_SIZE, SLAVE_REPORT_SIZE, SLAVE_REPORT_STRUCT, TRANSFER_HEADER_STRUCT
from rmqcli.broker.ha.config import HAConfig
from rmqcli.broker.ha.flow import FlowMonitor
from rmqcli.broker.ha.source import CommitLogSource

log = logging.getLogger(__name__)

POLL_SECONDS = 0.1
PUSH_READ = 1024 * 1024  # CommitLog bytes read at once for consecutive pushes (a catching-up slave)
REFUSED_LOG_SECONDS = 10.0  # refused connections are logged at most this often
DIRECT_PUSH_BUFFER = 256 * 1024  # a push is written from ``notify_append`` while less than this is unsent
_HEADER = TRANSFER_HEADER_STRUCT
_REPORT = SLAVE_REPORT_STRUCT


@dataclass(frozen=True)
class SlaveInfo:
    """One connected slave, as ``rmq haStatus`` shows it."""

    address: str
    request_offset: int  # first report; -1 before it
    ack_offset: int  # last report; -1 before the first
    gap: int  # master max offset - ack offset (bytes the slave has not acknowledged)
    connected_seconds: float
    transferred_per_second: int = 0  # bytes pushed in the last whole second
    transfer_from: int = -1  # where the pushes started


class HAMaster:
    """The HA port of a master over ``source``; ``await start()``, then ``await close()``."""

    def __init__(
        self,
        source: CommitLogSource,
        config: HAConfig | None = None,
        *,
        host: str = "0.0.0.0",
        port: int | None = None,
        full_sync_empty_slave: bool = False,
        direct_push: bool = False,
    ):
        self.direct_push = direct_push
        self.source = source
        self.full_sync_empty_slave = full_sync_empty_slave
        self.config = config or HAConfig()
        self.host = host
        self.port = self.config.ha_listen_port if port is None else port
        self.push_to_slave_max_offset = 0
        self._server: asyncio.Server | None = None
        self._connections: set[_Connection] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._waiters: list[tuple[int, int, _Waiter]] = []
        self._counted_waits = False  # a waiter needs more than one slave (a quorum write)
        self._seq = itertools.count()
        self.admit: Callable[[str], Awaitable[bool]] | None = None  # with ACL: the group's slaves only
        self._refused = 0
        self._refused_logged = -REFUSED_LOG_SECONDS

    # --- life cycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        """Bind the HA port (``AcceptSocketService.beginAccept``); ``port`` 0 picks a free one."""
        self._server = await asyncio.start_server(self._accept, self.host, self.port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("HA: listening on %s:%d", self.host, self.port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self._connections):
            conn.stop()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        waiters, self._waiters = self._waiters, []
        for _, _, waiter in waiters:
            waiter.fire(False)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        if self.admit is not None and not await self._admitted(writer):
            self._tasks.discard(task)
            return
        conn = _Connection(self, reader, writer)
        self._connections.add(conn)
        log.info("HAService receive new connection, %s", conn.address)
        try:
            await conn.run()
        except asyncio.CancelledError:
            pass  # the loop is going away; a cancelled handler would make asyncio's callback raise
        finally:
            self._connections.discard(conn)
            self._tasks.discard(task)
            conn.close()

    async def _admitted(self, writer: asyncio.StreamWriter) -> bool:
        """``admit`` lets the peer's host in; else the connection is closed before a byte is read
        (one log line per ``REFUSED_LOG_SECONDS``, with the count)."""
        assert self.admit is not None
        peer = writer.get_extra_info("peername")
        host = str(peer[0]) if peer else ""
        try:
            admitted = await self.admit(host)
        except Exception:  # a failed lookup admits no one
            log.exception("HA: checking %s failed", host)
            admitted = False
        if admitted:
            return True
        self._refused += 1
        now = time.monotonic()
        if now - self._refused_logged >= REFUSED_LOG_SECONDS:
            log.warning(
                "HA: refused %d connection(s), the last from %s: not a slave of this group",
                self._refused,
                host,
            )
            self._refused, self._refused_logged = 0, now
        writer.close()
        return False

    # --- what the broker calls ----------------------------------------------------------------------
    def notify_append(self) -> None:
        """New bytes are in the CommitLog: wake every connection's writer (call it on the loop)."""
        for conn in self._connections:
            if self.direct_push:
                conn.notify_append()
            else:
                conn.appended.set()

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    def is_slave_ok(self, master_put_where: int) -> bool:
        """``HAService.isSlaveOK``: a slave is connected and close enough to ``master_put_where``."""
        return (
            bool(self._connections)
            and master_put_where - self.push_to_slave_max_offset < self.config.ha_slave_fallbehind_max
        )

    def acked_by(self, offset: int) -> int:
        """How many connected slaves acknowledged ``offset``."""
        return sum(1 for c in self._connections if c.ack_offset >= offset)

    def in_sync(self, gap: int) -> int:
        """``inSyncReplicasNums``: this master and each slave less than ``gap`` bytes behind it."""
        top = self.source.max_offset()
        return 1 + sum(1 for c in self._connections if c.ack_offset >= 0 and top - c.ack_offset < gap)

    def when_acked(
        self, next_offset: int, callback: Callable[[bool], None], timeout: float | None = None, count: int = 1
    ) -> None:
        """``callback(True)`` once ``count`` slaves acknowledged ``next_offset`` (at once if they
        have), ``callback(False)`` after ``timeout`` seconds (``slaveTimeout`` by default) or at
        close, as ``GroupTransferService.doWaitTransfer``; called once, on the loop."""
        if count > 1:
            acknowledged = self.acked_by(next_offset) >= count
        else:  # the usual case: the best acknowledgement of any slave is enough
            acknowledged = self.push_to_slave_max_offset >= next_offset
        if acknowledged:
            callback(True)
            return
        delay = self.config.slave_timeout_seconds if timeout is None else timeout
        waiter = _Waiter(callback, count)
        self._counted_waits = self._counted_waits or count > 1
        waiter.timer = asyncio.get_running_loop().call_later(delay, waiter.fire, False)
        heapq.heappush(self._waiters, (next_offset, next(self._seq), waiter))

    def slave_acked(self, next_offset: int, timeout: float | None = None) -> asyncio.Future[bool]:
        """``when_acked`` as a future."""
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

        def settle(ok: bool) -> None:
            if not fut.done():
                fut.set_result(ok)

        self.when_acked(next_offset, settle, timeout)
        return fut

    async def wait_for_slave(self, next_offset: int, timeout: float | None = None) -> bool:
        return await self.slave_acked(next_offset, timeout)

    def slave_fall_behind(self) -> int:
        """``slaveFallBehindMuch``: bytes of this master's CommitLog no slave has acknowledged."""
        return self.source.max_offset() - self.push_to_slave_max_offset

    def slaves(self) -> list[SlaveInfo]:
        top = self.source.max_offset()
        now = time.monotonic()
        return [
            SlaveInfo(
                c.address,
                c.request_offset,
                c.ack_offset,
                top - c.ack_offset if c.ack_offset >= 0 else top,
                now - c.started,
                c.flow.per_second(),
                c.transfer_from,
            )
            for c in sorted(self._connections, key=lambda c: c.started)
        ]

    def notify_transfer(self, offset: int) -> None:
        """``HAService.notifyTransferSome``: a slave acknowledged ``offset``."""
        if offset > self.push_to_slave_max_offset:
            self.push_to_slave_max_offset = offset
        elif not self._counted_waits:
            return
        waiters, held = self._waiters, []
        while waiters and waiters[0][0] <= self.push_to_slave_max_offset:
            entry = heapq.heappop(waiters)
            waiter = entry[2]
            if waiter.count <= 1 or waiter.callback is None or self.acked_by(entry[0]) >= waiter.count:
                waiter.fire(True)
            else:  # a quorum wait: more slaves must acknowledge it
                held.append(entry)
        for entry in held:
            heapq.heappush(waiters, entry)


class _Waiter:
    """One ``when_acked`` callback and its timer."""

    __slots__ = ("callback", "count", "timer")

    def __init__(self, callback: Callable[[bool], None], count: int = 1):
        self.callback: Callable[[bool], None] | None = callback
        self.count = count  # slaves that must acknowledge
        self.timer: asyncio.TimerHandle | None = None

    def fire(self, ok: bool) -> None:
        callback, self.callback = self.callback, None
        if callback is None:
            return
        if self.timer is not None:
            self.timer.cancel()
        try:
            callback(ok)
        except Exception:  # one waiter's failure must not keep the others waiting
            log.exception("HA: a replication waiter failed")


class _Connection:
    """One slave on the HA port (``HAConnection``)."""

    def __init__(self, master: HAMaster, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.master = master
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.address = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.request_offset = -1
        self.ack_offset = -1
        self.started = time.monotonic()
        self.flow = FlowMonitor()
        self.transfer_from = -1
        self.requested = asyncio.Event()
        self.appended = asyncio.Event()
        self.offset = -1  # where the next push starts; -1 until pushes begin
        self.last_write = 0.0
        self._waiting = False  # the writer waits for appended bytes (nothing of its own to send)
        self._tasks: list[asyncio.Future[None]] = []

    async def run(self) -> None:
        self._tasks = [asyncio.ensure_future(self._read_reports()), asyncio.ensure_future(self._pushes())]
        try:
            await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.stop()
            for task in self._tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    try:
                        await task
                    except (ConnectionError, OSError) as exc:
                        log.info("HA: connection of slave %s: %s", self.address, exc)

    def stop(self) -> None:
        for task in self._tasks:
            task.cancel()

    def close(self) -> None:
        if not self.writer.is_closing():
            self.writer.close()

    def notify_append(self) -> None:
        """New bytes: pushed from here when the writer waits and the socket takes them at once,
        else the writer is woken to push them after a drain."""
        transport = self.writer.transport
        if (
            self._waiting
            and not transport.is_closing()
            and transport.get_write_buffer_size() < DIRECT_PUSH_BUFFER
        ):
            data = self._read()
            if data:
                self._push(data)
        self.appended.set()

    def _read(self) -> bytes:
        batch = self.master.config.ha_transfer_batch_size
        return self.master.source.read(self.offset, max(batch, PUSH_READ))

    def _push(self, data: bytes) -> None:
        """``data`` at ``offset`` as pushes of at most ``haTransferBatchSize`` bytes, written in one
        call (an empty push is a heartbeat)."""
        batch = self.master.config.ha_transfer_batch_size
        if len(data) <= batch:
            self.writer.writelines((_HEADER.pack(self.offset, len(data)), data))  # no copy of the data
        else:
            view = memoryview(data)
            parts: list[bytes | memoryview] = []
            for start in range(0, len(data), batch):
                piece = view[start : start + batch]
                parts += (_HEADER.pack(self.offset + start, len(piece)), piece)
            self.writer.writelines(parts)
        self.flow.add(len(data))
        self.offset += len(data)
        self.last_write = time.monotonic()

    # --- ReadSocketService ----------------------------------------------------------------------------
    async def _read_reports(self) -> None:
        master = self.master
        housekeeping = master.config.housekeeping_seconds
        pending = bytearray()
        last_read = time.monotonic()
        while True:
            try:
                chunk = await asyncio.wait_for(self.reader.read(MASTER_READ_BUFFER_SIZE), housekeeping)
            except TimeoutError:
                idle = int((time.monotonic() - last_read) * 1000)
                log.warning("ha housekeeping, found this connection[%s] expired, %d", self.address, idle)
                return
            if not chunk:
                log.info("HA: slave %s closed the connection", self.address)
                return
            last_read = time.monotonic()
            pending += chunk
            whole = len(pending) - len(pending) % SLAVE_REPORT_SIZE
            if whole == 0:
                continue
            (offset,) = _REPORT.unpack_from(pending, whole - SLAVE_REPORT_SIZE)
            del pending[:whole]
            if offset < 0:
                log.warning("HA: %s reported offset %d: not a slave; connection closed", self.address, offset)
                return
            self.ack_offset = offset
            if self.request_offset < 0:
                self.request_offset = offset
                log.info("slave[%s] request offset %d", self.address, offset)
                self.requested.set()
            elif offset > master.source.max_offset():
                log.warning(
                    "slave[%s] request offset=%d greater than local commitLog offset=%d; connection closed",
                    self.address,
                    offset,
                    master.source.max_offset(),
                )
                return
            master.notify_transfer(offset)

    # --- WriteSocketService ---------------------------------------------------------------------------
    async def _pushes(self) -> None:
        """Pushes from where the slave's first report says, then whatever the master appends; an
        empty push as heartbeat when there is nothing for ``haSendHeartbeatInterval``."""
        await self.requested.wait()
        offset = await self._first_offset()
        if offset is None:
            return
        self.offset = offset
        heartbeat = self.master.config.heartbeat_seconds
        self.last_write = time.monotonic()
        while True:
            self.appended.clear()
            data = self._read()
            idle = time.monotonic() - self.last_write
            if data or idle >= heartbeat:
                self._push(data)
                await self.writer.drain()
                continue
            self._waiting = True
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.appended.wait(), min(heartbeat - idle, POLL_SECONDS))
            finally:
                self._waiting = False

    async def _first_offset(self) -> int | None:
        """Where pushes start (``WriteSocketService``): a slave asking for 0 gets the start of the
        last file (everything with ``full_sync_empty_slave``); a slave ahead of this master gets
        an empty push at the master's end and the connection closes (None)."""
        source = self.master.source
        top = source.max_offset()
        request = self.request_offset
        if request == 0 and self.master.full_sync_empty_slave:
            offset = source.min_offset()
        elif request == 0:
            offset = max(top - top % source.file_size, 0)
        else:
            offset = request
        self.transfer_from = offset
        log.info(
            "master transfer data from %d to slave[%s], and slave request %d", offset, self.address, request
        )
        if request > top:
            log.warning(
                "HA: slave %s holds CommitLog bytes up to offset %d, past this master's end %d: "
                "it is ahead of its master and cannot be served; connection closed",
                self.address,
                request,
                top,
            )
            self.writer.write(_HEADER.pack(top, 0))
            await self.writer.drain()
            return None
        if 0 < request < source.min_offset():
            log.warning(
                "HA: slave %s asks for offset %d, before this master's first CommitLog offset %d: "
                "nothing can be pushed to it",
                self.address,
                request,
                source.min_offset(),
            )
        return offset
