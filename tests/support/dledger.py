"""A real 3-broker DLedger group of the 4.9.8 kit (``../shared/rocketmq-4.9.8``, README "DLedger
CommitLog mode") on free loopback ports, for tests of stores written in DLedger CommitLog mode."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from rmqcli.dledger.member import MemberState, Role
from rmqcli.dledger.node import DLedgerNode
from tests.support.oracle import (
    KIT,
    LOADED_MACHINE,
    Jvm,
    broker_port,
    clienttest_consume,
    clienttest_send,
    kit_env,
    kit_mqadmin,
    registered,
    route_addrs,
    route_master,
    topic_status_offsets,
)
from tests.support.serve import ServeProcess, free_port, wait_until, write_conf

GROUP = "RaftNode00"
SELF_IDS = ("n0", "n1", "n2")
DATA_FILE_SIZE = 1 << 20  # mappedFileSizeCommitLog: the size of the dledger data files too
# The median time from kill -9 of a leader to a new one in the route that the kill tests accept:
# DLedger's followers wait 3 missed heartbeats of 2 s (maxHeartBeatLeak, heartBeatTimeIntervalMs),
# then vote (the real 4.9.8 group here: ~7 s, README of the kit); the rest is for a loaded machine.
ELECTION_MEDIAN_BOUND_S = 20.0


def dledger_status(rmq, namesrv: str) -> dict[str, dict]:  # type: ignore[no-untyped-def]
    """selfId -> its row of ``rmq dledgerStatus -b GROUP --json`` (every member answering)."""
    out = rmq("dledgerStatus", "-n", namesrv, "-b", GROUP, "--json")
    assert out.exit_code == 0, out.stdout + out.stderr
    (group,) = json.loads(out.stdout)
    return {p["selfId"]: p for p in group["peers"]}


def leader_in_route(namesrv: str, by_addr: dict[str, str]) -> str | None:
    """The member (``by_addr``: address -> selfId) the route names brokerId 0 of the group."""
    return by_addr.get(route_addrs(namesrv, GROUP).get(0, ""))


def agreed(rows: dict[str, dict]) -> str | None:
    """The leader when every member names it and all are in its term, else None."""
    leaders = [n for n, p in rows.items() if p["role"] == "LEADER"]
    if len(leaders) != 1 or {p["leaderId"] for p in rows.values()} != set(leaders):
        return None
    return leaders[0] if len({p["term"] for p in rows.values()}) == 1 else None


@dataclass
class DLedgerGroup:
    home: Path
    namesrv: str
    ports: dict[str, int]  # selfId -> listenPort
    peers: dict[str, str]  # selfId -> DLedger address
    jvms: dict[str, Jvm] = field(default_factory=dict)
    states: dict[str, Path] = field(default_factory=dict)  # selfId -> ORACLE_STATE_DIR of its last start

    def store(self, self_id: str) -> Path:
        return self.home / self_id / "store"

    def conf(self, self_id: str) -> Path:
        return self.home / self_id / "broker.conf"

    def start(self, self_id: str) -> None:
        env = kit_env(self.home)
        self.states[self_id] = Path(env["ORACLE_STATE_DIR"])
        jvm = Jvm([str(KIT / "bin" / "broker"), "-c", str(self.conf(self_id))],
                  self.home / self_id / f"broker-{time.monotonic_ns()}.out", env)  # fmt: skip
        self.jvms[self_id] = jvm
        jvm.wait_for("boot success")

    def kill(self, self_id: str) -> None:
        """kill -9: the broker ends without flushing its checkpoints."""
        jvm = self.jvms.pop(self_id)
        jvm.proc.kill()
        jvm.proc.wait(20)

    def mqadmin(self, *args: str) -> str:
        return kit_mqadmin(KIT, kit_env(self.home), self.namesrv, *args)

    def leader(self, timeout: float = 90, not_: str | None = None) -> str:
        """The selfId of the leader the NameServer's route names (brokerId 0), other than ``not_``."""
        return route_master(self.namesrv, GROUP, self.ports, not_, timeout)

    def leaders(self, rounds: int) -> Iterator[str]:
        """The leader of each of ``rounds`` rounds: the first one elected, then after each round
        the leader killed (-9), a new one elected, and the old one restarted (it rejoins as a
        follower)."""
        leader = self.leader()
        for i in range(rounds):
            if i:
                self.kill(leader)
                old, leader = leader, self.leader(not_=leader)
                self.start(old)
            yield leader

    def log(self, self_id: str) -> str:
        """The log lines of ``self_id``'s last start (DLedger's go to ``broker_default.log``)."""
        logs = sorted((self.states[self_id] / "logs").rglob("*.log"))
        return "\n".join(p.read_text(errors="replace") for p in logs)

    def leader_term(self, self_id: str) -> int:
        """The term in which ``self_id`` last became leader, as its own broker log says
        (DLedger's ``[selfId] [ChangeRoleToLeader] from term: T``)."""
        pattern = re.compile(rf"\[{self_id}\] \[ChangeRoleToLeader\] from term: (\d+)")
        logs = sorted((self.states[self_id] / "logs").glob("*.log"))
        terms = [int(t) for log in logs for t in pattern.findall(log.read_text(errors="replace"))]
        assert terms, f"{self_id} never became leader in its logs"
        return terms[-1]

    def send(self, topic: str, count: int) -> int:
        """``clienttest NS topic count send`` (the 4.9.8 kit's client); all must answer SEND_OK."""
        return clienttest_send(self.home, self.namesrv, topic, count)

    def queue_offsets(self, topic: str) -> dict[int, tuple[int, int]]:
        """queueId -> (min, max) offset of ``topic`` as the leader answers ``mqadmin topicStatus``."""
        return topic_status_offsets(self.mqadmin, topic, GROUP)

    def stop(self) -> None:
        for jvm in self.jvms.values():
            jvm.terminate()
        for jvm in self.jvms.values():
            jvm.wait()
        self.jvms.clear()


class RmqMember:
    """An rmq ``DLedgerNode`` on its own event-loop thread, started and closed on demand."""

    def __init__(self, home: Path, self_id: str, peers: dict[str, str], **node: object):
        self.home, self.self_id, self.peers, self.options = home, self_id, peers, node
        self.node: DLedgerNode | None = None
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

    @property
    def ledger_home(self) -> Path:
        return self.home / f"dledger-{self.self_id}"

    def start(self) -> None:
        state = MemberState.load(GROUP, self.self_id, self.peers, self.ledger_home)
        self.node = self.run(lambda: DLedgerNode(state, **self.options))  # type: ignore[arg-type]
        self.run(self.node.start)

    def run(self, work: Callable[[], object]) -> object:
        """``work()`` on the node's loop (awaited when it returns an awaitable), its result."""

        async def call() -> object:
            out = work()
            return await out if asyncio.iscoroutine(out) else out  # type: ignore[misc]

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(120)

    def stop(self) -> None:
        if self.node is not None:
            self.run(self.node.close)
            self.node = None

    def view(self) -> tuple[int, str | None] | None:
        """(term, leader) once the node leads or follows."""
        if self.node is None or self.node.state.role is Role.CANDIDATE:
            return None
        return self.node.state.curr_term, self.node.state.leader_id


@contextmanager
def dledger_group(
    home: Path, java: tuple[str, ...] = SELF_IDS, extra: dict[str, str] | None = None
) -> Iterator[DLedgerGroup]:
    """A NameServer and three brokers n0, n1, n2 in one DLedger group, each store under
    ``home/<selfId>/store`` with 1 MiB data files (and the broker.conf keys of ``extra``); stops
    them all (SIGTERM) on the way out. Only the members in ``java`` are started (the test runs the
    others)."""
    ns_port = free_port()
    namesrv = f"127.0.0.1:{ns_port}"
    ports = {s: broker_port() for s in SELF_IDS}
    raft = {s: f"127.0.0.1:{free_port()}" for s in SELF_IDS}
    peers = ";".join(f"{s}-{raft[s]}" for s in SELF_IDS)
    group = DLedgerGroup(home, namesrv, ports, raft)
    for s in SELF_IDS:
        (home / s).mkdir(parents=True)
        conf = {
            "brokerClusterName": "DefaultCluster", "brokerName": GROUP, "listenPort": str(ports[s]),
            "namesrvAddr": namesrv, "brokerIP1": "127.0.0.1", "storePathRootDir": str(group.store(s)),
            "mappedFileSizeCommitLog": str(DATA_FILE_SIZE), "enableDLegerCommitLog": "true",
            "dLegerGroup": GROUP, "dLegerPeers": peers, "dLegerSelfId": s, "sendMessageThreadPoolNums": "4",
            "diskMaxUsedSpaceRatio": "95", **LOADED_MACHINE, **(extra or {}),
        }  # fmt: skip
        group.conf(s).write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
    ns = Jvm([str(KIT / "bin" / "namesrv"), "-p", str(ns_port)], home / "namesrv.out", kit_env(home))
    try:
        ns.wait_for("The Name Server boot success")
        for s in java:
            group.start(s)
        yield group
    finally:
        group.stop()
        ns.stop()


_RECOVERED = re.compile(r"Recover data to the end entryIndex=(-?\d+) processOffset=(-?\d+)")


@dataclass
class LoneBroker:
    """A real 4.9.8 broker in DLedger mode started on an existing store, alone in its group (its own
    selfId the only peer, so it elects itself and commits what it holds), with its NameServer."""

    home: Path
    namesrv: str
    port: int
    state: Path  # the broker's ORACLE_STATE_DIR (logs)

    def recovered(self) -> tuple[int, int]:
        """(entryIndex, processOffset) of DLedger's "Recover data to the end" log line."""
        for log in sorted((self.state / "logs").glob("*.log")):
            m = _RECOVERED.search(log.read_text(errors="replace"))
            if m:
                return int(m.group(1)), int(m.group(2))
        raise AssertionError(f"no 'Recover data to the end' line in {self.state / 'logs'}")

    def mqadmin(self, *args: str) -> str:
        return kit_mqadmin(KIT, kit_env(self.home), self.namesrv, *args)

    def queue_offsets(self, topic: str, timeout: float = 60) -> dict[int, tuple[int, int]]:
        """queueId -> (min, max) of ``topic`` from ``mqadmin topicStatus`` (retried until answered)."""
        return topic_status_offsets(self.mqadmin, topic, GROUP, timeout)

    def consume(self, topic: str, count: int, timeout: int = 60) -> tuple[int, int]:
        """``clienttest NS topic count consume``: (received, distinct), a new group from the first offset."""
        return clienttest_consume(self.home, self.namesrv, topic, count, timeout)


@contextmanager
def lone_broker(home: Path, store: Path) -> Iterator[LoneBroker]:
    """The real broker on ``store`` (its ``dledger-<selfId>`` names the selfId) until the block ends
    (SIGTERM: it persists its checkpoints). Ready once the NameServer routes to it as leader."""
    (self_id,) = [p.name.removeprefix("dledger-") for p in store.glob("dledger-*")]
    home.mkdir(parents=True, exist_ok=True)
    ns_port, port, raft = free_port(), broker_port(), free_port()
    conf = {
        "brokerClusterName": "DefaultCluster", "brokerName": GROUP, "listenPort": str(port),
        "namesrvAddr": f"127.0.0.1:{ns_port}", "brokerIP1": "127.0.0.1", "storePathRootDir": str(store),
        "mappedFileSizeCommitLog": str(DATA_FILE_SIZE), "enableDLegerCommitLog": "true",
        "dLegerGroup": GROUP, "dLegerPeers": f"{self_id}-127.0.0.1:{raft}", "dLegerSelfId": self_id,
        "diskMaxUsedSpaceRatio": "95", **LOADED_MACHINE,
    }  # fmt: skip
    (home / "broker.conf").write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
    ns = Jvm([str(KIT / "bin" / "namesrv"), "-p", str(ns_port)], home / "namesrv.out", kit_env(home))
    env = kit_env(home)
    broker = None
    try:
        ns.wait_for("The Name Server boot success")
        broker = Jvm([str(KIT / "bin" / "broker"), "-c", str(home / "broker.conf")], home / "broker.out", env)
        broker.wait_for("boot success")
        lone = LoneBroker(home, f"127.0.0.1:{ns_port}", port, Path(env["ORACLE_STATE_DIR"]))
        # 4.9.8 registers a DLedger member once its group has a leader: here, itself
        wait_until(lambda: registered(lone.namesrv, f"127.0.0.1:{port}"), 90, "the lone broker leading", 0.2)
        yield lone
    finally:
        if broker is not None:
            broker.stop()
        ns.stop()


# --- one real group's stores for the modules that only read them ---------------------------------
THREE_TERMS_TOPIC = "TopicD"
THREE_TERMS_BATCHES = (40, 30, 20)  # sent under the first, second and third leader
THREE_TERMS_CONSUMED = 30


@dataclass(frozen=True)
class ThreeTerms:
    """Stores of a real 4.9.8 group of three after two leader changes, and the brokers' facts:
    ``THREE_TERMS_BATCHES`` sent (``clienttest``, keys ``K<i>`` each batch) under three leaders in
    turn (each killed -9 and restarted before the next batch), then a fresh consumer group
    (``clienttest ... consume``) took ``THREE_TERMS_CONSUMED``."""

    stores: dict[str, Path]  # selfId -> store root (read only: copy before changing)
    last_leader: str
    per_term: dict[int, int]  # term (from each leader's own log) -> messages sent in it
    queues: dict[int, tuple[int, int]]  # queueId -> (min, max) offset, mqadmin topicStatus
    consumer_group: str


def three_terms(tmp_path_factory) -> ThreeTerms:  # type: ignore[no-untyped-def]
    """The ``ThreeTerms`` stores, made once per test run: the pytest-xdist workers share them (the
    first to ask makes them under a lock, the others read its facts)."""
    import fcntl
    import os

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    home = shared / "dledger-three-terms"
    with open(shared / "dledger-three-terms.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        facts = home / "facts.json"
        if not facts.exists():
            shutil.rmtree(home, ignore_errors=True)  # a maker that failed before
            home.mkdir()
            facts.write_text(json.dumps(_make_three_terms(home)))
    doc = json.loads(facts.read_text())
    return ThreeTerms(
        {n: Path(p) for n, p in doc["stores"].items()},
        doc["last_leader"],
        {int(t): c for t, c in doc["per_term"].items()},
        {int(q): (lo, hi) for q, (lo, hi) in doc["queues"].items()},
        doc["consumer_group"],
    )


def _make_three_terms(home: Path) -> dict:
    per_term: dict[int, int] = {}
    with dledger_group(home) as g:
        for leader, count in zip(g.leaders(len(THREE_TERMS_BATCHES)), THREE_TERMS_BATCHES, strict=True):
            term = g.leader_term(leader)
            per_term[term] = per_term.get(term, 0) + g.send(THREE_TERMS_TOPIC, count)
        queues = g.queue_offsets(THREE_TERMS_TOPIC)
        client = [str(KIT / "bin" / "clienttest"), g.namesrv, THREE_TERMS_TOPIC, str(THREE_TERMS_CONSUMED),
                  "consume", "120"]  # fmt: skip
        consume = subprocess.run(client, capture_output=True, text=True, timeout=300, env=kit_env(home))
        found = re.search(r"consumed \(consume, group (\S+)\)", consume.stdout)
        assert consume.returncode == 0 and found, consume.stdout[-3000:]
        stores = {s: str(g.store(s)) for s in SELF_IDS}
    return {"stores": stores, "last_leader": leader, "per_term": per_term, "queues": queues,
            "consumer_group": found.group(1)}  # fmt: skip


# --- three `rmq serve` members ----------------------------------------------------------------------
@dataclass
class ServeGroup:
    """Three ``rmq serve`` members of one DLedger group and the NameServer they register with."""

    namesrv: str
    ns_holder: ServeProcess  # the rmq serve of another cluster whose NameServer the members use
    members: dict[str, ServeProcess]  # selfId -> member

    @property
    def by_addr(self) -> dict[str, str]:
        """Broker address -> selfId."""
        return {m.broker: n for n, m in self.members.items()}

    def leader(self, not_: str | None = None, timeout: float = 60) -> str:
        """The selfId the route names brokerId 0, other than ``not_``."""
        by_addr = self.by_addr
        return wait_until(
            lambda: (n := leader_in_route(self.namesrv, by_addr)) not in (None, not_) and n,
            timeout, "a leader in the route" + (f" other than {not_}" if not_ else ""), 0.2,
        )  # fmt: skip


@contextmanager
def serve_group(tmp: Path, **conf: str) -> Iterator[ServeGroup]:
    """Three ``rmq serve`` members (``n0``-``n2``, 1 MiB data files, ``--verbose``, each broker.conf
    with ``conf`` too) under ``tmp/<selfId>``; the NameServer in a fourth ``rmq serve`` of another
    cluster, which creates no topic (else a client's sends fall back to it while the group has no
    leader): any member can be killed. Every process is killed on the way out."""
    ns_conf = write_conf(
        tmp / "ns.conf", brokerClusterName="NsCluster", brokerName="ns-holder", autoCreateTopicEnable="false"
    )
    peers = ";".join(f"{n}-127.0.0.1:{free_port()}" for n in SELF_IDS)
    members: dict[str, ServeProcess] = {}
    with ServeProcess(tmp / "ns" / "store", ns_conf) as ns_holder:
        try:
            for n in SELF_IDS:
                member_conf = write_conf(
                    tmp / f"{n}.conf", brokerName=GROUP, enableDLegerCommitLog="true", dLegerGroup=GROUP,
                    dLegerPeers=peers, dLegerSelfId=n, mappedFileSizeCommitLog=str(DATA_FILE_SIZE), **conf,
                )  # fmt: skip
                (tmp / n).mkdir()
                extra = ["--verbose", "--no-namesrv", "--namesrv", ns_holder.namesrv]
                members[n] = ServeProcess(tmp / n / "store", member_conf, extra)
                members[n].start()
            yield ServeGroup(ns_holder.namesrv, ns_holder, members)
        finally:
            for m in members.values():
                m.kill()
