"""SlaveActingMaster in ``rmq serve`` beside the real 5.1.1 (``../shared/rocketmq-5.1.1``, its
README and ``examples/acting-master.sh``): one scenario run against a group of real brokers and
against the same layout of ``rmq serve`` processes, and what each showed compared.

The layout: a NameServer with ``supportActingMaster=true``; broker-a's master and slave and
broker-b's master, all with ``enableSlaveActingMaster``, ``enableRemoteEscape`` and
``slaveReadEnable``. The scenario: messages and a delayed one (due 8 s later) to broker-a's
master, the slave synchronized, kill -9 of the master; then the route, what the acting slave
answers to a pull and a send, an offset committed on it, where the delayed message went; the
master restarted, the route and the offset it keeps, and the delayed message's copies.

Slow: ~3 min, most of it the real 5.1.1 slave's first SlaveSynchronize, ~60 s after it starts
(its topics, groups and offsets; before it, the slave knows no topic)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest

from rmqcli.remoting import headers as hd
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.admin.runner import rmq
from tests.broker.test_ha_serve import Member
from tests.support.oracle import Jvm, broker_port, wait_registered, write_broker_conf
from tests.support.oracle5 import KIT5, kit5_env
from tests.support.popwire import call, query_offset
from tests.support.records import body_records
from tests.support.serve import free_port, wait_until

pytestmark = [pytest.mark.java, pytest.mark.java5]

TOPIC = "TopicSAMR"
GROUP = "CG_SAMR"
DELAYS = "1s 2s 8s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"  # level 3: 8 s
BROKER = {
    "enableSlaveActingMaster": "true",
    "enableRemoteEscape": "true",
    "slaveReadEnable": "true",
    "messageDelayLevel": DELAYS,
}


class Layout(Protocol):
    """Broker-a's master (``a0``) and slave (``a1``), broker-b's master (``b0``), a NameServer."""

    ns: str
    a0: str
    a1: str
    b0: str

    def kill_master(self) -> None: ...  # kill -9 of broker-a's master

    def restart_master(self) -> None: ...


class RealLayout:
    """The real 5.1.1 NameServer and brokers, each JVM with its own state and log directory."""

    def __init__(self, home: Path):
        self.home = home
        ns_port = free_port()
        self.ns = f"127.0.0.1:{ns_port}"
        (home / "ns.props").write_text("supportActingMaster=true\n")
        self.jvms: list[Jvm] = []
        namesrv = [str(KIT5 / "bin" / "namesrv"), "-p", str(ns_port), "-c", str(home / "ns.props")]
        self._jvm("namesrv", namesrv, "The Name Server boot success")
        self.a0, self.a1, self.b0 = (f"127.0.0.1:{broker_port()}" for _ in range(3))
        for name, addr, broker, broker_id in (("a0", self.a0, "broker-a", 0), ("b0", self.b0, "broker-b", 0),
                                              ("a1", self.a1, "broker-a", 1)):  # fmt: skip
            (home / name).mkdir()
            role = {"brokerId": str(broker_id), "brokerRole": "SLAVE"} if broker_id else {}
            port = int(addr.rsplit(":", 1)[1])
            write_broker_conf(home / name, self.ns, port, "DefaultCluster", broker, **BROKER, **role)
        self.master = self._broker("a0")
        self._broker("b0")
        self._broker("a1")
        for addr in (self.a0, self.b0, self.a1):
            wait_registered(self.ns, addr)

    def _jvm(self, name: str, args: list[str], ready: str) -> Jvm:
        jvm = Jvm(args, self.home / f"{name}-{len(self.jvms)}.out", kit5_env(self.home))
        self.jvms.append(jvm)
        jvm.wait_for(ready)
        return jvm

    def _broker(self, name: str) -> Jvm:
        return self._jvm(name, [str(KIT5 / "bin" / "broker"), "-c", str(self.home / name / "broker.conf")],
                         "boot success")  # fmt: skip

    def kill_master(self) -> None:
        self.master.proc.kill()
        self.master.proc.wait(10)

    def restart_master(self) -> None:
        self.master = self._broker("a0")

    def close(self) -> None:
        for jvm in reversed(self.jvms):  # the stores are thrown away: no 15 s shutdown
            jvm.proc.kill()
        for jvm in self.jvms:
            jvm.wait()


class RmqLayout:
    """``rmq serve`` processes; broker-b's also runs the NameServer."""

    def __init__(self, tmp: Path):
        self.b = Member(tmp, "b-master", "ASYNC_MASTER", brokerName="broker-b", supportActingMaster="true",
                        **BROKER).start()  # fmt: skip
        self.master = Member(tmp, "a-master", "ASYNC_MASTER", namesrv=self.b.namesrv, **BROKER)
        self.slave = Member(tmp, "a-slave", "SLAVE", namesrv=self.b.namesrv, **BROKER)
        self.master.start()
        self.slave.start()
        self.ns, self.a0, self.a1, self.b0 = (
            self.b.namesrv,
            self.master.broker,
            self.slave.broker,
            self.b.broker,
        )

    def kill_master(self) -> None:
        self.master.sigkill()

    def restart_master(self) -> None:
        self.master.start()

    def close(self) -> None:
        for member in (self.slave, self.master, self.b):
            member.kill()


# --- requests ----------------------------------------------------------------------------------
def send(addr: str, key: str, delay_level: int = 0) -> tuple[int, str | None]:
    """A SEND_MESSAGE_V2 to queue 0 (a client's properties; ``DELAY`` if ``delay_level``)."""
    props = f"KEYS\x01{key}\x02TAGS\x01t\x02UNIQ_KEY\x01U{key}{time.time_ns()}\x02WAIT\x01true\x02"
    if delay_level:
        props += f"DELAY\x01{delay_level}\x02"
    header = hd.SendMessageRequestHeaderV2(
        a="PG_SAMR", b=TOPIC, c="TBW102", d=4, e=0, f=0, g=int(time.time() * 1000), h=0, i=props
    )
    answer = call(addr, RC.SEND_MESSAGE_V2, header, f"body-{key}".encode(), timeout=10)
    return answer.code, answer.remark


def pull(addr: str, queue_id: int) -> tuple[int, list[str]]:
    """A PULL_MESSAGE of a queue from offset 0: the answer's code and the keys it carries."""
    header = hd.PullMessageRequestHeader(
        consumer_group=GROUP, topic=TOPIC, queue_id=queue_id, queue_offset=0, max_msg_nums=32,
        sys_flag=hd.PULL_FLAG_SUBSCRIPTION, commit_offset=0, suspend_timeout_millis=0, subscription="*",
        sub_version=0, expression_type="TAG",
    )  # fmt: skip
    answer = call(addr, RC.PULL_MESSAGE, header, timeout=10)
    keys = (
        [r.properties.get("KEYS", "") for r in body_records(answer.body or b"")] if answer.code == 0 else []
    )
    return answer.code, keys


def copies(layout: Layout, addrs: list[str], key: str) -> int:
    """How many messages with ``key`` the topic's queues on ``addrs`` hold."""
    return sum(pull(addr, q)[1].count(key) for addr in addrs for q in (0, 1))


def route(layout: Layout) -> dict[str, Any]:
    """broker-a in the topic's route: its addresses (by role name), perm and acting flag."""
    answer = call(layout.ns, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}, timeout=5)
    assert answer.code == RS.SUCCESS, answer.remark
    data = jb.decode(jb.TopicRouteData, answer.body)
    names = {layout.a0: "a0", layout.a1: "a1"}
    [a] = [b for b in data.broker_datas if b.broker_name == "broker-a"]
    [queues] = [q for q in data.queue_datas if q.broker_name == "broker-a"]
    return {
        "addrs": {i: names.get(addr, addr) for i, addr in a.broker_addrs.items()},
        "perm": queues.perm,
        "enableActingMaster": a.enable_acting_master,
    }


def commit(addr: str, offset: int) -> int:
    """UPDATE_CONSUMER_OFFSET of GROUP's queue 0; the answer's code."""
    header = hd.UpdateConsumerOffsetRequestHeader(consumer_group=GROUP, topic=TOPIC, queue_id=0,
                                                  commit_offset=offset)  # fmt: skip
    return call(addr, RC.UPDATE_CONSUMER_OFFSET, header, timeout=5).code


def max_offset(addr: str) -> int:
    """The broker's CommitLog end (GET_BROKER_RUNTIME_INFO)."""
    answer = call(addr, RC.GET_BROKER_RUNTIME_INFO, timeout=5)
    return int(jb.decode(jb.KVTable, answer.body).table["commitLogMaxOffset"])


# --- the scenario ------------------------------------------------------------------------------
def scenario(layout: Layout) -> dict[str, Any]:
    """What one layout shows, step by step."""
    seen: dict[str, Any] = {}
    made = rmq("updateTopic", "-n", layout.ns, "-c", "DefaultCluster", "-t", TOPIC, "-r", "2", "-w", "2")
    assert "success" in made, made
    keys = [f"m{i}" for i in range(4)]
    assert [send(layout.a0, key)[0] for key in keys] == [RS.SUCCESS] * 4
    # the slave knows the topic (5.1.1: its first SlaveSynchronize) and has the messages
    wait_until(lambda: pull(layout.a1, 0) == (RS.SUCCESS, keys), 150, "the slave serves the messages", 1)
    seen["route before"] = route(layout)
    assert send(layout.a0, "d0", delay_level=3)[0] == RS.SUCCESS  # due 8 s later, the master dead
    wait_until(lambda: max_offset(layout.a1) == max_offset(layout.a0), 20, "the slave has every byte")

    layout.kill_master()
    wait_until(lambda: route(layout)["addrs"] == {0: "a1"}, 30, "slave a routed as id 0")
    seen["route after kill"] = route(layout)
    seen["pull from acting slave"] = pull(layout.a1, 0)
    code, remark = send(layout.a1, "x0")
    # the remark names the disk's usage ratios at that moment ("[CL:  0.27 CQ:  0.27 INDEX:  0.27]")
    seen["send to acting slave"] = (code, re.sub(r"\d+\.\d+", "<ratio>", remark or ""))
    seen["commit on acting slave"] = commit(layout.a1, 3)
    seen["offset on acting slave"] = query_offset(layout.a1, GROUP, TOPIC, 0)
    wait_until(lambda: copies(layout, [layout.b0], "d0") > 0, 60, "the delayed message on broker-b", 0.5)
    seen["delayed copies while down"] = {"b0": copies(layout, [layout.b0], "d0"),
                                         "a1": copies(layout, [layout.a1], "d0")}  # fmt: skip

    layout.restart_master()
    wait_until(lambda: route(layout)["addrs"] == {0: "a0", 1: "a1"}, 60, "master a back in the route")
    seen["route after return"] = route(layout)
    # the offset committed on the acting slave, if the master takes it, within 15 s of its return
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and query_offset(layout.a0, GROUP, TOPIC, 0) != 3:
        time.sleep(0.5)
    seen["offset on returned master"] = query_offset(layout.a0, GROUP, TOPIC, 0)
    # a second copy of the delayed message, if the returning master delivered it again, comes
    # within its first ticks (the message is long due): look for 10 s
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and copies(layout, [layout.a0, layout.b0], "d0") == 1:
        time.sleep(0.5)
    seen["delayed copies after return"] = {"a0": copies(layout, [layout.a0], "d0"),
                                           "b0": copies(layout, [layout.b0], "d0")}  # fmt: skip
    return seen


@pytest.fixture(scope="module")
def shown(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(what the real 5.1.1 showed, what rmq serve showed)."""
    real = RealLayout(tmp_path_factory.mktemp("sam-real"))
    try:
        theirs = scenario(real)
    finally:
        real.close()
    ours_layout = RmqLayout(tmp_path_factory.mktemp("sam-rmq"))
    try:
        ours = scenario(ours_layout)
    finally:
        ours_layout.close()
    yield theirs, ours


STEPS = [
    "route before",
    "route after kill",
    "pull from acting slave",
    "send to acting slave",
    "commit on acting slave",
    "offset on acting slave",
    "delayed copies while down",
    "route after return",
    "offset on returned master",
    "delayed copies after return",
]
# Where rmq does not do what 5.1.1 does; each is a finding for rmqcli.
DIFFERENT = {
    "offset on returned master": "5.1.1's returning master does not have the offset committed on the "
    "acting slave (QUERY_CONSUMER_OFFSET does not succeed, -1 here, still 15 s after its return; "
    "its BrokerPreOnlineService takes the slave's offsets only when their data version is not older "
    "than its own); rmq's master answers 3, the slave's",
    "delayed copies after return": "5.1.1's returning master delivers the delayed message again into "
    "broker-a (one copy on a0 besides broker-b's escaped one: it did not take the slave's delay "
    "offsets); rmq's master does not (a0: 0)",
}


@pytest.mark.parametrize(
    "step",
    [
        pytest.param(s, marks=pytest.mark.xfail(strict=True, reason=DIFFERENT[s])) if s in DIFFERENT else s
        for s in STEPS
    ],
)
def test_rmq_acts_as_the_real_5_1_1_group(shown: tuple[dict[str, Any], dict[str, Any]], step: str) -> None:
    theirs, ours = shown
    assert ours[step] == theirs[step]
