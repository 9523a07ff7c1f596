"""The slave side of replication: a client of the master's HA port (``HAService.HAClient`` of 4.9.8).

``HASlave.run()`` connects to the master's HA address, reports its own max offset at once and
then every ``haSendHeartbeatInterval`` and after each read that appended bytes, and appends each
push to its ``CommitLogAppender`` (bytes unchanged, files rolled where the master's are).

Each header is checked before anything of its push is written (nothing is written past a bad
frame; the pushes before it stay):

* not an HA push (negative offset or size, a body larger than a 4.9.8 slave could ever take, or
  one that crosses a CommitLog file): one log line, the connection is closed, and the slave
  reconnects with backoff;
* a start offset other than the slave's own end (once it holds bytes): 4.9.8's line
  "master pushed offset not equal the max phy offset in slave, SLAVE: .. MASTER: ..", and the
  slave stops replicating (4.9.8 reconnects and fails the same way forever; neither can repair a
  slave that is ahead of or diverges from its master: the operator compares the stores and
  rebuilds the slave);
* the first push after the slave's store was opened must start a record (or a file's BLANK
  record) whose stored physical offset is its start: a master whose records are laid out
  differently is a diverging master, and the slave stops, as above.

An empty slave (max offset 0) takes the first push wherever it starts, as 4.9.8's does, as long as
that is a file boundary. A master that sends nothing, not even a heartbeat, for
``haHousekeepingInterval``, a refused or closed connection, or a peer that is no HA port: one log
line and a reconnect after a backoff that doubles from ``backoff`` up to ``backoff_max`` and
starts again once a push arrived.

Flushing follows the broker's ``flushDiskType``: with ``sync_flush`` the appended bytes are
flushed before they are reported; otherwise every ``flush_interval_ms`` when something was
appended (``FlushRealTimeService``).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from formats import commitlog as fmt
from formats.ha import MAX_BODY_SIZE, SLAVE_REPORT_STRUCT, TRANSFER_HEADER_SIZE, TRANSFER_HEADER_STRUCT
from rmqcli.broker.ha.appender import AppendError, CommitLogAppender
from rmqcli.broker.ha.config import HAConfig
from rmqcli.broker.ha.flow import FlowMonitor

log = logging.getLogger(__name__)

READ_SIZE = 4 * 1024 * 1024  # at most this much is taken from the socket per read
_HEADER = TRANSFER_HEADER_STRUCT
_REPORT = SLAVE_REPORT_STRUCT
_SIZE_MAGIC = fmt.SIZE_MAGIC_STRUCT


class SlaveState(enum.Enum):
    IDLE = "idle"  # no master address yet
    CONNECTING = "connecting"
    CONNECTED = "connected"
    BACKOFF = "backoff"
    STOPPED = "stopped"  # divergence: replication ended for good
    CLOSED = "closed"


class _Outcome(enum.Enum):
    RECONNECT = 1
    STOP = 2
    CLOSED = 3


@dataclass
class _Session:
    address: str
    pushes: int = 0  # headers accepted
    appended: int = 0  # bytes appended


class _Run:
    """Pushes that follow each other in one CommitLog file, written with one call."""

    def __init__(self) -> None:
        self.start = 0
        self.size = 0
        self.pos = 0  # where the first of them starts in the read buffer
        self.parts: list[memoryview] = []

    def takes(self, start: int, file_size: int) -> bool:
        end = self.start + self.size
        return not self.parts or (start == end and end % file_size != 0)

    def add(self, start: int, body: memoryview, pos: int) -> None:
        if not self.parts:
            self.start, self.size, self.pos = start, 0, pos
        self.parts.append(body)
        self.size += len(body)


class HASlave:
    """Replicates a master's CommitLog into ``appender``; ``await run()`` until ``close()`` or a stop."""

    def __init__(
        self,
        appender: CommitLogAppender,
        config: HAConfig | None = None,
        *,
        master_address: str | None = None,
        sync_flush: bool = False,
        flush_interval_ms: int = 500,
        on_appended: Callable[[int], None] | None = None,
        backoff: float = 0.5,
        backoff_max: float = 5.0,
        connect_timeout: float = 3.0,
    ):
        self.appender = appender
        self.config = config or HAConfig()
        self.master_address = master_address or self.config.ha_master_address
        self.sync_flush = sync_flush
        self.flush_interval = max(flush_interval_ms, 10) / 1000
        self.on_appended = on_appended
        self.backoff = backoff
        self.backoff_max = backoff_max
        self.connect_timeout = connect_timeout
        self.state = SlaveState.IDLE
        self.stop_reason: str | None = None  # the line logged when replication stopped
        self.last_problem: str | None = None  # the line logged for the last reconnect
        self.reported_offset = -1
        self.flow = FlowMonitor()
        self.last_read_ms = 0  # epoch ms of the last bytes from the master
        self.last_write_ms = 0  # epoch ms of the last report to it
        self._last_report = 0.0
        self.reconnects = 0
        self._check_first_record = appender.max_offset > 0  # the store was opened: check the layout
        self._closing = False
        self._wake = asyncio.Event()
        self._writer: asyncio.StreamWriter | None = None
        self._dirty = False

    # --- control ------------------------------------------------------------------------------------
    def update_master_address(self, address: str | None) -> None:
        """``HAClient.updateMasterAddress``: from ``haMasterAddress`` or a registration answer."""
        if address == self.master_address:
            return
        log.info("update master address, OLD: %s NEW: %s", self.master_address, address)
        self.master_address = address
        if self._writer is not None:
            self._writer.close()
        self._wake.set()

    async def close(self) -> None:
        self._closing = True
        if self._writer is not None:
            self._writer.close()
        self._wake.set()

    # --- the loop -----------------------------------------------------------------------------------
    async def run(self) -> SlaveState:
        """Replicate until ``close()`` (CLOSED) or a divergence (STOPPED, ``stop_reason`` says why)."""
        flusher = None if self.sync_flush else asyncio.ensure_future(self._flush_loop())
        delay = self.backoff
        try:
            while not self._closing:
                address = self.master_address
                if not address:
                    self.state = SlaveState.IDLE
                    await self._pause(self.config.heartbeat_seconds)
                    continue
                self.state = SlaveState.CONNECTING
                session = _Session(address)
                outcome = await self._connect_and_replicate(session)
                if outcome is _Outcome.STOP:
                    self.state = SlaveState.STOPPED
                    return self.state
                if outcome is _Outcome.CLOSED or self._closing:
                    break
                self.reconnects += 1
                if session.pushes:
                    delay = self.backoff
                log.warning("HA: %s; reconnecting in %.1f s", self.last_problem, delay)
                self.state = SlaveState.BACKOFF
                await self._pause(delay)
                delay = min(delay * 2, self.backoff_max)
            self.state = SlaveState.CLOSED
            return self.state
        finally:
            if flusher is not None:
                flusher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await flusher
            if self._dirty:
                self._dirty = False
                self.appender.flush()

    async def _pause(self, seconds: float) -> None:
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)

    async def _flush_loop(self) -> None:
        while True:
            await asyncio.sleep(self.flush_interval)
            try:
                await self._flush()
            except OSError:
                log.exception("HA: flush of the replicated CommitLog failed")

    async def _flush(self) -> None:
        """The appended bytes to disk, in a worker thread: the loop goes on reading pushes."""
        if self._dirty:
            self._dirty = False
            await asyncio.to_thread(self.appender.take_flush())

    def _problem(self, line: str) -> _Outcome:
        self.last_problem = line  # logged by ``run`` with the time to the next attempt
        return _Outcome.RECONNECT

    def _stop(self, line: str) -> _Outcome:
        self.stop_reason = line
        log.error("%s", line)
        return _Outcome.STOP

    async def _connect_and_replicate(self, session: _Session) -> _Outcome:
        host, _, port = session.address.rpartition(":")
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host or "127.0.0.1", int(port)), self.connect_timeout
            )
        except (OSError, TimeoutError, ValueError) as exc:
            return self._problem(f"cannot connect to master {session.address}: {exc or type(exc).__name__}")
        self._writer = writer
        self.state = SlaveState.CONNECTED
        reporter = asyncio.ensure_future(self._report_loop(writer))
        try:
            return await self._replicate(session, reader, writer)
        except (ConnectionError, OSError) as exc:
            if self._closing:
                return _Outcome.CLOSED
            return self._problem(f"connection to master {session.address} failed: {exc}")
        finally:
            reporter.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError, OSError):
                await reporter
            self._writer = None
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _report(self, writer: asyncio.StreamWriter, offset: int) -> None:
        writer.write(_REPORT.pack(offset))
        self.reported_offset = offset
        self._last_report = time.monotonic()
        self.last_write_ms = int(time.time() * 1000)

    async def _report_loop(self, writer: asyncio.StreamWriter) -> None:
        """``HAClient.isTimeToReportOffset``: the max offset again every heartbeat interval."""
        heartbeat = self.config.heartbeat_seconds
        while True:
            wait = heartbeat - (time.monotonic() - self._last_report)
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            self._report(writer, self.appender.max_offset)
            await writer.drain()

    async def _replicate(
        self, session: _Session, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> _Outcome:
        appender = self.appender
        self._report(writer, appender.max_offset)
        await writer.drain()
        housekeeping = self.config.housekeeping_seconds
        buf = bytearray()
        while True:
            try:
                chunk = await asyncio.wait_for(reader.read(READ_SIZE), housekeeping)
            except TimeoutError:
                return self._problem(
                    f"master {session.address} sent nothing for {self.config.ha_housekeeping_interval} ms "
                    "(haHousekeepingInterval), connection closed"
                )
            if self._closing:
                return _Outcome.CLOSED
            if not chunk:
                if session.pushes == 0:
                    return self._problem(
                        f"{session.address} closed the connection before its first push: is it the "
                        "master's HA port?"
                    )
                return self._problem(f"master {session.address} closed the connection")
            buf += chunk
            self.last_read_ms = int(time.time() * 1000)
            before = appender.max_offset
            outcome, used = self._dispatch(session, buf)
            del buf[:used]
            end = appender.max_offset
            if end != before:
                self._dirty = True
                if self.sync_flush:
                    await self._flush()
                self._report(writer, end)
                if self.on_appended is not None:
                    self.on_appended(end)
                await writer.drain()
            if outcome is not None:
                return outcome

    def _dispatch(self, session: _Session, buf: bytearray) -> tuple[_Outcome | None, int]:
        """Append every whole push in ``buf``: ``(outcome when a header is bad, bytes used)``.
        Consecutive pushes into one file are written together (one ``pwritev``)."""
        pos = 0
        size_left = len(buf)
        run = _Run()
        with memoryview(buf) as view:
            while size_left - pos >= TRANSFER_HEADER_SIZE:
                start, size = _HEADER.unpack_from(buf, pos)
                mine = run.start + run.size if run.parts else self.appender.max_offset
                bad = self._check_header(session.address, start, size, mine)
                if bad is not None:
                    return self._write_run(session, run) or bad, run.pos if run.parts else pos
                end = pos + TRANSFER_HEADER_SIZE + size
                if end > size_left:
                    break
                if size:
                    body = view[pos + TRANSFER_HEADER_SIZE : end]
                    if self._check_first_record:
                        wrong = _layout_problem(start, body)
                        if wrong is not None:
                            return self._stop(wrong), pos
                        self._check_first_record = False
                    if not run.takes(start, self.appender.file_size):
                        failed = self._write_run(session, run)
                        if failed is not None:
                            return failed, run.pos
                        run = _Run()
                    run.add(start, body, pos)
                session.pushes += 1
                pos = end
            failed = self._write_run(session, run)
            if failed is not None:
                return failed, run.pos
        return None, pos

    def _write_run(self, session: _Session, run: _Run) -> _Outcome | None:
        if not run.parts:
            return None
        try:
            self.appender.append(run.start, run.parts if len(run.parts) > 1 else run.parts[0])
        except AppendError as exc:
            return self._problem(f"push from master {session.address} not appended: {exc}")
        session.appended += run.size
        self.flow.add(run.size)
        run.parts = []
        return None

    def _check_header(self, address: str, start: int, size: int, mine: int) -> _Outcome | None:
        """``mine``: where the slave's CommitLog ends, with the pushes of this read not written yet."""
        if start < 0 or size < 0 or size > MAX_BODY_SIZE:
            return self._problem(
                f"{address} sent a header that is no HA push (start offset {start}, body size {size}), "
                "connection closed"
            )
        file_size = self.appender.file_size
        if size and start % file_size + size > file_size:
            return self._problem(
                f"master {address} pushed {size} bytes at offset {start}, across the end of a "
                f"{file_size}-byte CommitLog file; connection closed"
            )
        if mine != 0 and start != mine:
            why = (
                "the slave holds bytes the master does not have (it is ahead of its master)"
                if start < mine
                else "the master pushes from past the slave's end"
            )
            return self._stop(
                f"master pushed offset not equal the max phy offset in slave, SLAVE: {mine} MASTER: {start}: "
                f"{why}; replication stopped"
            )
        if mine == 0 and size and start % file_size:
            return self._stop(
                f"master pushed offset {start} to an empty slave, which can only start at a CommitLog file "
                f"boundary ({file_size}-byte files); replication stopped"
            )
        return None


def _layout_problem(start: int, body: memoryview) -> str | None:
    """Why the master's bytes at ``start`` cannot continue the slave's CommitLog, which ends with a
    whole record there; None when they start a record stored at ``start``, or a BLANK record."""
    if len(body) < fmt.PREFIX_SIZE:
        return None  # too short to tell; the next pushes are not checked
    total, magic = _SIZE_MAGIC.unpack_from(body, 0)
    if magic == fmt.BLANK_MAGIC and total > 0:
        return None
    if magic in fmt.MESSAGE_MAGICS and total > 0:
        physical = fmt.stored_physical_offset(body)
        if physical == start:
            return None
        found = f"a record stored at offset {physical}"
    else:
        found = "no record"
    return (
        f"master pushed offset equal the max phy offset in slave ({start}), but the master's CommitLog holds "
        f"{found} there: the two CommitLogs differ; replication stopped"
    )
