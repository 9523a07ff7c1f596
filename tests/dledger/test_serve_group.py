"""``rmq serve`` as a broker of a DLedger group beside two real 4.9.8 brokers (n1, n2), with the real
C++ client sending and consuming through the group's NameServer:

- the route names the leader brokerId 0 and each follower its selfId's number + 1 (rmq's n0: 1);
- sends are acknowledged through whichever member leads, rmq or Java; the leader is killed (-9)
  and a new one elected takes the next sends, rounds on until rmq has both led and followed;
- no acknowledged message is lost: a consumer gets every one, and rmq's log holds the same bytes
  as a Java member's (the entries every running member holds).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rmqcli.remoting import headers as hd
from rmqcli.remoting.client import SyncClient
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.dledger.test_replication_mixed import log_bytes
from tests.support.broker_drivers import Driver, run_driver
from tests.support.components import require
from tests.support.dledger import DATA_FILE_SIZE, GROUP, DLedgerGroup, dledger_group
from tests.support.serve import ServeProcess, wait_until, write_conf

pytestmark = [pytest.mark.java, pytest.mark.cpp]

TOPIC = "TopicGroup"


def route(g: DLedgerGroup) -> dict[int, str]:
    """brokerId -> selfId of the group in ``mqadmin clusterList``."""
    by_addr = {f"127.0.0.1:{p}": n for n, p in g.ports.items()}
    out = {}
    for cols in (line.split() for line in g.mqadmin("clusterList").splitlines()):
        if len(cols) > 3 and cols[1] == GROUP and cols[3] in by_addr:
            out[int(cols[2])] = by_addr[cols[3]]
    return out


def send_to(addr: str, key: str) -> tuple[int, str]:
    """A send straight to one member's broker port: (code, remark)."""
    header = hd.SendMessageRequestHeader(
        producer_group="PG_DIRECT", topic=TOPIC, default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=0, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0,
        properties=f"KEYS\x01{key}\x02UNIQ_KEY\x01U{key}\x02WAIT\x01true\x02",
    )  # fmt: skip
    with SyncClient() as client:
        answer = client.invoke(addr, RemotingCommand.request(RC.SEND_MESSAGE, header, b"direct"), 10)
    return answer.code, answer.remark or ""


def produce(tmp: Path, g: DLedgerGroup, name: str, keys: list[str]) -> list[str]:
    events = run_driver(tmp, name, {"op": "produce", "namesrv": g.namesrv, "topic": TOPIC, "keys": keys}, 120)
    acked = [e["key"] for e in events if e.get("status") == 0]
    assert acked == keys, events[-5:]
    return acked


def test_rmq_serve_leads_and_follows_in_a_group_with_java_brokers(rmq, tmp_path: Path) -> None:
    require("java")
    require("cpp")
    with dledger_group(tmp_path, java=("n1", "n2")) as g:
        conf = write_conf(
            tmp_path / "n0.conf", brokerName=GROUP, brokerIP1="127.0.0.1", enableDLegerCommitLog="true",
            dLegerGroup=GROUP, dLegerPeers=";".join(f"{n}-{a}" for n, a in g.peers.items()),
            dLegerSelfId="n0", mappedFileSizeCommitLog=str(DATA_FILE_SIZE),
        )  # fmt: skip
        member = ServeProcess(g.store("n0"), conf, ["--verbose", "--no-namesrv", "--namesrv", g.namesrv])
        member.start()
        g.ports["n0"] = member.port
        acked: list[str] = []
        seen = {"rmq led": False, "rmq followed": False}
        try:
            leader = g.leader()
            made = rmq(
                "updateTopic", "-n", g.namesrv, "-c", "DefaultCluster", "-t", TOPIC, "-r", "4", "-w", "4"
            )
            assert made.exit_code == 0, made.stdout + made.stderr
            for round_ in range(6):
                wait_until(lambda: len(route(g)) == 3, 60, "all three members in the route")
                ids = route(g)
                assert ids[0] == leader and set(ids) == {
                    0,
                    *(int(n[1:]) + 1 for n in ids.values() if n != leader),
                }
                acked += produce(tmp_path, g, f"p{round_}", [f"k{round_}-{i}" for i in range(100)])
                # a follower, rmq or Java, refuses a send as a 4.9.8 slave does
                follower = next(n for n in ids.values() if n != leader)
                code, remark = send_to(f"127.0.0.1:{g.ports[follower]}", f"d{round_}")
                assert (code, remark.startswith("service not available now")) == (
                    RS.SERVICE_NOT_AVAILABLE,
                    True,
                )
                seen["rmq led" if leader == "n0" else "rmq followed"] = True
                if all(seen.values()):
                    break
                if leader == "n0":
                    member.kill()
                else:
                    g.kill(leader)
                old, leader = leader, g.leader(not_=leader)
                if old == "n0":
                    member.start()
                else:
                    g.start(old)
            assert all(seen.values()), seen
            # every acknowledged message is consumed
            consumer = Driver(tmp_path, "consume", {"op": "consume", "namesrv": g.namesrv, "topic": TOPIC,
                                                   "group": "CG_GROUP"})  # fmt: skip
            try:
                consumer.wait_for(
                    lambda ev: set(acked) <= {e.get("key") for e in ev}, 120, "every acked message"
                )
            finally:
                consumer.stop()
            assert member.stop() == 0
        finally:
            member.kill()
        home = g.store("n0") / "dledger-n0"
        java = next(n for n in ("n1", "n2") if n in g.jvms)
        theirs = g.store(java) / f"dledger-{java}"
        end = min(_data_end(home), _data_end(theirs))
        assert end > 0 and log_bytes(home, end) == log_bytes(theirs, end)


def _data_end(home: Path) -> int:
    from rmqcli.store import Store

    store = Store.open(home.parent)
    try:
        return store.commitlog.max_offset()
    finally:
        store.close()
