"""Consumers of the Apache RocketMQ 5.x Python client (PyPI ``rocketmq-python-client`` 5.1.2) for
tests/broker/test_grpc_consume*.py and tests/bench/grpc.py, run by the interpreter of
``.venv-rmq5`` (its package ``rocketmq`` is not the C++ client's).

Argument: a JSON object ``{"endpoint", "group", "topic", "tag": filter (default "*"), "sql": a SQL92
filter instead, "mode":
"simple" | "push", "steps": [...]}``. Simple mode runs the steps in order with one SimpleConsumer
(``await``: its long-polling seconds, default 5):

* ``{"op": "send", "messages": [{"body", "tag", "key", "group", "props"}]}``: a producer sends them
  first (``props``: user properties);
* ``{"op": "receive", "max": n, "invisible": s, "ack": bool, "change": s or null, "count": n,
  "within": s}``: receives until ``count`` messages (default: one receive) or ``within`` seconds,
  acking each when ``ack``, or changing its invisible duration to ``change`` s (then, with
  ``ack_after_change``, acking it with the new handle); ``want``: bodies to receive instead of a
  count;
* ``{"op": "sleep", "s": x}``.

Push mode (``expect``: messages, ``within``: seconds, ``fail``: bodies failed each time) consumes
until ``expect`` distinct bodies were consumed successfully (and the listener was called
``expect_attempts`` times) or ``within`` passed.

Load mode: see ``load``; bench mode: see ``bench``.

Prints one JSON object: ``{"steps": [[{"body", "id", "attempt", "tag", "group", "topic"}...]...],
"push": [...], "done": true}`` (a failed step's error in ``"error"``).
"""

from __future__ import annotations

import json
import sys
import threading
import time


def received(m: object) -> dict:
    return {
        "body": m.body.decode(),  # type: ignore[attr-defined]
        "id": m.message_id,  # type: ignore[attr-defined]
        "attempt": m.delivery_attempt,  # type: ignore[attr-defined]
        "tag": m.tag,  # type: ignore[attr-defined]
        "group": m.message_group,  # type: ignore[attr-defined]
        "topic": m.topic,  # type: ignore[attr-defined]
    }


def send(config: object, topic: str, messages: list[dict]) -> list[str]:
    from rocketmq import Message, Producer

    producer = Producer(config, (topic,))
    producer.startup()
    ids = []
    try:
        for item in messages:
            message = Message()
            message.topic = topic
            message.body = item["body"].encode()
            if item.get("tag"):
                message.tag = item["tag"]
            if item.get("key"):
                message.keys = item["key"]
            if item.get("group"):
                message.message_group = item["group"]
            for key, value in item.get("props", {}).items():
                message.add_property(key, value)
            ids.append(producer.send(message).message_id)
    finally:
        producer.shutdown()
    return ids


def simple(spec: dict, config: object, expression: object) -> dict:
    from rocketmq import SimpleConsumer

    consumer = SimpleConsumer(
        config, spec["group"], {spec["topic"]: expression}, await_duration=int(spec.get("await", 5))
    )
    consumer.startup()
    out: list = []
    try:
        for step in spec["steps"]:
            op = step["op"]
            if op == "send":
                out.append(send(config, spec["topic"], step["messages"]))
            elif op == "sleep":
                time.sleep(float(step["s"]))
                out.append([])
            elif op == "receive":
                got: list[dict] = []
                deadline = time.monotonic() + float(step.get("within", 0))
                while True:
                    for m in consumer.receive(int(step.get("max", 16)), int(step.get("invisible", 15))):
                        item = received(m)
                        if step.get("change") is not None:
                            consumer.change_invisible_duration(m, int(step["change"]))
                            if step.get("ack_after_change"):
                                consumer.ack(m)
                        elif step.get("ack", True):
                            consumer.ack(m)
                        got.append(item)
                    if step.get("want") is not None:  # until these bodies were all received
                        done = set(step["want"]) <= {g["body"] for g in got}
                    else:
                        done = len(got) >= int(step.get("count", 0))
                    if done or time.monotonic() >= deadline:
                        break
                out.append(got)
    finally:
        consumer.shutdown()
    return {"steps": out}


def push(spec: dict, config: object, expression: object) -> dict:
    from rocketmq import ConsumeResult, MessageListener, PushConsumer

    lock = threading.Lock()
    consumed: list[dict] = []
    failing = set(spec.get("fail", []))

    class Listener(MessageListener):
        def consume(self, message: object) -> object:
            item = received(message)
            with lock:
                item["ok"] = item["body"] not in failing
                consumed.append(item)
            return ConsumeResult.SUCCESS if item["ok"] else ConsumeResult.FAILURE

    consumer = PushConsumer(config, spec["group"], Listener(), {spec["topic"]: expression})
    consumer.startup()
    try:
        if spec.get("send"):
            send(config, spec["topic"], spec["send"])
        deadline = time.monotonic() + float(spec.get("within", 30))
        while time.monotonic() < deadline:
            with lock:
                done = {c["body"] for c in consumed if c["ok"]}
                seen = len(consumed)
            if len(done) >= int(spec["expect"]) and seen >= int(spec.get("expect_attempts", 0)):
                break
            time.sleep(0.2)
        time.sleep(float(spec.get("linger", 0)))
    finally:
        consumer.shutdown()
    return {"push": consumed}


def load(spec: dict, config: object, expression: object) -> dict:
    """A producer thread sending ``k<i>`` and a SimpleConsumer acking what it receives, each
    writing a line per event to stdout as it happens (``S body id``: send acknowledged, ``R body
    attempt``: received, ``A body``: ack acknowledged) until ``count`` sends or a failure (the
    server was killed); the test kills this process."""
    from rocketmq import Message, Producer, SimpleConsumer

    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    producer = Producer(config, (spec["topic"],))
    producer.startup()
    consumer = SimpleConsumer(config, spec["group"], {spec["topic"]: expression}, await_duration=5)
    consumer.startup()

    def produce() -> None:
        for i in range(int(spec["count"])):
            message = Message()
            message.topic = spec["topic"]
            message.body = f"k{i}".encode()
            try:
                receipt = producer.send(message)
            except Exception as exc:
                say(f"X send {type(exc).__name__}")
                return
            say(f"S k{i} {receipt.message_id}")

    sender = threading.Thread(target=produce, daemon=True)
    sender.start()
    failures = 0
    while failures < 3:
        try:
            for m in consumer.receive(16, 10):
                say(f"R {m.body.decode()} {m.delivery_attempt}")
                consumer.ack(m)
                say(f"A {m.body.decode()}")
            failures = 0
        except Exception as exc:
            failures += 1
            say(f"X receive {type(exc).__name__}")
            time.sleep(0.5)
    return {}


def bench(spec: dict, config: object, expression: object) -> dict:
    """``count`` sync sends of ``body`` bytes, then receive (batches of 32) and ack each of them,
    one thread: ``{"send_seconds", "receive_seconds", "received"}`` (clients started beforehand)."""
    from rocketmq import Message, Producer, SimpleConsumer

    producer = Producer(config, (spec["topic"],))
    producer.startup()
    consumer = SimpleConsumer(config, spec["group"], {spec["topic"]: expression}, await_duration=5)
    consumer.startup()
    body = b"x" * int(spec.get("body", 1024))
    count = int(spec["count"])

    def message() -> object:
        m = Message()
        m.topic = spec["topic"]
        m.body = body
        m.tag = "TagBench"
        return m

    producer.send(message())  # routes and connections outside the timing
    for m in consumer.receive(32, 30):
        consumer.ack(m)
    started = time.perf_counter()
    for _ in range(count):
        producer.send(message())
    send_seconds = time.perf_counter() - started
    received = 0
    started = time.perf_counter()
    deadline = time.monotonic() + 300
    while received < count and time.monotonic() < deadline:
        for m in consumer.receive(32, 30):
            consumer.ack(m)
            received += 1
    receive_seconds = time.perf_counter() - started
    producer.shutdown()
    consumer.shutdown()
    return {"send_seconds": send_seconds, "receive_seconds": receive_seconds, "received": received}


def main() -> None:
    spec = json.loads(sys.argv[1])
    from rocketmq import ClientConfiguration, Credentials, FilterExpression
    from rocketmq.grpc_protocol import FilterType

    config = ClientConfiguration(spec["endpoint"], Credentials(), request_timeout=10)
    if spec.get("sql"):
        expression = FilterExpression(spec["sql"], FilterType.SQL)
    else:
        expression = FilterExpression(spec.get("tag", "*"))
    mode = {"push": push, "load": load, "bench": bench}.get(spec.get("mode", ""), simple)
    result = mode(spec, config, expression)
    result["done"] = True
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
