"""Signed calls of the Apache RocketMQ 5.x Python client (PyPI ``rocketmq-python-client`` 5.1.2) for
tests/broker/test_grpc_acl.py, run by the interpreter of ``.venv-rmq5`` (its package ``rocketmq``
is not the C++ client's of the main virtual environment).

Argument: a JSON object ``{"endpoint", "calls": [...], "flow": {...} or null}``.

* ``calls``: one gRPC call each, over the client's own stubs and with the metadata its
  ``Signature.metadata`` builds from ``ak`` and ``sk`` (``MQv2-HMAC-SHA1 Credential=..,
  SignedHeaders=x-mq-date-time, Signature=<hex>``); ``auth`` may be ``"none"`` (no
  ``authorization``), ``"nodate"`` (no ``x-mq-date-time``) or any other text to send as the
  ``authorization`` value. ``rpc`` names the call (``QueryRoute``, ``SendMessage``, ``Telemetry``
  ...); ``topic`` and ``group`` its resources (a Heartbeat: ``client_type``, its group only when
  given; a Telemetry command: a consumer's settings with ``group``, else a producer's). Each
  answer is ``{"grpc": the gRPC status name, "details", "code": the response status code or
  null, "message"}``.
* ``flow``: the client as an application uses it with ``ak``/``sk``: a producer sends ``count``
  messages ``acl-N`` to ``topic``, a SimpleConsumer of ``group`` receives and acks until it has
  them all (``receive_first``: one receive before the sends, as a fresh group of the proxy gets
  only the newest messages); the answer is ``{"sent", "received", "acked", "error"}``.

Prints one JSON object ``{"calls": [...], "flow": {...}}``.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from collections.abc import Iterator


def metadata(endpoint: str, call: dict) -> list[tuple[str, str]]:
    from rocketmq import ClientConfiguration, Credentials
    from rocketmq.v5.util.signature import Signature

    config = ClientConfiguration(endpoint, Credentials(call.get("ak", ""), call.get("sk", "")))
    items = Signature.metadata(config, f"acl-probe@{uuid.uuid4().hex[:8]}")
    auth = call.get("auth", "sign")
    if auth == "none":
        items = [(k, v) for k, v in items if k != "authorization"]
    elif auth == "nodate":
        items = [(k, v) for k, v in items if k != "x-mq-date-time"]
    elif auth != "sign":
        items = [(k, v) for k, v in items if k != "authorization"] + [("authorization", auth)]
    return items


def request(rpc: str, call: dict, endpoint: str) -> object:
    """The request message of ``rpc`` over ``call``'s topic and group."""
    from google.protobuf.duration_pb2 import Duration
    from rocketmq.grpc_protocol import definition_pb2 as d
    from rocketmq.grpc_protocol import service_pb2 as s

    topic = d.Resource(name=call.get("topic", ""))
    group = d.Resource(name=call.get("group", ""))
    host, _, port = endpoint.rpartition(":")
    endpoints = d.Endpoints(scheme=d.IPv4, addresses=[d.Address(host=host, port=int(port))])
    if rpc == "QueryRoute":
        return s.QueryRouteRequest(topic=topic, endpoints=endpoints)
    if rpc == "QueryAssignment":
        return s.QueryAssignmentRequest(topic=topic, group=group, endpoints=endpoints)
    if rpc == "SendMessage":
        props = d.SystemProperties(
            message_id=uuid.uuid4().hex.upper(), body_encoding=d.IDENTITY, message_type=d.NORMAL,
            born_host="127.0.0.1",
        )  # fmt: skip
        props.born_timestamp.FromMilliseconds(int(time.time() * 1000))
        return s.SendMessageRequest(messages=[d.Message(topic=topic, system_properties=props, body=b"raw")])
    if rpc == "ReceiveMessage":
        queue = d.MessageQueue(topic=topic, id=-1, permission=d.READ_WRITE, broker=d.Broker(name="broker-a"))
        return s.ReceiveMessageRequest(
            group=group, message_queue=queue, batch_size=1,
            filter_expression=d.FilterExpression(type=d.TAG, expression="*"),
            invisible_duration=Duration(seconds=15), long_polling_timeout=Duration(seconds=1),
        )  # fmt: skip
    if rpc == "AckMessage":
        entry = s.AckMessageEntry(message_id="00", receipt_handle="garbage")
        return s.AckMessageRequest(group=group, topic=topic, entries=[entry])
    if rpc == "ChangeInvisibleDuration":
        return s.ChangeInvisibleDurationRequest(
            group=group, topic=topic, receipt_handle="garbage", message_id="00",
            invisible_duration=Duration(seconds=15),
        )  # fmt: skip
    if rpc == "ForwardMessageToDeadLetterQueue":
        return s.ForwardMessageToDeadLetterQueueRequest(
            group=group, topic=topic, receipt_handle="garbage", message_id="00", delivery_attempt=1,
            max_delivery_attempts=16,
        )  # fmt: skip
    if rpc == "EndTransaction":
        return s.EndTransactionRequest(
            topic=topic, message_id="00", transaction_id="00", resolution=d.COMMIT, source=d.SOURCE_CLIENT
        )
    if rpc == "Heartbeat":  # a consumer's (its group may be absent) or a producer's
        kind = call.get("client_type", "SIMPLE_CONSUMER" if "group" in call else "PRODUCER")
        heartbeat = s.HeartbeatRequest(client_type=getattr(d, kind))
        if "group" in call:
            heartbeat.group.CopyFrom(group)
        return heartbeat
    if rpc == "NotifyClientTermination":
        return s.NotifyClientTerminationRequest(group=group)
    raise ValueError(f"unknown rpc {rpc}")


def telemetry_command(call: dict) -> object:
    from google.protobuf.duration_pb2 import Duration
    from rocketmq.grpc_protocol import definition_pb2 as d
    from rocketmq.grpc_protocol import service_pb2 as s

    settings = d.Settings(request_timeout=Duration(seconds=3))
    if call.get("group"):
        settings.client_type = d.SIMPLE_CONSUMER
        settings.subscription.group.name = call["group"]
        settings.subscription.subscriptions.add(
            topic=d.Resource(name=call.get("topic", "")),
            expression=d.FilterExpression(type=d.TAG, expression="*"),
        )
    else:
        settings.client_type = d.PRODUCER
        settings.publishing.topics.add(name=call.get("topic", ""))
    return s.TelemetryCommand(settings=settings)


def one_call(stub: object, endpoint: str, call: dict) -> dict:
    import grpc

    rpc = call["rpc"]
    md = metadata(endpoint, call)
    answer: dict = {"grpc": "OK", "details": None, "code": None, "message": None}
    try:
        if rpc == "Telemetry":
            answered = threading.Event()

            def commands() -> Iterator[object]:  # open until the first answer
                yield telemetry_command(call)
                answered.wait(10)

            responses = stub.Telemetry(commands(), metadata=md, timeout=10)
            for response in responses:
                answer["code"], answer["message"] = response.status.code, response.status.message
                break
            else:
                answer["grpc"], answer["details"] = responses.code().name, responses.details()
            answered.set()
            responses.cancel()
        elif rpc == "ReceiveMessage":
            responses = stub.ReceiveMessage(request(rpc, call, endpoint), metadata=md, timeout=10)
            first = next(iter(responses))
            if first.WhichOneof("content") == "status":
                answer["code"], answer["message"] = first.status.code, first.status.message
            responses.cancel()
        else:
            response = getattr(stub, rpc)(request(rpc, call, endpoint), metadata=md, timeout=10)
            answer["code"], answer["message"] = response.status.code, response.status.message
    except grpc.RpcError as exc:
        answer["grpc"] = exc.code().name
        answer["details"] = exc.details()
    return answer


def flow(endpoint: str, spec: dict) -> dict:
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

    config = ClientConfiguration(endpoint, Credentials(spec["ak"], spec["sk"]), request_timeout=10)
    result: dict = {"sent": [], "received": [], "acked": 0, "error": None}
    consumer = SimpleConsumer(config, spec["group"], {spec["topic"]: FilterExpression()}, 5)
    producer = Producer(config, (spec["topic"],))
    try:
        consumer.startup()
        producer.startup()
        time.sleep(0.5)  # the receive below needs the server to have the consumer's settings
        if spec.get("receive_first"):
            consumer.receive(32, 15)
        for n in range(spec["count"]):
            message = Message()
            message.topic = spec["topic"]
            message.body = f"acl-{n}".encode()
            result["sent"].append(producer.send(message).message_id)
        deadline = time.time() + 20
        bodies = {f"acl-{n}" for n in range(spec["count"])}
        while not bodies <= set(result["received"]) and time.time() < deadline:
            for m in consumer.receive(32, 15):
                result["received"].append(m.body.decode())
                consumer.ack(m)
                result["acked"] += 1
    except Exception as exc:  # the client's error, as the application sees it
        result["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        producer.shutdown()
        consumer.shutdown()
    return result


def main() -> None:
    import grpc
    from rocketmq.grpc_protocol import MessagingServiceStub

    spec = json.loads(sys.argv[1])
    endpoint = spec["endpoint"]
    out: dict = {"calls": [], "flow": None}
    with grpc.insecure_channel(endpoint) as channel:
        stub = MessagingServiceStub(channel)
        for call in spec.get("calls", []):
            out["calls"].append(one_call(stub, endpoint, call))
    if spec.get("flow"):
        out["flow"] = flow(endpoint, spec["flow"])
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
