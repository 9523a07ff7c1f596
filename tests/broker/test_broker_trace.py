"""Message traces in ``rmq serve`` as a 4.9.8 broker keeps them: ``traceTopicEnable`` creates the
trace topic at start (1/1 queues, perm 6, a system topic), every send answer carries ``MSG_REGION``
and ``TRACE_ON``, getBrokerConfig reports the four keys, and ``rmq queryMsgTraceById`` reads what
a traced producer and consumer stored. The real 4.9.8 Java client (traces on) and the kit's
``mqadmin queryMsgTraceById`` run against the same server (skipped without Java 17, the kit or
javac). One server for the module."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from formats import commitlog as fmt
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.support.cli import invoke_rmq, one_line_error
from tests.support.java import compile_programs, mqadmin, trace_round_trip
from tests.support.serve import ServeProcess, invoke, run, wait_until, write_conf

REGION = "RegionT"  # regionId of the server: the MSG_REGION of its answers
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
# a stored Pub record of the real 4.9.8 client (research notes, 6a), traced message C000…0000
MSG_ID = "C0000202312E5FFD2B2781DF6D8A0000"
PUB = (
    "Pub\x011795670103437\x01DefaultRegion\x01TracePG\x01TraceTopicT\x01C0000202312E5FFD2B2781DF6D8A0000"
    "\x01TagA\x01KEY1 KEY2\x01127.0.0.1:20911\x0111\x01148\x010"
    "\x017F000001000051AF0000000000000000\x01true\x02"
)
SUB = (
    "SubBefore\x011795670104162\x01null\x01TraceCG\x01C0000202312E5FFD2B2781DF70620002"
    "\x01C0000202312E5FFD2B2781DF6D8A0000\x010\x01KEY1 KEY2\x02SubAfter\x01C0000202312E5FFD2B2781DF70620002"
    "\x01C0000202312E5FFD2B2781DF6D8A0000\x012\x01true\x01KEY1 KEY2\x010\x011795670104164\x01TraceCG\x02"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    root = tmp_path_factory.mktemp("trace")
    (root / "store").mkdir()
    conf = write_conf(root / "broker.conf", traceTopicEnable="true", regionId=REGION)
    with ServeProcess(root / "store", conf) as served:
        yield served


def rmq(*args: str, code: int = 0) -> str:
    result = invoke_rmq(*args)
    assert result.exit_code == code, (args, result.exit_code, result.stdout, result.stderr)
    return result.stdout if code == 0 else one_line_error(result.stderr)


def send_header(topic: str, **extra: str) -> dict[str, str]:
    header = {
        "producerGroup": "PG_TRACE_TEST",
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": "0",
        "sysFlag": "0",
        "bornTimestamp": str(int(time.time() * 1000)),
        "flag": "0",
        "properties": "",
        "reconsumeTimes": "0",
        "unitMode": "false",
        "batch": "false",
    }
    header.update(extra)
    return header


V2_KEYS = dict(  # SendMessageRequestHeaderV2's one-letter keys
    producerGroup="a", topic="b", defaultTopic="c", defaultTopicQueueNums="d", queueId="e", sysFlag="f",
    bornTimestamp="g", flag="h", properties="i", reconsumeTimes="j", unitMode="k", batch="m",
)  # fmt: skip


def v2(header: dict[str, str]) -> dict[str, str]:
    return {V2_KEYS[k]: v for k, v in header.items()}


BATCH = b"".join(
    fmt.BatchElement.build(dict(magic_code=0, body_crc=0, flag=0, body=body, properties=b""))
    for body in (b"one", b"two")
)


def test_every_send_answer_carries_region_and_trace_on(server: ServeProcess) -> None:
    """``preSend``: stored or refused, single (both request codes) or batch."""

    async def go(client) -> list[tuple[int, dict[str, str]]]:  # type: ignore[no-untyped-def]
        answers = []
        for code, header, body in (
            (RC.SEND_MESSAGE, send_header("TraceTopicA"), b"x"),
            (RC.SEND_MESSAGE_V2, v2(send_header("TraceTopicA")), b"y"),  # the send lane
            (RC.SEND_BATCH_MESSAGE, v2(send_header("TraceTopicA", batch="true")), BATCH),
            (RC.SEND_MESSAGE, send_header("SCHEDULE_TOPIC_XXXX"), b"z"),  # NO_PERMISSION
            (RC.SEND_MESSAGE, send_header("bad topic!"), b"z"),  # SYSTEM_ERROR
        ):
            r = await invoke(client, server.broker, code, header, body)
            answers.append((r.code, r.ext_fields))
        return answers

    answers = run(go)
    assert [code for code, _ in answers] == [
        RS.SUCCESS,
        RS.SUCCESS,
        RS.SUCCESS,
        RS.NO_PERMISSION,
        RS.SYSTEM_ERROR,
    ]
    for _, ext in answers:
        assert ext["MSG_REGION"] == REGION and ext["TRACE_ON"] == "true", ext
    assert set(answers[3][1]) == {"MSG_REGION", "TRACE_ON"}  # a refusal: nothing else


def test_trace_topic_is_created_at_start_as_a_system_topic(server: ServeProcess) -> None:
    async def go(client) -> tuple[dict, list[str]]:  # type: ignore[no-untyped-def]
        route = await invoke(client, server.namesrv, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": TRACE_TOPIC})
        assert route.code == RS.SUCCESS, route.remark
        system = await invoke(client, server.broker, RC.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
        return json.loads(route.body)["queueDatas"], json.loads(system.body)["topicList"]

    queues, system = run(go)
    assert [(q["readQueueNums"], q["writeQueueNums"], q["perm"]) for q in queues] == [(1, 1, 6)]
    assert {TRACE_TOPIC, "DefaultCluster", "broker-a", "DefaultCluster_REPLY_TOPIC"} <= set(system)
    err = rmq("updateTopic", "-b", server.broker, "-t", TRACE_TOPIC, code=6)
    assert f"The topic[{TRACE_TOPIC}] is conflict with system topic." in err


def test_broker_config_reports_the_trace_keys(server: ServeProcess) -> None:
    (answer,) = json.loads(rmq("getBrokerConfig", "-b", server.broker, "--json"))
    flat = dict(answer["properties"])
    assert {k: flat[k] for k in ("traceTopicEnable", "msgTraceTopicName", "regionId", "traceOn")} == {
        "traceTopicEnable": "true",
        "msgTraceTopicName": TRACE_TOPIC,
        "regionId": REGION,
        "traceOn": "true",
    }
    err = rmq("updateBrokerConfig", "-b", server.broker, "-k", "traceTopicEnable", "-v", "false", code=6)
    assert "traceTopicEnable is read only at start" in err

    async def trace_on(client) -> str:  # type: ignore[no-untyped-def]
        r = await invoke(client, server.broker, RC.SEND_MESSAGE_V2, v2(send_header("TraceTopicA")), b"t")
        return r.ext_fields["TRACE_ON"]

    rmq("updateBrokerConfig", "-b", server.broker, "-k", "traceOn", "-v", "false")
    try:
        assert run(trace_on) == "false"  # in force at once, on the send lane too
    finally:
        rmq("updateBrokerConfig", "-b", server.broker, "-k", "traceOn", "-v", "true")
    assert run(trace_on) == "true"


def local(millis: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(millis / 1000))


def test_query_msg_trace_by_id_reads_stored_trace_records(server: ServeProcess) -> None:
    """The real client's stored bodies, sent as plain messages to the trace topic with its keys."""
    ns = server.namesrv
    for body in (PUB, SUB):
        rmq("sendMessage", "-n", ns, "-t", TRACE_TOPIC, "-k", f"KEY2 KEY1 {MSG_ID}", "-p", body)
    wait_until(
        lambda: invoke_rmq("queryMsgTraceById", "-n", ns, "-i", MSG_ID).exit_code == 0, 10, "the index"
    )
    row = "{:<10} {:<20} {:<20} {:<20} {:<10} {:<10}\n"
    assert rmq("queryMsgTraceById", "-n", ns, "-i", MSG_ID) == (
        row.format("#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status")
        + row.format("Pub", "TracePG", "127.0.0.1", local(1795670103437), "148ms", "success")
        + "\n"
        + row.format("#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status")
        + row.format("Sub", "TraceCG", "127.0.0.1", local(1795670104164), "2ms", "success")
        + "\n"
    )
    views = json.loads(rmq("queryMsgTraceById", "-n", ns, "-i", MSG_ID, "--json"))
    assert sorted(v["msgType"] for v in views) == ["Pub", "SubAfter", "SubBefore"]
    pub = next(v for v in views if v["msgType"] == "Pub")
    assert pub["offsetMsgId"] == "7F000001000051AF0000000000000000" and pub["storeHost"] == "127.0.0.1:20911"
    # a key of the traced message finds the trace messages, but no record is about it
    assert rmq("queryMsgTraceById", "-n", ns, "-i", "KEY1") == ""


def test_query_msg_trace_by_id_errors(server: ServeProcess) -> None:
    ns = server.namesrv
    err = rmq("queryMsgTraceById", "-n", ns, "-i", "C0A80001000000000000000000000000", code=3)
    assert "NO_MESSAGE(208): query message by key finished, but no message." in err
    err = rmq("queryMsgTraceById", "-n", ns, "-i", MSG_ID, "-t", "NoSuchTraceTopic", code=3)
    assert "TOPIC_NOT_EXIST(17): The topic[NoSuchTraceTopic] not matched route info" in err


@pytest.mark.java
def test_traced_java_clients_against_rmq_serve_and_mqadmin(server: ServeProcess, tmp_path: Path) -> None:
    """A traced producer and push consumer of the 4.9.8 client; rmq and the kit's mqadmin print the
    same trace."""
    classes = compile_programs(tmp_path / "classes")
    state = tmp_path / "state"
    msg_id = trace_round_trip(classes, state, server.namesrv, "TracedTopic", "TracePG_S", "TraceCG_S")

    def both() -> bool:
        return "Sub " in rmq("queryMsgTraceById", "-n", server.namesrv, "-i", msg_id)

    wait_until(both, 15, "the Pub and Sub traces")
    ours = rmq("queryMsgTraceById", "-n", server.namesrv, "-i", msg_id)
    lines = ours.splitlines()
    pub = lines[1].split()
    assert pub[:3] == ["Pub", "TracePG_S", "127.0.0.1"] and pub[5].endswith("ms") and pub[6] == "success"
    sub = lines[4].split()
    assert sub[:3] == ["Sub", "TraceCG_S", "127.0.0.1"] and sub[6] == "success"
    theirs = mqadmin(state, "queryMsgTraceById", "-n", server.namesrv, "-i", msg_id)
    assert theirs.stdout == ours, theirs.stdout + theirs.stderr


def test_trace_topic_settings() -> None:
    """``msgTraceTopicName`` names a store directory: an invalid name stops the broker at start; the
    named topic joins the broker's system topics only with ``traceTopicEnable``."""
    from rmqcli.broker.config import broker_config_from_properties
    from rmqcli.broker.names import config_system_topics
    from rmqcli.errors import UsageError

    with pytest.raises(UsageError, match="msgTraceTopicName='../up'"):
        broker_config_from_properties({"traceTopicEnable": "true", "msgTraceTopicName": "../up"})
    off = broker_config_from_properties({"msgTraceTopicName": "MyTrace"})
    assert not off.trace_topic_enable and "MyTrace" not in config_system_topics(off)
    on = broker_config_from_properties({"traceTopicEnable": "true", "msgTraceTopicName": "MyTrace"})
    assert config_system_topics(on) == ("DefaultCluster", "broker-a", "DefaultCluster_REPLY_TOPIC", "MyTrace")
