"""The 5.x client's side of ``tests.bench.grpc``, run by the interpreter of ``.venv-rmq5`` (its
package ``rocketmq`` is the Apache RocketMQ 5.x Python client, not the C++ client's).

Argument: a JSON object ``{"endpoint", "group", "topic", "count", "body"}``. One Producer and one
SimpleConsumer are started, and one message is sent, received and acked (routes, connections and
settings outside what is measured); then ``count`` sync sends from one thread, then receives
(batches of 32) with an ack of each message until ``count`` are received, as
``grpc5_consumer.py``'s bench mode does. Before each of the two rows and after the last, a line
``{"gate": name}`` is printed and a line is read from stdin: the bench reads the server's CPU time
there, so that each row is measured on its own and the clients' start-up and shut-down are in
neither. The last line printed is ``{"send_seconds", "receive_seconds", "received"}``.
"""

from __future__ import annotations

import json
import sys
import time


def gate(name: str) -> None:
    print(json.dumps({"gate": name}), flush=True)
    sys.stdin.readline()


def main() -> None:
    spec = json.loads(sys.argv[1])
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

    config = ClientConfiguration(spec["endpoint"], Credentials(), request_timeout=10)
    topic, count = spec["topic"], int(spec["count"])
    body = b"x" * int(spec.get("body", 1024))
    producer = Producer(config, (topic,))
    producer.startup()
    consumer = SimpleConsumer(config, spec["group"], {topic: FilterExpression("*")}, await_duration=5)
    consumer.startup()

    def message() -> Message:
        m = Message()
        m.topic = topic
        m.body = body
        m.tag = "TagBench"
        return m

    producer.send(message())
    for m in consumer.receive(32, 30):
        consumer.ack(m)
    gate("send")
    started = time.perf_counter()
    for _ in range(count):
        producer.send(message())
    send_seconds = time.perf_counter() - started
    gate("receive")
    received = 0
    started = time.perf_counter()
    deadline = time.monotonic() + 300
    while received < count and time.monotonic() < deadline:
        for m in consumer.receive(32, 30):
            consumer.ack(m)
            received += 1
    receive_seconds = time.perf_counter() - started
    gate("end")
    producer.shutdown()
    consumer.shutdown()
    print(
        json.dumps({"send_seconds": send_seconds, "receive_seconds": receive_seconds, "received": received})
    )


if __name__ == "__main__":
    main()
