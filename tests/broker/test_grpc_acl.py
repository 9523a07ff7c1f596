"""``rmq serve``'s gRPC endpoint with ``aclEnable=true``: the real Apache RocketMQ 5.x Python client
(``rocketmq-python-client`` 5.1.2 in ``.venv-rmq5``, run as ``grpc5_acl_client.py``) signs its
calls with ``Credentials``, and rmq checks them against the same ``plain_acl.yml`` as remoting,
as 5.1.1's proxy does (``rmqcli.broker.acl.grpcacl``): right keys send, receive and ack; a wrong
secret, no credentials, an unknown access key, no ``authorization`` at all, a topic without PUB, a
DENIED topic or group are refused with gRPC PERMISSION_DENIED (INTERNAL without the metadata),
and the reasons are rmq's log lines, the remoting ones' texts. The same file serves rmq's signed
remoting requests, where admin-only requests are (no gRPC call is admin-only). The same calls go
to the real 5.1.1 proxy (local mode, ``enableACL``, the file under ``-Drocketmq.home.dir``), and
each answer must be the one rmq gives, except where 5.1.1 checks a group as a topic."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import subprocess
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
import yaml

from rmqcli.broker.acl import grpcacl
from rmqcli.broker.acl.permissions import ANY, PUB, SUB
from rmqcli.broker.acl.plainacl import PlainAclFiles
from rmqcli.broker.acl.validator import AccessDenied
from rmqcli.remoting.acl import Credentials
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.support.acl import exchange, is_refusal, keys, send_request, signed
from tests.support.cli import run_rmq
from tests.support.client5 import PYTHON5, needs_client5
from tests.support.proxy5 import real_proxy
from tests.support.serve import ServeProcess, wait_until, write_conf

CLIENT = Path(__file__).with_name("grpc5_acl_client.py")

ADMIN = Credentials("aclAdmin01", "adminSecret01")
USER = Credentials("grpcUser01", "grpcSecret01")
WHITE = Credentials("grpcWhite01", "whiteSecret01")
ACL = {
    "globalWhiteRemoteAddresses": ["10.10.103.*"],
    "accounts": [
        # an admin passes every gRPC check, even its own DENY entry (5.1.1's PlainPermissionChecker)
        {"accessKey": ADMIN.access_key, "secretKey": ADMIN.secret_key, "admin": True,
         "topicPerms": ["TopicDenied=DENY"]},
        {"accessKey": USER.access_key, "secretKey": USER.secret_key, "admin": False,
         "defaultTopicPerm": "SUB", "defaultGroupPerm": "SUB",
         "topicPerms": ["TopicAcl=PUB|SUB", "TopicDenied=DENY"], "groupPerms": ["GroupDenied=DENY"]},
        # white-listed where the clients come from: its signature is not checked
        {"accessKey": WHITE.access_key, "secretKey": WHITE.secret_key, "whiteRemoteAddress": "127.0.0.1"},
    ],
}  # fmt: skip
TOPICS = ("TopicAcl", "TopicSubOnly", "TopicDenied")


def user(**call: object) -> dict:
    return {"ak": USER.access_key, "sk": USER.secret_key, **call}


# (label, call): the same calls go to rmq and to the real proxy
RIGHT = [
    ("route", user(rpc="QueryRoute", topic="TopicAcl")),
    ("send", user(rpc="SendMessage", topic="TopicAcl")),
    ("producer settings", user(rpc="Telemetry", topic="TopicAcl")),
    ("white-listed account, wrong secret", {"rpc": "QueryRoute", "topic": "TopicAcl", "ak": WHITE.access_key,
                                            "sk": "not-its-secret"}),
    ("admin, its DENY topic", {"rpc": "SendMessage", "topic": "TopicDenied", "ak": ADMIN.access_key,
                               "sk": ADMIN.secret_key}),
]  # fmt: skip
REFUSED = [
    ("wrong secret", user(rpc="QueryRoute", topic="TopicAcl", sk="wrongSecret01")),
    ("no credentials", {"rpc": "SendMessage", "topic": "TopicAcl"}),
    ("unknown access key", {"rpc": "QueryRoute", "topic": "TopicAcl", "ak": "nobody0001",
                            "sk": "nobody0001"}),
    ("not an authorization", user(rpc="QueryRoute", topic="TopicAcl", auth="garbage")),
    ("signature not hex", user(rpc="QueryRoute", topic="TopicAcl",
                               auth=f"MQv2-HMAC-SHA1 Credential={USER.access_key}, SignedHeaders="
                                    "x-mq-date-time, Signature=zz")),
    ("route of a DENY topic", user(rpc="QueryRoute", topic="TopicDenied")),
    ("send without PUB", user(rpc="SendMessage", topic="TopicSubOnly")),
    ("end transaction without PUB", user(rpc="EndTransaction", topic="TopicSubOnly")),
    ("producer settings without PUB", user(rpc="Telemetry", topic="TopicSubOnly")),
    ("receive from a DENY topic", user(rpc="ReceiveMessage", topic="TopicDenied", group="GroupOk")),
    ("ack on a DENY topic", user(rpc="AckMessage", topic="TopicDenied", group="GroupOk")),
    ("change invisible on a DENY topic", user(rpc="ChangeInvisibleDuration", topic="TopicDenied",
                                              group="GroupOk")),
    ("DLQ forward on a DENY topic", user(rpc="ForwardMessageToDeadLetterQueue", topic="TopicDenied",
                                         group="GroupOk")),
    ("assignment of a DENY topic", user(rpc="QueryAssignment", topic="TopicDenied", group="GroupOk")),
    ("consumer heartbeat without group", user(rpc="Heartbeat", client_type="SIMPLE_CONSUMER")),
]  # fmt: skip
NO_METADATA = [
    ("no authorization", user(rpc="QueryRoute", topic="TopicAcl", auth="none")),
    ("no x-mq-date-time", user(rpc="QueryRoute", topic="TopicAcl", auth="nodate")),
]
# 5.1.1 checks a group's bare name as a topic (USER's default topic permission SUB lets it by);
# rmq checks it as a group, as 5.1.4 does
DENIED_GROUP = [
    ("receive for a DENY group", user(rpc="ReceiveMessage", topic="TopicAcl", group="GroupDenied")),
    ("consumer heartbeat of a DENY group", user(rpc="Heartbeat", group="GroupDenied")),
    ("consumer settings of a DENY group", user(rpc="Telemetry", topic="TopicAcl", group="GroupDenied")),
]
CALLS = RIGHT + REFUSED + NO_METADATA + DENIED_GROUP
FLOW = {"ak": USER.access_key, "sk": USER.secret_key, "topic": "TopicAcl", "group": "GroupOk", "count": 3}


def client5(endpoint: str, home: Path, calls: list[dict], flow: dict | None = None) -> dict:
    """Run ``grpc5_acl_client.py``; its JSON answer (HOME apart: the client logs to ~/logs)."""
    spec = {"endpoint": endpoint, "calls": calls, "flow": flow}
    proc = subprocess.run(
        [str(PYTHON5), str(CLIENT), json.dumps(spec)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(home)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def write_acl(home: Path) -> Path:
    """``home/conf/plain_acl.yml``: where 5.1.1 looks under ``rocketmq.home.dir``."""
    path = home / "conf" / "plain_acl.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(ACL, sort_keys=False))
    return path


def create_topics(namesrv: str, broker: str) -> None:
    """The topics, signed by ADMIN; back once the NameServer has their routes (a 5.1.1 broker
    registers a new topic in the background)."""
    for topic in TOPICS:
        run_rmq(
            "updateTopic", "-n", namesrv, "-b", broker, "-t", topic, "-a", "+message.type=NORMAL",
            *keys(ADMIN), check=True,
        )  # fmt: skip

    def routed(topic: str) -> bool:
        return run_rmq("topicRoute", "-n", namesrv, "-t", topic).returncode == 0

    for topic in TOPICS:
        wait_until(partial(routed, topic), 30, f"the route of {topic}", step=0.3)


def start_rmq(tmp: Path) -> ServeProcess:
    """``rmq serve`` with aclEnable=true, the gRPC endpoint on, the ACL file watched every 0.2 s."""
    acl_file = write_acl(tmp / "rmqhome")
    conf = write_conf(tmp / "broker.conf", aclEnable="true")
    server = ServeProcess(tmp / "store", conf, extra=["--acl", str(acl_file)], grpc=True)
    os.environ["RMQ_ACL_WATCH_SECONDS"] = "0.2"  # the child inherits it
    try:
        server.start()
    finally:
        del os.environ["RMQ_ACL_WATCH_SECONDS"]
    create_topics(server.namesrv, server.broker)
    return server


@pytest.fixture(scope="module")
def rmq_acl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    server = start_rmq(tmp_path_factory.mktemp("grpcacl"))
    try:
        yield server
    finally:
        server.stop()


def shape(answer: dict) -> tuple[str, int | None]:
    """What the differential compares: the gRPC status, and the response's status code."""
    return answer["grpc"], answer["code"]


# --- the parse of 5.1.1's AuthorizationHeader and request messages, in process ---------------------


def sign_hex(secret: str, date_time: str) -> str:
    """The 5.x clients' signature: hex of HmacSHA1(secret, x-mq-date-time)."""
    return hmac.new(secret.encode(), date_time.encode(), hashlib.sha1).hexdigest()


def header(access_key: str, signature: str) -> str:
    return f"MQv2-HMAC-SHA1 Credential={access_key}, SignedHeaders=x-mq-date-time, Signature={signature}"


def test_authorization_header_is_read_as_5_1_1_reads_it() -> None:
    digest = hmac.new(b"k", b"d", hashlib.sha1).digest()
    parsed = grpcacl.parse_authorization(header("ak/cn-x/extra", digest.hex().upper()))
    assert parsed.access_key == "ak"  # Credential up to its first "/"
    assert parsed.signature == base64.b64encode(digest).decode()  # hex in, Base64 compared
    assert grpcacl.parse_authorization("M Credential=, Signature=").access_key == ""
    assert grpcacl.parse_authorization("M Other=1,,").access_key is None  # trailing empties dropped
    for bad, message in [
        ("MQv2-HMAC-SHA1", "authorization header is incorrect"),
        ("M Credential", "authorization keyValues length is incorrect, actual length=1"),
        ("M ", "authorization keyValues length is incorrect, actual length=1"),
        ("M Credential=/", "authorization credential length is incorrect, actual length=0"),
        ("M Signature=abc", "Odd number of characters."),
        ("M Signature=zz", "Illegal hexadecimal character z at index 0"),
    ]:
        with pytest.raises(AccessDenied, match=f"^{message}$"):
            grpcacl.parse_authorization(bad)


def test_each_request_names_the_resources_5_1_1_checks() -> None:
    from rmqcli.broker.grpc.stubs import load

    s = load()
    d, v = s.definition, s.service
    t, g = d.Resource(name="T"), d.Resource(name="G")
    queue = d.MessageQueue(topic=t)
    assert grpcacl.needed_resources(v.QueryRouteRequest(topic=t)) == {"T": ANY}
    both = {"%RETRY%G": SUB, "T": SUB}
    assert grpcacl.needed_resources(v.QueryAssignmentRequest(topic=t, group=g)) == both
    assert grpcacl.needed_resources(v.ReceiveMessageRequest(group=g, message_queue=queue)) == both
    assert grpcacl.needed_resources(v.AckMessageRequest(group=g, topic=t)) == both
    assert grpcacl.needed_resources(v.ChangeInvisibleDurationRequest(group=g, topic=t)) == both
    assert grpcacl.needed_resources(v.ForwardMessageToDeadLetterQueueRequest(group=g, topic=t)) == both
    assert grpcacl.needed_resources(v.NotifyClientTerminationRequest(group=g)) == {"%RETRY%G": SUB}
    assert grpcacl.needed_resources(v.EndTransactionRequest(topic=t)) == {"T": PUB}
    sends = v.SendMessageRequest(messages=[d.Message(topic=t), d.Message(topic=t)])
    assert grpcacl.needed_resources(sends) == {"T": PUB}
    assert grpcacl.needed_resources(v.HeartbeatRequest(client_type=d.PRODUCER)) == {}
    assert grpcacl.needed_resources(v.HeartbeatRequest(client_type=d.PUSH_CONSUMER, group=g)) == {
        "%RETRY%G": SUB
    }
    settings = d.Settings(publishing=d.Publishing(topics=[t, d.Resource(name="U")]))
    assert grpcacl.needed_resources(v.TelemetryCommand(settings=settings)) == {"T": PUB, "U": PUB}
    entry = d.SubscriptionEntry(topic=t)
    settings = d.Settings(subscription=d.Subscription(group=g, subscriptions=[entry]))
    assert grpcacl.needed_resources(v.TelemetryCommand(settings=settings)) == both
    assert grpcacl.needed_resources(v.TelemetryCommand(status=d.Status())) == {}
    for bad, message in [
        (v.SendMessageRequest(), "SendMessageRequest, messageCount is zero"),
        (v.SendMessageRequest(messages=[d.Message(topic=t), d.Message(topic=g)]),
         "SendMessageRequest, messages' topic is not consistent"),
        (v.HeartbeatRequest(client_type=d.SIMPLE_CONSUMER), "Consumer heartbeat doesn't have group"),
        (v.TelemetryCommand(settings=d.Settings()),
         "settings command doesn't have publishing or subscription"),
    ]:  # fmt: skip
        with pytest.raises(AccessDenied, match=f"^{message}$"):
            grpcacl.needed_resources(bad)


def test_validate_in_5_1_1_order(tmp_path: Path) -> None:
    from rmqcli.broker.grpc.stubs import load

    s = load()
    files = PlainAclFiles(write_acl(tmp_path))
    route = s.service.QueryRouteRequest(topic=s.definition.Resource(name="TopicDenied"))
    stamp = "20260101T000000Z"

    def check(
        host: str, authorization: str | None, date_time: str | None = stamp, message: object = route
    ) -> str | None:
        try:
            grpcacl.validate(files, host, authorization, date_time, message)
        except (AccessDenied, grpcacl.MissingMetadata) as exc:
            return str(exc)
        return None

    assert check("127.0.0.1", header(USER.access_key, sign_hex(USER.secret_key, stamp))) == (
        "No permission for topic:TopicDenied"  # 5.1.1's words for an entry (4.9.8: "No default ...")
    )
    assert check("127.0.0.1", header(USER.access_key, sign_hex("wrong", stamp))) == (
        f"Check signature failed for accessKey={USER.access_key}"
    )
    assert check("127.0.0.1", header(ADMIN.access_key, sign_hex(ADMIN.secret_key, stamp))) is None
    queue = s.definition.MessageQueue(topic=s.definition.Resource(name="TopicAcl"))
    group = s.definition.Resource(name="GroupDenied")
    receive = s.service.ReceiveMessageRequest(group=group, message_queue=queue)
    signed_user = header(USER.access_key, sign_hex(USER.secret_key, stamp))
    assert check("127.0.0.1", signed_user, message=receive) == "No permission for group:GroupDenied"
    # a global white-listed address needs no valid signature, but a readable header and a date
    assert check("10.10.103.7", header("nobody0001", "00")) is None
    assert check("10.10.103.7", "garbage") == "authorization header is incorrect"
    assert check("10.10.103.7", None) == "the call has no authorization metadata"
    assert check("10.10.103.7", header("nobody0001", "00"), None) == "the call has no x-mq-date-time metadata"
    assert check("127.0.0.1", "M Signature=00") == "No accessKey is configured"


# --- rmq serve with the real 5.x client ------------------------------------------------------------


@needs_client5
def test_rmq_checks_5x_clients_against_plain_acl(rmq_acl: ServeProcess, tmp_path: Path) -> None:
    """Right keys send, receive and ack; every refusal is PERMISSION_DENIED (INTERNAL without the
    metadata), with no description; rmq's log says why, in the ACL's words. An application with a
    wrong secret cannot start its producer; a consumer of a DENY group gets the error on receive."""
    result = client5(rmq_acl.grpc, tmp_path, [call for _, call in CALLS], FLOW)
    answers = dict(zip([label for label, _ in CALLS], result["calls"], strict=True))
    for label, _ in RIGHT:
        assert shape(answers[label]) == ("OK", 20000), (label, answers[label])
    for label, _ in REFUSED + DENIED_GROUP:
        assert answers[label] == {
            "grpc": "PERMISSION_DENIED",
            "details": "",
            "code": None,
            "message": None,
        }, label
    for label, _ in NO_METADATA:
        assert answers[label]["grpc"] == "INTERNAL", label
    flow = result["flow"]
    assert flow["error"] is None and len(flow["sent"]) == 3
    assert {"acl-0", "acl-1", "acl-2"} <= set(flow["received"]) and flow["acked"] == len(flow["received"])
    wrong = client5(rmq_acl.grpc, tmp_path, [], {**FLOW, "sk": "wrongSecret01"})["flow"]
    assert wrong["error"] == f"Exception: failed to fetch topic:{FLOW['topic']} route." and not wrong["sent"]
    denied = client5(rmq_acl.grpc, tmp_path, [], {**FLOW, "group": "GroupDenied"})["flow"]
    assert len(denied["sent"]) == 3 and not denied["received"]  # its producer may send
    assert "StatusCode.PERMISSION_DENIED" in denied["error"]  # its receive raises
    log = rmq_acl.output()
    for line in [
        f"gRPC QueryRoute from 127.0.0.1 refused: Check signature failed for accessKey={USER.access_key}",
        "gRPC SendMessage from 127.0.0.1 refused: No acl config for ",
        "gRPC QueryRoute from 127.0.0.1 refused: No acl config for nobody0001",
        "gRPC SendMessage from 127.0.0.1 refused: No default permission for topic:TopicSubOnly",
        "gRPC ReceiveMessage from 127.0.0.1 refused: No permission for topic:TopicDenied",
        "further lines about refused gRPC calls held back for 60 s",  # 10 lines a minute
    ]:
        assert line in log, line


@needs_client5
def test_one_account_file_for_remoting_and_grpc(rmq_acl: ServeProcess, tmp_path: Path) -> None:
    """USER's keys sign remoting requests too: a send with PUB passes, one without is refused with
    the reason the gRPC refusal logged, and an admin-only request (none over gRPC) is refused."""
    answer = exchange(rmq_acl.broker, signed(send_request("TopicAcl"), USER))
    assert answer.code == RS.SUCCESS, answer.remark
    answer = exchange(rmq_acl.broker, signed(send_request("TopicSubOnly"), USER))
    assert is_refusal(answer, "No default permission for topic:TopicSubOnly"), answer.remark
    create = run_rmq(
        "updateTopic", "-n", rmq_acl.namesrv, "-b", rmq_acl.broker, "-t", "TopicNew", *keys(USER)
    )
    assert create.returncode != 0
    code = int(RC.UPDATE_AND_CREATE_TOPIC)
    assert f"Need admin permission for request code={code}, but accessKey={USER.access_key} is not" in (
        create.stdout + create.stderr
    )


@needs_client5
def test_an_edited_acl_file_applies_to_grpc_calls(tmp_path: Path) -> None:
    """The watched file changes USER's secret: its old signature is refused from then on."""
    server = start_rmq(tmp_path)
    try:
        call = user(rpc="QueryRoute", topic="TopicAcl")
        [before] = client5(server.grpc, tmp_path, [call])["calls"]
        edited = json.loads(json.dumps(ACL))
        edited["accounts"][1]["secretKey"] = "newSecret001"
        (tmp_path / "rmqhome" / "conf" / "plain_acl.yml").write_text(yaml.safe_dump(edited))
        time.sleep(1.0)
        old, new = client5(server.grpc, tmp_path, [call, {**call, "sk": "newSecret001"}])["calls"]
    finally:
        server.stop()
    assert shape(before) == ("OK", 20000)
    assert shape(old) == ("PERMISSION_DENIED", None) and shape(new) == ("OK", 20000)


# --- the differential: the same calls to the real 5.1.1 proxy -----------------------------------


@pytest.mark.java
@needs_client5
@pytest.mark.proxy5
def test_rmq_answers_the_calls_as_the_real_5_1_1_proxy(rmq_acl: ServeProcess, tmp_path: Path) -> None:
    """Each call's gRPC status and response code from rmq and from the real proxy (enableACL,
    the same plain_acl.yml) are the same, but for a DENY group: 5.1.1 checks the group's name as
    a topic, so USER's default topic permission lets its calls by."""
    home = tmp_path / "aclhome"
    write_acl(home)
    calls = [call for _, call in CALLS]
    ours = client5(rmq_acl.grpc, tmp_path, calls, FLOW)
    with real_proxy(
        tmp_path / "proxy",
        broker_settings={"aclEnable": "true"},
        proxy_settings={"enableACL": "true"},
        java_opts=f"-Drocketmq.home.dir={home}",
    ) as proxy:
        create_topics(proxy.namesrv, proxy.broker)
        theirs = client5(proxy.endpoint, tmp_path, calls, {**FLOW, "receive_first": True})
        wrong = client5(proxy.endpoint, tmp_path, [], {**FLOW, "sk": "wrongSecret01"})["flow"]
    assert wrong["error"] == f"Exception: failed to fetch topic:{FLOW['topic']} route.", wrong
    labels = [label for label, _ in CALLS]
    mine = dict(zip(labels, ours["calls"], strict=True))
    real = dict(zip(labels, theirs["calls"], strict=True))
    for label, _ in RIGHT + REFUSED + NO_METADATA:
        assert shape(mine[label]) == shape(real[label]), (label, mine[label], real[label])
        assert (mine[label]["details"] == "") == (real[label]["details"] == ""), label
    for label, _ in DENIED_GROUP:
        assert shape(mine[label]) == ("PERMISSION_DENIED", None), label
        assert real[label]["grpc"] == "OK", (label, real[label])  # past the ACL
    for flow in (ours["flow"], theirs["flow"]):
        assert flow["error"] is None and {"acl-0", "acl-1", "acl-2"} <= set(flow["received"]), flow
