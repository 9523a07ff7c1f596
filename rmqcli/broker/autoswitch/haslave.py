"""The slave side of AutoSwitchHA (5.1.1 ``AutoSwitchHAClient``; docs/controller.md §6).

READY: connect to the master's HA address (the NameServer names it in the registration answer).
HANDSHAKE: send the 16-byte handshake, read the master's epoch list and max offset, and cut this
replica back to the point where both agree (§6.8: from the highest local epoch down, the first the
master has with the same start; the smaller end). No such point: the handshake fails and is tried
again, as 5.1.1 does. TRANSFER: each frame's offset must be this CommitLog's end; a new epoch in a
header is appended to the epoch file; the body is appended; the confirm offset is the smaller of
the master's and this end; the end is reported when it grew, and every ``haSendHeartbeatInterval``
in any case. Any error, or ``haHousekeepingInterval`` without a byte, closes the connection and
the client starts over.

rmq reports its start at once after the handshake, where 5.1.1 waits for the report timer (up to
``haSendHeartbeatInterval``) when nothing had to be cut; a master reads both alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from formats import autoswitch as wire
from formats.epoch import EpochEntry
from rmqcli.broker.autoswitch.epochs import EpochCache
from rmqcli.broker.ha.appender import AppendError, QueueAppender
from rmqcli.broker.ha.config import HAConfig
from rmqcli.errors import UsageError
from rmqcli.remoting.client import parse_address

log = logging.getLogger(__name__)

RETRY_S = 5.0  # AutoSwitchHAClient: READY sleeps 5 s after a failed connect
FAILED_HANDSHAKE_WAIT_S = 2.0
CONNECT_TIMEOUT_S = 3.0


class HandshakeFailed(Exception):
    """No consistent point with the master, or the cut failed."""


class AutoSwitchSlave:
    """Replicates from the master named by ``master_address``; ``run()`` until ``close()``."""

    def __init__(
        self,
        appender: QueueAppender,
        epochs: EpochCache,
        config: HAConfig,
        broker_id: int,
        truncate: Callable[[int], None],
        on_appended: Callable[[int, int], None],
        *,
        sync_from_last_file: bool = False,
        async_learner: bool = False,
    ):
        self.appender, self.epochs, self.config = appender, epochs, config
        self.broker_id = broker_id
        self.truncate = truncate  # cut the store at an offset
        self.on_appended = on_appended  # (new end, confirm offset)
        self.sync_from_last_file, self.async_learner = sync_from_last_file, async_learner
        self.master_address: str | None = None
        self.state = wire.READY
        self.reported = 0
        self._changed = asyncio.Event()
        self._closed = False
        self._writer: asyncio.StreamWriter | None = None

    def set_master(self, address: str | None) -> None:
        """The master's HA address changed: reconnect there."""
        if address != self.master_address:
            self.master_address = address
            self.drop()
            self._changed.set()

    def drop(self) -> None:
        if self._writer is not None:
            self._writer.close()

    async def close(self) -> None:
        self._closed = True
        self.drop()
        self._changed.set()

    async def run(self) -> None:
        while not self._closed:
            address = self.master_address
            if not address:
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), RETRY_S)
                continue
            try:
                await self._session(address)
            except HandshakeFailed as exc:
                log.error("AutoSwitchHA: handshake with %s failed: %s", address, exc)
                await asyncio.sleep(FAILED_HANDSHAKE_WAIT_S)
            except (OSError, asyncio.IncompleteReadError, TimeoutError, ConnectionError, AppendError) as exc:
                if not self._closed:
                    log.warning("AutoSwitchHA: connection to master %s ended: %s", address,
                                str(exc) or type(exc).__name__)  # fmt: skip
            finally:
                self.state = wire.READY
                self._writer = None
            if not self._closed and address == self.master_address:
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), 1.0)

    async def _session(self, address: str) -> None:
        try:
            host, port = parse_address(address)
        except UsageError as exc:
            raise ConnectionError(str(exc)) from None
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), CONNECT_TIMEOUT_S)
        self._writer = writer
        silence = self.config.housekeeping_seconds
        try:
            self.state = wire.HANDSHAKE
            writer.write(
                wire.SLAVE_HANDSHAKE_STRUCT.pack(
                    wire.HANDSHAKE, int(self.sync_from_last_file), int(self.async_learner), self.broker_id
                )
            )
            await writer.drain()
            head = await asyncio.wait_for(reader.readexactly(wire.HANDSHAKE_ANSWER_SIZE), silence)
            state, body_size, master_max, _last_epoch = wire.HANDSHAKE_ANSWER_STRUCT.unpack(head)
            if state != wire.HANDSHAKE or body_size < 0 or body_size % wire.EPOCH_ENTRY_SIZE:
                raise ConnectionError(f"not a handshake answer (state {state}, body {body_size})")
            if body_size > wire.MAX_EPOCH_ENTRIES * wire.EPOCH_ENTRY_SIZE:
                raise ConnectionError(f"a handshake answer of {body_size} bytes")
            body = await asyncio.wait_for(reader.readexactly(body_size), silence)
            theirs = [
                EpochEntry(*wire.EPOCH_ENTRY_STRUCT.unpack_from(body, i))
                for i in range(0, body_size, wire.EPOCH_ENTRY_SIZE)
            ]
            start = self._cut_to_master(theirs, master_max)
            self.state = wire.TRANSFER
            await self._report(writer, start)
            await self._transfer(reader, writer)
        finally:
            writer.close()

    def _cut_to_master(self, theirs: list[EpochEntry], master_max: int) -> int:
        """``doTruncate``: where this replica starts again (§6.8)."""
        if not self.epochs.entries:
            log.info("AutoSwitchHA: no local epoch: a new replica, nothing to cut")
            return self.appender.max_offset
        own_end = self.appender.max_offset
        point = self.epochs.consistent_point(own_end, theirs, master_max)
        log.info("AutoSwitchHA: master epochs %s (end %d), local %s (end %d): consistent point %d",
                 theirs, master_max, self.epochs.entries, own_end, point)  # fmt: skip
        if point < 0:
            raise HandshakeFailed(
                f"no consistent point between master {theirs} and local {self.epochs.entries}"
            )
        if point < own_end:
            self.truncate(point)
        self.epochs.truncate_suffix(point)
        return min(point, self.appender.max_offset)

    async def _report(self, writer: asyncio.StreamWriter, offset: int) -> None:
        writer.write(wire.SLAVE_REPORT_STRUCT.pack(wire.TRANSFER, offset))
        await writer.drain()
        self.reported = offset
        self._last_report = time.monotonic()

    async def _transfer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        beat = self.config.heartbeat_seconds
        silence = self.config.housekeeping_seconds
        received_epoch = -1
        last_read = time.monotonic()
        while True:
            if time.monotonic() - self._last_report >= beat:
                await self._report(writer, self.appender.max_offset)
            try:
                head = await asyncio.wait_for(reader.readexactly(wire.TRANSFER_HEADER_SIZE), beat)
            except TimeoutError:
                if time.monotonic() - last_read >= silence:
                    raise TimeoutError(f"no frame from the master for {silence:.0f} s") from None
                continue
            last_read = time.monotonic()
            state, size, offset, epoch, epoch_start, confirm = wire.TRANSFER_HEADER_STRUCT.unpack(head)
            if state != wire.TRANSFER:
                raise ConnectionError(f"a master header in state {state} while transferring")
            if size < 0 or size > wire.MAX_BODY_SIZE:
                raise ConnectionError(f"a transfer of {size} bytes")
            body = await asyncio.wait_for(reader.readexactly(size), silence) if size else b""
            end = self.appender.max_offset
            if end != 0 and size and offset != end:
                raise ConnectionError(f"master pushed offset {offset}, this slave's CommitLog ends at {end}")
            if epoch != received_epoch:
                received_epoch = epoch
                if epoch_start >= 0:
                    self.epochs.append(EpochEntry(epoch, epoch_start))
            if body:
                self.appender.append(offset, body)
            end = self.appender.max_offset
            self.on_appended(end, min(confirm, end))
            if end > self.reported:
                await self._report(writer, end)
