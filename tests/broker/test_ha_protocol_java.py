"""HA with the real 4.9.8 broker (skipped without Java 17 and ../shared/rocketmq-4.9.8): an rmq slave
of a real master fed 3,000 messages by bin/clienttest, a real slave of rmq's master service, and an
rmq slave pointed at a remoting port."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rmqcli.broker.ha.appender import QueueAppender
from rmqcli.broker.ha.config import HAConfig
from rmqcli.broker.ha.master import HAMaster
from rmqcli.broker.ha.slave import HASlave, SlaveState
from rmqcli.broker.ha.source import StoreFilesSource
from rmqcli.store.mapped import MappedFileQueue
from rmqcli.store.read.commitlog import CommitLog
from tests.support.components import require
from tests.support.ha import FILE, REAL, REAL_END, SLAVE_LOG, commitlog_files, lines, writable_copy
from tests.support.oracle import KIT, Jvm, broker_port
from tests.support.serve import free_port

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
    require("java")
    require("real")
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
        # a send may wait 200 ms in the real broker's queue by default, then TIMEOUT_CLEAN_QUEUE:
        # on a loaded machine the 3,000 sends of bin/clienttest meet it
        waitTimeMillsInSendQueue=3000,
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
