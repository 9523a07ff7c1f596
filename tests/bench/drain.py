"""Backlog drains with the C++ push consumer (PyPI ``rocketmq`` 0.4.4): ``rmq serve`` beside the real
4.9.8 broker, in one run.

Both brokers get the same backlog (``--count`` 1 KiB messages, sync sends, four queues); then
``--drains`` drains run against each, alternating between the brokers (rmq, real, rmq, real, ...)
so that both meet the same moments of a shared machine. A drain is the "drain" op of
``tests.bench.broker``'s client script: a fresh PushConsumer group (from offset 0), two consume
threads, first to last message. Printed per drain: the rate, the broker's CPU seconds, and from
the client's own log (``<pid>_rocketmq-cpp.log.0``, its "cache msg size" lines) the most
messages it held for one queue, and so whether its flow control paused the drain. Then the
median and the slowest of each broker, and the issue's two ratios (rmq median >= 1.2x the real
median, rmq slowest >= 1.0x the real slowest).

Why a drain sometimes runs at a third of its rate, with either broker: the C++ client (1.2.x,
``DefaultMQPushConsumer::pullMessageAsync``) stops pulling a queue for a fixed 1,000 ms once it
holds more than 1,000 unconsumed messages of it (``m_maxMsgCacheSize``). Its pulls (four queues,
one pull of 32 in flight each) can outrun its consumption (a Python callback under the GIL);
when they outrun it by a quarter or more over a 5,000-message queue, every queue reaches the
threshold near the same moment and the drain pauses ~1 s, whatever the broker.

Two more drains a broker by the same client with 15 us of busy work a message in its callback
(``SLOW_WORK_US``): it then consumes slower than either broker serves, and both brokers meet the
pause in every drain. That the pause follows the client's consumption rate, not the broker, is
shown in each run.

The same five drains a broker follow with the real 4.9.8 Java push consumer
(``tests/support/java/DrainConsumer.java``, the client's defaults: 20 consume threads, a 50 ms
pause at 1,000 messages held), one JVM a broker that drains twice untimed first so that its hot
paths are compiled: a client that consumes two to three times faster than the C++ one. Printed
per drain: the rate, the broker's CPU seconds, and how many pulls the broker answered
SUBSCRIPTION_NOT_LATEST (a fresh group's first pulls can reach the broker before the heartbeat
that registers the client's new subscription version; 4.9.8 answers them so, and the client
retries them 1 s later, which stalls the drain with either broker).

Needs Java 17 and ``../shared/rocketmq-4.9.8`` for the real broker (and javac for the Java rows);
without them its rows say "skipped: no Java 17". Run as ``python -m tests.bench.drain``. Figures
are printed, never asserted; they move with the load of the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.bench.broker import BODY, CLIENT, TOPIC, client, client_result, process_cpu, queued

TARGET_MEDIAN = 1.2  # rmq's median drain rate over the real broker's
TARGET_SLOWEST = 1.0  # rmq's slowest drain over the real broker's slowest
FLOW_CONTROL = 1000  # messages of one queue the C++ client holds before it pauses that queue's pulls
BATCH = 32  # messages the C++ push consumer asks for in a pull
SLOW_DRAINS = 2  # drains a broker by the slowed client
SLOW_WORK_US = 15.0  # its busy time a message: it then consumes ~35,000 msgs/s, below either broker
COMMITLOG_FILE = 16 * 1024 * 1024  # as ``real_cluster``'s broker.conf, for both brokers

_CACHE_LINE = re.compile(r"\(info\):cache msg size:(\d+) of pullRequest:")


@dataclass
class Broker:
    """One broker under test: its name server, its address, the process whose CPU is counted."""

    name: str
    namesrv: str
    addr: str
    pid: int | None
    rates: list[float]

    def drain(self, tmp: Path, group: str, count: int, work_us: float = 0) -> tuple[float | None, str]:
        """One drain by a fresh group ``group`` whose callback also spends ``work_us`` busy a
        message: its rate (None when it fell short) and its row."""
        cpu = process_cpu(self.pid)
        script = tmp / "client.py"
        script.write_text(CLIENT)
        cmd = {"op": "drain", "namesrv": self.namesrv, "topic": TOPIC, "group": group, "work_us": work_us}
        proc = subprocess.Popen(
            [sys.executable, str(script), json.dumps({**cmd, "count": count})],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "HOME": str(tmp)},
            cwd=tmp,
        )
        result = client_result(proc)
        cpu_s = process_cpu(self.pid) - cpu
        if result["count"] < count:
            return None, f"{result['count']} of {count} messages in 300 s"
        rate = result["count"] / result["first_to_last"]
        peak = client_peak(tmp / "logs" / "rocketmq-cpp" / f"{proc.pid}_rocketmq-cpp.log.0")
        paused = "yes" if peak > FLOW_CONTROL - BATCH else "no"
        return rate, (
            f"{rate:9,.0f} msgs/s   broker CPU {cpu_s:5.2f} s   client: at most {peak:5d} messages "
            f"of a queue held, 1 s flow-control pause: {paused}"
        )


def client_peak(log: Path) -> int:
    """The most messages of one queue the C++ client held after consuming a batch (its "cache msg
    size" lines; -1 without its log). It consumes the batches of 32 it pulls, and checks its cache
    right after adding a batch, so a peak above ``FLOW_CONTROL - 32`` means the cache passed the
    threshold once: that queue's pulls paused for 1 s."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return -1
    return max((int(m[1]) for m in _CACHE_LINE.finditer(text)), default=0)


def pid_of(marker: str) -> int | None:
    """The process whose command line names ``marker`` (the real broker's JVM and its broker.conf)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline and "java" in cmdline:
            return int(entry.name)
    return None


def fill(tmp: Path, namesrv: str, count: int) -> None:
    """``count`` sync sends (one more, untimed, first) of 1 KiB bodies to ``TOPIC``."""
    client(tmp, {"op": "sync", "namesrv": namesrv, "topic": TOPIC, "count": count, "body": BODY})


@contextmanager
def rmq_broker(tmp: Path) -> Iterator[Broker]:
    from tests.support.serve import ServeProcess, write_conf

    size = str(COMMITLOG_FILE)
    conf = write_conf(tmp / "rmq.conf", flushDiskType="ASYNC_FLUSH", mappedFileSizeCommitLog=size)
    server = ServeProcess(tmp / "rmq", conf).start()
    try:
        assert server.proc is not None
        yield Broker("rmq", server.namesrv, server.broker, server.proc.pid, [])
    finally:
        server.stop()


@contextmanager
def real_broker(tmp: Path) -> Iterator[Broker | None]:
    from tests.support.oracle import HAVE_JAVA, real_cluster

    if not HAVE_JAVA:
        yield None
        return
    home = tmp / "real"
    home.mkdir()
    with real_cluster(home) as cluster:
        time.sleep(1.5)  # the kit's README: give the broker a moment after "boot success"
        yield Broker("real", cluster.namesrv, cluster.broker, pid_of(str(home / "broker.conf")), [])


def summary(broker: Broker) -> tuple[float, float]:
    return statistics.median(broker.rates), min(broker.rates)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20000, help="messages in the backlog (default 20000)")
    parser.add_argument("--drains", type=int, default=5, help="drains per broker (default 5)")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="rmq-bench-drain-"))
    lines: list[str] = []
    slow_lines: list[str] = []
    try:
        with both(tmp) as (rmq, real):
            brokers = [b for b in (rmq, real) if b is not None]
            for broker in brokers:
                fill(tmp, broker.namesrv, args.count)
            backlog = {b.name: queued(b.addr, TOPIC) for b in brokers}
            for i in range(args.drains):
                for broker in brokers:
                    rate, row = broker.drain(tmp, f"CG_DRAIN_{broker.name}_{i}", backlog[broker.name])
                    if rate is not None:
                        broker.rates.append(rate)
                    lines.append(f"  {broker.name:<5} drain {i + 1}: {row}")
                    print(lines[-1], flush=True)
            for i in range(SLOW_DRAINS):
                for broker in brokers:
                    group = f"CG_SLOW_DRAIN_{broker.name}_{i}"
                    _, row = broker.drain(tmp, group, backlog[broker.name], SLOW_WORK_US)
                    slow_lines.append(f"  {broker.name:<5} slow drain {i + 1}: {row}")
                    print(slow_lines[-1], flush=True)
            java_rates = java_drains(tmp, brokers, backlog, args.drains)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report(args, rmq, real, lines, load_before)
    print(
        f"  the same client with {SLOW_WORK_US:g} us of work a message in its callback, so that it consumes "
        "slower than either broker serves (the pause is the client's: it stalls the real broker too):"
    )
    print("\n".join(slow_lines))
    report_java(java_rates)


JAVA_WARMUP = 2  # untimed drains by each broker's Java consumer first, so that it runs compiled code
NOT_LATEST = "CODE: 25"  # SUBSCRIPTION_NOT_LATEST in the Java client's log


def java_drains(
    tmp: Path, brokers: list[Broker], backlog: dict[str, int], drains: int
) -> dict[str, list[tuple[float, int]]]:
    """The drains of the 4.9.8 Java push consumer, alternating between the brokers: by broker, each
    drain's rate and how many of its pulls the broker answered SUBSCRIPTION_NOT_LATEST (empty
    without Java 17, the kit or javac). One JVM a broker drains for every group, after
    ``JAVA_WARMUP`` untimed drains."""
    from tests.support.java import javac, start_program
    from tests.support.oracle import HAVE_JAVA

    if not HAVE_JAVA or shutil.which("javac") is None:
        return {}
    classes = tmp / "classes"
    javac(classes).check_returncode()
    consumers = {
        b.name: JavaConsumer(
            start_program(
                classes, tmp / f"java-{b.name}", "DrainConsumer", b.namesrv, TOPIC, str(backlog[b.name])
            ),
            tmp / f"java-{b.name}" / "logs" / "rocketmq_client.log",
            backlog[b.name],
        )
        for b in brokers
    }
    rates: dict[str, list[tuple[float, int]]] = {b.name: [] for b in brokers}
    try:
        for i in range(JAVA_WARMUP):
            for name, consumer in consumers.items():
                consumer.drain(f"CG_JAVA_WARM_{name}_{i}")
        for i in range(drains):
            for broker in brokers:
                name = broker.name
                cpu = process_cpu(broker.pid)
                drained = consumers[name].drain(f"CG_JAVA_DRAIN_{name}_{i}")
                cpu_s = process_cpu(broker.pid) - cpu
                if drained is None:
                    print(f"  {name:<5} Java drain {i + 1}: incomplete", flush=True)
                    continue
                rates[name].append(drained)
                rate, refused = drained
                print(
                    f"  {name:<5} Java drain {i + 1}: {rate:9,.0f} msgs/s   broker CPU {cpu_s:5.2f} s   "
                    f"pulls answered SUBSCRIPTION_NOT_LATEST (retried 1 s later): {refused}",
                    flush=True,
                )
    finally:
        for consumer in consumers.values():
            consumer.close()
    return rates


@dataclass
class JavaConsumer:
    """A running ``DrainConsumer``: it drains once for each group written to its stdin."""

    proc: subprocess.Popen[str]
    log: Path
    count: int

    def drain(self, group: str) -> tuple[float, int] | None:
        """One drain by ``group``: (msgs/s from the first message to the last, SUBSCRIPTION_NOT_LATEST
        answers in the client's log meanwhile), or None when it fell short."""
        before = self.log.stat().st_size if self.log.exists() else 0
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(group + "\n")
        self.proc.stdin.flush()
        line = ""
        while not line.startswith("RESULT "):
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the Java drain consumer stopped")
        seen, first_to_last, _ = line.split()[1:]
        with self.log.open("rb") as log:
            log.seek(before)
            refused = log.read().decode(errors="replace").count(NOT_LATEST)
        if int(seen) < self.count:
            return None
        return self.count / float(first_to_last), refused

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def report_java(rates: dict[str, list[tuple[float, int]]]) -> None:
    if not rates:
        print("  Java push consumer: skipped: no Java 17 or javac")
        return
    print(
        f"  with the real 4.9.8 Java push consumer (one warm JVM a broker, {JAVA_WARMUP} untimed drains "
        "first; it consumes faster than the C++ client, so that these rows measure the brokers):"
    )
    for name, drained in rates.items():
        values = [rate for rate, _ in drained]
        listed = ", ".join(f"{r:,.0f}" for r in values)
        print(
            f"  {name:<5} median {statistics.median(values):9,.0f} msgs/s, "
            f"slowest {min(values):9,.0f} msgs/s   ({listed})"
        )
    if rates.get("rmq") and rates.get("real"):
        rmq = [rate for rate, _ in rates["rmq"]]
        real = [rate for rate, _ in rates["real"]]
        ratios(statistics.median(rmq), min(rmq), statistics.median(real), min(real))


@contextmanager
def both(tmp: Path) -> Iterator[tuple[Broker, Broker | None]]:
    """Both brokers up at once, so that their drains can alternate."""
    (tmp / "rmq-side").mkdir()
    (tmp / "real-side").mkdir()
    with rmq_broker(tmp / "rmq-side") as rmq, real_broker(tmp / "real-side") as real:
        yield rmq, real


def report(args: argparse.Namespace, rmq: Broker, real: Broker | None, lines: list[str], load: float) -> None:
    print(
        f"\ndrain of a {args.count:,}-message backlog ({BODY}-byte bodies, 4 queues), C++ push consumer "
        f"rocketmq 0.4.4, {args.drains} drains per broker, alternating (figures move with the machine's load)"
    )
    print(f"  load average (1 min) {load:.2f} before, {os.getloadavg()[0]:.2f} after, {os.cpu_count()} CPUs")
    print(f"  the client pauses a queue's pulls 1 s once it holds more than {FLOW_CONTROL:,} of its messages")
    for line in lines:
        print(line)
    if real is None:
        print("  real  4.9.8: skipped: no Java 17")
    for broker in (rmq, real):
        if broker is None or not broker.rates:
            continue
        median, slowest = summary(broker)
        rates = ", ".join(f"{r:,.0f}" for r in broker.rates)
        print(f"  {broker.name:<5} median {median:9,.0f} msgs/s, slowest {slowest:9,.0f} msgs/s   ({rates})")
    if real is None or not real.rates or not rmq.rates:
        print("  ratios: skipped: no Java 17" if real is None else "  ratios: no complete drains")
        return
    ratios(*summary(rmq), *summary(real))


def ratios(rmq_median: float, rmq_slowest: float, real_median: float, real_slowest: float) -> None:
    """The issue's two ratios against their targets."""
    for what, ratio, target in (
        ("median", rmq_median / real_median, TARGET_MEDIAN),
        ("slowest", rmq_slowest / real_slowest, TARGET_SLOWEST),
    ):
        verdict = "met" if ratio >= target else "not met"
        print(f"  rmq {what} / real {what}: {ratio:.2f}x (target >= {target:.1f}x: {verdict})")


if __name__ == "__main__":
    main()
