"""Topic and group names on ``rmq serve``: checked as RocketMQ 4.9.8 checks them
(``TopicValidator``, the client's ``Validators.checkGroup``) in every request that would store a
message, persist a name or build a path from it; and bodies a 4.9.8 processor dereferences at once
(HEART_BEAT, LOCK/UNLOCK_BATCH_MQ) answered with an error when missing or ``null``.

A real ``rmq serve`` subprocess on free loopback ports, raw requests with rmq's own remoting client.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from formats import fastjson
from formats.commitlog import decode_offset_msg_id
from rmqcli.remoting import headers as hd
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.client import RemotingClient
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.support.serve import ServeProcess, write_conf

ILLEGAL_TOPIC = "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
LONG_TOPIC = "The specified topic is longer than topic max length."
# TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET of 4.9.8
NOT_ALLOWED = (
    "SCHEDULE_TOPIC_XXXX",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT",
)
BAD_NAMES = ("Evil\n", "a/b", "..", "x/../../y", "sp ace", "", " ", "é", "a" * 300)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    tmp = tmp_path_factory.mktemp("names")
    proc = ServeProcess(tmp / "store", write_conf(tmp / "broker.conf"))
    proc.start()
    try:
        first = send(proc.broker, "TopicNames", b"first")  # the record at CommitLog offset 0
        assert first.code == RS.SUCCESS, first.remark
        yield proc
    finally:
        proc.kill()


def call(addr: str, code: int, header: dict | None = None, body: bytes = b"") -> RemotingCommand:
    async def go() -> RemotingCommand:
        async with RemotingClient() as client:
            return await client.invoke(addr, RemotingCommand.request(code, header, body, version=407), 10.0)

    return asyncio.run(go())


def send(
    addr: str, topic: str, body: bytes, props: str = "", *, code: int = RC.SEND_MESSAGE_V2
) -> RemotingCommand:
    header = hd.SendMessageRequestHeaderV2(
        a="PG_NAMES", b=topic, c="TBW102", d=4, e=0, f=0, g=int(time.time() * 1000), h=0, i=props
    ).to_ext_fields()
    if code == RC.SEND_MESSAGE:
        header = hd.SendMessageRequestHeader(
            producer_group="PG_NAMES", topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
            queue_id=0, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0, properties=props,
        ).to_ext_fields()  # fmt: skip
    return call(addr, code, header, body)


def topics(server: ServeProcess) -> dict:
    return fastjson.loads(call(server.broker, RC.GET_ALL_TOPIC_CONFIG).body)["topicConfigTable"]


def groups(server: ServeProcess) -> dict:
    return fastjson.loads(call(server.broker, RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG).body)[
        "subscriptionGroupTable"
    ]


def offsets(server: ServeProcess) -> dict:
    return fastjson.loads(call(server.broker, RC.GET_ALL_CONSUMER_OFFSET).body)["offsetTable"]


def files_outside(server: ServeProcess) -> list[Path]:
    """Everything under the test's directory but the store, its config and the server's log."""
    base = server.store.parent
    return [p for p in base.rglob("*") if not p.is_relative_to(server.store) and p.parent != base]


def flushed(server: ServeProcess) -> None:
    """A round trip, then a little time for the reput and the flush of whatever was stored."""
    assert call(server.broker, RC.GET_BROKER_RUNTIME_INFO).code == RS.SUCCESS
    time.sleep(0.8)


def assert_healthy(server: ServeProcess) -> None:
    assert server.proc is not None and server.proc.poll() is None
    assert send(server.broker, "TopicNames", b"still here").code == RS.SUCCESS
    assert "Traceback" not in server.output()


# --- the reproduction of the issue -------------------------------------------------------------
def test_send_back_with_a_path_in_the_group_writes_nothing_outside_the_store(server: ServeProcess) -> None:
    target = server.store.parent / "escaped"
    ups = len(server.store.parts) + 2  # consumequeue/%DLQ%x/ up to / and then some, as in the issue
    group = "x/" + "../" * ups + str(target).lstrip("/")
    assert len("%DLQ%" + group) <= 127  # short enough for a CommitLog record: the store takes it
    header = {"group": group, "offset": "0", "delayLevel": "-1", "originTopic": "TopicNames"}
    answer = call(server.broker, RC.CONSUMER_SEND_MSG_BACK, header)
    assert answer.code == RS.SYSTEM_ERROR
    assert (
        answer.remark
        == f"the specified group[{group}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    )
    flushed(server)
    assert not target.exists()
    assert files_outside(server) == []
    assert group not in groups(server)
    assert not [t for t in topics(server) if group in t]
    assert_healthy(server)


def test_send_back_whose_retry_topic_would_be_too_long_is_refused(server: ServeProcess) -> None:
    group = "G" * 121  # a valid group (at most 255), but %RETRY% + it is 128 characters
    header = {"group": group, "offset": "0", "delayLevel": "0"}
    answer = call(server.broker, RC.CONSUMER_SEND_MSG_BACK, header)
    assert (answer.code, answer.remark) == (RS.SYSTEM_ERROR, LONG_TOPIC)
    assert not [t for t in topics(server) if group in t]
    ok = call(
        server.broker, RC.CONSUMER_SEND_MSG_BACK, {"group": "G_BACK", "offset": "0", "delayLevel": "-1"}
    )
    assert ok.code == RS.SUCCESS, ok.remark
    assert "%DLQ%G_BACK" in topics(server)


def test_send_to_a_retry_topic_of_a_blank_group_does_not_create_the_group(server: ServeProcess) -> None:
    answer = send(server.broker, "%RETRY%", b"x", "RECONSUME_TIME\x0199\x02")
    assert answer.code == RS.SYSTEM_ERROR
    assert answer.remark == "the specified group is blank"
    assert "" not in groups(server)


# --- sends -------------------------------------------------------------------------------------
@pytest.mark.parametrize("code", [RC.SEND_MESSAGE, RC.SEND_MESSAGE_V2])
def test_a_topic_with_a_trailing_newline_is_refused(server: ServeProcess, code: int) -> None:
    answer = send(server.broker, "Evil\n", b"x", code=code)
    assert (answer.code, answer.remark) == (RS.SYSTEM_ERROR, ILLEGAL_TOPIC)
    assert "Evil\n" not in topics(server)
    assert not (server.store / "consumequeue" / "Evil\n").exists()


@pytest.mark.parametrize("topic", NOT_ALLOWED)
def test_sends_to_the_topics_4_9_8_forbids_are_refused(server: ServeProcess, topic: str) -> None:
    answer = send(server.broker, topic, b"x")
    assert (answer.code, answer.remark) == (
        RS.NO_PERMISSION,
        f"Sending message to topic[{topic}] is forbidden.",
    )


def test_the_trace_topic_takes_sends_as_in_4_9_8(server: ServeProcess) -> None:
    answer = send(server.broker, "RMQ_SYS_TRACE_TOPIC", b"trace")
    assert answer.code == RS.SUCCESS, answer.remark


def test_topic_length_limit(server: ServeProcess) -> None:
    assert send(server.broker, "T" * 127, b"x").code == RS.SUCCESS
    answer = send(server.broker, "T" * 128, b"x")
    assert (answer.code, answer.remark) == (RS.SYSTEM_ERROR, LONG_TOPIC)
    blank = send(server.broker, " ", b"x")
    assert (blank.code, blank.remark) == (RS.SYSTEM_ERROR, "The specified topic is blank.")


def test_end_transaction_does_not_commit_to_a_topic_named_by_a_property(server: ServeProcess) -> None:
    """A plain message carrying its own REAL_TOPIC, then END_TRANSACTION COMMIT pointing at it."""
    target = server.store.parent / "escaped-tx"
    real = "../../" + target.name
    props = f"REAL_TOPIC\x01{real}\x02REAL_QID\x010\x02PGROUP\x01PG_NAMES\x02"
    sent = send(server.broker, "TopicNamesTx", b"tx", props)
    assert sent.code == RS.SUCCESS, sent.remark
    _, _, physical = decode_offset_msg_id(sent.ext_fields["msgId"])
    header = hd.EndTransactionRequestHeader(
        producer_group="PG_NAMES", tran_state_table_offset=int(sent.ext_fields["queueOffset"]),
        commit_log_offset=physical, commit_or_rollback=8, msg_id=sent.ext_fields["msgId"],
    ).to_ext_fields()  # fmt: skip
    answer = call(server.broker, RC.END_TRANSACTION, header)
    assert (answer.code, answer.remark) == (RS.SYSTEM_ERROR, ILLEGAL_TOPIC)
    flushed(server)
    assert not target.exists()
    assert files_outside(server) == []
    bad_group = dict(header, producerGroup="PG/..")
    answer = call(server.broker, RC.END_TRANSACTION, bad_group)
    assert answer.code == RS.SYSTEM_ERROR
    assert "contains illegal characters" in (answer.remark or "")


# --- pull and offsets --------------------------------------------------------------------------
def pull(server: ServeProcess, group: str, topic: str) -> RemotingCommand:
    header = hd.PullMessageRequestHeader(
        consumer_group=group, topic=topic, queue_id=0, queue_offset=0, max_msg_nums=32, sys_flag=0x5,
        commit_offset=0, suspend_timeout_millis=0, subscription="*", sub_version=0,
    ).to_ext_fields()  # fmt: skip
    return call(server.broker, RC.PULL_MESSAGE, header)


@pytest.mark.parametrize("name", BAD_NAMES)
def test_pull_with_a_bad_group_or_topic_is_refused(server: ServeProcess, name: str) -> None:
    answer = pull(server, name, "TopicNames")
    assert answer.code == RS.SYSTEM_ERROR
    assert "group" in (answer.remark or "")
    assert name not in groups(server)
    answer = pull(server, "G_PULL", name)
    assert answer.code == RS.SYSTEM_ERROR
    assert "topic" in (answer.remark or "")
    assert not [k for k in offsets(server) if k.startswith(f"{name}@")]


def test_pull_with_good_names_still_works(server: ServeProcess) -> None:
    answer = pull(server, "G_PULL", "TopicNames")
    assert answer.code == RS.SUCCESS, answer.remark


@pytest.mark.parametrize("name", BAD_NAMES)
def test_offsets_with_a_bad_group_or_topic_are_refused(server: ServeProcess, name: str) -> None:
    for group, topic in ((name, "TopicNames"), ("G_OFFSETS", name)):
        header = {"consumerGroup": group, "topic": topic, "queueId": "0", "commitOffset": "1"}
        answer = call(server.broker, RC.UPDATE_CONSUMER_OFFSET, header)
        assert answer.code == RS.SYSTEM_ERROR
        query = call(
            server.broker, RC.QUERY_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic, "queueId": "0"}
        )
        assert query.code == RS.SYSTEM_ERROR
    time.sleep(0.1)
    assert not [k for k in offsets(server) if name in k.split("@")]
    good = {"consumerGroup": "G_OFFSETS", "topic": "TopicNames", "queueId": "0", "commitOffset": "1"}
    assert call(server.broker, RC.UPDATE_CONSUMER_OFFSET, good).code == RS.SUCCESS


# --- heartbeats --------------------------------------------------------------------------------
def heartbeat(group: str = "G_BEAT", producer: str = "PG_BEAT", topic: str = "TopicNames") -> bytes:
    return jb.encode(
        jb.HeartbeatData(
            client_id="127.0.0.1@names",
            consumer_data_set=[
                jb.ConsumerData(
                    group_name=group, subscription_data_set=[jb.SubscriptionData(topic=topic, sub_string="*")]
                )
            ],
            producer_data_set=[jb.ProducerData(group_name=producer)],
        )
    )


@pytest.mark.parametrize("name", BAD_NAMES)
def test_heartbeats_with_bad_names_are_refused(server: ServeProcess, name: str) -> None:
    for body in (heartbeat(group=name), heartbeat(producer=name), heartbeat(topic=name)):
        answer = call(server.broker, RC.HEART_BEAT, {}, body)
        assert answer.code == RS.SYSTEM_ERROR
        assert (
            "illegal characters" in (answer.remark or "")
            or "blank" in (answer.remark or "")
            or "longer" in (answer.remark or "")
        )
    assert name not in groups(server)
    assert "%RETRY%" + name not in topics(server)
    listed = call(server.broker, RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G_BEAT"})
    assert listed.code == RS.SYSTEM_ERROR  # nothing of a refused heartbeat was registered
    answer = call(
        server.broker, RC.UNREGISTER_CLIENT, {"clientID": "127.0.0.1@names", "consumerGroup": name or " "}
    )
    assert answer.code == RS.SYSTEM_ERROR


def test_a_good_heartbeat_registers_and_empty_unregister_groups_are_ignored(server: ServeProcess) -> None:
    assert call(server.broker, RC.HEART_BEAT, {}, heartbeat()).code == RS.SUCCESS
    assert "%RETRY%G_BEAT" in topics(server)
    header = {"clientID": "127.0.0.1@names", "producerGroup": "", "consumerGroup": "G_BEAT"}
    assert call(server.broker, RC.UNREGISTER_CLIENT, header).code == RS.SUCCESS


def test_a_long_group_heartbeat_registers_without_an_unusable_retry_topic(server: ServeProcess) -> None:
    group = "L" * 200  # valid for Validators.checkGroup; %RETRY% + it is no valid topic
    answer = call(server.broker, RC.HEART_BEAT, {}, heartbeat(group=group, topic="%RETRY%" + group))
    assert answer.code == RS.SUCCESS, answer.remark
    assert "%RETRY%" + group not in topics(server)


# --- admin -------------------------------------------------------------------------------------
def create_topic(server: ServeProcess, topic: str) -> RemotingCommand:
    header = hd.CreateTopicRequestHeader(
        topic=topic, default_topic="TBW102", read_queue_nums=1, write_queue_nums=1, perm=6,
        topic_filter_type="SINGLE_TAG",
    ).to_ext_fields()  # fmt: skip
    return call(server.broker, RC.UPDATE_AND_CREATE_TOPIC, header)


@pytest.mark.parametrize("name", BAD_NAMES)
def test_admin_update_topic_and_sub_group_refuse_bad_names(server: ServeProcess, name: str) -> None:
    answer = create_topic(server, name)
    assert answer.code == RS.SYSTEM_ERROR
    assert answer.remark in (ILLEGAL_TOPIC, LONG_TOPIC, "The specified topic is blank.")
    assert name not in topics(server)
    body = jb.encode(jb.SubscriptionGroupConfig(group_name=name))
    answer = call(server.broker, RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)
    assert answer.code == RS.SYSTEM_ERROR
    assert name not in groups(server)
    header = {"srcGroup": "G_OFFSETS", "destGroup": name, "topic": "TopicNames", "offline": "true"}
    assert call(server.broker, RC.CLONE_GROUP_OFFSET, header).code == RS.SYSTEM_ERROR


@pytest.mark.parametrize("topic", ["TBW102", "SCHEDULE_TOPIC_XXXX", "rmq_sys_x", "DefaultCluster", "broker-a",
                                   "DefaultCluster_REPLY_TOPIC"])  # fmt: skip
def test_admin_update_topic_refuses_system_topics(server: ServeProcess, topic: str) -> None:
    answer = create_topic(server, topic)
    assert (answer.code, answer.remark) == (
        RS.SYSTEM_ERROR,
        f"The topic[{topic}] is conflict with system topic.",
    )


def test_admin_with_good_names_still_works(server: ServeProcess) -> None:
    assert create_topic(server, "TopicNamesAdmin").code == RS.SUCCESS
    body = jb.encode(jb.SubscriptionGroupConfig(group_name="G_ADMIN"))
    assert call(server.broker, RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body).code == RS.SUCCESS
    assert "G_ADMIN" in groups(server)


# --- bodies that are missing or null ------------------------------------------------------------
@pytest.mark.parametrize(
    ("code", "body"),
    [
        (RC.HEART_BEAT, b"null"),
        (RC.HEART_BEAT, b""),
        (RC.HEART_BEAT, b'{"clientID":"c","consumerDataSet":null}'),
        (RC.HEART_BEAT, b'{"clientID":"c","consumerDataSet":[null]}'),
        (RC.HEART_BEAT, b'{"clientID":"c","producerDataSet":[{"groupName":null}]}'),
        (RC.UNLOCK_BATCH_MQ, b"null"),
        (RC.UNLOCK_BATCH_MQ, b""),
        (RC.LOCK_BATCH_MQ, b"null"),
        (RC.LOCK_BATCH_MQ, b'{"consumerGroup":"G","clientId":"c","mqSet":[null]}'),
        (RC.LOCK_BATCH_MQ, b'{"consumerGroup":"a/b","clientId":"c","mqSet":[]}'),
    ],
)
def test_missing_or_null_bodies_get_an_error_answer(server: ServeProcess, code: int, body: bytes) -> None:
    answer = call(server.broker, code, {}, body)
    assert answer.code == RS.SYSTEM_ERROR
    assert answer.remark
    assert_healthy(server)


def test_a_null_sub_group_body_is_a_no_op_as_in_4_9_8(server: ServeProcess) -> None:
    answer = call(server.broker, RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, b"null")
    assert answer.code == RS.SUCCESS
    assert_healthy(server)


def test_lock_and_unlock_with_good_bodies_still_work(server: ServeProcess) -> None:
    mq = jb.MessageQueue(broker_name="broker-a", queue_id=0, topic="TopicNames")
    body = jb.encode(jb.LockBatchRequestBody(client_id="c1", consumer_group="G_LOCK", mq_set=[mq]))
    locked = call(server.broker, RC.LOCK_BATCH_MQ, {}, body)
    assert locked.code == RS.SUCCESS
    assert json.loads(locked.body)["lockOKMQSet"] == [
        {"brokerName": "broker-a", "queueId": 0, "topic": "TopicNames"}
    ]
    assert call(server.broker, RC.UNLOCK_BATCH_MQ, {}, body).code == RS.SUCCESS
