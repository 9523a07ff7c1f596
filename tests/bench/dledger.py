"""DLedger groups: sync sends/s and failover time, ``rmq serve`` against the real 4.9.8 group.

Measured side by side in one run, with the C++ client (PyPI ``rocketmq`` 0.4.4), 1 KiB bodies:

- sync sends/s from one client thread to a single rmq master (the baseline: no quorum), to a group
  of three ``rmq serve`` members and to a group of three real 4.9.8 brokers in DLedger mode (when
  Java 17 and ``../shared/rocketmq-4.9.8`` are here). The three run side by side and take
  ``ROUNDS`` streams each, in turn, so that the machine's swings fall on all; each rate is the
  median of its rounds. Targets: the rmq group at >= 1.0x of the real group; its ratio to the
  single master is the price of the quorum.
- failover: ``KILLS`` rounds of kill -9 of the leader under a sync-send stream, from the kill to the
  first send acknowledged after it (a new leader elected and registered, the client's route
  refreshed), median and max; the killed member starts again and follows before the next round.
  Twice: with the C++ client (``load``), whose route refresh every 30 s is most of the figure, and
  with the 4.9.8 Java client asking the NameServer every ``JAVA_POLL_MS`` (``FailoverProducer``,
  when javac is here), which leaves the brokers' part. Target: the rmq group's median <= the real
  group's.

Run as ``python -m tests.bench.dledger``; ``make bench`` calls it at the end. Figures are printed,
never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from tests.bench.broker import BODY, client, serve
from tests.support.broker_drivers import Driver
from tests.support.dledger import GROUP, SELF_IDS, leader_in_route

TARGET_VS_REAL = 1.0  # rmq group sync sends/s / the real group's
ROUNDS = 3
KILLS = 4
JAVA_POLL_MS = 500  # pollNameServerInterval of the Java client's failover rounds
FILE = 128 * 1024 * 1024  # mappedFileSizeCommitLog of every member
TOPIC = "BenchTopic"


class Group:
    """A running 3-member group: its NameServer, and kill/start by selfId."""

    def __init__(
        self, namesrv: str, addrs: dict[str, str], kill: Callable[[str], None], start: Callable[[str], None]
    ):
        self.namesrv, self.addrs, self.kill, self.start = namesrv, addrs, kill, start

    def leader(self, not_: str | None = None, timeout: float = 90) -> str:
        by_addr = {a: n for n, a in self.addrs.items()}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = leader_in_route(self.namesrv, by_addr)
            if found is not None and found != not_:
                return found
            time.sleep(0.05)
        raise RuntimeError(f"no leader in the route of {self.namesrv}")


@contextlib.contextmanager
def rmq_group(tmp: Path) -> Iterator[Group]:
    from tests.support.serve import ServeProcess, free_port, write_conf

    peers = ";".join(f"{n}-127.0.0.1:{free_port()}" for n in SELF_IDS)
    members: dict[str, ServeProcess] = {}
    # the NameServer in an rmq serve of another cluster, as the real group's runs apart: any member
    # can be killed
    ns_conf = write_conf(
        tmp / "ns.conf", brokerClusterName="NsCluster", brokerName="ns-holder", autoCreateTopicEnable="false"
    )
    ns_holder = ServeProcess(tmp / "ns" / "store", ns_conf).start()
    try:
        for n in SELF_IDS:
            conf = write_conf(
                tmp / f"rmq-{n}.conf", brokerName=GROUP, enableDLegerCommitLog="true", dLegerGroup=GROUP,
                dLegerPeers=peers, dLegerSelfId=n, mappedFileSizeCommitLog=str(FILE),
            )  # fmt: skip
            (tmp / f"rmq-{n}").mkdir()
            extra = ["--no-namesrv", "--namesrv", ns_holder.namesrv]
            members[n] = ServeProcess(tmp / f"rmq-{n}" / "store", conf, extra).start()
        addrs = {n: m.broker for n, m in members.items()}

        def kill(n: str) -> None:
            members[n].kill()

        def start(n: str) -> None:
            members[n].start()

        group = Group(ns_holder.namesrv, addrs, kill, start)
        group.leader()
        yield group
    finally:
        for m in members.values():
            m.kill()
        ns_holder.kill()


@contextlib.contextmanager
def real_group(tmp: Path) -> Iterator[Group | None]:
    from tests.support.dledger import dledger_group
    from tests.support.oracle import HAVE_JAVA

    if not HAVE_JAVA:
        yield None
        return
    with dledger_group(tmp / "real", extra={"mappedFileSizeCommitLog": str(FILE)}) as g:
        addrs = {n: f"127.0.0.1:{p}" for n, p in g.ports.items()}
        group = Group(g.namesrv, addrs, g.kill, g.start)
        group.leader()
        yield group


def make_topic(namesrv: str) -> None:
    import subprocess
    import sys

    rmq = [str(Path(sys.executable).parent / "rmq")]
    args = ["updateTopic", "-n", namesrv, "-c", "DefaultCluster", "-t", TOPIC, "-r", "4", "-w", "4"]
    subprocess.run(rmq + args, check=True, stdout=subprocess.DEVNULL)


class JavaLoad:
    """``FailoverProducer`` (``tests/support/java``): the 4.9.8 Java client's sync sends with the
    route asked every ``poll_ms``; ``events()`` as the C++ driver's (one ``t`` per acknowledgement)."""

    def __init__(self, classes: Path, state: Path, namesrv: str, poll_ms: int):
        from tests.support.java import start_program

        self.proc = start_program(classes, state, "FailoverProducer", namesrv, TOPIC, str(poll_ms))
        self.acks: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            word, _, rest = line.partition(" ")
            if word == "ACK":
                self.acks.append({"t": int(rest.split()[0]) / 1000, "id": rest.split()[1]})

    def events(self) -> list[dict]:
        return list(self.acks)

    def first_ack_after(self, since: float, timeout: float, what: str) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            later = [e["t"] for e in self.events() if e["t"] > since]
            if later:
                return min(later) - since
            time.sleep(0.02)
        raise RuntimeError(f"{what}: no acknowledgement within {timeout:g} s")

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def failover(group: Group, name: str, kills: int, load: Driver | JavaLoad) -> list[float]:
    """Seconds from each kill -9 of the leader to the first send ``load`` saw acknowledged after it."""
    times = []
    try:
        for round_ in range(kills):
            leader = group.leader()
            before = len(load.events())
            deadline = time.monotonic() + 60
            while len(load.events()) < before + 50:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{name}: no sends before kill {round_}")
                time.sleep(0.05)
            group.kill(leader)  # returns once the process is gone: acks after it are new
            killed_at = time.time()
            times.append(load.first_ack_after(killed_at, 120, f"{name}: an ack after the kill"))
            group.leader(not_=leader)
            group.start(leader)
    finally:
        load.kill()
    return times


def java_classes(tmp: Path) -> Path | None:
    """The Java test programs compiled, or None without Java 17, the kit or javac."""
    from tests.support.java import javac
    from tests.support.oracle import HAVE_JAVA

    if not HAVE_JAVA or shutil.which("javac") is None:
        return None
    javac(tmp / "classes").check_returncode()
    return tmp / "classes"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000, help="messages per stream")
    parser.add_argument("--kills", type=int, default=KILLS)
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="rmq-bench-dledger-"))
    rates: dict[str, list[float]] = {}
    fails: dict[str, list[float]] = {}
    java_fails: dict[str, list[float]] = {}
    try:
        with contextlib.ExitStack() as stack:
            single = serve(tmp, "single", "ASYNC_FLUSH")
            stack.callback(single.kill)
            groups: dict[str, Group | None] = {
                "rmq": stack.enter_context(rmq_group(tmp)),
                "real": stack.enter_context(real_group(tmp)),
            }
            namesrvs = {"single": single.namesrv} | {k: g.namesrv for k, g in groups.items() if g is not None}
            for ns in namesrvs.values():
                make_topic(ns)
            for _ in range(ROUNDS):
                for name, ns in namesrvs.items():
                    cmd = {"op": "sync", "namesrv": ns, "topic": TOPIC, "count": args.count, "body": BODY}
                    rates.setdefault(name, []).append(args.count / client(tmp, cmd)["seconds"])
            classes = java_classes(tmp)
            for name, g in groups.items():
                if g is None:
                    continue
                cpp = {"op": "load", "namesrv": g.namesrv, "topic": TOPIC, "prefix": "f"}
                fails[name] = failover(g, name, args.kills, Driver(tmp, f"load-{name}", cpp))
                if classes is not None:
                    java = JavaLoad(classes, tmp / f"java-{name}", g.namesrv, JAVA_POLL_MS)
                    java_fails[name] = failover(g, name, args.kills, java)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    median = {name: statistics.median(values) for name, values in rates.items()}
    print(
        f"\nDLedger groups of three, {BODY}-byte bodies, one C++ client thread, medians of {ROUNDS} "
        f"streams of {args.count:,} (figures move with the machine's load)"
    )
    print(f"  {'sync send, single rmq master (baseline)':<52} {median['single']:10,.0f} msgs/s   1.000x")
    rmq_rate = median["rmq"]
    print(
        f"  {'sync send, 3 rmq serve members':<52} {rmq_rate:10,.0f} msgs/s   "
        f"{rmq_rate / median['single']:.3f}x"
    )
    if "real" in median:
        real = median["real"]
        print(
            f"  {'sync send, 3 real 4.9.8 members':<52} {real:10,.0f} msgs/s   "
            f"{real / median['single']:.3f}x   "
            f"rmq group at {rmq_rate / real:.2f}x of it, target {TARGET_VS_REAL}x"
        )
    else:
        print("  real 4.9.8 DLedger group: skipped (no Java 17 or ../shared/rocketmq-4.9.8)")
    report_failover(
        f"kill -9 of the leader to the first acknowledged send, {args.kills} kills each, the C++ client "
        "(its route refreshed every 30 s: the wait for it is most of the figure)",
        fails,
    )
    report_failover(
        f"the same with the 4.9.8 Java client, route asked every {JAVA_POLL_MS} ms "
        "(the brokers' part: election, registration)",
        java_fails,
    )


def report_failover(title: str, fails: dict[str, list[float]]) -> None:
    if not fails:
        print(f"  {title}: skipped (no Java 17, ../shared/rocketmq-4.9.8 or javac)")
        return
    print(f"  {title}:")
    for name, times in fails.items():
        print(
            f"    {name:<6} median {statistics.median(times):6.2f} s   max {max(times):6.2f} s   "
            f"{[round(t, 2) for t in times]}"
        )
    if "real" in fails:
        ratio = statistics.median(fails["rmq"]) / statistics.median(fails["real"])
        print(f"    rmq median at {ratio:.2f}x of the real group's, target <= 1.0x")


if __name__ == "__main__":
    main()
