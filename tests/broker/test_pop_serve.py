"""POP against ``rmq serve`` across a SIGKILL and beside a 4.x client (research notes issue21 §2b):
offsets and checkpoints survive a crash (un-acked messages come back, acked ones do not), and a
C++ PushConsumer (PULL, PyPI ``rocketmq`` 0.4.4, in a driver process) and a POP consumer of
another group on the same topic each see every message.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rmqcli.remoting.codes import ResponseCode as RS
from tests.support import popwire as w
from tests.support.broker_drivers import run_driver, start_consumer
from tests.support.serve import ServeProcess, write_conf


def test_sigkill_keeps_offsets_and_redelivers_unacked(tmp_path: Path) -> None:
    conf = write_conf(tmp_path / "broker.conf", flushConsumerOffsetInterval="300")
    server = ServeProcess(tmp_path / "store", conf).start()
    try:
        a = server.broker
        assert w.create_topic(a, "TopicK", 1).code == RS.SUCCESS
        for i in range(4):
            assert w.send(a, "TopicK", f"k{i}".encode()).code == RS.SUCCESS
        msgs = w.popped(w.pop(a, "GK", "TopicK", invisible=2500), "TopicK", "GK")
        assert [m.body for m in msgs] == [b"k0", b"k1", b"k2", b"k3"]
        assert w.ack(a, "GK", msgs[0]).code == RS.SUCCESS
        assert w.ack(a, "GK", msgs[2]).code == RS.SUCCESS
        deadline = time.monotonic() + 10
        path = server.store / "config" / "consumerOffset.json"
        while time.monotonic() < deadline and not (path.exists() and "TopicK@GK" in path.read_text()):
            time.sleep(0.1)
    finally:
        server.kill()  # SIGKILL: no flush, no final persist
    server = ServeProcess(tmp_path / "store", conf).start()
    try:
        a = server.broker
        assert w.query_offset(a, "GK", "TopicK", 0) == 4  # kept: the popped messages are not popped again
        back = w.pop_until(a, "GK", "TopicK", 2, timeout=15, invisible=2500)
        assert sorted((m.body, m.rec.reconsume_times) for m in back) == [(b"k1", 1), (b"k3", 1)]
        for m in back:
            assert w.ack(a, "GK", m).code == RS.SUCCESS
        assert w.pop_until(a, "GK", "TopicK", 1, timeout=4, invisible=2500) == []
    finally:
        server.stop()


@pytest.mark.cpp
def test_a_cpp_push_consumer_and_a_pop_consumer_each_see_every_message(tmp_path: Path) -> None:
    keys = [f"both{i}" for i in range(12)]
    with ServeProcess(tmp_path / "store", write_conf(tmp_path / "broker.conf")) as server:
        ns, a = server.namesrv, server.broker
        assert w.create_topic(a, "TopicBoth", 4).code == RS.SUCCESS
        # the POP group starts before the messages (initMode MAX would skip older ones)
        assert w.pop(a, "GPOP", "TopicBoth", init_mode=1).code == RS.POLLING_TIMEOUT
        consumer = start_consumer(
            tmp_path, "cpp", {"op": "consume", "namesrv": ns, "group": "GCPP", "topic": "TopicBoth"}
        )
        try:
            sent = run_driver(
                tmp_path, "produce", {"op": "produce", "namesrv": ns, "topic": "TopicBoth", "keys": keys}
            )
            assert all(e["status"] == 0 for e in sent if "key" in e)
            popped: list[w.Popped] = []
            deadline = time.monotonic() + 30
            while len(popped) < len(keys) and time.monotonic() < deadline:
                resp = w.pop(a, "GPOP", "TopicBoth", poll=1000, init_mode=1, invisible=30000)
                got = w.popped(resp, "TopicBoth", "GPOP") if resp.code == RS.SUCCESS else []
                for m in got:
                    assert w.ack(a, "GPOP", m).code == RS.SUCCESS
                popped += got
            consumer.wait_for(lambda ev: {e.get("key") for e in ev} >= set(keys), 40, "every message")
        finally:
            events = consumer.stop()
    assert sorted(m.rec.keys[0] for m in popped) == sorted(keys)
    assert {e["key"] for e in events if e.get("key") in keys} == set(keys)
