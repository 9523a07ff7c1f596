"""A ``BrokerController`` in this process over a ``StoreWriter`` whose clock the test moves: the
broker services (schedule, transaction check) without sockets; and a real 5.1.1 controller-mode
pair (``controller_pair``) for the stores such a group writes."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from rmqcli.broker.config import BrokerConfig
from rmqcli.broker.controller import BrokerController
from rmqcli.store.write.writer import StoreWriter
from tests.support.cli import RMQ
from tests.support.oracle import (
    LOADED_MACHINE,
    Jvm,
    broker_port,
    clienttest_consume,
    clienttest_send,
    kit_mqadmin,
    route_master,
    topic_status_offsets,
)
from tests.support.oracle5 import KIT5, kit5_env
from tests.support.serve import free_port, wait_until


@contextmanager
def broker_controller(root: Path, clock: list[int], **config: object) -> Iterator[BrokerController]:
    """The controller of a store at ``root`` whose time is ``clock[0]``; ``config`` overrides
    ``BrokerConfig`` fields. The writer is closed on leaving."""
    writer = StoreWriter(root, clock=lambda: clock[0])
    try:
        yield BrokerController(replace(BrokerConfig(broker_ip1="127.0.0.1"), **config), writer, [])
    finally:
        writer.close()


# --- a real 5.1.1 controller-mode pair ------------------------------------------------------------
# ``../shared/rocketmq-5.1.1`` README "Controller mode": a NameServer with the controller inside and
# two brokers of one group with ``enableControllerMode=true``, on free loopback ports.

CLUSTER = "DefaultCluster"
GROUP = "broker-a"
NAMES = ("b1", "b2")


BOTH_IN_SYNC = [(1, "true"), (2, "true")]


@dataclass
class SyncState:
    """What the real ``mqadmin getSyncStateSet`` prints, as values: the master's id and the epochs,
    and the ids in and out of the in-sync set with their liveness."""

    master: str | None
    master_epoch: str | None
    set_epoch: str | None
    in_sync: list[tuple[int, str]]
    not_in_sync: list[tuple[int, str]]

    @staticmethod
    def of(text: str) -> SyncState:
        fields = dict(re.findall(r"^#(\w+)\t(.*)$", text, re.M))
        replica = r"^(InSyncReplica|NotInSyncReplica):\tReplicaIdentity\{.*brokerId=(\d+).*alive=(\w+)\}"
        replicas = re.findall(replica, text, re.M)
        return SyncState(
            fields.get("MasterBrokerId"),
            fields.get("MasterEpoch"),
            fields.get("SyncStateSetEpoch"),
            sorted((int(i), a) for kind, i, a in replicas if kind == "InSyncReplica"),
            sorted((int(i), a) for kind, i, a in replicas if kind == "NotInSyncReplica"),
        )


@dataclass
class ControllerPair:
    home: Path
    namesrv: str
    ports: dict[str, int]  # name -> listenPort (HA on +1)
    jvms: dict[str, Jvm] = field(default_factory=dict)
    states: dict[str, list[Path]] = field(default_factory=dict)  # name -> ORACLE5_STATE_DIR of each start
    rmq: frozenset[str] = frozenset()  # the brokers that are rmq serve
    outputs: dict[str, list[Path]] = field(default_factory=dict)  # name -> rmq serve's output of each start

    def store(self, name: str) -> Path:
        return self.home / name / "store"

    def conf(self, name: str) -> Path:
        return self.home / name / "broker.conf"

    def start(self, name: str, wait: str = "boot success") -> None:
        """Start broker ``name``: a real 5.1.1 broker, or ``rmq serve`` when it is one of ``rmq``."""
        out = self.home / name / f"broker-{time.monotonic_ns()}.out"
        if name in self.rmq:
            ports = ["--port", str(self.ports[name]), "--grpc-port", "0"]
            args = [*RMQ, "serve", str(self.store(name)), "--config", str(self.conf(name)), "-v",
                    "--no-namesrv", "-n", self.namesrv, *ports]  # fmt: skip
            self.outputs.setdefault(name, []).append(out)
            proc = Jvm(args, out, {**os.environ, "PYTHONUNBUFFERED": "1"})
            self.jvms[name] = proc
            proc.wait_for("; store ")
            return
        env = kit5_env(self.home)
        self.states.setdefault(name, []).append(Path(env["ORACLE5_STATE_DIR"]))
        jvm = Jvm([str(KIT5 / "bin" / "broker"), "-c", str(self.conf(name))], out, env)
        self.jvms[name] = jvm
        jvm.wait_for(wait)

    def kill(self, name: str) -> None:
        """kill -9: no checkpoint flush, ``abort`` stays."""
        jvm = self.jvms.pop(name)
        jvm.proc.kill()
        jvm.proc.wait(20)

    def stop(self, name: str) -> None:
        """SIGTERM and wait: a clean shutdown (checkpoint flushed, ``abort`` removed)."""
        self.jvms.pop(name).stop()

    def mqadmin(self, *args: str) -> str:
        return kit_mqadmin(KIT5, kit5_env(self.home), self.namesrv, *args)

    def master(self, timeout: float = 90, not_: str | None = None) -> str:
        """The name of the broker the route names brokerId 0 (other than ``not_``)."""
        return route_master(self.namesrv, GROUP, self.ports, not_, timeout)

    def sync_state_set(self) -> str:
        """The real mqadmin's getSyncStateSet, asked of the first live controller (again, up to
        three times, when a loaded JVM printed no answer)."""
        text = ""
        for _ in range(3):
            text = self.mqadmin("getSyncStateSet", "-b", GROUP, "-a", next(iter(self.controllers.values())))
            if "#brokerName" in text:
                break
        return text

    def sync_state(self) -> SyncState:
        return SyncState.of(self.sync_state_set())

    def in_sync(self, timeout: float, what: str = "both brokers in sync") -> SyncState:
        """The in-sync set once it holds both brokers, alive."""
        return wait_until(lambda: (s := self.sync_state()).in_sync == BOTH_IN_SYNC and s, timeout, what)

    def topic_copied(self, name: str, topic: str, timeout: float = 60) -> None:
        """Until broker ``name`` (a slave) holds ``topic`` in its ``topics.json``: a topic the sends
        created on the master reaches a slave with its next config copy (every 10 s), and a slave
        elected before that has no route for it."""
        path = self.store(name) / "config" / "topics.json"
        wait_until(lambda: path.is_file() and f'"{topic}"' in path.read_text(errors="replace"), timeout,
                   f"{topic} copied to {name}")  # fmt: skip

    def start_both(self, timeout: float = 120) -> str:
        """b1 then b2 started, a master elected and both in the in-sync set: the master's name."""
        self.start("b1")
        self.start("b2")
        master = self.master(timeout=timeout)
        self.in_sync(timeout)
        return master

    def send(self, topic: str, count: int) -> int:
        """``clienttest NS topic count send`` (the 4.9.8 kit's client); all must answer SEND_OK."""
        return clienttest_send(self.home, self.namesrv, topic, count)

    def consume(self, topic: str, count: int, timeout: int = 60) -> tuple[int, int]:
        """``clienttest NS topic count consume``: (received, distinct), a new group from the first offset."""
        return clienttest_consume(self.home, self.namesrv, topic, count, timeout)

    def queue_offsets(self, topic: str) -> dict[int, tuple[int, int]]:
        """queueId -> (min, max) offset of ``topic`` as the master answers ``mqadmin topicStatus``."""
        return topic_status_offsets(self.mqadmin, topic, GROUP)

    def broker_log(self, name: str) -> str:
        """Every store/broker log line of ``name``'s starts, oldest first (rmq serve's output)."""
        parts = [p.read_text(errors="replace") for p in self.outputs.get(name, [])]
        for state in self.states.get(name, []):
            parts += [p.read_text(errors="replace") for p in sorted((state / "logs").rglob("*.log"))]
        return "\n".join(parts)

    def close(self) -> None:
        for jvm in self.jvms.values():
            jvm.terminate()
        for jvm in self.jvms.values():
            jvm.wait()
        self.jvms.clear()

    controller: str = ""  # every controller's address, ";"-separated (the brokers' controllerAddr)
    controller_process: Jvm | None = None  # rmq controller, when the one controller is rmq's
    controllers: dict[str, str] = field(default_factory=dict)  # selfId -> address
    controller_procs: dict[str, Jvm] = field(default_factory=dict)  # selfId -> its process
    namesrvs: dict[str, Jvm] = field(default_factory=dict)  # selfId (or "ns") -> NameServer process

    def kill_controller(self, ident: str) -> None:
        """kill -9 of a controller (a real one's NameServer with it)."""
        proc = self.controller_procs.pop(ident)
        proc.proc.kill()
        proc.proc.wait(20)
        self.namesrvs = {k: v for k, v in self.namesrvs.items() if v is not proc}
        self.controllers.pop(ident)


@contextmanager
def controller_pair(
    home: Path,
    unclean: bool = True,
    controller: str | tuple[str, ...] = "real",
    brokers: tuple[str, str] = ("real", "real"),
    **settings: str,
) -> Iterator[ControllerPair]:
    """Controllers and the configurations of brokers b1, b2 (stores under ``home/<name>/store``,
    1 MiB CommitLog files); no broker started. ``controller`` names the kind of each controller
    n0, n1, ...: ``"real"`` is a 5.1.1 NameServer with the controller inside, ``"rmq"`` is ``rmq
    controller`` (a plain 5.1.1 NameServer is added when no controller is real); several make one
    DLedger group. ``brokers`` names the kind of b1 and b2 the same way (``"rmq"``: ``rmq serve``).
    The brokers register with every NameServer and know every controller.
    ``enableElectUncleanMaster`` when ``unclean``. Everything started is stopped on the way out."""
    kinds = (controller,) if isinstance(controller, str) else tuple(controller)
    ids = [f"n{i}" for i in range(len(kinds))]
    raft = {i: free_port() for i in ids}
    peers = ";".join(f"{i}-127.0.0.1:{port}" for i, port in raft.items())
    ns_ports = {i: free_port() for i, kind in zip(ids, kinds, strict=True) if kind == "real"} or {
        "ns": free_port()
    }
    namesrv = ";".join(f"127.0.0.1:{port}" for port in ns_ports.values())
    pair = ControllerPair(home, namesrv, {n: broker_port() for n in NAMES})
    pair.rmq = frozenset(n for n, kind in zip(NAMES, brokers, strict=True) if kind == "rmq")
    pair.controllers = {i: f"127.0.0.1:{raft[i]}" for i in ids}
    pair.controller = ";".join(pair.controllers.values())
    for n in NAMES:
        (home / n).mkdir(parents=True)
        port = pair.ports[n]
        conf = {
            "brokerClusterName": CLUSTER, "brokerName": GROUP, "brokerId": "-1", "brokerRole": "SLAVE",
            "enableControllerMode": "true", "controllerAddr": pair.controller, "allAckInSyncStateSet": "true",
            "listenPort": str(port), "haListenPort": str(port + 1), "namesrvAddr": namesrv,
            "brokerIP1": "127.0.0.1", "brokerIP2": "127.0.0.1", "storePathRootDir": str(pair.store(n)),
            "mappedFileSizeCommitLog": "1048576", "autoCreateTopicEnable": "true",
            "diskMaxUsedSpaceRatio": "95", **({} if n in pair.rmq else LOADED_MACHINE), **settings,
        }  # fmt: skip
        pair.conf(n).write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
    try:
        for i, kind in zip(ids, kinds, strict=True):
            props = {
                "controllerDLegerGroup": "group1", "controllerDLegerPeers": peers,
                "controllerDLegerSelfId": i, "controllerStorePath": str(home / f"controller-{i}"),
                "enableElectUncleanMaster": str(unclean).lower(),
            }  # fmt: skip
            if kind == "real":
                pair.namesrvs[i] = _namesrv(
                    home, i, ns_ports[i], {"enableControllerInNamesrv": "true", **props}
                )
                pair.controller_procs[i] = pair.namesrvs[i]
            else:
                props |= {
                    "configStorePath": str(home / f"controller-{i}.properties"),
                    "mappedFileSize": "1048576",
                }
                (home / f"controller-{i}.conf").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
                args = [*RMQ, "controller", "-v", "-c", str(home / f"controller-{i}.conf")]
                ours = Jvm(args, home / f"controller-{i}.out", {**os.environ, "PYTHONUNBUFFERED": "1"})
                pair.controller_procs[i] = ours
                ours.wait_for(f"rmq controller: {i} of group1 on")
        if "ns" in ns_ports:
            pair.namesrvs["ns"] = _namesrv(home, "ns", ns_ports["ns"], {})
        pair.controller_process = pair.controller_procs.get("n0") if kinds == ("rmq",) else None
        yield pair
    finally:
        pair.close()
        for proc in {id(p): p for p in (*pair.controller_procs.values(), *pair.namesrvs.values())}.values():
            proc.stop()


def _namesrv(home: Path, name: str, port: int, props: dict[str, str]) -> Jvm:
    """A 5.1.1 NameServer (SlaveActingMaster's heartbeats on) with more ``props``, started."""
    path = home / f"ns-{name}.props"
    path.write_text("".join(f"{k}={v}\n" for k, v in {"supportActingMaster": "true", **props}.items()))
    ns = Jvm([str(KIT5 / "bin" / "namesrv"), "-p", str(port), "-c", str(path)], home / f"namesrv-{name}.out",
             kit5_env(home))  # fmt: skip
    ns.wait_for("The Name Server boot success")
    return ns
