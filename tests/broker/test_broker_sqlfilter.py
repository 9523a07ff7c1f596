"""SQL92 subscriptions (``enablePropertyFilter``, ``rmqcli.filter.sql92``) in ``rmq serve``.

Over the wire with rmq's client: CHECK_CLIENT_CONFIG, pulls that carry their SQL92 subscription
and pulls that use the one their heartbeat registered, the refusals of a broker without the
setting, and the 4.9.8 quirk that a pull carrying an expression that does not compile is not
filtered at all. End to end: the real 4.9.8 Java push consumer (``MessageSelector.bySql``)
consumes what each expression selects from ``rmq serve`` and from the real 4.9.8 broker, and the
two must deliver the same messages, which are the ones ``Selector.matches`` picks."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rmqcli.filter.sql92 import compile_selector
from rmqcli.remoting import headers as hd
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.client import SyncClient
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.broker.test_grpc_consume import consumer5, needs_client5, prepare
from tests.support import popwire as w
from tests.support.java import compile_programs, run_program
from tests.support.oracle import real_cluster
from tests.support.records import body_records
from tests.support.serve import ServeProcess, write_conf

COUNT = 40
TOPIC = "TopicSql"


def user_properties(i: int) -> dict[str, str]:
    """What SqlFilterRoundTrip.java puts on message ``i`` (``String.valueOf(i / 2.0)`` for d)."""
    props = {"a": str(i), "b": "xyz"[i % 3], "d": repr(i / 2)}
    if i % 4 == 0:
        props["c"] = "true"
    return props


def stored_properties(i: int) -> dict[str, str]:
    return {**user_properties(i), "TAGS": "TagA" if i % 2 == 0 else "TagB", "KEYS": f"k{i}"}


def send(client: SyncClient, broker: str, i: int) -> None:
    props = "".join(f"{k}\x01{v}\x02" for k, v in stored_properties(i).items())
    header = hd.SendMessageRequestHeader(
        producer_group="PG_SQL", topic=TOPIC, default_topic="TBW102", default_topic_queue_nums=1,
        queue_id=0, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0, properties=props,
    )  # fmt: skip
    answer = client.invoke(broker, RemotingCommand.request(RC.SEND_MESSAGE, header, b"m%d" % i), 10)
    assert answer.code == RS.SUCCESS, answer.remark


def pull(
    client: SyncClient, broker: str, group: str, expression: str | None, sql: bool = True
) -> RemotingCommand:
    """A pull of queue 0 from offset 0; with ``expression`` it carries its subscription."""
    flag = hd.PULL_FLAG_SUBSCRIPTION if expression is not None else 0
    header = hd.PullMessageRequestHeader(
        consumer_group=group, topic=TOPIC, queue_id=0, queue_offset=0, max_msg_nums=64,
        sys_flag=flag, commit_offset=0, suspend_timeout_millis=0,
        subscription=expression, sub_version=0, expression_type="SQL92" if sql else "TAG",
    )  # fmt: skip
    return client.invoke(broker, RemotingCommand.request(RC.PULL_MESSAGE, header), 10)


def keys(answer: RemotingCommand) -> list[str]:
    assert answer.code == RS.SUCCESS, (answer.code, answer.remark)
    return [rec.properties["KEYS"] for rec in body_records(answer.body)]


def check(client: SyncClient, broker: str, expression: str) -> RemotingCommand:
    sub = jb.SubscriptionData(topic=TOPIC, sub_string=expression, expression_type="SQL92")
    body = jb.encode(jb.CheckClientRequestBody(client_id="c1", group="G_SQL", subscription_data=sub))
    return client.invoke(broker, RemotingCommand.request(RC.CHECK_CLIENT_CONFIG, body=body), 10)


def heartbeat(client: SyncClient, broker: str, group: str, expression: str) -> None:
    sub = jb.SubscriptionData(topic=TOPIC, sub_string=expression, expression_type="SQL92")
    consumer = jb.ConsumerData(
        group_name=group, consume_type="CONSUME_PASSIVELY", message_model="CLUSTERING",
        consume_from_where="CONSUME_FROM_FIRST_OFFSET", subscription_data_set=[sub],
    )  # fmt: skip
    body = jb.encode(jb.HeartbeatData(client_id="c1", consumer_data_set=[consumer]))
    answer = client.invoke(broker, RemotingCommand.request(RC.HEART_BEAT, body=body), 10)
    assert answer.code == RS.SUCCESS, answer.remark


def selected(expression: str) -> list[str]:
    selector = compile_selector(expression)
    return [f"k{i}" for i in range(COUNT) if selector.matches(stored_properties(i))]


def test_sql92_pulls_filter_by_properties_only_with_enable_property_filter(tmp_path: Path) -> None:
    on = ServeProcess(tmp_path / "on", write_conf(tmp_path / "on.conf", enablePropertyFilter="true"))
    off = ServeProcess(tmp_path / "off", write_conf(tmp_path / "off.conf"))
    with on, off, SyncClient() as client:
        for server in (on, off):
            for i in range(COUNT):
                send(client, server.broker, i)
        expression = "a BETWEEN 3 AND 30 AND (b = 'y' OR c = TRUE) AND TAGS <> 'TagB'"
        assert keys(pull(client, on.broker, "G_SQL", expression)) == selected(expression) != []
        none = pull(client, on.broker, "G_SQL", "zz IS NOT NULL")
        assert (none.code, none.remark, none.ext_fields["nextBeginOffset"]) == (
            RS.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE", str(COUNT)
        )  # fmt: skip
        # a carried expression that does not compile filters nothing (ConsumerFilterManager.build
        # gives null, and 4.9.8 runs without its assertion)
        everything = [f"k{i}" for i in range(32)]  # maxTransferCountOnMessageInMemory: 32 a pull
        assert keys(pull(client, on.broker, "G_SQL", "a = ")) == everything
        empty = pull(client, on.broker, "G_SQL", "")
        assert (empty.code, empty.remark) == (
            RS.SUBSCRIPTION_PARSE_FAILED,
            "parse the consumer's subscription failed",
        )

        # the subscription a heartbeat registered
        heartbeat(client, on.broker, "G_SQL_HB", "b = 'z'")
        assert keys(pull(client, on.broker, "G_SQL_HB", None)) == selected("b = 'z'")
        heartbeat(client, on.broker, "G_SQL_BAD", "b = ")
        bad = pull(client, on.broker, "G_SQL_BAD", None)
        assert bad.code == RS.FILTER_DATA_NOT_EXIST
        assert bad.remark == "The broker's consumer filter data is not exist!Your expression may be wrong!"

        assert check(client, on.broker, "a > 1").code == RS.SUCCESS
        parse_failed = check(client, on.broker, "a > 'x'")
        assert parse_failed.code == RS.SUBSCRIPTION_PARSE_FAILED
        assert "cannot be compared" in parse_failed.remark

        refusal = (RS.SYSTEM_ERROR, "The broker does not support consumer to filter message by SQL92")
        answer = check(client, off.broker, "a > 1")
        assert (answer.code, answer.remark) == refusal
        answer = pull(client, off.broker, "G_SQL", "a > 1")
        assert (answer.code, answer.remark) == refusal
        heartbeat(client, off.broker, "G_SQL_HB", "b = 'z'")
        answer = pull(client, off.broker, "G_SQL_HB", None)
        assert (answer.code, answer.remark) == refusal
        assert keys(pull(client, off.broker, "G_SQL", "*", sql=False)) == everything  # tags as before

        # POP (5.1.1's PopMessageProcessor) filters by SQL92 whatever enablePropertyFilter says
        popped_keys = [
            p.rec.properties["KEYS"] for p in w.popped(sql_pop(off.broker, "b = 'x'"), TOPIC, "G_POP")
        ]
        assert sorted(popped_keys) == sorted(selected("b = 'x'")[:32])
        bad = sql_pop(off.broker, "b = ")
        assert (bad.code, bad.remark) == (
            RS.SUBSCRIPTION_PARSE_FAILED,
            "parse the consumer's subscription failed",
        )


def sql_pop(broker: str, expression: str) -> RemotingCommand:
    header = hd.PopMessageRequestHeader(
        consumer_group="G_POP", topic=TOPIC, queue_id=-1, max_msg_nums=32, invisible_time=60_000, poll_time=0,
        born_time=int(time.time() * 1000), init_mode=0, exp_type="SQL92", exp=expression,
    )  # fmt: skip
    return w.call(broker, RC.POP_MESSAGE, header)


EXPRESSIONS = [
    "a BETWEEN 3 AND 12",
    "b = 'y' AND a > 20",
    "c = TRUE OR b IN ('z')",
    "c IS NULL AND TAGS = 'TagA'",
    "d >= 10.5",
    "a > 5 AND NOT (b <> 'x')",
    "zz IS NOT NULL",
    "a = ",
]


def round_trip(classes: Path, state: Path, namesrv: str, topic: str) -> dict[int, str]:
    out = run_program(
        classes, state, "SqlFilterRoundTrip", namesrv, topic, str(COUNT), *EXPRESSIONS, timeout=240
    )
    assert f"SENT {COUNT}" in out, out
    results = {}
    for line in out.splitlines():
        if line.startswith("EXPR "):
            _, index, *rest = line.split(" ", 2)
            result = rest[0] if rest else ""
            if result.startswith("START_FAILED"):  # the code; the reasons are each parser's own text
                result = result.split("  DESC:")[0]
            results[int(index)] = result
    return results


@pytest.mark.java
def test_the_java_consumer_gets_from_rmq_what_the_real_broker_delivers(tmp_path: Path) -> None:
    classes = compile_programs(tmp_path / "classes")
    conf = write_conf(tmp_path / "rmq.conf", enablePropertyFilter="true")
    with ServeProcess(tmp_path / "store", conf) as server:
        from_rmq = round_trip(classes, tmp_path / "state-rmq", server.namesrv, TOPIC)
    home = tmp_path / "real"
    home.mkdir()
    with real_cluster(home, enablePropertyFilter="true") as cluster:
        from_real = round_trip(classes, tmp_path / "state-real", cluster.namesrv, TOPIC)
    assert from_rmq == from_real
    *good, bad = EXPRESSIONS
    for index, expression in enumerate(good):
        assert from_rmq[index] == ",".join(sorted(selected(expression))), expression
    assert from_rmq[len(good)] == f"START_FAILED CODE: {RS.SUBSCRIPTION_PARSE_FAILED}"


@needs_client5
def test_a_5x_simple_consumer_receives_what_its_sql92_expression_selects(tmp_path: Path) -> None:
    """gRPC ReceiveMessage with a SQL92 FilterExpression: POP filters by the expression."""
    store = tmp_path / "store"
    prepare(store, {"TopicSql5": {}}, {"G_SQL5": {}})
    expression = "a >= 4 AND b <> 'y' OR c IS NOT NULL"
    messages = [{"body": f"m{i}", "props": user_properties(i)} for i in range(16)]
    want = [f"m{i}" for i in range(16) if compile_selector(expression).matches(user_properties(i))]
    assert 0 < len(want) < 16
    with ServeProcess(store, grpc=True) as server:
        spec = {
            "endpoint": server.grpc, "group": "G_SQL5", "topic": "TopicSql5", "sql": expression, "await": 2,
            "steps": [
                {"op": "send", "messages": messages},
                {"op": "receive", "max": 16, "ack": True, "want": want, "within": 30},
                {"op": "receive", "max": 16, "ack": True, "within": 3},
            ],
        }  # fmt: skip
        result = consumer5(spec, tmp_path)
    _, first, rest = result["steps"]
    assert sorted(m["body"] for m in first + rest) == sorted(want)
