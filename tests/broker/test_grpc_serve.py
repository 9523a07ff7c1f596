"""``rmq serve``'s gRPC endpoint over a real socket, called with grpcio and the stubs rmq generates
(the calls a 5.x client makes, and the ones it should not): statuses as the 5.1 proxy answers them,
routes, FIFO queue choice, a transactional send committed with EndTransaction, the consumer calls'
refusals, and the command line (port in use, TLS options, ``--grpc-port 0``)."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import grpc
import pytest

from rmqcli.broker.grpc.producer import consistent_hash, java_string_hash
from rmqcli.broker.grpc.stubs import load
from tests.support.cli import one_line_error, rmq_json, run_rmq
from tests.support.grpcserve import server_fixture, stub_fixture
from tests.support.serve import ServeProcess, free_port, free_port_pair, listening_ports, write_conf

S = load()
D, SV = S.definition, S.service
TOPIC = "TopicGS"
META = [("x-mq-client-id", "test@1@0@x"), ("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2")]


server = server_fixture(TOPIC)
stub = stub_fixture()


def message(body: bytes, message_id: str, **system: object) -> object:
    m = D.Message(body=body)
    m.topic.name = TOPIC
    m.system_properties.message_id = message_id
    m.system_properties.message_type = D.NORMAL
    m.system_properties.born_timestamp.FromMilliseconds(int(time.time() * 1000))
    for name, value in system.items():
        setattr(m.system_properties, name, value)
    return m


def stored(server: ServeProcess, topic: str, message_id: str) -> dict:
    [found] = rmq_json("queryMsgByUniqueKey", "-n", server.namesrv, "-t", topic, "-i", message_id, "--json")
    return found["message"]


def test_every_call_needs_a_client_id(stub) -> None:
    request = SV.QueryRouteRequest(topic=D.Resource(name=TOPIC))
    assert stub.QueryRoute(request).status.code == D.CLIENT_ID_REQUIRED


def test_routes_name_the_grpc_endpoint(server: ServeProcess, stub) -> None:
    answer = stub.QueryRoute(SV.QueryRouteRequest(topic=D.Resource(name=TOPIC)), metadata=META)
    assert answer.status.code == D.OK
    assert [q.id for q in answer.message_queues] == list(range(8))
    for queue in answer.message_queues:
        assert queue.permission == D.READ_WRITE and list(queue.accept_message_types) == [D.NORMAL]
        assert (queue.broker.name, queue.broker.id) == ("broker-a", 0)
        [address] = queue.broker.endpoints.addresses
        assert (address.host, address.port, queue.broker.endpoints.scheme) == (
            "127.0.0.1",
            server.grpc_port,
            D.IPv4,
        )
    missing = stub.QueryRoute(SV.QueryRouteRequest(topic=D.Resource(name="NoSuchTopicGS")), metadata=META)
    assert missing.status.code == D.TOPIC_NOT_FOUND and not missing.message_queues
    system = stub.QueryRoute(
        SV.QueryRouteRequest(topic=D.Resource(name="SCHEDULE_TOPIC_XXXX")), metadata=META
    )
    assert system.status.code == D.ILLEGAL_TOPIC
    assignment = stub.QueryAssignment(
        SV.QueryAssignmentRequest(topic=D.Resource(name=TOPIC), group=D.Resource(name="GID_GS")),
        metadata=META,
    )
    assert assignment.status.code == D.OK and [a.message_queue.id for a in assignment.assignments] == [-1]


def test_refused_sends(stub) -> None:
    bad = message(b"x", "01AA")
    bad.user_properties["TAGS"] = "mine"
    answer = stub.SendMessage(SV.SendMessageRequest(messages=[bad]), metadata=META)
    assert (answer.status.code, answer.status.message) == (
        D.ILLEGAL_MESSAGE_PROPERTY_KEY,
        "property is used by system: TAGS",
    )
    answer = stub.SendMessage(SV.SendMessageRequest(), metadata=META)
    assert answer.status.code == D.MESSAGE_CORRUPTED
    missing = message(b"x", "01AB")
    missing.topic.name = "NoSuchTopicGS"
    assert (
        stub.SendMessage(SV.SendMessageRequest(messages=[missing]), metadata=META).status.code
        == D.TOPIC_NOT_FOUND
    )


def test_a_message_group_picks_its_queue_as_the_proxy(server: ServeProcess, stub) -> None:
    for group in ("order-1", "group-A", "g"):
        message_id = f"01FIFO{java_string_hash(group) & 0xFFFF:04X}"
        sent = message(b"fifo", message_id, message_group=group)
        answer = stub.SendMessage(SV.SendMessageRequest(messages=[sent]), metadata=META)
        assert answer.status.code == D.OK and answer.entries[0].message_id == message_id
        found = stored(server, TOPIC, message_id)
        assert found["queueId"] == consistent_hash(java_string_hash(group), 8)
        assert found["properties"]["__SHARDINGKEY"] == group


def test_a_transaction_is_committed_with_end_transaction(server: ServeProcess, stub) -> None:
    message_id = "01C0FFEE0000000000000000000000TX01"
    half = message(b"tx-body", message_id, message_type=D.TRANSACTION)
    answer = stub.SendMessage(SV.SendMessageRequest(messages=[half]), metadata=META)
    [entry] = answer.entries
    assert answer.status.code == D.OK and entry.transaction_id == message_id
    assert run_rmq("queryMsgByUniqueKey", "-n", server.namesrv, "-t", TOPIC, "-i", message_id).returncode != 0
    end = SV.EndTransactionRequest(
        topic=D.Resource(name=TOPIC), message_id=message_id, transaction_id=message_id,
        resolution=D.COMMIT, source=D.SOURCE_CLIENT,
    )  # fmt: skip
    assert stub.EndTransaction(end, metadata=META).status.code == D.OK
    committed = stored(server, TOPIC, message_id)
    assert committed["body"] == "tx-body" and committed["properties"]["PGROUP"] == TOPIC
    again = stub.EndTransaction(end, metadata=META)  # its transaction data is used up
    assert (again.status.code, again.status.message) == (
        D.INTERNAL_SERVER_ERROR,
        "cannot found transaction data",
    )
    blank = SV.EndTransactionRequest(topic=D.Resource(name=TOPIC), message_id=message_id, resolution=D.COMMIT)
    assert stub.EndTransaction(blank, metadata=META).status.code == D.INVALID_TRANSACTION_ID


def test_client_calls(stub) -> None:
    meta = [("x-mq-client-id", "fresh@2@0@y")]
    heartbeat = stub.Heartbeat(SV.HeartbeatRequest(client_type=D.PRODUCER), metadata=meta)
    assert heartbeat.status.code == D.UNRECOGNIZED_CLIENT_TYPE
    settings = D.Settings(client_type=D.PRODUCER)
    settings.publishing.topics.add(name=TOPIC)
    replies = stub.Telemetry(iter([SV.TelemetryCommand(settings=settings)]), metadata=meta)
    [reply] = list(replies)
    assert reply.status.code == D.OK and reply.settings.publishing.max_body_size == 4 * 1024 * 1024
    assert stub.Heartbeat(SV.HeartbeatRequest(client_type=D.PRODUCER), metadata=meta).status.code == D.OK
    done = stub.NotifyClientTermination(SV.NotifyClientTerminationRequest(), metadata=meta)
    assert done.status.code == D.OK
    assert stub.Heartbeat(SV.HeartbeatRequest(client_type=D.PRODUCER), metadata=meta).status.code == (
        D.UNRECOGNIZED_CLIENT_TYPE
    )
    with pytest.raises(grpc.RpcError) as caught:
        list(stub.Telemetry(iter([SV.TelemetryCommand(settings=D.Settings())]), metadata=meta))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "no publishing or subscription" in caught.value.details()


def test_consumer_calls_refuse_as_the_proxy(server: ServeProcess, stub) -> None:
    topic = "TopicGSEmpty"
    run_rmq("updateTopic", "-n", server.namesrv, "-c", "DefaultCluster", "-t", topic, check=True)
    queue = D.MessageQueue(topic=D.Resource(name=topic), broker=D.Broker(name="broker-a"))
    request = SV.ReceiveMessageRequest(group=D.Resource(name="GID_GS"), message_queue=queue, batch_size=4)
    request.invisible_duration.FromSeconds(5)  # under the 10 s minimum
    first, last = list(stub.ReceiveMessage(request, metadata=META, timeout=30))
    assert first.status.code == D.ILLEGAL_INVISIBLE_TIME
    assert last.HasField("delivery_timestamp")
    request.invisible_duration.FromSeconds(30)
    first, last = list(stub.ReceiveMessage(request, metadata=META, timeout=4))  # 4 s left: under 5 s
    assert first.status.code == D.ILLEGAL_POLLING_TIME and last.HasField("delivery_timestamp")
    request.long_polling_timeout.FromSeconds(5)
    started = time.monotonic()
    first, last = list(stub.ReceiveMessage(request, metadata=META, timeout=30))  # nothing there
    assert first.status.code == D.MESSAGE_NOT_FOUND and first.status.message == "no new message"
    assert time.monotonic() - started >= 4
    entry = SV.AckMessageEntry(message_id="X", receipt_handle="not a handle")
    ack = stub.AckMessage(
        SV.AckMessageRequest(group=D.Resource(name="GID_GS"), topic=D.Resource(name=TOPIC), entries=[entry]),
        metadata=META,
    )
    assert ack.status.code == D.INVALID_RECEIPT_HANDLE
    assert [e.status.code for e in ack.entries] == [D.INVALID_RECEIPT_HANDLE]
    change = SV.ChangeInvisibleDurationRequest(
        group=D.Resource(name="GID_GS"), topic=D.Resource(name=TOPIC), receipt_handle="1 2 3"
    )
    assert stub.ChangeInvisibleDuration(change, metadata=META).status.code == D.INVALID_RECEIPT_HANDLE


def test_grpc_port_in_use_is_one_line_and_exit_5(tmp_path: Path, rmq_proc) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = ["--namesrv-port", str(free_port()), "--port", str(free_port_pair()), "--grpc-port", str(port)]
        proc = rmq_proc("serve", str(tmp_path / "store"), *args, timeout=60)
    assert proc.returncode == 5, (proc.stdout, proc.stderr)
    assert one_line_error(proc.stderr) == (
        f"rmq: error: gRPC: cannot listen on 127.0.0.1:{port}: address already in use\n"
    )


def test_tls_options_go_together(tmp_path: Path, rmq_proc) -> None:
    cert = tmp_path / "cert.pem"
    cert.write_text("not a certificate")
    proc = rmq_proc("serve", str(tmp_path / "store"), "--grpc-cert", str(cert), timeout=60)
    assert proc.returncode == 2
    assert "--grpc-cert and --grpc-key go together" in one_line_error(proc.stderr)


def test_grpc_port_0_serves_no_grpc(tmp_path: Path) -> None:
    """With --grpc-port 0 the process listens on the NameServer, broker, VIP and HA ports only."""
    with ServeProcess(tmp_path / "store") as s:
        assert "gRPC" not in s.output()
        assert s.proc is not None
        assert listening_ports(s.proc.pid) == {s.namesrv_port, s.port, s.port - 2, s.port + 1}
    with ServeProcess(tmp_path / "store", grpc=True) as s:  # the same check sees a gRPC port
        assert s.proc is not None
        assert s.grpc_port in listening_ports(s.proc.pid)


def test_a_topic_with_a_message_type_takes_only_that_type(tmp_path: Path) -> None:
    """A 5.x topic's ``message.type`` attribute (topics.json ``attributes``, as a 5.x broker writes
    it): advertised in the route and checked at send, as the 5.1 proxy does."""
    config = tmp_path / "store" / "config"
    config.mkdir(parents=True)
    fifo = {
        "topicName": "TopicFifo", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
        "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False,
        "attributes": {"message.type": "FIFO"},
    }  # fmt: skip
    tables = {"dataVersion": {"counter": 1, "timestamp": 0}, "topicConfigTable": {"TopicFifo": fifo}}
    (config / "topics.json").write_text(json.dumps(tables))
    with ServeProcess(tmp_path / "store", write_conf(tmp_path / "broker.conf"), grpc=True) as s:
        with grpc.insecure_channel(s.grpc) as channel:
            fifo_stub = S.service_grpc.MessagingServiceStub(channel)
            route = fifo_stub.QueryRoute(
                SV.QueryRouteRequest(topic=D.Resource(name="TopicFifo")), metadata=META
            )
            assert {tuple(q.accept_message_types) for q in route.message_queues} == {(D.FIFO,)}
            plain = message(b"plain", "01TYPE0001")
            plain.topic.name = "TopicFifo"
            answer = fifo_stub.SendMessage(SV.SendMessageRequest(messages=[plain]), metadata=META)
            assert answer.status.code == D.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
            assert answer.status.message.endswith("topic type is FIFO, message type is NORMAL")
            grouped = message(b"grouped", "01TYPE0002", message_group="g1")
            grouped.topic.name = "TopicFifo"
            answer = fifo_stub.SendMessage(SV.SendMessageRequest(messages=[grouped]), metadata=META)
            assert answer.status.code == D.OK
        assert stored(s, "TopicFifo", "01TYPE0002")["queueId"] == consistent_hash(java_string_hash("g1"), 4)


def test_admin_requests_reach_a_grpc_consumer_over_telemetry(server: ServeProcess, stub) -> None:
    """consumerStatus with jstack and queryMsgByUniqueKey's consume-directly, relayed by the broker to a
    consumer on its Telemetry stream (print_thread_stack_trace_command, verify_message_command) and
    answered with the client's thread_stack_trace / verify_message_result, as the 5.1 proxy does."""
    import queue
    import threading

    client_id = "admin@1@0@x"
    meta = [("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2")]
    mid = "01ADMIN000000000000000000000000001"
    sent = stub.SendMessage(
        SV.SendMessageRequest(messages=[message(b"verify me", mid, tag="TV")]), metadata=META
    )
    assert sent.status.code == D.OK
    # mqadmin finds a group's broker by its %RETRY% topic, which only a 4.x client's heartbeat makes
    run_rmq("updateTopic", "-n", server.namesrv, "-c", "DefaultCluster", "-t", "%RETRY%GID_ADMIN", check=True)
    outgoing: queue.Queue = queue.Queue()
    sub = D.Subscription(group=D.Resource(name="GID_ADMIN"))
    sub.subscriptions.add(
        topic=D.Resource(name=TOPIC), expression=D.FilterExpression(type=D.TAG, expression="*")
    )
    outgoing.put(SV.TelemetryCommand(settings=D.Settings(client_type=D.SIMPLE_CONSUMER, subscription=sub)))
    replies = stub.Telemetry(iter(outgoing.get, None), metadata=meta, timeout=60)
    try:
        assert next(replies).settings.subscription.group.name == "GID_ADMIN"
        results: dict = {}

        def admin(name: str, *args: str) -> None:
            results[name] = run_rmq(*args)

        status = threading.Thread(
            target=admin,
            args=("status", "consumerStatus", "-n", server.namesrv, "-g", "GID_ADMIN", "-i", client_id, "-s",
                  "-b", server.broker),
        )  # fmt: skip
        status.start()
        asked = next(replies)
        assert asked.WhichOneof("command") == "print_thread_stack_trace_command"
        nonce = asked.print_thread_stack_trace_command.nonce
        stack = SV.ThreadStackTrace(nonce=nonce, thread_stack_trace="main: idle")
        outgoing.put(SV.TelemetryCommand(status=D.Status(code=D.OK), thread_stack_trace=stack))
        status.join(60)
        assert results["status"].returncode == 0, results["status"].stderr
        assert "main: idle" in results["status"].stdout
        verify = threading.Thread(
            target=admin,
            args=("verify", "queryMsgByUniqueKey", "-n", server.namesrv, "-t", TOPIC, "-i", mid,
                  "-g", "GID_ADMIN", "-d", client_id),
        )  # fmt: skip
        verify.start()
        asked = next(replies)
        assert asked.WhichOneof("command") == "verify_message_command"
        assert asked.verify_message_command.message.body == b"verify me"
        assert asked.verify_message_command.message.system_properties.message_id == mid
        nonce = asked.verify_message_command.nonce
        outgoing.put(SV.TelemetryCommand(
            status=D.Status(code=D.OK), verify_message_result=SV.VerifyMessageResult(nonce=nonce)
        ))  # fmt: skip
        verify.join(60)
        assert results["verify"].returncode == 0, results["verify"].stderr
        assert "consumeResult=CR_SUCCESS, remark=from gRPC client" in results["verify"].stdout
    finally:
        outgoing.put(None)
        replies.cancel()


def test_auto_renew_pops_for_60_seconds_and_the_handle_acks(server: ServeProcess, stub) -> None:
    """A receive with ``auto_renew`` (push consumers) ignores ``invisible_duration``: the proxy pops
    for its default 60 s and renews itself; the handle given to the client acks."""
    topic = "TopicGSRenew"
    run_rmq(
        "updateTopic",
        "-n",
        server.namesrv,
        "-c",
        "DefaultCluster",
        "-t",
        topic,
        "-r",
        "1",
        "-w",
        "1",
        check=True,
    )
    m = message(b"renew me", "01RENEW0000000000000000000000000001")
    m.topic.name = topic
    assert stub.SendMessage(SV.SendMessageRequest(messages=[m]), metadata=META).status.code == D.OK
    queue = D.MessageQueue(topic=D.Resource(name=topic), broker=D.Broker(name="broker-a"))
    request = SV.ReceiveMessageRequest(
        group=D.Resource(name="GID_GS_RENEW"), message_queue=queue, batch_size=8, auto_renew=True
    )
    request.long_polling_timeout.FromSeconds(5)
    # a new group pops from the last message of each queue on (init mode MAX): this one
    status, got, last = list(stub.ReceiveMessage(request, metadata=META, timeout=30))
    assert (
        status.status.code == D.OK and got.message.body == b"renew me" and last.HasField("delivery_timestamp")
    )
    handle = got.message.system_properties.receipt_handle
    fields = handle.split(" ")
    assert len(fields) == 9 and fields[2] == "60000" and fields[5] == "broker-a"  # invisible 60 s
    entry = SV.AckMessageEntry(message_id=got.message.system_properties.message_id, receipt_handle=handle)
    ack = stub.AckMessage(
        SV.AckMessageRequest(
            group=D.Resource(name="GID_GS_RENEW"), topic=D.Resource(name=topic), entries=[entry]
        ),
        metadata=META,
    )
    assert ack.status.code == D.OK and [e.status.code for e in ack.entries] == [D.OK]
