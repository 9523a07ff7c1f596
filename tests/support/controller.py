"""A ``BrokerController`` in this process over a ``StoreWriter`` whose clock the test moves: the
broker services (schedule, transaction check) without sockets; and a real 5.1.1 controller-mode
pair (``controller_pair``) for the stores such a group writes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from rmqcli.broker.config import BrokerConfig
from rmqcli.broker.controller import BrokerController
from rmqcli.store.write.writer import StoreWriter
from tests.support.oracle import (
    Jvm,
    broker_port,
    clienttest_send,
    kit_mqadmin,
    route_master,
    topic_status_offsets,
)
from tests.support.oracle5 import KIT5, kit5_env
from tests.support.serve import free_port


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


@dataclass
class ControllerPair:
    home: Path
    namesrv: str
    ports: dict[str, int]  # name -> listenPort (HA on +1)
    jvms: dict[str, Jvm] = field(default_factory=dict)
    states: dict[str, list[Path]] = field(default_factory=dict)  # name -> ORACLE5_STATE_DIR of each start

    def store(self, name: str) -> Path:
        return self.home / name / "store"

    def conf(self, name: str) -> Path:
        return self.home / name / "broker.conf"

    def start(self, name: str, wait: str = "boot success") -> None:
        env = kit5_env(self.home)
        self.states.setdefault(name, []).append(Path(env["ORACLE5_STATE_DIR"]))
        out = self.home / name / f"broker-{time.monotonic_ns()}.out"
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
        return self.mqadmin("getSyncStateSet", "-b", GROUP, "-a", self.controller)

    def send(self, topic: str, count: int) -> int:
        """``clienttest NS topic count send`` (the 4.9.8 kit's client); all must answer SEND_OK."""
        return clienttest_send(self.home, self.namesrv, topic, count)

    def queue_offsets(self, topic: str) -> dict[int, tuple[int, int]]:
        """queueId -> (min, max) offset of ``topic`` as the master answers ``mqadmin topicStatus``."""
        return topic_status_offsets(self.mqadmin, topic, GROUP)

    def broker_log(self, name: str) -> str:
        """Every store/broker log line of ``name``'s starts, oldest first."""
        parts = []
        for state in self.states.get(name, []):
            parts += [p.read_text(errors="replace") for p in sorted((state / "logs").rglob("*.log"))]
        return "\n".join(parts)

    def close(self) -> None:
        for jvm in self.jvms.values():
            jvm.terminate()
        for jvm in self.jvms.values():
            jvm.wait()
        self.jvms.clear()

    controller: str = ""


@contextmanager
def controller_pair(home: Path, unclean: bool = True, **settings: str) -> Iterator[ControllerPair]:
    """A NameServer with the controller inside (``enableElectUncleanMaster`` when ``unclean``) and
    the configurations of brokers b1, b2 (stores under ``home/<name>/store``, 1 MiB CommitLog
    files); none started. Everything started is stopped (SIGTERM) on the way out."""
    ns_port, raft = free_port(), free_port()
    namesrv = f"127.0.0.1:{ns_port}"
    pair = ControllerPair(home, namesrv, {n: broker_port() for n in NAMES})
    pair.controller = f"127.0.0.1:{raft}"
    props = {
        "enableControllerInNamesrv": "true", "controllerDLegerGroup": "group1",
        "controllerDLegerPeers": f"n0-127.0.0.1:{raft}", "controllerDLegerSelfId": "n0",
        "controllerStorePath": str(home / "controller"), "enableElectUncleanMaster": str(unclean).lower(),
        "supportActingMaster": "true",
    }  # fmt: skip
    (home / "ns.props").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    for n in NAMES:
        (home / n).mkdir(parents=True)
        port = pair.ports[n]
        conf = {
            "brokerClusterName": CLUSTER, "brokerName": GROUP, "brokerId": "-1", "brokerRole": "SLAVE",
            "enableControllerMode": "true", "controllerAddr": pair.controller, "allAckInSyncStateSet": "true",
            "listenPort": str(port), "haListenPort": str(port + 1), "namesrvAddr": namesrv,
            "brokerIP1": "127.0.0.1", "brokerIP2": "127.0.0.1", "storePathRootDir": str(pair.store(n)),
            "mappedFileSizeCommitLog": "1048576", "autoCreateTopicEnable": "true",
            "diskMaxUsedSpaceRatio": "95", **settings,
        }  # fmt: skip
        pair.conf(n).write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
    ns = Jvm([str(KIT5 / "bin" / "namesrv"), "-p", str(ns_port), "-c", str(home / "ns.props")],
             home / "namesrv.out", kit5_env(home))  # fmt: skip
    try:
        ns.wait_for("The Name Server boot success")
        yield pair
    finally:
        pair.close()
        ns.stop()
