"""``rmq serve`` with the real C++ client (PyPI ``rocketmq`` 0.4.4): RECONSUME_LATER and redelivery
through the retry topic and the delay levels, and a second PushConsumer joining a group (rebalance
after NOTIFY_CONSUMER_IDS_CHANGED). The client runs in driver processes (``tests.support.broker_drivers``).
"""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path

import pytest

from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.support.broker_drivers import Driver, run_driver, start_consumer
from tests.support.serve import LEVELS, ServeProcess, invoke, run, wait_until, write_conf

pytestmark = pytest.mark.cpp


def test_reconsume_later_comes_back_through_the_retry_topic(tmp_path: Path) -> None:
    conf = write_conf(tmp_path / "broker.conf", messageDelayLevel=LEVELS)
    keys = [f"rl{i}" for i in range(8)]
    fail = keys[::3]  # rl0, rl3, rl6: RECONSUME_LATER on the first delivery
    with ServeProcess(tmp_path / "store", conf) as server:
        ns = server.namesrv
        run_driver(tmp_path, "warm", {"op": "produce", "namesrv": ns, "topic": "TopicRL", "keys": ["warm"]})
        consumer = Driver(
            tmp_path,
            "consume",
            {"op": "consume", "namesrv": ns, "group": "CG_RL", "topic": "TopicRL", "fail": fail},
        )  # noqa: E501
        try:
            consumer.wait_for(lambda ev: any(e.get("key") == "warm" for e in ev), 40, "the first message")
            # one message per pull: the client sends back the whole batch a failed message came in
            sent = run_driver(
                tmp_path,
                "produce",
                {
                    "op": "produce",
                    "namesrv": ns,
                    "topic": "TopicRL",
                    "keys": keys,
                    "after": str(consumer.out),
                },
            )  # noqa: E501
            assert all(e["status"] == 0 for e in sent if "key" in e)
            consumer.wait_for(
                lambda ev: {e["key"] for e in ev if e.get("times") == 1} >= set(fail),
                60,
                "redelivery of the failed messages",
            )
            time.sleep(1)  # nothing else may come back
        finally:
            events = consumer.stop()
    deliveries = [e for e in events if e.get("key") in keys]
    first = Counter(e["key"] for e in deliveries if e["times"] == 0)
    again = [e for e in deliveries if e["times"] == 1]
    assert first == Counter(keys)
    assert sorted(e["key"] for e in again) == sorted(fail)  # only the failed ones, once
    assert all(e["topic"] == "TopicRL" for e in again)  # the client restores RETRY_TOPIC
    assert all(e["len"] == len("body-" + e["key"]) for e in deliveries)
    assert {e["id"] for e in again} == {e["id"] for e in deliveries if e["key"] in fail and e["times"] == 0}


def test_a_cpp_delayed_message_arrives_after_its_delay(tmp_path: Path) -> None:
    conf = write_conf(tmp_path / "broker.conf", messageDelayLevel=LEVELS)  # level 2 is 2 s here
    keys = [f"dl{i}" for i in range(3)]
    with ServeProcess(tmp_path / "store", conf) as server:
        ns = server.namesrv
        run_driver(tmp_path, "warm", {"op": "produce", "namesrv": ns, "topic": "TopicDL", "keys": ["warm"]})
        consumer = Driver(
            tmp_path, "consume", {"op": "consume", "namesrv": ns, "group": "CG_DL", "topic": "TopicDL"}
        )  # noqa: E501
        try:
            consumer.wait_for(lambda ev: any(e.get("key") == "warm" for e in ev), 40, "the first message")
            run_driver(
                tmp_path,
                "produce",
                {"op": "produce", "namesrv": ns, "topic": "TopicDL", "keys": keys, "delay": 2},
            )  # noqa: E501
            events = consumer.wait_for(
                lambda ev: {e.get("key") for e in ev} >= set(keys), 40, "the delayed ones"
            )
        finally:
            consumer.stop()
    got = [e for e in events if e.get("key") in keys]
    assert sorted(e["key"] for e in got) == keys and all(e["times"] == 0 for e in got)
    assert all(e["stored"] - e["born"] >= 2000 for e in got)  # stored in the topic once due


def test_a_compressed_cpp_batch_is_stored_as_its_messages(tmp_path: Path) -> None:
    """The C++ client zlib-compresses a batch body over 4 KiB as a whole and marks the batch "1"."""
    conf = write_conf(tmp_path / "broker.conf")
    keys = [f"bt{i}" for i in range(12)]
    with ServeProcess(tmp_path / "store", conf) as server:
        ns = server.namesrv
        sent = run_driver(
            tmp_path,
            "batch",
            {"op": "batch", "namesrv": ns, "topic": "TopicBatch", "keys": keys, "size": 1000},
        )  # noqa: E501
        assert sent[0]["status"] == 0
        consumer = Driver(
            tmp_path, "consume", {"op": "consume", "namesrv": ns, "group": "CG_BT", "topic": "TopicBatch"}
        )  # noqa: E501
        try:
            events = consumer.wait_for(lambda ev: {e.get("key") for e in ev} >= set(keys), 40, "the batch")
        finally:
            consumer.stop()
    got = [e for e in events if "key" in e]
    assert sorted(e["key"] for e in got) == sorted(keys)  # one message per element, each once
    assert all(e["len"] == 1000 for e in got)
    assert sorted(e["offset"] for e in got) == list(range(len(keys)))  # one queue, consecutive offsets


def test_a_second_consumer_joins_and_the_queues_are_split(tmp_path: Path) -> None:
    conf = write_conf(tmp_path / "broker.conf")
    topic, group = "TopicRB", "CG_RB"
    with ServeProcess(tmp_path / "store", conf) as server:
        before = [f"a{i}" for i in range(8)]
        run_driver(
            tmp_path, "produce1", {"op": "produce", "namesrv": server.namesrv, "topic": topic, "keys": before}
        )  # noqa: E501
        common = {"op": "consume", "namesrv": server.namesrv, "group": group, "topic": topic}
        a = Driver(tmp_path, "a", {**common, "instance": "consumerA"})
        b: Driver | None = None
        try:
            a.wait_for(lambda ev: {e.get("key") for e in ev} >= set(before), 40, "consumer A alone")
            b = start_consumer(tmp_path, "b", {**common, "instance": "consumerB"})

            def members() -> int:
                async def go(client):  # type: ignore[no-untyped-def]
                    return await invoke(
                        client, server.broker, RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}
                    )  # noqa: E501

                import json

                r = run(go)
                return len(json.loads(r.body)["consumerIdList"]) if r.code == RS.SUCCESS else 0

            wait_until(lambda: members() == 2, 20, "both consumers in the group")

            # both clients rebalance on NOTIFY_CONSUMER_IDS_CHANGED: A drops two queues, B takes them
            # (before, A could still take messages of B's queues: they would not be split)
            def split() -> bool:
                mine = held(tmp_path, a.proc.pid, topic)
                theirs = held(tmp_path, b.proc.pid, topic)  # type: ignore[union-attr]
                return len(mine) == len(theirs) == 2 and mine | theirs == {0, 1, 2, 3}

            wait_until(split, 30, "the queues split between A and B (their rebalance logs)")
            after = [f"b{i}" for i in range(40)]
            run_driver(
                tmp_path,
                "produce2",
                {"op": "produce", "namesrv": server.namesrv, "topic": topic, "keys": after},
            )  # noqa: E501

            def all_seen(_ev: list[dict]) -> bool:
                seen = {e.get("key") for e in a.events()} | {e.get("key") for e in b.events()}  # type: ignore[union-attr]
                return seen >= set(after)

            a.wait_for(all_seen, 40, "every message after the join")
        finally:
            a.stop()
            if b is not None:
                b.stop()
        ev_a = [e for e in a.events() if str(e.get("key", "")).startswith("b")]
        ev_b = [e for e in b.events() if str(e.get("key", "")).startswith("b")]
    keys_a, keys_b = Counter(e["key"] for e in ev_a), Counter(e["key"] for e in ev_b)
    assert set(keys_a) | set(keys_b) == set(after)  # none lost
    assert not set(keys_a) & set(keys_b)  # each consumed by one of them
    assert max(keys_a.values()) == 1 and max(keys_b.values()) == 1
    queues_a, queues_b = {e["queue"] for e in ev_a}, {e["queue"] for e in ev_b}
    assert queues_a and queues_b and not queues_a & queues_b  # the queues are split
    assert len(queues_a | queues_b) == 4
    # the client logs each NOTIFY_CONSUMER_IDS_CHANGED it gets: A for its own join and B's, B for its own
    for driver, least in ((a, 2), (b, 1)):
        log = "".join(p.read_text(errors="replace") for p in client_logs(tmp_path, driver.proc.pid))
        assert log.count(f"notifyConsumerIdsChanged:{group}") >= least


def held(tmp: Path, pid: int, topic: str) -> set[int]:
    """The queues of ``topic`` the C++ client holds now, by its log: each rebalance logs
    ``add mq:`` for a queue it takes and ``drop mq:`` for one it gives up."""
    log = "".join(p.read_text(errors="replace") for p in client_logs(tmp, pid))
    queues: set[int] = set()
    pattern = rf"(add|drop) mq:MessageQueue \[topic={re.escape(topic)}, brokerName=[^,]+, queueId=(\d+)\]"
    for change, queue in re.findall(pattern, log):
        (queues.add if change == "add" else queues.discard)(int(queue))
    return queues


def client_logs(tmp: Path, pid: int) -> list[Path]:
    """The C++ client's log files of one process (``~/logs/rocketmq-cpp/<pid>_rocketmq-cpp.log.N``)."""
    return sorted((tmp / "home" / "logs" / "rocketmq-cpp").glob(f"{pid}_rocketmq-cpp.log*"))
