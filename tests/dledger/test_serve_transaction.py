"""The transaction check of three ``rmq serve`` members in one DLedger group runs on the leader only
and follows the leadership, as 4.9.8's ``changeSpecialServiceStatus`` from
``DLedgerRoleChangeHandler`` (changeToMaster / changeToSlave) has it.

The NameServer runs in a fourth ``rmq serve`` of another cluster (it creates no topics), as in
``test_serve_kill_rounds.py``; the members check every second (``transactionCheckInterval``) the half
messages older than a second (``transactionTimeOut``). A transactional producer of group PG_TX (rmq's
own ``RemotingClient``) heartbeats to every live member each second, records the broker each
CHECK_TRANSACTION_STATE comes from, and answers only the checks of the broker it was told to:

- the leader acknowledges a half message (tx1) once the group's majority holds it and is killed
  (-9) at once, before it could check it; the member elected next checks it back, and only it: the
  producer's COMMIT to it delivers tx1 to a C++ consumer once. The killed member, started again,
  follows, catches up and never checks; once it holds the leader's check offsets it takes the
  leadership back (``rmq leadershipTransfer``) and checks nothing either: tx1 is still stored once.
  (The op message names the half message as the check stored it again, so the first copy is
  passed over only by the check offset the follower copied from the leader, ``SlaveSynchronize``.)
  Throughout, ``brokerActive`` (``isSpecialServiceRunning``) is true on the leader only.
- a ROLLBACK answered to the new leader's check stores nothing: a plain message sent afterwards to
  the same queue is the first one there.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from formats.names import TRANS_CHECK_GROUP, TRANS_HALF_TOPIC
from rmqcli.errors import NetworkError
from rmqcli.remoting import headers as hd
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.client import RemotingClient
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.support.broker_drivers import Driver, start_consumer
from tests.support.dledger import GROUP, SELF_IDS, agreed, dledger_status, leader_in_route, serve_group
from tests.support.serve import ServeProcess, wait_until

pytestmark = pytest.mark.cpp

TOPIC = "TopicTxLeader"
QUEUE = 1  # the half messages' queue, and the plain ones' that follow them
COMMIT, ROLLBACK = 8, 12
INTERVAL = 1.0  # transactionCheckInterval and transactionTimeOut, in seconds
T = TypeVar("T")


@dataclass(frozen=True)
class Check:
    addr: str  # the broker that asked
    at: float  # time.time() when the producer got it
    transaction_id: str


class TxProducer:
    """A transactional producer of group PG_TX on its own event-loop thread: heartbeats with its
    producer data to each address of ``members`` every second, so that any member could ask it (a
    4.9.8 producer heartbeats the master only and reaches a new leader after its next route
    refresh), records every CHECK_TRANSACTION_STATE, and answers a check (END_TRANSACTION,
    ``fromTransactionCheck``, to the broker that asked) when ``answer`` names that broker, once per
    transaction."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.client = RemotingClient()
        self.client.register(RC.CHECK_TRANSACTION_STATE, self._on_check)
        self.members: set[str] = set()
        self.checks: list[Check] = []
        self.answer: dict[str, int] = {}  # broker address -> COMMIT or ROLLBACK for its checks
        self.answered: dict[str, str] = {}  # transaction id -> the broker answered
        self._beats = asyncio.run_coroutine_threadsafe(self._beat_loop(), self.loop)

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _on_check(self, req: RemotingCommand, addr: str) -> None:
        h = req.header(hd.CheckTransactionStateRequestHeader)
        self.checks.append(Check(addr, time.time(), h.transaction_id or ""))
        outcome = self.answer.get(addr)
        if outcome is None or h.transaction_id in self.answered:
            return
        self.answered[h.transaction_id] = addr
        end = hd.EndTransactionRequestHeader(
            producer_group="PG_TX", tran_state_table_offset=h.tran_state_table_offset,
            commit_log_offset=h.commit_log_offset, commit_or_rollback=outcome,
            from_transaction_check=True, msg_id=h.msg_id or "", transaction_id=h.transaction_id,
        )  # fmt: skip
        await self.client.invoke_oneway(addr, RemotingCommand.request(RC.END_TRANSACTION, end))

    async def beat(self, addr: str) -> int:
        """One HEART_BEAT with the producer group; its response code."""
        data = jb.HeartbeatData(
            client_id="127.0.0.1@tx", producer_data_set=[jb.ProducerData(group_name="PG_TX")]
        )
        return (
            await self.client.invoke(addr, RemotingCommand.request(RC.HEART_BEAT, None, jb.encode(data)), 3)
        ).code

    async def _beat_loop(self) -> None:
        while True:
            for addr in sorted(self.members):
                try:
                    await self.beat(addr)
                except NetworkError:  # a killed member
                    pass
            await asyncio.sleep(1)

    async def send(self, addr: str, key: str, transactional: bool) -> int:
        """SEND_MESSAGE of ``key`` to queue ``QUEUE``: a half message (sysFlag PREPARED, ``TRAN_MSG``)
        or a plain one; the response code."""
        props = f"KEYS\x01{key}\x02UNIQ_KEY\x01U{key}\x02WAIT\x01true"
        if transactional:
            props = f"TRAN_MSG\x01true\x02PGROUP\x01PG_TX\x02{props}"
        header = hd.SendMessageRequestHeader(
            producer_group="PG_TX", topic=TOPIC, default_topic="TBW102", default_topic_queue_nums=4,
            queue_id=QUEUE, sys_flag=4 if transactional else 0, born_timestamp=int(time.time() * 1000),
            flag=0, properties=props,
        )  # fmt: skip
        request = RemotingCommand.request(RC.SEND_MESSAGE, header, f"body-{key}".encode())
        return (await self.client.invoke(addr, request, 10)).code

    async def half_offset(self, addr: str) -> int | None:
        """The half queue's check offset (``CID_RMQ_SYS_TRANS``) in the broker's GET_ALL_CONSUMER_OFFSET."""
        answer = await self.client.invoke(addr, RemotingCommand.request(RC.GET_ALL_CONSUMER_OFFSET), 3)
        assert answer.code == RS.SUCCESS
        table = jb.decode(jb.ConsumerOffsetSerializeWrapper, answer.body).offset_table
        return table.get(f"{TRANS_HALF_TOPIC}@{TRANS_CHECK_GROUP}", {}).get(0)

    def active(self, addr: str) -> str:
        """``brokerActive`` of the broker's runtime info: whether its transaction check and delayed
        delivery run (``isSpecialServiceRunning``)."""

        async def ask() -> str:
            answer = await self.client.invoke(addr, RemotingCommand.request(RC.GET_BROKER_RUNTIME_INFO), 3)
            return jb.decode(jb.KVTable, answer.body).table["brokerActive"]

        return self.call(ask())

    async def topics(self, addr: str) -> set[str]:
        answer = await self.client.invoke(addr, RemotingCommand.request(RC.GET_ALL_TOPIC_CONFIG), 3)
        return set(jb.decode(jb.TopicConfigSerializeWrapper, answer.body).topic_config_table)

    def close(self) -> None:
        self._beats.cancel()
        self.call(self.client.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@dataclass
class FailedOver:
    """A half message acknowledged by the first leader, which was killed at once; the new leader."""

    ns: str
    members: dict[str, ServeProcess]
    producer: TxProducer
    first: str  # selfId of the killed leader
    leader: str  # selfId of the leader elected after the kill
    killed_at: float

    def addr(self, self_id: str) -> str:
        return self.members[self_id].broker

    def assert_no_failed_check(self) -> None:
        """No member's log has a check run that failed (a follower's, whose puts are refused)."""
        for n, m in self.members.items():
            assert "transaction check failed" not in m.output(), (n, m.log)

    def leader_at(self, check: Check) -> bool:
        """The check came from the first leader before its kill or from the new leader."""
        if check.addr == self.addr(self.first):
            return check.at <= self.killed_at + 1  # one already on its way when it died
        return check.addr == self.addr(self.leader)


@contextmanager
def failed_over(rmq, tmp_path: Path, key: str, outcome: int) -> Iterator[FailedOver]:  # type: ignore[no-untyped-def]
    """Three members and the NameServer; the producer heartbeats to the three, sends the half message
    ``key`` to the leader (SUCCESS: the majority holds it) which is killed at once; once another
    member is brokerId 0 in the route the producer answers its checks with ``outcome``."""
    producer = TxProducer()
    with serve_group(
        tmp_path,
        transactionCheckInterval=str(int(INTERVAL * 1000)),
        transactionTimeOut=str(int(INTERVAL * 1000)),
    ) as group:
        ns, members, by_addr = group.namesrv, group.members, group.by_addr
        try:
            first = group.leader(timeout=30)
            made = rmq("updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", TOPIC, "-r", "4", "-w", "4")
            assert made.exit_code == 0, made.stdout + made.stderr
            # the followers copy the leader's topics (every 10 s): whoever leads next routes the topic
            for m in members.values():
                wait_until(
                    lambda a=m.broker: TOPIC in producer.call(producer.topics(a)),
                    30,
                    f"{TOPIC} on {m.broker}",
                )
                assert producer.call(producer.beat(m.broker)) == RS.SUCCESS
            producer.members = set(by_addr)
            assert producer.call(producer.send(members[first].broker, key, True)) == RS.SUCCESS
            members[first].kill()  # well within transactionTimeOut of the send: too young to check yet
            killed_at = time.time()
            producer.members.discard(members[first].broker)
            leader = group.leader(not_=first)
            producer.answer = {members[leader].broker: outcome}
            wait_until(
                lambda: producer.active(members[leader].broker) == "true", 30, "the new leader's check"
            )
            (follower,) = set(SELF_IDS) - {first, leader}
            assert producer.active(members[follower].broker) == "false"
            yield FailedOver(ns, members, producer, first, leader, killed_at)
        finally:
            producer.close()


def consumer(tmp_path: Path, ns: str, name: str, group: str) -> Driver:
    """A C++ push consumer of a new group; one thread, so a queue's messages come in offset order."""
    cmd = {"op": "consume", "namesrv": ns, "topic": TOPIC, "group": group, "threads": 1}
    return start_consumer(tmp_path, name, cmd)


def test_the_new_leader_checks_back_the_killed_leaders_half_message_and_only_it(rmq, tmp_path: Path) -> None:
    with failed_over(rmq, tmp_path, "tx1", COMMIT) as run:
        producer, first, leader = run.producer, run.first, run.leader
        wait_until(lambda: "Utx1" in producer.answered, 60, "a check of tx1 from the new leader, answered")
        assert producer.answered == {"Utx1": run.addr(leader)}
        committed_at = time.time()
        c1 = consumer(tmp_path, run.ns, "txc", "CG_TX")
        try:
            c1.wait_for(lambda ev: any(e.get("key") == "tx1" for e in ev), 90, "tx1 committed")
            consumed_at = time.time()
            # the killed member starts again and follows: it catches up with the leader's log and
            # copies its offsets, the check offset of the half queue among them (SlaveSynchronize)
            run.members[first].start()
            assert producer.call(producer.beat(run.addr(first))) == RS.SUCCESS  # it could ask now
            producer.members.add(run.addr(first))
            wait_until(
                lambda: agreed(rows := dledger_status(rmq, run.ns)) == leader
                and len({p["committedIndex"] for p in rows.values()}) == 1,
                60, "the restarted member level with the leader",
            )  # fmt: skip
            assert producer.active(run.addr(first)) == "false"
            leader_offset = producer.call(producer.half_offset(run.addr(leader)))
            assert leader_offset is not None and leader_offset >= 1
            wait_until(
                lambda: producer.call(producer.half_offset(run.addr(first)))
                == producer.call(producer.half_offset(run.addr(leader))),
                30, "the leader's check offsets on the restarted member",
            )  # fmt: skip
            seen = len(producer.checks)
            # nothing may happen now: three check intervals (and one more) in which no member, the
            # restarted one included, asks about the resolved tx1 again
            time.sleep(4 * INTERVAL)
            assert producer.checks[seen:] == []
        finally:
            got = [e["key"] for e in c1.stop() if "key" in e]
        assert got.count("tx1") == 1, got
        # the restarted member leads again; the op of tx1 is in the log it replicated and it
        # checks from the offset it copied: no check of tx1
        moved = rmq("leadershipTransfer", "-n", run.ns, "-b", GROUP, "-t", first, "--json")
        assert moved.exit_code == 0, moved.stdout + moved.stderr
        by_addr = {m.broker: n for n, m in run.members.items()}
        wait_until(lambda: leader_in_route(run.ns, by_addr) == first, 30, "the first leader back")
        wait_until(lambda: producer.active(run.addr(first)) == "true", 30, "its transaction check running")
        wait_until(lambda: producer.active(run.addr(leader)) == "false", 30, "the old leader's check stopped")
        # nothing may happen now either: three check intervals (and one more) of the first leader
        time.sleep(4 * INTERVAL)
        after = producer.call(producer.send(run.addr(first), "after", False))
        assert after == RS.SUCCESS
        c2 = consumer(tmp_path, run.ns, "txc2", "CG_TX_AFTER")
        try:
            c2.wait_for(
                lambda ev: any(e.get("key") == "after" for e in ev), 90, "the plain message after tx1"
            )
        finally:
            got = [e["key"] for e in c2.stop() if "key" in e]
        checks = producer.checks
        assert got.count("tx1") == 1, got
        assert checks[seen:] == []  # none from the moment the restarted member was level
        assert checks and all(c.transaction_id == "Utx1" for c in checks)
        assert all(run.leader_at(c) for c in checks), checks
        assert run.addr(leader) in {c.addr for c in checks}
        follower = next(n for n in SELF_IDS if n not in (first, leader))
        assert run.addr(follower) not in {c.addr for c in checks}
        run.assert_no_failed_check()
        early = [c for c in checks if c.addr == run.addr(first)]
        first_check = min(c.at for c in checks if c.addr == run.addr(leader)) - run.killed_at
        print(
            f"\nnew leader {leader} ({first} killed): its first check {first_check:.1f} s after the kill, "
            f"tx1 consumed {consumed_at - committed_at:.1f} s after the answer; {len(checks)} checks in all, "
            f"{len(early)} from {first} before its kill"
        )


def test_a_rollback_answered_to_the_new_leader_stores_nothing(rmq, tmp_path: Path) -> None:
    with failed_over(rmq, tmp_path, "tx2", ROLLBACK) as run:
        producer = run.producer
        wait_until(lambda: "Utx2" in producer.answered, 60, "a check of tx2 from the new leader, answered")
        assert producer.call(producer.send(run.addr(run.leader), "plain", False)) == RS.SUCCESS
        c = consumer(tmp_path, run.ns, "txr", "CG_TX_RB")
        try:
            events = c.wait_for(lambda ev: any(e.get("key") == "plain" for e in ev), 90, "the plain message")
        finally:
            c.stop()
        seen = len(producer.checks)
        # nothing may happen now: three check intervals (and one more) in which a half message
        # left without its op would be checked again
        time.sleep(4 * INTERVAL)
        assert producer.checks[seen:] == []
        assert [e["key"] for e in events if "key" in e] == ["plain"]
        (plain,) = [e for e in events if e.get("key") == "plain"]
        assert (plain["queue"], plain["offset"]) == (QUEUE, 0)  # nothing was stored before it
        assert all(run.leader_at(ch) for ch in producer.checks), producer.checks
        run.assert_no_failed_check()
