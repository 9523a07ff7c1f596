"""Replication: ``rmq serve`` master-slave groups with the C++ client (PyPI ``rocketmq`` 0.4.4).

Measured side by side in one run:

- replication lag under a one-thread sync-send stream to an ASYNC_MASTER: the bytes the slave is
  behind, sampled every 5 ms from both brokers' ``commitLogMaxOffset`` (GET_BROKER_RUNTIME_INFO),
  p50 / p99 / max;
- sync sends/s from one client thread: ASYNC_MASTER with a slave (the baseline), SYNC_MASTER with a
  slave (target 0.6x of the baseline), and the real 4.9.8 SYNC_MASTER with a real slave when Java
  17 and ``../shared/rocketmq-4.9.8`` are here (target: rmq's SYNC_MASTER at 1.0x of it). The
  three groups run side by side and take ``ROUNDS`` streams each, in turn, so that the machine's
  swings fall on all; each rate is the median of its rounds, and the lag stream is one of its own;
- catch-up of a slave on a 1 GiB store: a master over a generated 1 GiB CommitLog and a slave that
  holds only its first record, so that it is served everything else; MB/s from the slave's first
  replicated byte to its last (target 200 MB/s), against ``cp`` of the same files into a fresh
  directory (a read and a write of every byte through the page cache, as a slave's). On a virtual
  machine the first touch of a page of guest memory can cost more than the write into it (the
  host backs guest memory lazily), so the run first touches and frees ``WARM_GIB`` GiB of memory
  and prints the rate of that first touch.

Run as ``python -m tests.bench.ha``; ``make bench`` calls it at the end. Figures are printed,
never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from tests.bench.broker import BODY, client, client_result, start_client
from tests.support import ROOT

TARGET_SYNC_RATIO = 0.6  # SYNC_MASTER sends/s against ASYNC_MASTER's
TARGET_REAL_RATIO = 1.0  # rmq's SYNC_MASTER against the real 4.9.8 one
TARGET_CATCH_UP = 200  # MB/s
FILE = 128 * 1024 * 1024
CATCH_UP_MIB = 1024
ROUNDS = 5
WARM_GIB = 4


def member(
    tmp: Path, name: str, role: str, namesrv: str | None = None, store: Path | None = None, **keys: object
):  # type: ignore[no-untyped-def]
    from tests.support.serve import ServeProcess, free_port, write_conf

    settings = {
        "brokerRole": role,
        "brokerId": "1" if role == "SLAVE" else "0",
        "mappedFileSizeCommitLog": str(FILE),
        "haListenPort": str(free_port()),
    }
    settings.update({k: str(v) for k, v in keys.items()})
    conf = write_conf(tmp / f"{name}.conf", **settings)
    extra = ["--no-namesrv", "--namesrv", namesrv] if namesrv else []
    return ServeProcess(store or tmp / name, conf, extra)


async def _max_offset(c, addr: str) -> int:  # type: ignore[no-untyped-def]
    """``commitLogMaxOffset`` of the broker at ``addr`` (GET_BROKER_RUNTIME_INFO) over client ``c``."""
    from rmqcli.remoting import json_body as jb
    from rmqcli.remoting.codec import RemotingCommand
    from rmqcli.remoting.codes import RequestCode as RC

    answer = await c.invoke(addr, RemotingCommand.request(RC.GET_BROKER_RUNTIME_INFO), 5)
    return int(jb.decode(jb.KVTable, answer.body).table["commitLogMaxOffset"])


def max_offsets(addrs: list[str]) -> list[int]:
    from rmqcli.remoting.client import RemotingClient

    async def go() -> list[int]:
        async with RemotingClient() as c:
            return [await _max_offset(c, addr) for addr in addrs]

    return asyncio.run(go())


def lag_while(tmp: Path, master, slave, count: int) -> tuple[float, list[int]]:  # type: ignore[no-untyped-def]
    """A sync-send stream of ``count`` messages; (seconds, lag samples in bytes)."""
    from rmqcli.remoting.client import RemotingClient

    proc = start_client(
        tmp, {"op": "sync", "namesrv": master.namesrv, "topic": "LagTopic", "count": count, "body": BODY}
    )
    samples: list[int] = []

    async def sample() -> None:
        async with RemotingClient() as c:
            while proc.poll() is None:
                ends = [await _max_offset(c, addr) for addr in (master.broker, slave.broker)]
                samples.append(max(0, ends[0] - ends[1]))
                await asyncio.sleep(0.005)

    asyncio.run(sample())
    return client_result(proc)["seconds"], samples


def percentile(values: list[int], share: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0


def sync_rates(tmp: Path, count: int) -> tuple[float, float, float | None, list[int]]:
    """Median sends/s of ``ROUNDS`` sync-send streams of ``count`` messages to an rmq ASYNC_MASTER
    group, an rmq SYNC_MASTER group and (with Java) the real 4.9.8 SYNC_MASTER group, all running
    side by side and taking one stream each in turn, so that the machine's swings fall on all of
    them; and the lag samples of one more stream to the ASYNC_MASTER."""
    groups = {}
    with contextlib.ExitStack() as stack:
        try:
            for role in ("ASYNC_MASTER", "SYNC_MASTER"):
                master = member(tmp, f"{role.lower()}-master", role).start()
                groups[role] = (master, member(tmp, f"{role.lower()}-slave", "SLAVE", namesrv=master.namesrv))
                groups[role][1].start()
                wait_for_link(*groups[role])
            namesrvs = {role: master.namesrv for role, (master, _) in groups.items()}
            real = stack.enter_context(real_group(tmp))
            if real is not None:
                namesrvs["REAL"] = real
            rates: dict[str, list[float]] = {name: [] for name in namesrvs}
            for _ in range(ROUNDS):
                for name, ns in namesrvs.items():
                    cmd = {"op": "sync", "namesrv": ns, "topic": "SyncTopic", "count": count, "body": BODY}
                    rates[name].append(count / client(tmp, cmd)["seconds"])
            _, samples = lag_while(tmp, *groups["ASYNC_MASTER"], count)
        finally:
            for master, slave in groups.values():
                slave.stop()
                master.stop()
    median = {name: statistics.median(values) for name, values in rates.items()}
    return median["ASYNC_MASTER"], median["SYNC_MASTER"], median.get("REAL"), samples


def wait_for_link(master, slave, timeout: float = 30) -> None:  # type: ignore[no-untyped-def]
    """A first message through the pair: the slave is connected and replicating."""
    client(
        master.store.parent,
        {"op": "sync", "namesrv": master.namesrv, "topic": "WarmTopic", "count": 1, "body": 10},
    )
    deadline = time.monotonic() + timeout
    while True:
        ends = max_offsets([master.broker, slave.broker])
        if ends[0] == ends[1] > 0:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the slave did not catch up: {ends}")
        time.sleep(0.1)


@contextlib.contextmanager
def real_group(tmp: Path) -> Iterator[str | None]:
    """A real 4.9.8 SYNC_MASTER with a real slave, warmed by 100 sends: its name server's address
    (None without Java 17 and the kit)."""
    from tests.support.oracle import HAVE_JAVA, KIT, Jvm, broker_port
    from tests.support.serve import free_port

    if not HAVE_JAVA:
        yield None
        return
    env = {k: v for k, v in os.environ.items() if k != "JAVA_OPT_EXT"}
    env["ORACLE_STATE_DIR"] = str(tmp / "java-state")
    ns_port = free_port()
    ns = f"127.0.0.1:{ns_port}"
    jvms = [Jvm([str(KIT / "bin" / "namesrv"), "-p", str(ns_port)], tmp / "ns.out", env)]
    try:
        jvms[0].wait_for("The Name Server boot success")
        for role, broker_id in (("SYNC_MASTER", 0), ("SLAVE", 1)):
            port = broker_port()
            conf = tmp / f"real-{role}.conf"
            keys = {
                "brokerClusterName": "BenchCluster",
                "brokerName": "real-bench",
                "brokerId": broker_id,
                "brokerRole": role,
                "listenPort": port,
                "namesrvAddr": ns,
                "brokerIP1": "127.0.0.1",
                "brokerIP2": "127.0.0.1",
                "storePathRootDir": tmp / f"real-{role}",
                "flushDiskType": "ASYNC_FLUSH",
                "autoCreateTopicEnable": "true",
                "mappedFileSizeCommitLog": FILE,
                "diskMaxUsedSpaceRatio": 95,
            }
            conf.write_text("".join(f"{k}={v}\n" for k, v in keys.items()))
            jvm = Jvm([str(KIT / "bin" / "broker"), "-c", str(conf)], tmp / f"real-{role}.out", env)
            jvms.append(jvm)
            jvm.wait_for("boot success")
        time.sleep(6)  # the slave's first offset report (haSendHeartbeatInterval)
        client(tmp, {"op": "sync", "namesrv": ns, "topic": "SyncTopic", "count": 100, "body": BODY})
        yield ns
    finally:
        for jvm in reversed(jvms):
            jvm.stop()


def first_touch(gib: int) -> float:
    """MB/s of a first write into each page of ``gib`` GiB of fresh anonymous memory, then freed."""
    import mmap

    started = time.perf_counter()
    for _ in range(gib):
        with mmap.mmap(-1, 1 << 30) as memory:
            for i in range(0, 1 << 30, mmap.PAGESIZE):
                memory[i] = 1
    return gib * (1 << 30) / (time.perf_counter() - started) / 1e6


def copy_rate(files: list[Path], dest: Path) -> float:
    """MB/s of ``cp`` of ``files`` into the new directory ``dest``."""
    dest.mkdir()
    started = time.perf_counter()
    subprocess.run(["cp", *map(str, files), str(dest)], check=True)
    seconds = time.perf_counter() - started
    total = sum(f.stat().st_size for f in files)
    shutil.rmtree(dest)
    return total / seconds / 1e6


def catch_up(tmp: Path) -> tuple[float, float, int]:
    """(slave MB/s, cp MB/s of the same files, bytes) for a slave served a 1 GiB CommitLog."""
    from rmqcli.store import Store

    source = ROOT / "bench-data" / f"ha-store-{CATCH_UP_MIB}"
    marker = source / ".generated"
    if not marker.exists():
        shutil.rmtree(source, ignore_errors=True)
        print(f"generating a {CATCH_UP_MIB} MiB store in {source} ...", flush=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "fixtures.generate",
                str(source),
                "--preset",
                "bench",
                "--size-mib",
                str(CATCH_UP_MIB),
            ],
            check=True,
            cwd=ROOT,
        )
        marker.touch()
    files = sorted((source / "commitlog").iterdir())
    store = Store.open(source)
    try:
        end, first = store.commitlog.max_offset(), next(store.commitlog.headers())
    finally:
        store.close()
    master_store = tmp / "catch-master"
    shutil.copytree(source, master_store, ignore=shutil.ignore_patterns(".generated"))
    slave_store = tmp / "catch-slave"
    (slave_store / "commitlog").mkdir(parents=True)
    with open(files[0], "rb") as src, open(slave_store / "commitlog" / files[0].name, "wb") as dst:
        dst.write(src.read(first.total_size))  # the first record: the slave asks for what follows it
        dst.truncate(FILE)  # a whole (sparse) file, as a broker's are
    master = member(tmp, "catch-m", "ASYNC_MASTER", store=master_store).start()
    slave = member(tmp, "catch-s", "SLAVE", namesrv=master.namesrv, store=slave_store)
    try:
        slave.start()
        first_seen = last_seen = None
        position = first.total_size
        deadline = time.monotonic() + 600
        while position < end and time.monotonic() < deadline:
            position = max_offsets([slave.broker])[0]
            now = time.perf_counter()
            if first_seen is None and position > first.total_size:
                first_seen = now
            last_seen = now
            time.sleep(0.05)  # each probe is a request the slave answers between pushes
    finally:
        slave.stop()
        master.stop()
    cp_rate = copy_rate(files, tmp / "cp")  # while both stores still hold their pages
    moved = end - first.total_size
    seconds = (last_seen or 0) - (first_seen or 0)
    return (moved / seconds / 1e6 if seconds > 0 else float("nan")), cp_rate, moved


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=3000, help="messages per stream")
    args = parser.parse_args(argv)
    n = args.count
    tmp = Path(tempfile.mkdtemp(prefix="rmq-bench-ha-"))
    try:
        async_rate, sync_rate, real_rate, samples = sync_rates(tmp, n)
        touch_rate = first_touch(WARM_GIB)
        catch_rate, cp_rate, moved = catch_up(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"\nreplication, {BODY}-byte bodies, one C++ client thread, medians of {ROUNDS} streams of {n:,} "
        "(figures move with the machine's load)"
    )
    print(f"  {'sync send, ASYNC_MASTER with a slave (baseline)':<56} {async_rate:10,.0f} msgs/s   1.000x")
    print(
        f"  {'sync send, SYNC_MASTER with a slave':<56} {sync_rate:10,.0f} msgs/s   "
        f"{sync_rate / async_rate:.3f}x   target {TARGET_SYNC_RATIO}x"
    )
    if real_rate is None:
        print("  real 4.9.8 SYNC_MASTER with a real slave: skipped (no Java 17 or ../shared/rocketmq-4.9.8)")
    else:
        print(
            f"  {'sync send, real 4.9.8 SYNC_MASTER with a real slave':<56} {real_rate:10,.0f} msgs/s   "
            f"{real_rate / async_rate:.3f}x   rmq SYNC_MASTER at {sync_rate / real_rate:.2f}x of it, "
            f"target {TARGET_REAL_RATIO}x"
        )
    print(
        f"  replication lag on ASYNC_MASTER, {len(samples)} samples: p50 {percentile(samples, 0.5):,} bytes, "
        f"p99 {percentile(samples, 0.99):,} bytes, max {max(samples, default=0):,} bytes"
    )
    print(
        f"  catch-up of a slave, {moved / 2**20:,.0f} MiB: {catch_rate:,.0f} MB/s "
        f"(cp of the files: {cp_rate:,.0f} MB/s, {catch_rate / cp_rate:.3f}x); "
        f"target {TARGET_CATCH_UP} MB/s ({catch_rate / TARGET_CATCH_UP:.2f}x of target); "
        f"first touch of {WARM_GIB} GiB of memory before it: {touch_rate:,.0f} MB/s"
    )


if __name__ == "__main__":
    main()
