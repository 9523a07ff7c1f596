"""``rmq serve`` brokers in a DLedger group with real 4.9.8 brokers (one rmq and two Java, two rmq
and one Java), the real C++ client sending and consuming through the group's NameServer:

- the route names the leader brokerId 0 and each follower its selfId's number + 1, in the real
  ``mqadmin clusterList`` too;
- a sync-send stream goes on through whichever member leads; a follower, rmq or Java, refuses a
  send straight to it with SERVICE_NOT_AVAILABLE; the leader is killed (-9) ten times, and more
  until every member has led, a new one is elected and takes the next sends, the killed one starts
  again and follows; ``rmq dledgerStatus`` shows every member in the leader's term (a Java leader's as
  its log says), and ``rmq leadershipTransfer`` moves the leadership to a member of the other kind;
- no acknowledged message is lost: a consumer gets every one and nothing that was not sent, and the
  members' logs are the same bytes wherever they all hold entries.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import pytest

from rmqcli.remoting import headers as hd
from rmqcli.remoting.client import SyncClient
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.dledger.test_replication_mixed import log_bytes
from tests.support.broker_drivers import Driver, start_consumer
from tests.support.components import require
from tests.support.dledger import (
    DATA_FILE_SIZE,
    ELECTION_MEDIAN_BOUND_S,
    GROUP,
    DLedgerGroup,
    agreed,
    dledger_group,
    dledger_status,
)
from tests.support.oracle import route_addrs
from tests.support.serve import ServeProcess, wait_until, write_conf

pytestmark = [pytest.mark.java, pytest.mark.cpp]

TOPIC = "TopicGroup"
KILLS = 10  # kills of the leader under the send stream, and more until every member has led
MAX_KILLS = 16


def route(g: DLedgerGroup) -> dict[int, str]:
    """brokerId -> selfId of the group in the NameServer's cluster info (what ``clusterList`` prints;
    asked in process: the waits poll it often)."""
    by_addr = {f"127.0.0.1:{p}": n for n, p in g.ports.items()}
    return {i: by_addr[a] for i, a in route_addrs(g.namesrv, GROUP).items() if a in by_addr}


def mqadmin_route(g: DLedgerGroup) -> dict[int, str]:
    """brokerId -> selfId of the group in the real ``mqadmin clusterList``."""
    by_addr = {f"127.0.0.1:{p}": n for n, p in g.ports.items()}
    out = {}
    for cols in (line.split() for line in g.mqadmin("clusterList").splitlines()):
        if len(cols) > 3 and cols[1] == GROUP and cols[3] in by_addr:
            out[int(cols[2])] = by_addr[cols[3]]
    return out


def settled_route(g: DLedgerGroup, timeout: float = 90) -> dict[int, str]:
    """The group's route once it names a leader and two followers."""
    deadline = time.monotonic() + timeout
    while True:
        ids = route(g)
        if len(ids) == 3 and 0 in ids:
            return ids
        assert time.monotonic() < deadline, f"no leader and two followers in the route: {ids}"
        time.sleep(0.2)


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


class Mixed:
    """The group's members: rmq serves for the selfIds not in ``g``'s Java ones, one interface."""

    def __init__(self, g: DLedgerGroup, tmp: Path, rmq_ids: tuple[str, ...]):
        self.g, self.rmq = g, {}
        peers = ";".join(f"{n}-{a}" for n, a in g.peers.items())
        for n in rmq_ids:
            conf = write_conf(
                tmp / f"{n}.conf", brokerName=GROUP, brokerIP1="127.0.0.1", enableDLegerCommitLog="true",
                dLegerGroup=GROUP, dLegerPeers=peers, dLegerSelfId=n,
                mappedFileSizeCommitLog=str(DATA_FILE_SIZE),
            )  # fmt: skip
            (g.home / n).mkdir(exist_ok=True)
            self.rmq[n] = ServeProcess(
                g.store(n), conf, ["--verbose", "--no-namesrv", "--namesrv", g.namesrv]
            )

    def start(self, n: str) -> None:
        if n in self.rmq:
            self.g.ports[n] = self.rmq[n].start().port
        else:
            self.g.start(n)

    def kill(self, n: str) -> None:
        if n in self.rmq:
            self.rmq[n].kill()
        else:
            self.g.kill(n)

    def running(self) -> list[str]:
        return [n for n, p in self.rmq.items() if p.proc and p.proc.poll() is None] + list(self.g.jvms)


@pytest.mark.parametrize("rmq_ids", [("n0",), ("n0", "n1")], ids=["one-rmq-two-java", "two-rmq-one-java"])
def test_every_member_leads_in_a_mixed_group(rmq, tmp_path: Path, rmq_ids: tuple[str, ...]) -> None:
    require("java")
    require("cpp")
    java = tuple(n for n in ("n0", "n1", "n2") if n not in rmq_ids)
    with dledger_group(tmp_path, java=java) as g:
        group = Mixed(g, tmp_path, rmq_ids)
        led: set[str] = set()
        try:
            for n in rmq_ids:
                group.start(n)
            g.leader()
            made = rmq(
                "updateTopic", "-n", g.namesrv, "-c", "DefaultCluster", "-t", TOPIC, "-r", "4", "-w", "4"
            )
            assert made.exit_code == 0, made.stdout + made.stderr
            load = Driver(
                tmp_path, "load", {"op": "load", "namesrv": g.namesrv, "topic": TOPIC, "prefix": "k"}
            )
            elections: list[float] = []
            try:
                for round_ in range(MAX_KILLS):
                    # a restarted member may start an election of its own: whoever leads now
                    ids = settled_route(g)  # the leader 0, each follower its selfId's number + 1
                    leader = ids[0]
                    assert set(ids) == {0, *(int(n[1:]) + 1 for n in ids.values() if n != leader)}, ids
                    before = sum("id" in e for e in load.events())
                    load.wait_for(
                        lambda ev, b=before: sum("id" in e for e in ev) >= b + 50, 120, f"round {round_}"
                    )
                    # a follower, rmq or Java, refuses a send as a 4.9.8 slave does
                    follower = next(n for n in ids.values() if n != leader)
                    code, remark = send_to(f"127.0.0.1:{g.ports[follower]}", f"d{round_}")
                    assert code == RS.SERVICE_NOT_AVAILABLE and remark.startswith("service not available now")
                    led.add(leader)
                    if round_ >= KILLS and len(led) == 3:
                        break
                    group.kill(leader)
                    killed_at = time.monotonic()
                    wait_until(
                        lambda o=leader: route(g).get(0) not in (None, o), 90, f"round {round_}: a leader"
                    )
                    elections.append(time.monotonic() - killed_at)
                    group.start(leader)
            finally:
                load.kill()  # its last send, if any, is in flight: the key after the last it printed
            events = load.events()
            acked = [e["key"] for e in events if "id" in e]
            attempted = {e["key"] for e in events if "key" in e}
            attempted.add(f"k{max(int(k[1:]) for k in attempted) + 1}")
            print(f"\n{len(elections)} leader kills, kill -> new leader in the route: "
                  f"{[round(e, 1) for e in elections]} s")  # fmt: skip
            assert statistics.median(elections) <= ELECTION_MEDIAN_BOUND_S, elections
            assert led == {"n0", "n1", "n2"}, led
            # rmq dledgerStatus: every member, rmq or Java, in the term of the leader the route names
            # (a Java leader's term as its own log says); then a transfer, to the other kind if any
            leader = settled_route(g)[0]
            rows = wait_until(
                lambda: rows if agreed(rows := dledger_status(rmq, g.namesrv)) == leader else None,
                30, "dledgerStatus agreeing with the route",
            )  # fmt: skip
            if leader not in group.rmq:
                assert rows[leader]["term"] == g.leader_term(leader)
            for n in group.rmq:
                assert 0 <= rows[n]["committedIndex"] <= rows[n]["endIndex"], rows[n]
            assert all(p["committedPos"] > 0 for p in rows.values()), rows
            others = [n for n in rows if n != leader]
            to = next((n for n in others if (n in group.rmq) != (leader in group.rmq)), others[0])
            moved = rmq("leadershipTransfer", "-n", g.namesrv, "-b", GROUP, "-t", to)
            assert moved.exit_code == 0, moved.stdout + moved.stderr
            wait_until(lambda: route(g).get(0) == to, 60, f"{to} leading in the route after the transfer")
            # the real mqadmin's clusterList shows the group as the route does: the leader 0, each
            # follower its selfId's number + 1
            shown = wait_until(
                lambda: r if len(r := mqadmin_route(g)) == 3 else None, 60, "mqadmin clusterList"
            )
            assert shown == settled_route(g) and shown[0] == to, shown
            consume = {"op": "consume", "namesrv": g.namesrv, "topic": TOPIC, "group": "CG_GROUP"}
            consumer = start_consumer(tmp_path, "consume", consume)
            try:
                consumed = consumer.wait_for(
                    lambda ev: set(acked) <= {e.get("key") for e in ev}, 120, "every acked message"
                )
            finally:
                consumer.kill()
            delivered = {e["key"] for e in consumed if "key" in e}
            assert delivered <= attempted, sorted(delivered - attempted)[:5]  # nothing that was not sent
            ends = {n: _data_end(g.store(n) / f"dledger-{n}") for n in group.running()}
            end = min(ends.values())
            some = next(iter(ends))
            first = log_bytes(g.store(some) / f"dledger-{some}", end)
            for n in ends:  # the entries every member holds are the same bytes
                assert log_bytes(g.store(n) / f"dledger-{n}", end) == first, n
            for p in group.rmq.values():
                assert p.stop() == 0
        finally:
            for p in group.rmq.values():
                p.kill()


def _data_end(home: Path) -> int:
    from rmqcli.store import Store

    store = Store.open(home.parent)
    try:
        return store.commitlog.max_offset()
    finally:
        store.close()
