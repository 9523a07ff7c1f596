"""5.x timer messages from the 4.x C++ client (PyPI ``rocketmq`` 0.4.4: ``Message.set_property``
sends any user property): a message sent with ``TIMER_DELAY_SEC=3`` is answered SEND_OK, is not in
its topic at once, and reaches a C++ push consumer after its time with 5.1.1's properties."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rmqcli.remoting.codes import ResponseCode as RS
from tests.support import popwire as w
from tests.support.broker_drivers import Driver
from tests.support.serve import ServeProcess, write_conf

pytestmark = pytest.mark.cpp

TOPIC = "TopicTimerCpp"
PRODUCER = textwrap.dedent(
    """
    import json, sys
    from rocketmq.client import Message, Producer
    spec = json.loads(sys.argv[1])
    p = Producer("PG_TIMER_CPP")
    p.set_namesrv_addr(spec["namesrv"])
    p.start()
    m = Message(spec["topic"])
    m.set_keys(spec["key"])
    m.set_tags("T")
    m.set_body("later")
    m.set_property("TIMER_DELAY_SEC", "3")
    r = p.send_sync(m)
    print(json.dumps({"status": int(r.status), "id": r.msg_id, "offset": r.offset}), flush=True)
    p.shutdown()
    """
)


def test_a_timer_property_of_the_cpp_client(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path / "store", write_conf(tmp_path / "broker.conf")).start()
    consumer = None
    try:
        assert w.create_topic(serve.broker, TOPIC, 1).code == RS.SUCCESS
        (tmp_path / "home").mkdir()
        spec = {"namesrv": serve.namesrv, "topic": TOPIC, "key": "cpp-timer"}
        proc = subprocess.run(
            [sys.executable, "-c", PRODUCER, json.dumps(spec)], capture_output=True, text=True, timeout=60,
            cwd=tmp_path, env={**os.environ, "HOME": str(tmp_path / "home")},
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        sent = json.loads(proc.stdout.strip().splitlines()[-1])
        assert sent["status"] == 0 and sent["offset"] == 0  # SEND_OK, the timer queue's offset
        sent_at = time.time() * 1000
        early = w.pull_all(serve.broker, TOPIC, 0)
        early_late = time.time() * 1000 - sent_at > 1500  # the earliest delivery: about 2 s after the send
        consumer = Driver(
            tmp_path, "cpp", {"op": "consume", "group": "CG_TIMER", "namesrv": serve.namesrv, "topic": TOPIC}
        )
        events = consumer.wait_for(
            lambda ev: any(e.get("key") == "cpp-timer" for e in ev), 30, "the timer message"
        )
        [got] = [e for e in events if e.get("key") == "cpp-timer"]
        assert got["topic"] == TOPIC and got["len"] == len("later") and got["times"] == 0
        [rec] = w.pull_all(serve.broker, TOPIC, 0)
        p = rec.properties
        assert p["TIMER_DELAY_SEC"] == "3" and p["KEYS"] == "cpp-timer" and p["REAL_TOPIC"] == TOPIC
        assert {"TIMER_OUT_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "REAL_QID", "UNIQ_KEY"} <= set(p)
        assert got["id"] == p["UNIQ_KEY"]
        if not early_late:
            assert early == []
        assert int(p["TIMER_DEQUEUE_MS"]) >= int(p["TIMER_OUT_MS"]) + 1000
    finally:
        if consumer is not None:
            consumer.stop()
        serve.stop()
