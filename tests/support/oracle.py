"""The real Apache RocketMQ 4.9.8 of ``../shared/rocketmq-4.9.8`` for interop tests: whether it can
run here (Java 17 and the kit), free broker ports, and its launchers as child processes."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from rmqcli.errors import RmqError
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.codes import RequestCode as RC
from tests.support import SHARED
from tests.support.components import missing
from tests.support.popwire import call
from tests.support.serve import free_port, free_port_pair, wait_until

KIT = SHARED / "rocketmq-4.9.8"
HAVE_JAVA = missing("java") is None


broker_port = free_port_pair  # a listenPort whose VIP channel (-2) and HA port (+1) are free too


class Jvm:
    """One launcher of the kit in the foreground, its output in ``log``; ``stop()`` sends SIGTERM
    and waits."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str]):
        self.log = log
        with open(log, "w") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=log.parent)

    def wait_for(self, text: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log.read_text(errors="replace"):
            assert self.proc.poll() is None, f"{self.log.name} exited: {self.log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, (
                f"{self.log.name}: no {text!r}: {self.log.read_text()[-2000:]}"
            )
            time.sleep(0.1)

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def wait(self) -> None:
        wait_or_kill(self.proc, 20)

    def stop(self) -> None:
        self.terminate()
        self.wait()


def wait_or_kill(proc: subprocess.Popen, timeout: float) -> None:
    """Wait ``timeout`` s for a child to end; then SIGKILL it (and wait for that)."""
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def stop_by_file(proc: subprocess.Popen, stop_file: Path, timeout: float) -> None:
    """End a child that runs until ``stop_file`` exists: make the file, then ``wait_or_kill``."""
    stop_file.touch()
    wait_or_kill(proc, timeout)


def kit_env(state: Path, **extra: str) -> dict[str, str]:
    """The environment of one of the kit's JVMs: its own ``ORACLE_STATE_DIR`` under ``state``,
    no inherited ``JAVA_OPT_EXT`` (``extra`` may set one)."""
    env = {k: v for k, v in os.environ.items() if k != "JAVA_OPT_EXT"}
    env["ORACLE_STATE_DIR"] = str(state / f"state-{time.monotonic_ns()}")
    return {**env, **extra}


_SENT = re.compile(r"sent (\d+) messages \((\d+) SEND_OK\)")


def clienttest_send(home: Path, namesrv: str, topic: str, count: int) -> int:
    """``clienttest NS topic count send`` (the kit's client); all must answer SEND_OK."""
    run = subprocess.run([str(KIT / "bin" / "clienttest"), namesrv, topic, str(count), "send"],
                         capture_output=True, text=True, timeout=180, env=kit_env(home))  # fmt: skip
    m = _SENT.search(run.stdout)
    assert m and int(m.group(1)) == int(m.group(2)) == count, run.stdout[-3000:] + run.stderr[-2000:]
    return count


_RESULT = re.compile(r"RESULT sent=\d+ sendOk=\d+ received=(\d+) distinct=(\d+)")


def clienttest_consume(
    home: Path, namesrv: str, topic: str, count: int, timeout: int = 60
) -> tuple[int, int]:
    """``clienttest NS topic count consume``: (received, distinct), a new group from the first offset."""
    args = [str(KIT / "bin" / "clienttest"), namesrv, topic, str(count), "consume", str(timeout)]
    run = subprocess.run(args, capture_output=True, text=True, timeout=timeout + 120, env=kit_env(home))
    m = _RESULT.search(run.stdout)
    assert m, run.stdout[-3000:] + run.stderr[-2000:]
    return int(m.group(1)), int(m.group(2))


def kit_mqadmin(kit: Path, env: dict[str, str], namesrv: str, *args: str) -> str:
    """What a kit's ``mqadmin`` prints for ``args`` against ``namesrv`` (empty when it failed)."""
    run = subprocess.run([str(kit / "bin" / "mqadmin"), *args, "-n", namesrv], capture_output=True, text=True,
                         timeout=120, env=env)  # fmt: skip
    return run.stdout


def topic_status_offsets(
    mqadmin: Callable[..., str], topic: str, broker: str, timeout: float = 60
) -> dict[int, tuple[int, int]]:
    """queueId -> (min, max) offset from ``mqadmin topicStatus``'s rows of ``broker``, asked again
    a second apart while it shows none (on a loaded machine the JVM's call may time out and print
    nothing)."""
    deadline = time.monotonic() + timeout
    while True:
        out = mqadmin("topicStatus", "-t", topic)
        rows = [line.split() for line in out.splitlines() if line.startswith(broker)]
        if rows:
            return {int(r[1]): (int(r[2]), int(r[3])) for r in rows}
        assert time.monotonic() < deadline, f"no topicStatus rows of {broker}: {out}"
        time.sleep(1)


def route_addrs(ns: str, group: str) -> dict[int, str]:
    """brokerId -> address of ``group`` in the NameServer's cluster info (GET_BROKER_CLUSTER_INFO,
    what ``mqadmin clusterList`` prints), from the first of the ``;``-separated NameServers that
    answers; empty while none does."""
    for addr in ns.split(";"):
        try:
            answer = call(addr, RC.GET_BROKER_CLUSTER_INFO, timeout=5)
        except (RmqError, OSError):
            continue
        data = jb.decode_or_empty(jb.ClusterInfo, answer.body).broker_addr_table.get(group)
        return dict(data.broker_addrs) if data else {}
    return {}


def route_master(ns: str, group: str, ports: dict[str, int], not_: str | None, timeout: float) -> str:
    """The name (a key of ``ports``, name -> listenPort) of the broker that the NameServer ``ns``
    names brokerId 0 of ``group``, other than ``not_``; polled until ``timeout`` s."""
    by_addr = {f"127.0.0.1:{p}": n for n, p in ports.items()}
    deadline = time.monotonic() + timeout
    while True:
        ids = route_addrs(ns, group)
        if by_addr.get(ids.get(0, "")) not in (None, not_):
            return by_addr[ids[0]]
        assert time.monotonic() < deadline, f"no brokerId 0 of {group} in the route: {ids}"
        time.sleep(0.2)


def registered(ns: str, broker: str) -> bool:
    """Whether the NameServer ``ns`` lists the broker address ``broker`` in its cluster info."""
    info = jb.decode(jb.ClusterInfo, call(ns, RC.GET_BROKER_CLUSTER_INFO).body)
    return any(broker in data.broker_addrs.values() for data in info.broker_addr_table.values())


def wait_registered(ns: str, broker: str) -> None:
    """Until the broker is in the NameServer's routes: a broker that started before its NameServer
    listened registers again only on its next 30 s round."""
    wait_until(lambda: registered(ns, broker), 45, f"{broker} registered with {ns}", 0.5)


@dataclass(frozen=True)
class RealCluster:
    namesrv: str
    broker: str
    home: Path  # the directory the JVMs and their stores live in

    def env(self, **extra: str) -> dict[str, str]:
        """An environment for one more of the kit's tools (``mqadmin``, ``clienttest``)."""
        return kit_env(self.home, **extra)


LOADED_MACHINE = {"waitTimeMillsInSendQueue": "3000"}
"""What the real brokers that take a stream of sends are given: a send may wait 3 s in the
broker's queue (200 ms by default), since bin/clienttest stops at the first TIMEOUT_CLEAN_QUEUE
on a loaded machine."""


def write_broker_conf(home: Path, ns: str, port: int, cluster: str, broker: str, **settings: str) -> None:
    """``home/broker.conf`` of one ASYNC_MASTER on loopback ``port`` (HA on ``port + 1``), its store
    under ``home`` (16 MiB CommitLog files); ``settings`` are more lines."""
    conf = {
        "brokerClusterName": cluster, "brokerName": broker, "brokerId": "0", "brokerRole": "ASYNC_MASTER",
        "flushDiskType": "ASYNC_FLUSH", "listenPort": str(port), "haListenPort": str(port + 1),
        "namesrvAddr": ns, "brokerIP1": "127.0.0.1", "brokerIP2": "127.0.0.1",
        "storePathRootDir": str(home / "store"), "mappedFileSizeCommitLog": "16777216",
        "diskMaxUsedSpaceRatio": "95", **settings,
    }  # fmt: skip
    (home / "broker.conf").write_text("".join(f"{k}={v}\n" for k, v in conf.items()))


@contextmanager
def real_cluster(
    home: Path, cluster: str = "DefaultCluster", broker: str = "broker-a", env: dict[str, str] | None = None,
    **settings: str,
) -> Iterator[RealCluster]:  # fmt: skip
    """The kit's NameServer and one ASYNC_MASTER on free loopback ports, its store under ``home``
    (16 MiB CommitLog files); ``settings`` are more ``broker.conf`` lines (``traceTopicEnable="true"``)."""
    ns_port, port = free_port(), broker_port()
    write_broker_conf(home, f"127.0.0.1:{ns_port}", port, cluster, broker, **settings)
    with kit_cluster(KIT, home, ns_port, port, lambda: env or kit_env(home)) as cluster_:
        yield cluster_


@contextmanager
def kit_cluster(
    kit: Path, home: Path, ns_port: int, port: int, env: Callable[[], dict[str, str]], kill: bool = False
) -> Iterator[RealCluster]:
    """``kit``'s NameServer on ``ns_port`` and its broker of ``home/broker.conf`` (listening on
    ``port``), each with an ``env()`` of its own, until the broker is registered; at the end both
    are sent SIGTERM (``kill``: SIGKILL, for a store thrown away) and waited for."""
    ns = f"127.0.0.1:{ns_port}"
    # started together: the broker registers again every 30 s, and at once on each topic change
    namesrv = Jvm([str(kit / "bin" / "namesrv"), "-p", str(ns_port)], home / "namesrv.out", env())
    broker_jvm = Jvm(
        [str(kit / "bin" / "broker"), "-c", str(home / "broker.conf")], home / "broker.out", env()
    )
    try:
        namesrv.wait_for("The Name Server boot success")
        broker_jvm.wait_for("boot success")
        wait_registered(ns, f"127.0.0.1:{port}")
        yield RealCluster(ns, f"127.0.0.1:{port}", home)
    finally:
        for jvm in (broker_jvm, namesrv):
            if kill:
                jvm.proc.kill()
            else:
                jvm.terminate()
        broker_jvm.wait()
        namesrv.wait()
