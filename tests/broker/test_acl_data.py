"""Issue 41: with ``aclEnable=true`` the permissions follow the data, not the request code. Each
attack a limited account could make (defaults PUB|SUB, ``Secret=DENY``, ``VictimGroup=DENY``) is
sent as signed remoting frames over a raw socket to a real ``rmq serve`` and refused with
NO_PERMISSION (16); the legitimate path next to it still runs."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from rmqcli.broker.acl import grpcacl
from rmqcli.broker.acl.permissions import SUB
from rmqcli.broker.acl.plainacl import PlainAclFiles
from rmqcli.broker.acl.validator import AccessDenied
from rmqcli.remoting import headers as hd
from rmqcli.remoting.acl import Credentials
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.support import popwire as w
from tests.support.acl import exchange, is_refusal, serve_acl, signed
from tests.support.records import body_records
from tests.support.serve import ServeProcess

ADMIN = Credentials("dataAdmin01", "dataAdminSecret1")
LIMITED = Credentials("dataUser001", "dataUserSecret1")
ACL = {
    "accounts": [
        {"accessKey": ADMIN.access_key, "secretKey": ADMIN.secret_key, "admin": True},
        {"accessKey": LIMITED.access_key, "secretKey": LIMITED.secret_key, "admin": False,
         "defaultTopicPerm": "PUB|SUB", "defaultGroupPerm": "PUB|SUB",
         "topicPerms": ["Secret=DENY"], "groupPerms": ["VictimGroup=DENY"]},
    ]
}  # fmt: skip
OWN_GROUP = "LimitedGroup"
DENIED_SECRET = "No default permission for topic:Secret"
DENIED_VICTIM = "No default permission for group:VictimGroup"


def needs_admin(what: str) -> str:
    return f"Need admin permission for {what}, but accessKey={LIMITED.access_key} is not"


def props(**values: str) -> str:
    return "".join(f"{k}\x01{v}\x02" for k, v in values.items())


def send_v2(topic: str, group: str = "PG_DATA", sys_flag: int = 0, **properties: str) -> RemotingCommand:
    header = hd.SendMessageRequestHeaderV2(
        a=group, b=topic, c="TBW102", d=4, e=0, f=sys_flag, g=int(time.time() * 1000), h=0,
        i=props(**properties),
    )  # fmt: skip
    return RemotingCommand.request(RC.SEND_MESSAGE_V2, header.to_ext_fields(), b"data-body")


def call(server: ServeProcess, request: RemotingCommand, who: Credentials) -> RemotingCommand:
    return exchange(server.broker, signed(request, who))


def commit_offset(answer: RemotingCommand) -> int:
    """The CommitLog offset in a send answer's offset message id (its last 8 bytes)."""
    assert answer.code == RS.SUCCESS, answer.remark
    return int(answer.ext_fields["msgId"][-16:], 16)


def pull(topic: str, group: str = OWN_GROUP, sys_flag: int = 0) -> RemotingCommand:
    """A pull of queue 0 from offset 0 (``sys_flag`` 4: with its subscription, as a new consumer)."""
    fields = {"consumerGroup": group, "topic": topic, "queueId": 0, "queueOffset": 0, "maxMsgNums": 32,
              "sysFlag": sys_flag, "commitOffset": 0, "suspendTimeoutMillis": 0, "subscription": "*",
              "subVersion": 0, "expressionType": "TAG"}  # fmt: skip
    return RemotingCommand.request(RC.PULL_MESSAGE, fields)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    with serve_acl(tmp_path_factory.mktemp("acl-data"), ACL) as serve:
        yield serve


@pytest.fixture(scope="module")
def secret(server: ServeProcess) -> dict[str, int]:
    """The admin's messages: one in Secret, one delayed for Secret, one half message for Secret."""
    plain = call(server, send_v2("Secret"), ADMIN)
    delayed = call(server, send_v2("Secret", DELAY="2"), ADMIN)
    half = call(server, send_v2("Secret", "PG_SECRET", 4, TRAN_MSG="true", PGROUP="PG_SECRET"), ADMIN)
    opened = call(server, send_v2("Open"), ADMIN)
    return {
        "plain": commit_offset(plain),
        "delayed": commit_offset(delayed),
        "half": commit_offset(half),
        "half_queue_offset": int(half.ext_fields["queueOffset"]),
        "open": commit_offset(opened),
    }


def test_a_message_read_by_id_is_checked_against_its_topic(server: ServeProcess, secret: dict) -> None:
    def view(offset: int) -> RemotingCommand:
        return RemotingCommand.request(RC.VIEW_MESSAGE_BY_ID, {"offset": offset})

    assert is_refusal(call(server, view(secret["plain"]), LIMITED), DENIED_SECRET)
    assert is_refusal(
        call(server, view(secret["delayed"]), LIMITED), needs_admin("topic:SCHEDULE_TOPIC_XXXX")
    )
    assert call(server, view(secret["plain"]), ADMIN).code == RS.SUCCESS
    mine = call(server, view(secret["open"]), LIMITED)
    assert mine.code == RS.SUCCESS and b"data-body" in (mine.body or b"")


@pytest.mark.parametrize("topic", ["SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer", "RMQ_SYS_TRANS_HALF_TOPIC"])
def test_system_topics_holding_other_topics_messages_are_an_admins(
    server: ServeProcess, secret: dict, topic: str
) -> None:
    assert is_refusal(call(server, pull(topic), LIMITED), needs_admin(f"topic:{topic}"))
    assert call(server, pull(topic), ADMIN).code != RS.NO_PERMISSION


def test_send_back_needs_sub_on_the_copied_messages_topic(server: ServeProcess, secret: dict) -> None:
    def back(offset: int) -> RemotingCommand:
        fields = {"offset": offset, "group": OWN_GROUP, "delayLevel": -1, "maxReconsumeTimes": 0}
        return RemotingCommand.request(RC.CONSUMER_SEND_MSG_BACK, fields)

    assert is_refusal(call(server, back(secret["plain"]), LIMITED), DENIED_SECRET)
    assert call(server, back(secret["open"]), LIMITED).code == RS.SUCCESS  # into its own DLQ


def test_a_timer_or_a_commit_into_a_topic_needs_pub_on_it(server: ServeProcess, secret: dict) -> None:
    timer = send_v2("rmq_sys_wheel_timer", REAL_TOPIC="Secret", TIMER_OUT_MS="1000")
    assert is_refusal(call(server, timer, LIMITED), needs_admin("topic:rmq_sys_wheel_timer"))
    deliver = str(int(time.time() * 1000) + 3000)
    assert is_refusal(call(server, send_v2("Secret", TIMER_DELIVER_MS=deliver), LIMITED), DENIED_SECRET)
    assert call(server, send_v2("Open", TIMER_DELIVER_MS=deliver), LIMITED).code == RS.SUCCESS

    def end(offset: int, queue_offset: int, group: str) -> RemotingCommand:
        fields = {"producerGroup": group, "tranStateTableOffset": queue_offset, "commitLogOffset": offset,
                  "commitOrRollback": 8, "fromTransactionCheck": False, "msgId": "0" * 32}  # fmt: skip
        return RemotingCommand.request(RC.END_TRANSACTION, fields)

    commit = end(secret["half"], secret["half_queue_offset"], "PG_SECRET")
    assert is_refusal(call(server, commit, LIMITED), DENIED_SECRET)
    own = call(server, send_v2("Open", "PG_OPEN", 4, TRAN_MSG="true", PGROUP="PG_OPEN"), LIMITED)
    mine = end(commit_offset(own), int(own.ext_fields["queueOffset"]), "PG_OPEN")
    assert call(server, mine, LIMITED).code == RS.SUCCESS
    assert (
        call(server, end(secret["half"], secret["half_queue_offset"], "PG_SECRET"), ADMIN).code == RS.SUCCESS
    )


def stored_keys(server: ServeProcess, topic: str) -> list[str]:
    """The UNIQ_KEYs of queue 0 of ``topic``, pulled by the admin from the start."""
    keys: list[str] = []
    offset = 0
    while True:
        request = pull(topic, "AdminGroup", 4)
        request.ext_fields["queueOffset"] = str(offset)
        answer = call(server, request, ADMIN)
        if answer.code != RS.SUCCESS or not answer.body:
            return keys
        keys += [r.properties.get("UNIQ_KEY", "") for r in body_records(answer.body)]
        offset = int(answer.ext_fields["nextBeginOffset"])


def test_a_timer_cancel_marker_into_a_denied_topic_is_refused(server: ServeProcess) -> None:
    """A TIMER_DEL_UNIQKEY marker naming the admin's Secret timer, due in the same second, in
    5.1.1's form (the key) and 5.2's (``Secret+key``): a send to Secret, refused; the timer comes."""
    at = str((int(time.time() * 1000) // 1000 + 3) * 1000 + 500)
    victim = send_v2("Secret", UNIQ_KEY="SECRETTIMER1", TIMER_DELIVER_MS=at)
    assert call(server, victim, ADMIN).code == RS.SUCCESS
    for key in ("SECRETTIMER1", "Secret+SECRETTIMER1"):
        marker = send_v2("Secret", UNIQ_KEY=f"M-{key}", TIMER_DEL_UNIQKEY=key, TIMER_DELIVER_MS=at)
        answer = call(server, marker, LIMITED)
        assert is_refusal(answer, DENIED_SECRET), (key, answer.code, answer.remark)
    deadline = time.monotonic() + 30
    while "SECRETTIMER1" not in stored_keys(server, "Secret") and time.monotonic() < deadline:
        time.sleep(0.5)
    assert "SECRETTIMER1" in stored_keys(server, "Secret"), "the Secret timer was not delivered"


def test_retry_topics_and_locks_belong_to_their_group(server: ServeProcess) -> None:
    v1 = hd.SendMessageRequestHeader(
        producer_group="PG_DATA", topic="%RETRY%VictimGroup", default_topic="TBW102",
        default_topic_queue_nums=4, queue_id=0, sys_flag=0, born_timestamp=int(time.time() * 1000),
        flag=0, properties="",
    )  # fmt: skip
    no_group = RemotingCommand.request(RC.SEND_MESSAGE, v1.to_ext_fields(), b"x")
    assert is_refusal(call(server, no_group, LIMITED), DENIED_VICTIM)
    other_group = send_v2("%RETRY%VictimGroup", group=OWN_GROUP)
    assert is_refusal(call(server, other_group, LIMITED), DENIED_VICTIM)
    assert call(server, send_v2(f"%RETRY%{OWN_GROUP}", group=OWN_GROUP), LIMITED).code == RS.SUCCESS

    def lock(group: str, code: int = RC.LOCK_BATCH_MQ) -> RemotingCommand:
        body = {"consumerGroup": group, "clientId": "c1",
                "mqSet": [{"topic": "Open", "brokerName": "broker-a", "queueId": 0}]}  # fmt: skip
        return RemotingCommand.request(code, {}, json.dumps(body).encode())

    assert is_refusal(call(server, lock("VictimGroup"), LIMITED), DENIED_VICTIM)
    assert is_refusal(call(server, lock("VictimGroup", RC.UNLOCK_BATCH_MQ), LIMITED), DENIED_VICTIM)
    assert call(server, lock(OWN_GROUP), LIMITED).code == RS.SUCCESS


@pytest.mark.parametrize(
    "code",
    [RC.GET_ALL_TOPIC_CONFIG, RC.GET_ALL_CONSUMER_OFFSET, RC.GET_ALL_DELAY_OFFSET,
     RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, RC.GET_BROKER_CONFIG, RC.GET_BROKER_RUNTIME_INFO,
     RC.GET_BROKER_CONSUME_STATS],
)  # fmt: skip
def test_whole_tables_and_settings_need_an_admin(server: ServeProcess, code: int) -> None:
    request = RemotingCommand.request(code)
    assert is_refusal(call(server, request, LIMITED), needs_admin(f"request code={code}"))
    assert call(server, RemotingCommand.request(code), ADMIN).code != RS.NO_PERMISSION


@pytest.mark.parametrize(
    ("code", "fields"),
    [(RC.GET_TOPIC_STATS_INFO, {}), (RC.GET_MAX_OFFSET, {"queueId": 0}), (RC.GET_MIN_OFFSET, {"queueId": 0}),
     (RC.SEARCH_OFFSET_BY_TIMESTAMP, {"queueId": 0, "timestamp": 0}),
     (RC.GET_EARLIEST_MSG_STORETIME, {"queueId": 0}), (RC.QUERY_TOPIC_CONSUME_BY_WHO, {}),
     (RC.GET_TOPIC_CONFIG, {})],
)  # fmt: skip
def test_a_denied_topics_metadata_needs_sub_on_it(
    server: ServeProcess, secret: dict, code: int, fields: dict
) -> None:
    """4.9.8 checks none of these: any signed account read a DENY topic's offsets, stats and config."""
    answer = call(server, RemotingCommand.request(code, {"topic": "Secret", **fields}), LIMITED)
    assert is_refusal(answer, DENIED_SECRET), (answer.code, answer.remark)
    assert (
        call(server, RemotingCommand.request(code, {"topic": "Open", **fields}), LIMITED).code
        != RS.NO_PERMISSION
    )
    assert (
        call(server, RemotingCommand.request(code, {"topic": "Secret", **fields}), ADMIN).code
        != RS.NO_PERMISSION
    )


def test_broker_stats_of_a_denied_topic_or_group_are_refused(server: ServeProcess, secret: dict) -> None:
    """VIEW_BROKER_STATS_DATA: SUB on the topic and the group its ``statsKey`` names."""

    def stats(name: str, key: str) -> RemotingCommand:
        return RemotingCommand.request(RC.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key})

    refused = [
        (stats("TOPIC_PUT_NUMS", "Secret"), DENIED_SECRET),
        (stats("GROUP_GET_NUMS", "Secret@" + OWN_GROUP), DENIED_SECRET),
        (stats("GROUP_GET_NUMS", "Open@VictimGroup"), DENIED_VICTIM),
        (stats("NO_SUCH_STATS", "Open@Secret"), DENIED_SECRET),  # unknown: each part as a topic
    ]
    for request, message in refused:
        answer = call(server, request, LIMITED)
        assert is_refusal(answer, message), (request.ext_fields, answer.code, answer.remark)
    assert call(server, stats("TOPIC_PUT_NUMS", "Open"), LIMITED).code != RS.NO_PERMISSION
    assert call(server, stats("GROUP_GET_NUMS", "Open@" + OWN_GROUP), LIMITED).code != RS.NO_PERMISSION
    assert call(server, stats("TOPIC_PUT_NUMS", "Secret"), ADMIN).code == RS.SUCCESS


def test_consumer_metadata_of_denied_resources_is_refused(server: ServeProcess) -> None:
    def assignment(topic: str, group: str) -> RemotingCommand:
        body = {"topic": topic, "consumerGroup": group, "clientId": "c1", "strategyName": "AVG",
                "messageModel": "CLUSTERING"}  # fmt: skip
        return RemotingCommand.request(RC.QUERY_ASSIGNMENT, {}, json.dumps(body).encode())

    refused = [
        (assignment("Secret", OWN_GROUP), DENIED_SECRET),
        (assignment("Open", "VictimGroup"), DENIED_VICTIM),
        (RemotingCommand.request(RC.GET_CONSUME_STATS, {"consumerGroup": "VictimGroup"}), DENIED_VICTIM),
        (RemotingCommand.request(RC.GET_CONSUME_STATS, {"consumerGroup": OWN_GROUP, "topic": "Secret"}),
         DENIED_SECRET),
        (RemotingCommand.request(RC.QUERY_CONSUME_QUEUE, {"topic": "Secret", "queueId": 0, "index": 0,
                                                          "count": 1, "consumerGroup": OWN_GROUP}),
         DENIED_SECRET),
        (RemotingCommand.request(RC.QUERY_CONSUMER_OFFSET, {"consumerGroup": OWN_GROUP, "topic": "Secret",
                                                            "queueId": 0}), DENIED_SECRET),
        (RemotingCommand.request(RC.QUERY_CONSUMER_OFFSET, {"consumerGroup": "VictimGroup", "topic": "Open",
                                                            "queueId": 0}), DENIED_VICTIM),
    ]  # fmt: skip
    for request, message in refused:
        answer = call(server, request, LIMITED)
        assert is_refusal(answer, message), (request.code, answer.code, answer.remark)
    own = RemotingCommand.request(
        RC.QUERY_CONSUMER_OFFSET, {"consumerGroup": OWN_GROUP, "topic": "Open", "queueId": 0}
    )
    assert call(server, own, LIMITED).code != RS.NO_PERMISSION
    assert call(server, assignment("Open", OWN_GROUP), LIMITED).code == RS.SUCCESS


def test_a_pop_retry_topic_belongs_to_its_group_and_its_topic(server: ServeProcess) -> None:
    """``%RETRY%VictimGroup_Secret`` (5.1.1's ``KeyBuilder.buildPopRetryTopic``) holds Secret's
    messages VictimGroup popped and did not ack: read as the group ``VictimGroup_Secret`` alone, the
    limited account's default would let it read, copy and feed them; it needs VictimGroup and Secret."""
    retry = "%RETRY%VictimGroup_Secret"
    assert call(server, send_v2("Secret", UNIQ_KEY="POPRETRY0001"), ADMIN).code == RS.SUCCESS
    unacked = w.pop_header("VictimGroup", "Secret", invisible=1000)
    popped = call(server, RemotingCommand.request(RC.POP_MESSAGE, unacked), ADMIN)
    assert popped.code == RS.SUCCESS and popped.body, popped.remark
    revived: list = []
    deadline = time.monotonic() + 60  # revived once the 1 s is over (the revive round: a few s)
    while not revived and time.monotonic() < deadline:
        answer = call(server, pull(retry, "AdminGroup", 4), ADMIN)
        revived = body_records(answer.body) if answer.code == RS.SUCCESS and answer.body else []
        if not revived:
            time.sleep(0.5)
    assert revived, "no POP retry message within 60 s"
    offset = revived[0].physical_offset

    def back(group: str) -> RemotingCommand:
        fields = {"offset": offset, "group": group, "delayLevel": -1, "maxReconsumeTimes": 0}
        return RemotingCommand.request(RC.CONSUMER_SEND_MSG_BACK, fields)

    view = RemotingCommand.request(RC.VIEW_MESSAGE_BY_ID, {"offset": offset})
    wanted = {"topic": retry, "key": "POPRETRY0001", "maxNum": 32, "beginTimestamp": 0,
              "endTimestamp": 2**62}  # fmt: skip
    query = RemotingCommand.request(RC.QUERY_MESSAGE, wanted)
    pop_it = RemotingCommand.request(RC.POP_MESSAGE, w.pop_header(OWN_GROUP, retry, invisible=60000))
    refused = {
        "pull": pull(retry, sys_flag=4),
        "view by id": view,
        "send into": send_v2(retry, group=OWN_GROUP),
        "send back": back(OWN_GROUP),
        "query": query,
        "pop": pop_it,
    }
    for what, request in refused.items():
        answer = call(server, request, LIMITED)
        assert is_refusal(answer, DENIED_VICTIM), (what, answer.code, answer.remark)
    again = call(server, pull(retry, "AdminGroup", 4), ADMIN)
    assert again.code == RS.SUCCESS and body_records(again.body or b"")
    seen = call(server, RemotingCommand.request(RC.VIEW_MESSAGE_BY_ID, {"offset": offset}), ADMIN)
    assert seen.code == RS.SUCCESS and b"data-body" in (seen.body or b"")
    assert call(server, pull(f"%RETRY%{OWN_GROUP}", sys_flag=4), LIMITED).code != RS.NO_PERMISSION


def test_a_pop_retry_topic_named_after_the_trace_topic_is_no_trace_send(server: ServeProcess) -> None:
    """``%RETRY%VictimGroup_RMQ_SYS_TRACE_TOPIC`` reads as VictimGroup's retry of the trace topic: a
    send to it is no send to RMQ_SYS_TRACE_TOPIC (which needs no permission) and needs VictimGroup."""
    group = json.dumps({"groupName": "VictimGroup"}).encode()
    created = RemotingCommand.request(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, group)
    assert call(server, created, ADMIN).code == RS.SUCCESS
    answer = call(server, send_v2("%RETRY%VictimGroup_RMQ_SYS_TRACE_TOPIC", group=OWN_GROUP), LIMITED)
    assert is_refusal(answer, DENIED_VICTIM), (answer.code, answer.remark)


def test_a_grpc_call_naming_a_pop_retry_topic_needs_its_group_and_topic(tmp_path: Path) -> None:
    """gRPC (``grpcacl.validate`` without the broker's names: every reading of the name): a receive
    from ``%RETRY%VictimGroup_Secret`` and a send to ``%RETRY%VictimGroup_RMQ_SYS_TRACE_TOPIC``."""
    from rmqcli.broker.grpc.stubs import load

    s = load()
    d, v = s.definition, s.service
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(yaml.safe_dump(ACL))
    files = PlainAclFiles(acl_file)
    date = "20261129T000000Z"
    signature = hmac.new(LIMITED.secret_key.encode(), date.encode(), hashlib.sha1).hexdigest()
    authorization = (
        f"MQv2-HMAC-SHA1 Credential={LIMITED.access_key}, SignedHeaders=x-mq-date-time, Signature={signature}"
    )
    queue = d.MessageQueue(topic=d.Resource(name="%RETRY%VictimGroup_Secret"))
    receive = v.ReceiveMessageRequest(group=d.Resource(name=OWN_GROUP), message_queue=queue)
    assert grpcacl.needed_resources(receive) == {
        "%RETRY%" + OWN_GROUP: SUB, "%RETRY%VictimGroup_Secret": SUB, "%RETRY%VictimGroup": SUB, "Secret": SUB
    }  # fmt: skip
    trace = d.Message(topic=d.Resource(name="%RETRY%VictimGroup_RMQ_SYS_TRACE_TOPIC"))
    for message in (receive, v.SendMessageRequest(messages=[trace])):
        with pytest.raises(AccessDenied, match="^No permission for group:VictimGroup$"):
            grpcacl.validate(files, "10.0.0.9", authorization, date, message)
    own = d.MessageQueue(topic=d.Resource(name="Open"))
    mine = v.ReceiveMessageRequest(group=d.Resource(name=OWN_GROUP), message_queue=own)
    grpcacl.validate(files, "10.0.0.9", authorization, date, mine)  # passes
