"""HA bad peers: a web server, a port that closes, a garbage header after valid pushes, a master
that stalls, a refused connection; the master drops peers that are no slaves. One log line each,
a reconnect with growing backoff, never a crash, never a byte past a bad frame."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from formats import ha as hfmt
from rmqcli.broker.ha.appender import QueueAppender
from rmqcli.broker.ha.config import HAConfig
from rmqcli.broker.ha.master import HAMaster
from rmqcli.broker.ha.slave import HASlave, SlaveState
from rmqcli.broker.ha.source import StoreFilesSource
from tests.support import ha as support
from tests.support.serve import free_port

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
    appender = QueueAppender.open(tmp_path / "slave" / "commitlog", support.FILE)
    config = slave.pop("config", support.FAST)
    ha = HASlave(
        appender, config, master_address=f"127.0.0.1:{fake.port}", backoff=0.05, backoff_max=0.2, **slave
    )
    task = asyncio.ensure_future(ha.run())
    await support.until(lambda: len(fake.accepted) >= until_accepts, 20, f"{until_accepts} connections")
    assert not task.done()  # no crash, still trying
    await ha.close()
    assert await task is SlaveState.CLOSED
    appender.close()
    await fake.close()
    return fake, ha, appender


def test_a_web_server_is_no_ha_port(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def web(fake: FakeMaster, reader: support.Reader, writer: support.Writer, n: int) -> None:
        await reader.read(100)
        writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()

    fake, slave, appender = support.run(_against(tmp_path, web, 3))
    warned = support.lines(caplog, support.SLAVE_LOG)
    assert len(warned) >= 2 and all("sent a header that is no HA push" in m for m in warned[:2])
    assert len(warned) in (slave.reconnects, slave.reconnects + 1)  # one line per failed connection
    assert appender.max_offset == 0 and not any((tmp_path / "slave" / "commitlog").iterdir())


def test_a_port_that_closes_backs_off_longer_each_time(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def close(fake: FakeMaster, reader: support.Reader, writer: support.Writer, n: int) -> None:
        return

    fake, slave, appender = support.run(_against(tmp_path, close, 5))
    warned = support.lines(caplog, support.SLAVE_LOG)
    assert warned[0].endswith(
        "closed the connection before its first push: is it the master's HA port?; reconnecting in 0.1 s"
    )
    assert warned[-1].endswith("; reconnecting in 0.2 s")  # 0.05 s doubled, at most backoff_max
    gaps = [b - a for a, b in zip(fake.accepted, fake.accepted[1:], strict=False)]
    assert gaps[0] >= 0.045 and gaps[-1] >= 0.19  # 0.05 s doubling up to 0.2 s
    assert appender.max_offset == 0


@support.needs_real
def test_garbage_header_after_valid_pushes(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Two valid pushes are kept, nothing of the bad frame or after it is written, and the next
    connection asks for the offset after the valid pushes."""
    head = (support.REAL / "commitlog" / "00000000000000000000").read_bytes()[:5000]

    async def script(fake: FakeMaster, reader: support.Reader, writer: support.Writer, n: int) -> None:
        await fake.first_report(reader)
        if n == 0:
            writer.write(hfmt.TRANSFER_HEADER_STRUCT.pack(0, 3000) + head[:3000])
            writer.write(hfmt.TRANSFER_HEADER_STRUCT.pack(3000, 2000) + head[3000:])
            writer.write(b"\xff" * 12 + b"more bytes that must not be written")
            await writer.drain()
        await reader.read(100)

    master, slave, appender = support.run(_against(tmp_path, script, 2))
    assert master.reports[:2] == [0, 5000]
    data = (tmp_path / "slave" / "commitlog" / "00000000000000000000").read_bytes()
    assert data[:5000] == head and not any(data[5000:])
    assert (
        "sent a header that is no HA push (start offset -1, body size -1)"
        in support.lines(caplog, support.SLAVE_LOG)[0]
    )


def test_a_stalled_master_is_left_after_the_housekeeping_interval(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def stall(fake: FakeMaster, reader: support.Reader, writer: support.Writer, n: int) -> None:
        await reader.read(8)
        await asyncio.sleep(30)

    config = HAConfig(ha_send_heartbeat_interval=100, ha_housekeeping_interval=300)
    fake, slave, appender = support.run(_against(tmp_path, stall, 2, config=config))
    assert fake.accepted[1] - fake.accepted[0] >= 0.3
    assert support.lines(caplog, support.SLAVE_LOG)[0].startswith(
        f"HA: master 127.0.0.1:{fake.port} sent nothing for 300 ms (haHousekeepingInterval)"
    )
    assert appender.max_offset == 0


def test_master_pushing_from_past_the_slave_end_stops_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> tuple[HASlave, QueueAppender]:
        appender = QueueAppender.open(tmp_path / "slave" / "commitlog", support.FILE)
        appender.append(0, b"\x01" * 100)

        async def gap(fake: FakeMaster, reader: support.Reader, writer: support.Writer, n: int) -> None:
            await reader.readexactly(8)
            writer.write(hfmt.TRANSFER_HEADER_STRUCT.pack(200, 4) + b"abcd")
            await writer.drain()
            await reader.read(100)

        fake = await FakeMaster(gap).start()
        slave = HASlave(appender, support.FAST, master_address=f"127.0.0.1:{fake.port}")
        assert await asyncio.wait_for(slave.run(), 10) is SlaveState.STOPPED
        await fake.close()
        appender.close()
        return slave, appender

    slave, appender = support.run(scenario())
    assert appender.max_offset == 100
    (line,) = support.lines(caplog, support.SLAVE_LOG)
    assert "SLAVE: 100 MASTER: 200: the master pushes from past the slave's end" in line


@support.needs_real
def test_refused_then_a_master_appears(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()
    source = StoreFilesSource(support.writable_copy(support.REAL, tmp_path / "master"))

    async def scenario() -> None:
        appender = QueueAppender.open(tmp_path / "slave" / "commitlog", support.FILE)
        slave = HASlave(
            appender, support.FAST, master_address=f"127.0.0.1:{port}", backoff=0.05, backoff_max=0.2
        )
        task = asyncio.ensure_future(slave.run())
        await support.until(lambda: slave.reconnects >= 3, 10, "three refusals")
        master = HAMaster(source, support.FAST, host="127.0.0.1", port=port, full_sync_empty_slave=True)
        await master.start()
        await support.until(lambda: appender.max_offset == support.REAL_END, 20, "replication")
        await slave.close()
        assert await task is SlaveState.CLOSED
        appender.close()
        await master.close()

    support.run(scenario())
    source.close()
    assert support.lines(caplog, support.SLAVE_LOG)[0].startswith(
        f"HA: cannot connect to master 127.0.0.1:{port}"
    )
    assert support.commitlog_files(tmp_path / "slave" / "commitlog") == support.commitlog_files(
        support.REAL / "commitlog"
    )


@support.needs_real
def test_master_drops_peers_that_are_no_slaves(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    source = StoreFilesSource(support.writable_copy(support.REAL, tmp_path / "master"))
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
        writer.write(hfmt.SLAVE_REPORT_STRUCT.pack(support.REAL_END))
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(hfmt.SLAVE_REPORT_STRUCT.pack(support.REAL_END + 1))
        with contextlib.suppress(ConnectionError):
            while await asyncio.wait_for(reader.read(1 << 20), 5):
                pass
        writer.close()
        await support.until(lambda: master.connection_count == 0, 5, "no connection left")
        assert master.push_to_slave_max_offset == support.REAL_END  # the bad report was never counted
        await master.close()

    support.run(scenario())
    source.close()
    warned = support.lines(caplog, support.MASTER_LOG)
    assert any("reported offset -5: not a slave" in m for m in warned)
    assert any(m.startswith("ha housekeeping, found this connection[") for m in warned)
    assert any(
        f"request offset={support.REAL_END + 1} greater than local commitLog offset={support.REAL_END}" in m
        for m in warned
    )
