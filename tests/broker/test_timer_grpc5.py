"""A delayed send of the real Apache RocketMQ 5.x Python client (``rocketmq-python-client`` 5.1.2
in ``.venv-rmq5``; skipped without it) over ``rmq serve``'s gRPC endpoint: a message with a
delivery timestamp, to a topic whose ``message.type`` is DELAY, is held by the timer
(``rmqcli.broker.timer``) and arrives in its topic at its time, with its message id as
``UNIQ_KEY`` and the timestamp as ``TIMER_DELIVER_MS``."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import time
from pathlib import Path

from formats.records import Record
from tests.broker.test_grpc_client5 import PYTHON5, needs_client5
from tests.support import popwire as w
from tests.support.cli import run_rmq
from tests.support.serve import ServeProcess, wait_until, write_conf

TOPIC = "TopicTimerG5"
CLIENT = textwrap.dedent(
    """
    import json, sys, time
    from rocketmq import ClientConfiguration, Credentials, Message, Producer
    spec = json.loads(sys.argv[1])
    config = ClientConfiguration(spec["endpoint"], Credentials(), request_timeout=10)
    producer = Producer(config, (spec["topic"],))
    producer.startup()
    try:
        message = Message()
        message.topic = spec["topic"]
        message.body = b"later"
        message.tag = "T"
        # 5.1.2 writes this number into the Timestamp's seconds (its docstring says ms): seconds
        message.delivery_timestamp = at = int(time.time()) + spec["delay_s"]
        receipt = producer.send(message)
        print(json.dumps({"message_id": receipt.message_id, "at": at * 1000}), flush=True)
    finally:
        producer.shutdown()
    """
)


def stored(addr: str) -> list[Record]:
    return [r for q in range(8) for r in w.pull_all(addr, TOPIC, q)]


@needs_client5
def test_a_delivery_timestamp_of_the_5x_client_arrives_at_its_time(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path / "store", write_conf(tmp_path / "broker.conf"), grpc=True).start()
    try:
        run_rmq(
            "updateTopic", "-n", serve.namesrv, "-c", "DefaultCluster", "-t", TOPIC,
            "-a", "+message.type=DELAY", check=True,
        )  # fmt: skip
        spec = {"endpoint": serve.grpc, "topic": TOPIC, "delay_s": 4}
        proc = subprocess.run(
            [str(PYTHON5), "-c", CLIENT, json.dumps(spec)], capture_output=True, text=True, timeout=60,
            env={**os.environ, "HOME": str(tmp_path)},
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
        sent = json.loads(proc.stdout.strip().splitlines()[-1])
        early = stored(serve.broker)
        early_at = time.time() * 1000
        wait_until(lambda: stored(serve.broker), 15, "the delayed message")
        [rec] = stored(serve.broker)
        p = rec.properties
        assert p["UNIQ_KEY"] == sent["message_id"] and p["TIMER_DELIVER_MS"] == str(sent["at"])
        assert rec.body() == b"later" and p["TAGS"] == "T" and p["REAL_TOPIC"] == TOPIC
        assert int(p["TIMER_DEQUEUE_MS"]) >= sent["at"]  # not before its time
        if early_at < sent["at"]:
            assert early == []  # held until its time
    finally:
        serve.stop()
