"""A producer of the Apache RocketMQ 5.x Python client (PyPI ``rocketmq-python-client`` 5.1.2) for
tests/broker/test_grpc_client5.py, run by the interpreter of ``.venv-rmq5`` (its package
``rocketmq`` is not the C++ client's of the main virtual environment).

Argument: a JSON object ``{"endpoint", "topic", "messages": [{"body", "tag", "key", "properties",
"group"}], "missing": topic or null, "tls": bool, "linger": seconds before the
shutdown, "orphan": body of a transactional message sent and left open}``; the checker commits
what the server asks about. Prints one JSON object: the send receipts
(``message_id``, ``offset``), the error text of a send to the missing topic, and ``"done": true``
after the producer's shutdown (its NotifyClientTermination).
"""

from __future__ import annotations

import json
import sys
import time


def main() -> None:
    spec = json.loads(sys.argv[1])
    from rocketmq import ClientConfiguration, Credentials, Message, Producer, TransactionChecker
    from rocketmq import TransactionResolution as Resolution

    checked: list[str] = []

    class Checker(TransactionChecker):  # the server's check-back of an open transaction: commit
        def check(self, message: Message) -> int:
            checked.append(message.message_id)
            return Resolution.COMMIT

    config = ClientConfiguration(spec["endpoint"], Credentials(), request_timeout=10)
    producer = Producer(config, (spec["topic"],), checker=Checker(), tls_enable=bool(spec.get("tls")))
    producer.startup()
    result: dict = {"sent": [], "checked": checked}
    try:
        if spec.get("orphan"):  # a half message left open: neither committed nor rolled back
            message = Message()
            message.topic = spec["topic"]
            message.body = spec["orphan"].encode()
            receipt = producer.send(message, producer.begin_transaction())
            result["sent"].append({"message_id": receipt.message_id, "offset": receipt.offset})
        for item in spec["messages"]:
            message = Message()
            message.topic = spec["topic"]
            message.body = item["body"].encode()
            if item.get("tag"):
                message.tag = item["tag"]
            if item.get("key"):
                message.keys = item["key"]  # the setter takes one key
            for key, value in item.get("properties", {}).items():
                message.add_property(key, value)
            if item.get("group"):
                message.message_group = item["group"]
            receipt = producer.send(message)
            result["sent"].append({"message_id": receipt.message_id, "offset": receipt.offset})
        if spec.get("missing"):
            message = Message()
            message.topic = spec["missing"]
            message.body = b"nowhere"
            try:
                producer.send(message)
                result["missing_error"] = None
            except Exception as exc:  # the client's error for a topic the server does not have
                result["missing_error"] = f"{type(exc).__name__}: {exc}"
        time.sleep(float(spec.get("linger", 0)))  # the first heartbeat comes about 1 s after start
    finally:
        producer.shutdown()
    result["done"] = True
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
