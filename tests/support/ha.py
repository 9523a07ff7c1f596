"""Shared by the HA tests: the real 4.9.8 store served as a master's CommitLog, settings for fast
heartbeats, and an rmq master-slave pair over loopback (``Replication``)."""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from rmqcli.broker.ha.appender import QueueAppender
from rmqcli.broker.ha.config import HAConfig
from rmqcli.broker.ha.master import HAMaster
from rmqcli.broker.ha.slave import HASlave, SlaveState
from tests.support.realfixtures import REAL_ROOT
from tests.support.stores import geometry

Reader, Writer = asyncio.StreamReader, asyncio.StreamWriter  # the fake masters' script arguments
REAL = REAL_ROOT / "basic-1" / "store"
FILE = 1024 * 1024
REAL_END = 5239795  # the real store's max physical offset (basic-1/expected.json's records)
SETTINGS = geometry(FILE, 6000, 500, 2000)
FAST = HAConfig(ha_send_heartbeat_interval=200, ha_housekeeping_interval=1000)
SLAVE_LOG = "rmqcli.broker.ha.slave"
MASTER_LOG = "rmqcli.broker.ha.master"

needs_real = pytest.mark.real


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
