"""Memory of ``rmq serve`` under many topics and clients, and of ``rmq verify`` on a 4 GiB store
(issue 20, item 7). Targets: serve under 300 MB RSS, verify under 200 MB RSS.

- ``rmq serve`` on a fresh store: its RSS idle right after start (the baseline), then with 1,000
  topics of 8 queues created by UPDATE_AND_CREATE_TOPIC (as ``rmq updateTopic`` sends it) and 100
  client connections that stay connected: each sends a producer and consumer heartbeat, a few sends
  and pulls, and heartbeats again, from one Python process with rmq's own remoting client; beside
  them a real C++ producer and push consumer (``tests.support.broker_drivers``) send and consume.
  Peak (VmHWM) and current (VmRSS) RSS, with the current RSS split into anonymous and file-backed
  pages (RssAnon, RssFile: mapped store files count in RSS as file pages).
- ``rmq verify`` (with CRCs) of a 4 GiB store generated once under ``bench-data/`` with the
  fixture generator (``run.ensure_store``): its peak RSS (the child's VmHWM, sampled every 10 ms)
  and the largest anonymous and file-backed parts seen while it ran, beside ``rmq verify`` of a
  small store and ``python -c pass``. Skipped, with the reason printed, when the disk has less
  than 10 GiB free.

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SERVE_TARGET_MB = 300
VERIFY_TARGET_MB = 200
TOPICS, QUEUES, CONNECTIONS = 1_000, 8, 100
VERIFY_MIB = 4096
MIN_FREE = 10 * 2**30
MB = 10**6


# --- /proc --------------------------------------------------------------------------------------
def proc_status(pid: int) -> dict[str, int]:
    """The memory lines of /proc/PID/status, in bytes (empty once the process is gone)."""
    out: dict[str, int] = {}
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem"):
            out[key] = int(value.split()[0]) * 1024
    return out


class Sampler:
    """Largest VmHWM, VmRSS, RssAnon and RssFile of a process, sampled every 10 ms in a thread."""

    def __init__(self, pid: int):
        self.pid = pid
        self.peak = {"VmHWM": 0, "RssAnon": 0, "RssFile": 0, "VmRSS": 0}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.is_set():
            status = proc_status(self.pid)
            if not status:
                return
            for key in self.peak:
                self.peak[key] = max(self.peak[key], status.get(key, 0))
            self._done.wait(0.01)

    def stop(self) -> dict[str, int]:
        self._done.set()
        self._thread.join()
        return self.peak


def mb(n: int) -> str:
    return f"{n / MB:7.1f} MB"


# --- rmq serve ----------------------------------------------------------------------------------
async def _operate(broker: str, pid: int) -> tuple[int, float, int, int, dict[str, int]]:
    """Create the topics, then open the client connections and make them work; returns (topics
    created, seconds the creation took, messages sent, messages pulled, the server's memory while
    the connections were open). The connections are closed on return."""
    from rmqcli.remoting import headers as hd
    from rmqcli.remoting import json_body as jb
    from rmqcli.remoting.client import RemotingClient
    from rmqcli.remoting.codec import RemotingCommand
    from rmqcli.remoting.codes import RequestCode as RC
    from rmqcli.remoting.codes import ResponseCode as RS

    def topic(i: int) -> str:
        return f"MemTopic{i}"

    async with RemotingClient() as admin:
        semaphore = asyncio.Semaphore(16)

        async def create(i: int) -> bool:
            header = hd.CreateTopicRequestHeader(
                topic=topic(i),
                default_topic="TBW102",
                read_queue_nums=QUEUES,
                write_queue_nums=QUEUES,
                perm=6,
                topic_filter_type="SINGLE_TAG",
            ).to_ext_fields()
            async with semaphore:
                r = await admin.invoke(
                    broker, RemotingCommand.request(RC.UPDATE_AND_CREATE_TOPIC, header), 30
                )
            return r.code == RS.SUCCESS

        started = time.perf_counter()
        created = sum(await asyncio.gather(*(create(i) for i in range(TOPICS))))
        creating = time.perf_counter() - started

    clients = [RemotingClient() for _ in range(CONNECTIONS)]
    sent = pulled = 0
    try:

        def heartbeat(n: int) -> RemotingCommand:
            data = jb.HeartbeatData(
                client_id=f"127.0.0.1@mem{n}",
                producer_data_set=[jb.ProducerData(group_name=f"PG_MEM{n % 10}")],
                consumer_data_set=[
                    jb.ConsumerData(
                        group_name=f"CG_MEM{n}",
                        consume_type="CONSUME_PASSIVELY",
                        subscription_data_set=[
                            jb.SubscriptionData(topic=topic(n * 10 + k), sub_string="*") for k in range(3)
                        ],
                    )
                ],
            )
            return RemotingCommand.request(RC.HEART_BEAT, body=jb.encode(data))

        async def work(n: int, client: RemotingClient) -> tuple[int, int]:
            assert (await client.invoke(broker, heartbeat(n), 30)).code == RS.SUCCESS
            got_sent = got_pulled = 0
            for k in range(4):
                t = topic((n * 10 + k) % TOPICS)
                header = hd.SendMessageRequestHeaderV2(
                    a=f"PG_MEM{n % 10}", b=t, c="TBW102", d=4, e=k % QUEUES, f=0,
                    g=int(time.time() * 1000), h=0, i=f"KEYS\x01mem-{n}-{k}\x02TAGS\x01T\x02",
                )  # fmt: skip
                r = await client.invoke(
                    broker,
                    RemotingCommand.request(
                        RC.SEND_MESSAGE_V2, header.to_ext_fields(), b"x" * 1024, version=407
                    ),
                    30,
                )
                got_sent += r.code == RS.SUCCESS
            for k in range(4):
                pull = hd.PullMessageRequestHeader(
                    consumer_group=f"CG_MEM{n}", topic=topic((n * 10 + k) % TOPICS), queue_id=k % QUEUES,
                    queue_offset=0, max_msg_nums=32, sys_flag=0x4, commit_offset=0,
                    suspend_timeout_millis=0, subscription="*", sub_version=0,
                ).to_ext_fields()  # fmt: skip
                r = await client.invoke(
                    broker, RemotingCommand.request(RC.PULL_MESSAGE, pull, version=407), 30
                )
                got_pulled += r.code == RS.SUCCESS
            return got_sent, got_pulled

        for _ in range(2):  # a second round: heartbeats again on the connections kept open
            results = await asyncio.gather(*(work(n, c) for n, c in enumerate(clients)))
            sent += sum(s for s, _ in results)
            pulled += sum(p for _, p in results)
        await asyncio.sleep(1.0)
        during = proc_status(pid)
    finally:
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)
    return created, creating, sent, pulled, during


def serve_memory() -> None:
    from tests.support.broker_drivers import HAVE_CLIENT, Driver
    from tests.support.serve import ServeProcess

    print(f"\nrmq serve: {TOPICS:,} topics x {QUEUES} queues, {CONNECTIONS} client connections")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        server = ServeProcess(tmp / "store").start()
        drivers: list[Driver] = []
        try:
            assert server.proc is not None
            pid = server.proc.pid
            time.sleep(1.0)
            idle = proc_status(pid)
            started = time.perf_counter()
            cpp = "no C++ client"
            if HAVE_CLIENT:
                # the C++ clients start first, on their own topic, and run through the Python work
                create = ["updateTopic", "-n", server.namesrv, "-c", "DefaultCluster", "-t", "MemCpp"]
                subprocess.run(
                    [str(BIN / "rmq"), *create, "-r", "8", "-w", "8"], check=True, stdout=subprocess.DEVNULL
                )
                common = {"namesrv": server.namesrv, "topic": "MemCpp"}
                drivers.append(Driver(tmp, "cpp-consume", {**common, "op": "consume", "group": "CG_MEMCPP"}))
                load = {**common, "op": "load", "prefix": "cpp-", "min": 512, "max": 1536}
                drivers.append(Driver(tmp, "cpp-load", load))
            created, creating, sent, pulled, during = asyncio.run(_operate(server.broker, pid))
            for d in drivers:
                d.stop()
            if drivers:
                acked = sum(1 for e in drivers[1].events() if "id" in e)
                consumed = len({e["key"] for e in drivers[0].events() if "key" in e})
                cpp = f"C++ producer {acked:,} acknowledged sends, C++ push consumer {consumed:,} messages"
            after = proc_status(pid)
            seconds = time.perf_counter() - started
        finally:
            for d in drivers:
                d.kill()
            try:
                server.stop()
            except AssertionError:  # figures taken already; say so and go on
                print("  (rmq serve did not stop within 15 s of SIGTERM: killed)")
                server.kill()
    hwm = after.get("VmHWM", during.get("VmHWM", 0))
    print(
        f"  work: {created:,} topics created ({creating:.1f} s), {sent:,} sends and {pulled:,} pulls "
        f"answered over {CONNECTIONS} connections; {cpp} ({seconds:.1f} s)"
    )
    for name, status in (
        ("idle on an empty store (baseline)", idle),
        ("connections open", during),
        ("after the clients left", after),
    ):
        print(
            f"  {name:<36} VmRSS {mb(status['VmRSS'])}  "
            f"(anon {mb(status['RssAnon'])}, file {mb(status['RssFile'])})"
        )
    verdict = "met" if hwm < SERVE_TARGET_MB * MB else "missed"
    print(
        f"  {'peak (VmHWM)':<36} VmHWM {mb(hwm)}  target < {SERVE_TARGET_MB} MB: {verdict} "
        f"({hwm / max(idle['VmRSS'], 1):.2f}x the idle baseline)"
    )


# --- rmq verify ---------------------------------------------------------------------------------
def measured(argv: list[str]) -> tuple[int, dict[str, int], float, int]:
    """Run ``argv``; returns (its peak RSS: the VmHWM last sampled, or wait4's ru_maxrss when no
    sample was taken (that one also counts the pages of this process the child shared before it
    exec'd); the largest RssAnon, RssFile and VmRSS sampled; seconds; exit status)."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, cwd=ROOT)
    sampler = Sampler(proc.pid)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    peak = sampler.stop()
    hwm = peak["VmHWM"] or usage.ru_maxrss * 1024
    return hwm, peak, time.perf_counter() - started, proc.returncode


def verify_memory() -> None:
    from fixtures.generate import generate
    from tests.bench.run import ensure_store

    print(f"\nrmq verify (with CRCs) of a {VERIFY_MIB // 1024} GiB store")
    store = ROOT / "bench-data" / f"store-{VERIFY_MIB}"
    if not (store / f".bench-{VERIFY_MIB}").exists():
        free = shutil.disk_usage(ROOT).free
        if free < MIN_FREE:
            print(f"  skipped: {free / 2**30:.1f} GiB free on the disk, {MIN_FREE // 2**30} GiB needed")
            return
        ensure_store(store, VERIFY_MIB)  # prints how long the generation took
    rows = []
    rows.append(("python -c pass (baseline)", measured([sys.executable, "-c", "pass"])))
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp) / "small", "small")
        small = measured([str(BIN / "rmq"), "verify", f"{tmp}/small"])
        rows.append(("rmq verify, small store (baseline)", small))
    rows.append(
        (f"rmq verify, {VERIFY_MIB // 1024} GiB store", measured([str(BIN / "rmq"), "verify", str(store)]))
    )
    size = sum(f.stat().st_size for f in (store / "commitlog").iterdir())
    print(f"  store: {store} ({size / 2**30:.2f} GiB of CommitLog files)")
    for name, (maxrss, peak, seconds, rc) in rows:
        print(
            f"  {name:<36} peak RSS {mb(maxrss)}  (largest anon {mb(peak['RssAnon'])}, "
            f"file {mb(peak['RssFile'])})  {seconds:6.2f} s  exit {rc}"
        )
    maxrss = rows[-1][1][0]
    verdict = "met" if maxrss < VERIFY_TARGET_MB * MB else "missed"
    print(
        f"  rmq verify of {VERIFY_MIB // 1024} GiB: {mb(maxrss).strip()} peak; "
        f"target < {VERIFY_TARGET_MB} MB: {verdict}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("serve", "verify"), help="run one of the two")
    args = parser.parse_args(argv)
    if args.only != "verify":
        serve_memory()
    if args.only != "serve":
        verify_memory()


if __name__ == "__main__":
    main()
