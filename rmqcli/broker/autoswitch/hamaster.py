"""The master side of AutoSwitchHA (5.1.1 ``AutoSwitchHAService`` + ``AutoSwitchHAConnection``;
docs/controller.md §5.6, §6).

One connection per slave, the slave connecting to ``haListenPort``. The reader takes the slave's
headers: a handshake (16 bytes: its controller id and flags), answered at once with this master's
epoch list and max offset; then reports (12 bytes), the first being where to start, each later one
an acknowledgement. The writer, once the first report is in, sends the CommitLog from there in
frames of a 36-byte header (the epoch being sent and its start, the confirm offset) and at most
``haTransferBatchSize`` bytes that never cross a file or an epoch's end; a heartbeat (no body)
after ``haSendHeartbeatInterval`` of silence. A slave silent for ``haHousekeepingInterval`` is
dropped. ``on_ack(slave_id, offset)`` is told of each acknowledgement; ``on_gone(slave_id)`` when a
connection ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from formats import autoswitch as wire
from rmqcli.broker.autoswitch.epochs import EpochCache
from rmqcli.broker.ha.config import HAConfig
from rmqcli.broker.ha.source import WriterSource

log = logging.getLogger(__name__)

NO_DATA_RETRY_S = 0.5  # AutoSwitchHAConnection: no start found yet, try again


@dataclass
class SlaveLink:
    """What the master knows of one connected slave."""

    address: str
    slave_id: int = -1  # from its handshake
    async_learner: bool = False
    sync_from_last_file: bool = False
    request_offset: int = -1  # its first report
    ack_offset: int = -1  # its last report
    caught_up_ms: int = 0  # the last time it was at the master's end (5.1.1 lastCatchUpTimeMs)
    last_master_max: int = 0  # the master's end when it last sent data (lastMasterMaxOffset)
    last_transfer_ms: int = 0  # when it last sent data (lastTransferTimeMs)


class AutoSwitchMaster:
    """The HA port of a controller-mode master; ``await start()``, ``await close()``."""

    def __init__(
        self,
        source: WriterSource,
        epochs: EpochCache,
        config: HAConfig,
        confirm_offset: Callable[[], int],
        *,
        host: str = "0.0.0.0",
        port: int | None = None,
    ):
        self.source, self.epochs, self.config = source, epochs, config
        self.confirm_offset = confirm_offset
        self.host = host
        self.port = config.ha_listen_port if port is None else port
        self.on_ack: Callable[[SlaveLink], None] = lambda _link: None
        self.on_gone: Callable[[SlaveLink], None] = lambda _link: None
        self.links: dict[asyncio.Task[None], SlaveLink] = {}
        self._server: asyncio.Server | None = None
        self._wakeups: set[asyncio.Event] = set()  # each connection's writer
        self.serving = False  # a slave is served only while this broker is the master

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.host, self.port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("AutoSwitchHA: listening on %s:%d", self.host, self.port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        self.drop_all()
        if self.links:
            await asyncio.wait(list(self.links), timeout=5)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    def drop_all(self) -> None:
        """Every connection closed (a role change, 5.1.1 ``destroyConnections``)."""
        for task in list(self.links):
            task.cancel()

    def notify_append(self) -> None:
        for wake in self._wakeups:
            wake.set()

    def links_by_id(self) -> dict[int, SlaveLink]:
        return {link.slave_id: link for link in self.links.values() if link.slave_id >= 0}

    # --- one connection ---------------------------------------------------------------------------
    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        peer = writer.get_extra_info("peername")
        link = SlaveLink(f"{peer[0]}:{peer[1]}" if peer else "?")
        if not self.serving:
            writer.close()
            return
        self.links[task] = link
        log.info("AutoSwitchHA: slave connected from %s", link.address)
        first_report = asyncio.Event()
        sender = asyncio.get_running_loop().create_task(self._send(link, writer, first_report))
        try:
            await self._read(link, reader, writer, first_report)
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError, OSError) as exc:
            log.info(
                "AutoSwitchHA: slave %s (%d) gone: %s", link.address, link.slave_id, exc or type(exc).__name__
            )
        except asyncio.CancelledError:
            pass
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await sender
            self.links.pop(task, None)
            writer.close()
            self.on_gone(link)

    async def _read(
        self,
        link: SlaveLink,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        first_report: asyncio.Event,
    ) -> None:
        silence = self.config.housekeeping_seconds
        while True:
            head = await asyncio.wait_for(reader.readexactly(wire.STATE_SIZE), silence)
            (state,) = wire.STATE_STRUCT.unpack(head)
            if state == wire.HANDSHAKE:
                rest = await asyncio.wait_for(reader.readexactly(wire.SLAVE_HANDSHAKE_REST), silence)
                _, last_file, learner, slave_id = wire.SLAVE_HANDSHAKE_STRUCT.unpack(head + rest)
                link.slave_id, link.sync_from_last_file, link.async_learner = (
                    slave_id,
                    last_file == 1,
                    learner == 1,
                )
                writer.write(self._handshake_answer())
                await writer.drain()
            elif state == wire.TRANSFER:
                rest = await asyncio.wait_for(reader.readexactly(wire.SLAVE_REPORT_REST), silence)
                _, offset = wire.SLAVE_REPORT_STRUCT.unpack(head + rest)
                if link.request_offset < 0:
                    link.request_offset = offset
                    first_report.set()
                link.ack_offset = offset
                if offset >= self.source.max_offset():
                    link.caught_up_ms = time.time_ns() // 1_000_000
                elif offset >= link.last_master_max:
                    link.caught_up_ms = max(link.caught_up_ms, link.last_transfer_ms)
                self.on_ack(link)
            else:
                raise ConnectionError(f"a header in state {state} from the slave")

    def _handshake_answer(self) -> bytes:
        """``buildHandshakeBuffer``: the max offset, the last epoch, every entry."""
        entries = self.epochs.entries[-wire.MAX_EPOCH_ENTRIES :]
        body = b"".join(wire.EPOCH_ENTRY_STRUCT.pack(e.epoch, e.start_offset) for e in entries)
        head = wire.HANDSHAKE_ANSWER_STRUCT.pack(
            wire.HANDSHAKE, len(body), self.source.max_offset(), self.epochs.last_epoch
        )
        return head + body

    def _start_offset(self, link: SlaveLink) -> int:
        """§6.7: the slave's report, or for 0 the first byte held (the last file's start with
        ``syncFromLastFile``); -1 while there is nothing."""
        if link.request_offset > 0:
            return link.request_offset
        end = self.source.max_offset()
        if end <= 0:
            return -1
        if link.sync_from_last_file:
            return end - end % self.source.file_size
        return self.source.min_offset()

    async def _send(self, link: SlaveLink, writer: asyncio.StreamWriter, first_report: asyncio.Event) -> None:
        """``WriteSocketService``: from the start of §6.7 on, chunks within one file and one epoch;
        a chunk that would pass its epoch's end is cut there and goes out with the next epoch."""
        wake = asyncio.Event()
        self._wakeups.add(wake)
        try:
            await first_report.wait()
            beat = self.config.heartbeat_seconds
            offset, entry = -1, None
            last_write = 0.0
            while entry is None:  # nothing to send from yet: heartbeats until there is
                offset = self._start_offset(link)
                found = self.epochs.entry_for(offset) if offset >= 0 else None
                if found is not None:
                    entry = found[0]
                    log.info("AutoSwitchHA: sending to slave %d from offset %d, epoch %d",
                             link.slave_id, offset, entry.epoch)  # fmt: skip
                    break
                if time.monotonic() - last_write >= beat and self.epochs.entries:
                    first = self.epochs.entries[0]
                    writer.write(self._header(0, offset, first.epoch, first.start_offset))
                    await writer.drain()
                    last_write = time.monotonic()
                await asyncio.sleep(NO_DATA_RETRY_S)
            while True:
                size = min(self.config.ha_transfer_batch_size, self.source.max_offset() - offset)
                if size > 0:
                    following = self.epochs.next_after(entry.epoch)
                    if following is not None and offset + size > following.start_offset:
                        size = following.start_offset - offset
                        entry = following
                    data = self.source.read(offset, size) if size > 0 else b""
                    link.last_master_max = self.source.max_offset()
                    link.last_transfer_ms = time.time_ns() // 1_000_000
                    writer.write(self._header(len(data), offset, entry.epoch, entry.start_offset) + data)
                    await writer.drain()
                    offset += len(data)
                    last_write = time.monotonic()
                    continue
                link.caught_up_ms = time.time_ns() // 1_000_000  # nothing to send: caught up
                if time.monotonic() - last_write >= beat:
                    writer.write(self._header(0, offset, entry.epoch, entry.start_offset))
                    await writer.drain()
                    last_write = time.monotonic()
                wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), min(beat, 1.0))
        finally:
            self._wakeups.discard(wake)

    def _header(self, size: int, offset: int, epoch: int, epoch_start: int) -> bytes:
        return wire.TRANSFER_HEADER_STRUCT.pack(
            wire.TRANSFER, size, offset, epoch, epoch_start, self.confirm_offset()
        )
