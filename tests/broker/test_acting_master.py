"""SlaveActingMaster (RocketMQ 5.1.1) in ``rmq serve``, with real processes and the C++ client.

Two broker groups in one cluster: broker-a (an rmq master and an rmq slave) and broker-b (an rmq
master whose process also runs the NameServer, ``supportActingMaster=true``); every broker has
``enableSlaveActingMaster=true`` and ``enableRemoteEscape=true``. Broker-a's master is SIGKILLed.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from rmqcli.errors import CorruptDataError
from rmqcli.remoting import headers as hd
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.client import RemotingClient, SyncClient
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.store import Store
from tests.broker.test_ha_serve import Member, kill_under_load, stored_keys
from tests.support import JS
from tests.support.broker_drivers import Driver, run_driver, start_consumer
from tests.support.serve import wait_until
from tests.support.stores import ends_meet

TOPIC = "TopicSAM"
ACTING = {"enableSlaveActingMaster": "true", "enableRemoteEscape": "true"}
DELAYS = "1s 2s 8s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"  # level 3: 8 s


def route(ns: str) -> dict[str, dict]:
    """brokerName -> (brokerAddrs, perm) of the topic's route."""
    with SyncClient() as client:
        answer = client.invoke(ns, RemotingCommand.request(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}), 5)
    assert answer.code == RS.SUCCESS
    data = jb.decode(jb.TopicRouteData, answer.body)
    perms = {q.broker_name: q.perm for q in data.queue_datas}
    return {
        b.broker_name: {"addrs": dict(b.broker_addrs), "perm": perms[b.broker_name]}
        for b in data.broker_datas
    }


def placed(root: Path) -> dict[str, int]:
    """The queue of each message of the topic in a store, by key."""
    store = Store.open(root)
    try:
        return {
            rec.properties["KEYS"]: rec.queue_id for rec in store.commitlog.records() if rec.topic == TOPIC
        }
    finally:
        store.close()


def placed_live(root: Path) -> dict[str, int]:
    """``placed`` of a store its broker is writing: a record read while it is being copied in
    (its end not yet written) reads as none, so the caller's next poll sees it whole."""
    try:
        return placed(root)
    except CorruptDataError:
        return {}


def physical(root: Path) -> dict[str, int]:
    """The CommitLog offset of each message of the topic in a store, by key."""
    store = Store.open(root)
    try:
        return {
            rec.properties["KEYS"]: rec.physical_offset
            for rec in store.commitlog.records()
            if rec.topic == TOPIC
        }
    finally:
        store.close()


def retried(root: Path) -> set[str]:
    """Keys of the send-backs a store holds (parked for their delay, or in a retry topic)."""
    store = Store.open(root)
    try:
        return {
            rec.properties.get("KEYS", "")
            for rec in store.commitlog.records()
            if rec.properties.get("RETRY_TOPIC") == TOPIC
        }
    finally:
        store.close()


def broker_active(addr: str) -> str:
    with SyncClient() as client:
        answer = client.invoke(addr, RemotingCommand.request(RC.GET_BROKER_RUNTIME_INFO), 5)
    return jb.decode(jb.KVTable, answer.body).table["brokerActive"]


def send_delayed(addr: str, key: str, level: int) -> RemotingCommand:
    """A delayed send straight to ``addr`` (the C++ producer would pick either group), with a
    ``UNIQ_KEY`` as clients set it."""
    header = hd.SendMessageRequestHeader(
        producer_group="PG_DELAY", topic=TOPIC, default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=0, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0,
        properties=f"KEYS\x01{key}\x02TAGS\x01T\x02DELAY\x01{level}\x02UNIQ_KEY\x01U{key}\x02WAIT\x01true\x02",
    )  # fmt: skip
    with SyncClient() as client:
        return client.invoke(
            addr, RemotingCommand.request(RC.SEND_MESSAGE, header, b"body-" + key.encode()), 10
        )


@pytest.mark.cpp
def test_consumers_keep_receiving_and_a_delayed_message_is_escaped_once(rmq, tmp_path: Path) -> None:
    """Killed master a: the route names slave a as id 0 (read-only), the slave acts as master, a
    consumer started after the kill receives every message of both groups, and a delayed message
    sent to a before the kill, due during the outage, arrives once (sent to b by the slave).
    Restarted, master a takes the acting slave's offsets before it registers, takes its role back,
    and the consumer group reads nothing again."""
    b = Member(tmp_path, "b-master", "ASYNC_MASTER", brokerName="broker-b", supportActingMaster="true",
               messageDelayLevel=DELAYS, **ACTING).start()  # fmt: skip
    ns = b.namesrv
    master = Member(tmp_path, "a-master", "ASYNC_MASTER", namesrv=ns, messageDelayLevel=DELAYS, **ACTING)
    slave = Member(tmp_path, "a-slave", "SLAVE", namesrv=ns, slaveReadEnable="true", messageDelayLevel=DELAYS,
                   **ACTING)  # fmt: skip
    consumer = None
    try:
        master.start()
        slave.start()
        made = rmq("updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", TOPIC, "-r", "2", "-w", "2")
        assert made.exit_code == 0, made.stderr
        keys = [f"s{i}" for i in range(40)]
        sent = run_driver(tmp_path, "produce", {"op": "produce", "namesrv": ns, "topic": TOPIC, "keys": keys})
        assert all(e.get("status") == 0 for e in sent if "key" in e)
        assert send_delayed(master.broker, "d0", 3).code == RS.SUCCESS
        wait_until(ends_meet(slave.store, master.store), 20, "the slave has every byte of its master")
        assert broker_active(slave.broker) == "false"

        master.sigkill()
        wait_until(lambda: route(ns)["broker-a"]["addrs"] == {0: slave.broker}, 15, "slave a routed as id 0")
        assert route(ns)["broker-a"]["perm"] == 4  # read-only: producers send to b
        wait_until(lambda: broker_active(slave.broker) == "true", 10, "slave a acting as master")
        members = rmq("getBrokerMemberGroup", "-n", ns, "-c", "DefaultCluster", "-b", "broker-a")
        assert members.exit_code == 0, members.stderr
        assert members.stdout.splitlines()[1].split() == [
            "DefaultCluster",
            "broker-a",
            "1",
            slave.broker,
            "true",
        ]
        clusters = rmq("clusterList", "-n", ns).stdout.splitlines()
        assert clusters[0].split()[-1] == "#ACTIVATED"  # a group without its master is listed
        [row] = [line for line in clusters if slave.broker in line]
        assert row.split()[2] == "1" and row.split()[-1] == "true"

        consumer = Driver(
            tmp_path, "consume", {"op": "consume", "namesrv": ns, "topic": TOPIC, "group": "CG_SAM"}
        )
        wanted = set(keys) | {"d0"}
        consumer.wait_for(lambda ev: wanted <= {e.get("key") for e in ev}, 60, "every message, d0 included")
        # a second d0 (a second escape by the delay service, which found it due with the first, or
        # a redelivery) would come right after the first: 2 s is many pull rounds more
        time.sleep(2)
        got = [e["key"] for e in consumer.stop() if "key" in e]
        consumer = None
        assert got.count("d0") == 1
        assert "d0" in stored_keys(b.store)  # escaped: written by broker-b's master

        # a send-back to the acting slave goes to broker-b's master too (its retry topic is made there)
        key, offset = next((k, o) for k, o in physical(slave.store).items() if k.startswith("s"))
        back = hd.ConsumerSendMsgBackRequestHeader(
            offset=offset, group="CG_SAM", delay_level=1, origin_topic=TOPIC
        )
        with SyncClient() as client:
            answer = client.invoke(slave.broker, RemotingCommand.request(RC.CONSUMER_SEND_MSG_BACK, back), 10)
        assert answer.code == RS.SUCCESS, answer.remark
        wait_until(lambda: key in retried(b.store), 10, "the retry message on broker-b")

        master.start()
        wait_until(
            lambda: route(ns)["broker-a"]["addrs"] == {0: master.broker, 1: slave.broker}, 20, "master a back"
        )
        assert route(ns)["broker-a"]["perm"] == 6
        wait_until(lambda: broker_active(slave.broker) == "false", 10, "slave a no longer acting")
        wait_until(lambda: broker_active(master.broker) == "true", 10, "master a running its services")

        # the same group again: it starts from the offsets committed on the acting slave, which the
        # master took before it came back; the delayed message is not delivered a second time
        consumer = start_consumer(
            tmp_path, "consume2", {"op": "consume", "namesrv": ns, "topic": TOPIC, "group": "CG_SAM"}
        )
        after = [f"after{i}" for i in range(8)]
        run_driver(tmp_path, "produce2", {"op": "produce", "namesrv": ns, "topic": TOPIC, "keys": after})
        consumer.wait_for(lambda ev: set(after) <= {e.get("key") for e in ev}, 60, "the new messages")
        # old messages (offsets not taken over) or a second d0 would come with the first pulls,
        # which brought the new ones: 3 s is many pull rounds more
        time.sleep(3)
        again = [e for e in consumer.stop() if "key" in e]
        consumer = None
        assert sorted(e["key"] for e in again if e["times"] == 0) == sorted(after)  # duplicates: 0
        assert [e["key"] for e in again if e["times"] > 0] == [key]  # the send-back, once
        wait_until(ends_meet(slave.store, master.store), 20, "replication resumed")
    finally:
        if consumer is not None:
            consumer.stop()
        slave.kill()
        master.kill()
        b.kill()


@contextmanager
def two_groups(rmq, tmp: Path, **keys: str) -> Iterator[tuple[Member, Member, Member]]:  # type: ignore[no-untyped-def]
    """Broker-b's master (with the NameServer), broker-a's master and slave, all acting-master
    brokers, and TopicSAM on both groups; (b, a's master, a's slave)."""
    b = Member(
        tmp, "b-master", "ASYNC_MASTER", brokerName="broker-b", supportActingMaster="true", **ACTING, **keys
    )
    master = Member(tmp, "a-master", "ASYNC_MASTER", namesrv=b.namesrv, **ACTING, **keys)
    slave = Member(tmp, "a-slave", "SLAVE", namesrv=b.namesrv, slaveReadEnable="true", **ACTING, **keys)
    try:
        b.start()
        master.start()
        slave.start()
        made = rmq("updateTopic", "-n", b.namesrv, "-c", "DefaultCluster", "-t", TOPIC, "-r", "2", "-w", "2")
        assert made.exit_code == 0, made.stderr
        yield b, master, slave
    finally:
        slave.kill()
        master.kill()
        b.kill()


@pytest.mark.cpp
def test_a_half_message_unknown_at_the_kill_is_checked_back_through_another_group(
    rmq, tmp_path: Path
) -> None:
    """A transaction's half message on broker-a, no outcome when its master is killed: the acting
    slave sends it on to broker-b as a prepared message, broker-b checks it back with the producer,
    whose COMMIT delivers it there once; master a, back, does not check it again."""
    # checked 5 s after its birth: master a must not check it itself while the slave catches up
    fast = {"transactionCheckInterval": "1000", "transactionTimeOut": "5000"}
    with two_groups(rmq, tmp_path, **fast) as (b, master, slave):
        checks: list[str] = []

        async def producer() -> None:
            async with RemotingClient() as client:

                async def on_check(req: RemotingCommand, addr: str) -> None:
                    h = req.header(hd.CheckTransactionStateRequestHeader)
                    checks.append(addr)
                    end = hd.EndTransactionRequestHeader(
                        producer_group="PG_TX", tran_state_table_offset=h.tran_state_table_offset,
                        commit_log_offset=h.commit_log_offset, commit_or_rollback=8,
                        from_transaction_check=True, msg_id=h.msg_id or "", transaction_id=h.transaction_id,
                    )  # fmt: skip
                    await client.invoke_oneway(addr, RemotingCommand.request(RC.END_TRANSACTION, end))

                client.register(RC.CHECK_TRANSACTION_STATE, on_check)
                beat = jb.HeartbeatData(
                    client_id="127.0.0.1@tx", producer_data_set=[jb.ProducerData(group_name="PG_TX")]
                )
                for addr in (b.broker, master.broker):
                    answer = await client.invoke(
                        addr, RemotingCommand.request(RC.HEART_BEAT, None, jb.encode(beat)), 5
                    )
                    assert answer.code == RS.SUCCESS
                half = hd.SendMessageRequestHeader(
                    producer_group="PG_TX", topic=TOPIC, default_topic="TBW102", default_topic_queue_nums=4,
                    queue_id=1, sys_flag=4, born_timestamp=int(time.time() * 1000), flag=0,
                    properties="TRAN_MSG\x01true\x02PGROUP\x01PG_TX\x02KEYS\x01tx1\x02UNIQ_KEY\x01Utx1\x02WAIT\x01true",
                )  # fmt: skip
                sent = await client.invoke(
                    master.broker, RemotingCommand.request(RC.SEND_MESSAGE, half, b"tx-body"), 5
                )
                assert sent.code == RS.SUCCESS
                for _ in range(200):  # the slave has it before the master goes
                    if ends_meet(slave.store, master.store)():
                        break
                    await asyncio.sleep(0.1)
                master.sigkill()
                for _ in range(300):
                    if checks:
                        break
                    await asyncio.sleep(0.1)
                assert checks and set(checks) == {b.broker}  # broker-b asks, broker-a's slave never does
                consumer = Driver(
                    tmp_path, "txc", {"op": "consume", "namesrv": b.namesrv, "topic": TOPIC, "group": "CG_TX"}
                )
                try:
                    consumer.wait_for(
                        lambda ev: any(e.get("key") == "tx1" for e in ev), 60, "the committed message"
                    )
                    master.start()
                    for _ in range(300):
                        info = await client.invoke(
                            master.broker, RemotingCommand.request(RC.GET_BROKER_RUNTIME_INFO), 5
                        )
                        if jb.decode(jb.KVTable, info.body).table["brokerActive"] == "true":
                            break
                        await asyncio.sleep(0.1)
                    beat_a = RemotingCommand.request(RC.HEART_BEAT, None, jb.encode(beat))
                    assert (
                        await client.invoke(master.broker, beat_a, 5)
                    ).code == RS.SUCCESS  # reachable again
                    # master a's own checks run every second (transactionCheckInterval=1000): a
                    # check of tx1 would come within the first; 4 s gives it four chances
                    await asyncio.sleep(4)
                finally:
                    got = [e["key"] for e in consumer.stop() if "key" in e]
                assert got.count("tx1") == 1
                assert set(checks) == {b.broker}

        asyncio.run(producer())
    assert "tx1" in stored_keys(b.store)


def test_a_frozen_master_leaves_the_routes_within_15_seconds(rmq, tmp_path: Path) -> None:
    """SIGSTOP: the master's sockets stay open, only its heartbeats stop; the NameServer drops it
    ``brokerNotActiveTimeoutMillis`` (10 s) after the last one, at its next scan (every 5 s)."""
    import signal

    with two_groups(rmq, tmp_path) as (b, master, slave):
        ns = b.namesrv
        wait_until(
            lambda: route(ns)["broker-a"]["addrs"] == {0: master.broker, 1: slave.broker}, 10, "group a"
        )
        assert master.proc is not None
        removal = f"broker {master.broker}: silent for 10 s; removed"
        master.proc.send_signal(signal.SIGSTOP)
        frozen = time.time()
        try:
            # when the NameServer dropped it, by its own clock: the log file's mtime when the line
            # is the last one written (else when this test saw it, later), so that a loaded machine
            # slowing this test's polling does not move the time measured
            left = None
            deadline = time.monotonic() + 40
            while left is None:
                assert time.monotonic() < deadline, "master a not dropped within 40 s"
                text = b.output()
                if removal in text:
                    stat = b.log.stat()
                    last = text.rstrip("\n").endswith(removal) and b.output() == text
                    left = (stat.st_mtime if last else time.time()) - frozen
                time.sleep(0.02)
            wait_until(
                lambda: route(ns)["broker-a"]["addrs"] == {0: slave.broker}, 20, "slave a routed as id 0"
            )
            wait_until(lambda: broker_active(slave.broker) == "true", 10, "slave a acting as master")
        finally:
            master.proc.send_signal(signal.SIGCONT)
        # its silence (a heartbeat a second) began at most 1 s before the freeze; dropped at the
        # first scan (every 5 s) after 10 s of it: between 9 and 15 s after the freeze
        assert 9.0 <= left <= 15.5, left


@pytest.mark.cpp
def test_an_orderly_consumer_keeps_per_queue_order_through_the_kill_and_the_return(
    rmq, tmp_path: Path
) -> None:
    """The C++ orderly consumer locks its queues on whichever broker is id 0 of broker-a (the
    master, then the acting slave, then the master again); per queue, what it consumes comes in
    queue-offset order without a gap, and every acknowledged send is consumed."""
    with two_groups(rmq, tmp_path) as (b, master, slave):
        ns = b.namesrv
        consumer = Driver(
            tmp_path,
            "ordc",
            {"op": "consume", "namesrv": ns, "topic": TOPIC, "group": "CG_ORD", "orderly": True},
        )
        load = Driver(
            tmp_path, "ordp", {"op": "load", "namesrv": ns, "topic": TOPIC, "prefix": "o", "shards": 4}
        )
        try:
            consumed = lambda ev: sum("key" in e for e in ev)  # noqa: E731
            consumer.wait_for(lambda ev: consumed(ev) >= 100, 60, "messages before the kill")
            master.sigkill()
            at_kill = consumed(consumer.events())
            consumer.wait_for(lambda ev: consumed(ev) >= at_kill + 100, 90, "messages after the kill")
            master.start()
            wait_until(lambda: broker_active(master.broker) == "true", 30, "master a back")
            at_return = consumed(consumer.events())
            consumer.wait_for(lambda ev: consumed(ev) >= at_return + 100, 90, "messages after the return")
        finally:
            sends = load.stop()
        acked = {e["key"] for e in sends if "id" in e}
        try:
            consumer.wait_for(lambda ev: acked <= {e.get("key") for e in ev}, 60, "every acknowledged send")
        finally:
            events = [e for e in consumer.stop() if "key" in e]
    where = {key: ("a", q) for key, q in placed(master.store).items()}  # the messages' group and queue
    where.update({key: ("b", q) for key, q in placed(b.store).items()})
    by_queue: dict[tuple[str, int], list[int]] = {}
    for e in events:
        group, queue = where[e["key"]]
        assert queue == e["queue"]
        by_queue.setdefault((group, queue), []).append(e["offset"])
    assert len(by_queue) == 4  # both queues of both groups
    for queue, offsets in by_queue.items():
        first_seen = list(dict.fromkeys(offsets))  # a message given again after a failover counts once
        assert first_seen == list(range(first_seen[0], first_seen[0] + len(first_seen))), queue


@pytest.mark.cpp
@pytest.mark.js
def test_ali_ons_consumes_everything_while_the_master_is_down(rmq, tmp_path: Path) -> None:
    """ali-ons, a second 4.x client of its own, started after the kill: it reads broker-a's queues
    from the acting slave (id 0 in its route) and broker-b's from its master, each message once."""
    with two_groups(rmq, tmp_path) as (b, master, slave):
        ns = b.namesrv
        keys = [f"j{i}" for i in range(30)]
        sent = run_driver(tmp_path, "produce", {"op": "produce", "namesrv": ns, "topic": TOPIC, "keys": keys})
        assert all(e.get("status") == 0 for e in sent if "key" in e)
        assert set(placed(master.store)) & set(keys)  # some went to broker-a
        wait_until(ends_meet(slave.store, master.store), 20, "the slave has every byte of its master")
        master.sigkill()
        wait_until(lambda: route(ns)["broker-a"]["addrs"] == {0: slave.broker}, 15, "slave a routed as id 0")
        proc = subprocess.run(
            ["node", str(JS / "ons_consume.js"), ns, TOPIC, "CG_ONS_SAM", ",".join(keys)],
            cwd=tmp_path, capture_output=True, text=True, timeout=120,
            env={**os.environ, "HOME": str(tmp_path)},
        )  # fmt: skip
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, proc.stdout[-2000:] + proc.stderr[-2000:]
    got = json.loads(lines[0][len("RESULT ") :])["got"]
    assert sorted(got) == sorted(keys)


def lock(addr: str, client_id: str, only_this_broker: bool | None = None) -> list[int]:
    """LOCK_BATCH_MQ of broker-a's queues 0 and 1 for ``client_id``: the queue ids granted."""
    body = jb.LockBatchRequestBody(
        client_id=client_id,
        consumer_group="CG_LOCK",
        mq_set=[jb.MessageQueue(topic=TOPIC, broker_name="broker-a", queue_id=q) for q in (0, 1)],
        only_this_broker=only_this_broker,
    )
    with SyncClient() as client:
        answer = client.invoke(addr, RemotingCommand.request(RC.LOCK_BATCH_MQ, None, jb.encode(body)), 5)
    assert answer.code == RS.SUCCESS
    return sorted(mq.queue_id for mq in jb.decode(jb.LockBatchResponseBody, answer.body).lock_ok_mq_set)


def test_strict_mode_locks_need_a_majority_of_the_group(rmq, tmp_path: Path) -> None:
    """``lockInStrictMode`` with ``totalReplicas=2``: a lock granted by the master is forwarded to
    the slave, so another client cannot take it there; with the master dead the acting slave alone
    is one vote of two and grants nothing, as 5.1.1 does; ``onlyThisBroker`` locks locally."""
    with two_groups(rmq, tmp_path, lockInStrictMode="true", totalReplicas="2") as (b, master, slave):
        wait_until(
            lambda: route(b.namesrv)["broker-a"]["addrs"] == {0: master.broker, 1: slave.broker}, 10, "a"
        )
        # the master and the slave hold them for c1, once both know their member group (until
        # then the master alone is one vote of two and grants nothing)
        wait_until(lambda: lock(master.broker, "c1") == [0, 1], 20, "c1's locks on a's master and slave")
        assert lock(slave.broker, "c2") == []  # the slave holds them for c1 already
        assert lock(slave.broker, "c1", only_this_broker=True) == [0, 1]  # c1's own, locally
        master.sigkill()
        wait_until(lambda: broker_active(slave.broker) == "true", 15, "slave a acting as master")
        assert lock(slave.broker, "c1") == []  # one vote of two


@pytest.mark.cpp
def test_producers_send_on_to_broker_b_without_an_error_reaching_them(rmq, tmp_path: Path) -> None:
    """A sync-send stream across the kill of master a: the C++ producer's retries take every send
    to broker-b; none fails at the application."""
    with two_groups(rmq, tmp_path) as (b, master, slave):
        load = Driver(tmp_path, "load", {"op": "load", "namesrv": b.namesrv, "topic": TOPIC, "prefix": "p"})
        try:
            killed_at = kill_under_load(load, master)
        finally:
            events = load.stop()
    failed = [e for e in events if "key" in e and "id" not in e]
    assert failed == []
    after = [e["key"] for e in events[killed_at:] if "id" in e]
    assert set(after[20:]) <= set(placed(b.store))  # once the route changed, broker-b took them


def test_a_delayed_message_the_master_sent_on_is_not_sent_again_by_the_slave(rmq, tmp_path: Path) -> None:
    """The slave's delay offsets are the master's of its last sync (every 10 s). A delayed message
    the master delivered after that sync is in the replicated CommitLog: the acting slave finds it
    (its index, by UNIQ_KEY) and does not send it to broker-b a second time."""
    with two_groups(rmq, tmp_path, messageDelayLevel=DELAYS) as (b, master, slave):
        wait_until(lambda: "updated slave" in slave.output(), 20, "the slave's first sync from its master")
        assert send_delayed(master.broker, "d1", 1).code == RS.SUCCESS  # level 1: 1 s
        wait_until(lambda: "d1" in placed_live(master.store), 10, "d1 delivered by master a")
        wait_until(ends_meet(slave.store, master.store), 10, "the slave has it")
        master.sigkill()
        wait_until(lambda: broker_active(slave.broker) == "true", 15, "slave a acting as master")
        # a stale level 1 offset would make the acting slave deliver d1 again at once (it was due 1 s
        # after the send, long past); 3 s is the level's delay three times over
        time.sleep(3)
    assert "d1" not in stored_keys(b.store)


def test_a_returning_master_keeps_the_queue_locks_the_acting_slave_granted(rmq, tmp_path: Path) -> None:
    """An orderly consumer c1 locks broker-a's queues on the acting slave; master a, back, took
    those locks before it registered: c2 cannot lock them there, c1 renews them."""
    with two_groups(rmq, tmp_path) as (b, master, slave):
        master.sigkill()
        wait_until(lambda: broker_active(slave.broker) == "true", 15, "slave a acting as master")
        assert lock(slave.broker, "c1") == [0, 1]
        master.start()
        wait_until(lambda: route(b.namesrv)["broker-a"]["addrs"].get(0) == master.broker, 20, "master a back")
        assert lock(master.broker, "c2") == []
        assert lock(master.broker, "c1") == [0, 1]


def test_a_pull_held_on_the_acting_slave_is_answered_when_the_master_returns(rmq, tmp_path: Path) -> None:
    """``notifyMasterOnline``: a long-polling pull held on the acting slave (60 s) is answered as
    soon as the slave sees its master again, so that its consumer goes back to the master."""
    with two_groups(rmq, tmp_path) as (b, master, slave):
        assert send_delayed(master.broker, "h0", 0).code == RS.SUCCESS  # level 0: not delayed; queue 0
        wait_until(ends_meet(slave.store, master.store), 10, "the slave has it")
        wait_until(lambda: "updated slave topics" in slave.output(), 20, "the slave knows the topic")
        master.sigkill()
        wait_until(lambda: broker_active(slave.broker) == "true", 15, "slave a acting as master")

        async def held_pull() -> float:
            header = hd.PullMessageRequestHeader(
                consumer_group="CG_HOLD", topic=TOPIC, queue_id=0, queue_offset=1, max_msg_nums=32,
                sys_flag=hd.PULL_FLAG_SUSPEND | hd.PULL_FLAG_SUBSCRIPTION, commit_offset=0,
                suspend_timeout_millis=60000, subscription="*", sub_version=0,
            )  # fmt: skip
            async with RemotingClient() as client:
                pull = asyncio.ensure_future(
                    client.invoke(slave.broker, RemotingCommand.request(RC.PULL_MESSAGE, header), 90)
                )
                # held: nothing past offset 1, and an answer would come at once (60 s suspend)
                await asyncio.sleep(1.0)
                assert not pull.done(), pull.result().describe()
                started = time.monotonic()
                await asyncio.to_thread(master.start)
                answer = await pull
                assert answer.code == RS.PULL_NOT_FOUND
                return time.monotonic() - started

        # master a's start and one member-group period (~5 s alone, 13 s seen on a loaded machine),
        # far from the 60 s the pull would otherwise be held
        assert asyncio.run(held_pull()) < 30


@pytest.mark.java
def test_the_java_4_9_8_client_consumes_everything_while_the_master_is_down(rmq, tmp_path: Path) -> None:
    """The real 4.9.8 Java client (the kit's ``bin/clienttest``, DefaultMQPushConsumer of a fresh
    group from the first offset), started after the kill, receives every message of both groups."""
    from tests.support.oracle import KIT

    with two_groups(rmq, tmp_path) as (b, master, slave):
        ns = b.namesrv
        for name in ("broker-a", "broker-b"):  # 15 messages to each group, straight to its master
            addr = master.broker if name == "broker-a" else b.broker
            for i in range(15):
                assert send_delayed(addr, f"{name}-{i}", 0).code == RS.SUCCESS
        wait_until(ends_meet(slave.store, master.store), 20, "the slave has every byte of its master")
        master.sigkill()
        wait_until(lambda: route(ns)["broker-a"]["addrs"] == {0: slave.broker}, 15, "slave a routed as id 0")
        env = {k: v for k, v in os.environ.items() if k != "JAVA_OPT_EXT"}
        env["ORACLE_STATE_DIR"] = str(tmp_path / "java-state")
        consumed = subprocess.run(
            [str(KIT / "bin" / "clienttest"), ns, TOPIC, "30", "consume", "60"],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=180,
        )  # fmt: skip
    assert "received=30 distinct=30" in consumed.stdout, consumed.stdout[-2000:] + consumed.stderr[-2000:]
    assert consumed.returncode == 0
