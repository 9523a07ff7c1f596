"""Consumers of the Apache RocketMQ 5.x Python client (``rocketmq-python-client`` 5.1.2, in
``.venv-rmq5``; skipped without it) against ``rmq serve``'s gRPC endpoint, driven as a child
process (``grpc5_consumer.py``): SimpleConsumer receive / ack, change invisible duration and the
redelivery, the DLQ after the group's attempts, a PushConsumer (and its forward to the DLQ), a FIFO
group with two consumers, and the group in the broker's consumer table (``rmq consumerConnection``).

The groups' offsets are written into ``consumerOffset.json`` before the start (a new gRPC group
pops with init mode MAX, which skips what was sent before its first receive), and their attributes
into ``subscriptionGroup.json`` (``retryMaxTimes``, ``consumeMessageOrderly``)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import rmq_json, run_rmq
from tests.support.client5 import PYTHON5, needs_client5
from tests.support.serve import ServeProcess, wait_until, write_conf

CONSUMER = Path(__file__).with_name("grpc5_consumer.py")
QUEUES = 4


def consumer5_cmd(spec: dict) -> list[str]:
    return [str(PYTHON5), str(CONSUMER), json.dumps(spec)]


def consumer5(spec: dict, home: Path, timeout: float = 90) -> dict:
    """Run the 5.x consumer driver with ``spec``; its JSON result."""
    proc = subprocess.run(
        consumer5_cmd(spec),
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "HOME": str(home)},
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def prepare(store: Path, topics: dict[str, dict], groups: dict[str, dict]) -> None:
    """``topics.json``, ``subscriptionGroup.json`` and the groups' offsets (0 on every queue of
    every topic) before the first start."""
    config = store / "config"
    config.mkdir(parents=True)
    table = {}
    for name, attributes in topics.items():
        table[name] = {"topicName": name, "readQueueNums": QUEUES, "writeQueueNums": QUEUES, "perm": 6,
                       "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}  # fmt: skip
        if attributes:
            table[name]["attributes"] = attributes
    version = {"counter": 1, "timestamp": 0}
    (config / "topics.json").write_text(json.dumps({"dataVersion": version, "topicConfigTable": table}))
    subs = {}
    for group, extra in groups.items():
        subs[group] = {"groupName": group, "consumeEnable": True, "consumeFromMinEnable": True,
                       "consumeBroadcastEnable": True, "retryQueueNums": 1, "retryMaxTimes": 16,
                       "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1,
                       "notifyConsumerIdsChangedEnable": True, **extra}  # fmt: skip
    (config / "subscriptionGroup.json").write_text(
        json.dumps({"dataVersion": version, "subscriptionGroupTable": subs})
    )
    offsets = {f"{t}@{g}": {str(q): 0 for q in range(QUEUES)} for t in topics for g in groups}
    (config / "consumerOffset.json").write_text(json.dumps({"offsetTable": offsets}))


TOPICS = {f"TopicC{i}": {} for i in range(1, 7)} | {"TopicCF": {"message.type": "FIFO"}}
GROUPS = {
    "GC1": {},
    "GC2": {},
    "GC3": {"retryMaxTimes": 1},  # max attempts 2
    "GC4": {},
    "GC4F": {"retryMaxTimes": 1},
    "GCF": {"consumeMessageOrderly": True},
    "GC6": {},
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    tmp = tmp_path_factory.mktemp("grpcc")
    prepare(tmp / "store", TOPICS, GROUPS)
    serve = ServeProcess(tmp / "store", write_conf(tmp / "broker.conf"), extra=["-v"], grpc=True).start()
    try:
        yield serve
    finally:
        serve.stop()


def sent(n: int, prefix: str, **extra: str) -> list[dict]:
    return [{"body": f"{prefix}{i}", "tag": "T", "key": f"{prefix}{i}", **extra} for i in range(n)]


def steps(server: ServeProcess, group: str, topic: str, *ops: dict, **more: object) -> dict:
    """The driver's spec for ``ops`` run in turn by a consumer of ``group`` on ``topic`` of
    ``server``, 5 s given to its start (``more``: other keys of the spec)."""
    return {"endpoint": server.grpc, "group": group, "topic": topic, "await": 5, **more, "steps": list(ops)}


@needs_client5
def test_receive_ack_then_nothing_and_the_group_is_online(server: ServeProcess, tmp_path: Path) -> None:
    spec = steps(
        server, "GC1", "TopicC1",
        {"op": "send", "messages": sent(5, "a")},
        {"op": "receive", "count": 5, "within": 20, "invisible": 20},
        {"op": "receive", "invisible": 20},
        {"op": "sleep", "s": 1.5},  # the first heartbeat
    )  # fmt: skip
    proc = subprocess.Popen(
        consumer5_cmd(spec), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "HOME": str(tmp_path)},
    )  # fmt: skip
    seen: dict = {}

    def online() -> bool:
        # -b: a gRPC group has no %RETRY%<group> topic to route by (nor in 5.1: its retry topics
        # are %RETRY%<group>_<topic>)
        result = run_rmq("consumerConnection", "-b", server.broker, "-g", "GC1", "--json")
        if result.returncode == 0:
            seen.update(json.loads(result.stdout))
        return bool(seen)

    try:
        wait_until(online, 30, "GC1 in consumerConnection")
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, out[-2000:] + err[-3000:]
    ids, first, second, _ = json.loads(out.strip().splitlines()[-1])["steps"]
    assert sorted(m["body"] for m in first) == [f"a{i}" for i in range(5)]
    assert {m["id"] for m in first} == set(ids) and {m["attempt"] for m in first} == {1}
    assert all(m["tag"] == "T" and m["topic"] == "TopicC1" for m in first)
    assert second == []  # acked: nothing comes back
    text = json.dumps(seen)
    assert "CONSUME_ACTIVELY" in text and "TopicC1" in text and "PYTHON" in text
    log = server.output()
    assert "(SIMPLE_CONSUMER, PYTHON 5.1.2)" in log and "group GC1" in log


@needs_client5
def test_change_invisible_duration_then_redelivery_as_attempt_2(server: ServeProcess, tmp_path: Path) -> None:
    spec = steps(
        server, "GC2", "TopicC2",
        {"op": "send", "messages": sent(2, "b")},
        {"op": "receive", "count": 2, "within": 20, "invisible": 30, "change": 2},
        {"op": "receive", "count": 2, "within": 25, "invisible": 30},
        {"op": "receive", "invisible": 20},
    )  # fmt: skip
    ids, first, again, after = consumer5(spec, tmp_path)["steps"]
    assert sorted(m["body"] for m in first) == ["b0", "b1"] and {m["attempt"] for m in first} == {1}
    assert sorted(m["body"] for m in again) == ["b0", "b1"] and {m["attempt"] for m in again} == {2}
    assert {m["id"] for m in again} == set(ids) and all(m["topic"] == "TopicC2" for m in again)
    assert after == []


@needs_client5
def test_an_unacked_message_goes_to_the_dlq_after_its_attempts(server: ServeProcess, tmp_path: Path) -> None:
    spec = steps(
        server, "GC3", "TopicC3",
        {"op": "send", "messages": sent(1, "d")},
        {"op": "receive", "count": 1, "within": 20, "invisible": 30, "change": 1},
        {"op": "receive", "count": 1, "within": 25, "invisible": 30, "change": 1},
        {"op": "receive", "count": 1, "within": 8, "invisible": 30},
    )  # fmt: skip
    [message_id], first, second, third = consumer5(spec, tmp_path)["steps"]
    assert [(m["body"], m["attempt"]) for m in first + second] == [("d0", 1), ("d0", 2)]
    assert third == []  # reconsumeTimes 2 >= max attempts 2: forwarded, not delivered
    [found] = rmq_json(
        "queryMsgByUniqueKey", "-n", server.namesrv, "-t", "%DLQ%GC3", "-i", message_id, "--json"
    )
    assert found["message"]["body"] == "d0" and found["message"]["topic"] == "%DLQ%GC3"


@needs_client5
def test_a_push_consumer_consumes_everything_and_forwards_its_failure(
    server: ServeProcess, tmp_path: Path
) -> None:
    spec = {"endpoint": server.grpc, "group": "GC4", "topic": "TopicC4", "mode": "push",
            "send": sent(10, "p"), "expect": 10, "within": 40}  # fmt: skip
    consumed = consumer5(spec, tmp_path)["push"]
    assert sorted({c["body"] for c in consumed if c["ok"]}) == sorted(f"p{i}" for i in range(10))
    # a failing listener: redelivered once (max attempts 2: the consumer's backoff changes the
    # invisible duration), then the next receive of the group forwards it to %DLQ%GC4F
    spec = {"endpoint": server.grpc, "group": "GC4F", "topic": "TopicC5", "mode": "push",
            "send": sent(1, "f"), "fail": ["f0"], "expect": 0, "expect_attempts": 2,
            "within": 30}  # fmt: skip
    consumed = consumer5(spec, tmp_path)["push"]
    assert [(c["body"], c["attempt"]) for c in consumed] == [("f0", 1), ("f0", 2)]
    [message_id] = {c["id"] for c in consumed}
    spec = steps(server, "GC4F", "TopicC5", {"op": "receive", "count": 1, "within": 15, "invisible": 20})
    assert consumer5(spec, tmp_path)["steps"] == [[]]
    [found] = rmq_json(
        "queryMsgByUniqueKey", "-n", server.namesrv, "-t", "%DLQ%GC4F", "-i", message_id, "--json"
    )
    assert found["message"]["body"] == "f0"


@needs_client5
def test_a_fifo_group_keeps_order_with_two_consumers(server: ServeProcess, tmp_path: Path) -> None:
    import grpc

    from rmqcli.broker.grpc.stubs import load

    s = load()
    d = s.definition
    settings = d.Settings(
        client_type=d.SIMPLE_CONSUMER, subscription=d.Subscription(group=d.Resource(name="GCF"))
    )
    with grpc.insecure_channel(server.grpc) as channel:
        stub = s.service_grpc.MessagingServiceStub(channel)
        commands = iter([s.service.TelemetryCommand(settings=settings)])
        [reply] = list(stub.Telemetry(commands, metadata=[("x-mq-client-id", "fifo@1@0@x")], timeout=10))
    assert reply.settings.subscription.fifo and reply.settings.backoff_policy.max_attempts == 17
    assert reply.settings.subscription.receive_batch_size == 32
    messages = [{"body": f"{g}-{i}", "tag": "T", "group": g} for i in range(6) for g in ("ga", "gb", "gc")]
    consumer5(steps(server, "GCF", "TopicCF", {"op": "send", "messages": messages}), tmp_path)
    spec = steps(
        server, "GCF", "TopicCF", {"op": "receive", "count": 18, "within": 9, "invisible": 20, "max": 4}
    )
    env = {**os.environ, "HOME": str(tmp_path)}
    procs = [
        subprocess.Popen(
            consumer5_cmd(spec), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        for _ in range(2)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, out[-2000:] + err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1])["steps"][0])
    everything = [m for got in results for m in got]
    assert sorted(m["body"] for m in everything) == sorted(m["body"] for m in messages)  # each once
    for got in results:  # in each consumer, every message group's messages in their order
        for group in ("ga", "gb", "gc"):
            seq = [int(m["body"].split("-")[1]) for m in got if m["group"] == group]
            assert seq == sorted(seq), (group, seq)
    for group in ("ga", "gb", "gc"):  # one queue per message group, so one consumer each batch
        assert all(m["attempt"] == 1 for m in everything if m["group"] == group)


@needs_client5
def test_a_tag_filter_takes_retried_messages_of_its_tag_only(server: ServeProcess, tmp_path: Path) -> None:
    """The broker filters a topic's queues by tag but not the pop-retry topic: the proxy's filter
    acks a retried message of another tag and does not deliver it."""
    every = steps(
        server, "GC6", "TopicC6",
        {"op": "send", "messages": [{"body": "tb", "tag": "B"}, {"body": "ta", "tag": "A"}]},
        {"op": "receive", "count": 2, "within": 20, "invisible": 20, "change": 1},
    )  # fmt: skip
    _, got = consumer5(every, tmp_path)["steps"]
    assert sorted(m["body"] for m in got) == ["ta", "tb"]  # both back in a second, from the retry topic
    only_a = steps(
        server, "GC6", "TopicC6", {"op": "receive", "count": 2, "within": 8, "invisible": 20}, tag="A"
    )
    [got] = consumer5(only_a, tmp_path)["steps"]
    assert [(m["body"], m["attempt"]) for m in got] == [("ta", 2)]
    again = steps(server, "GC6", "TopicC6", {"op": "receive", "invisible": 20})
    assert consumer5(again, tmp_path)["steps"] == [[]]  # tb was acked by the filter
