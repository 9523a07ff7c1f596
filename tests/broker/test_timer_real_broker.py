"""5.x timer messages in ``rmq serve`` beside the real RocketMQ 5.1.1 broker
(``../shared/rocketmq-5.1.1``): the same sends to both (``TIMER_DELAY_SEC=3``, a past
``TIMER_DELIVER_MS``, a delay beyond ``timerMaxDelaySec``), the same answers (code, remark, header
fields, the timer queue's offset), the delayed message absent at once and then in its topic with the
same property keys and values but times; the timer topic has no topic config in either.

Left out: what 5.1.1's send path does to every message, timed or not, where rmq keeps 4.9.8's
(its answers carry ``transactionId``; with its default send hook it stores ``MSG_REGION`` and
``TRACE_ON`` in each message's properties)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from rmqcli.remoting.codes import ResponseCode as RS
from tests.broker.test_timer_serve import tsend
from tests.support import popwire as w
from tests.support.oracle5 import real_cluster5
from tests.support.serve import ServeProcess, wait_until, write_conf

pytestmark = [pytest.mark.java, pytest.mark.java5]

TOPIC = "TopicTimer"
EVERY_SEND = {"MSG_REGION", "TRACE_ON", "transactionId"}  # 5.1.1's, for every message (see above)
TIMES = {"TIMER_OUT_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "TIMER_DELIVER_MS", "UNIQ_KEY"}


def answer(resp: Any) -> tuple[int, str | None, list[str], str | None, str | None]:
    ext = resp.ext_fields
    keys = sorted(set(ext) - EVERY_SEND)
    return resp.code, resp.remark, keys, ext.get("queueId"), ext.get("queueOffset")


def keys(props: dict[str, str]) -> list[str]:
    return sorted(set(props) - EVERY_SEND)


def scenario(a: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    assert w.create_topic(a, TOPIC, 1).code == RS.SUCCESS
    seen["delay"] = answer(tsend(a, {"UNIQ_KEY": f"U{time.time_ns()}", "TIMER_DELAY_SEC": "3"}))
    seen["at.once"] = len(w.pull_all(a, TOPIC, 0))
    seen["too.long"] = answer(tsend(a, {"UNIQ_KEY": f"U{time.time_ns()}", "TIMER_DELAY_SEC": "300000"}))
    past = str(int(time.time() * 1000) - 5000)
    seen["past"] = answer(tsend(a, {"UNIQ_KEY": f"P{time.time_ns()}", "TIMER_DELIVER_MS": past}))
    wait_until(lambda: w.pull_all(a, TOPIC, 0), 5, "the past message")  # 5.1.1's reput: a moment
    seen["past.stored"] = [keys(r.properties) for r in w.pull_all(a, TOPIC, 0)]
    wait_until(lambda: len(w.pull_all(a, TOPIC, 0)) >= 2, 15, "the delayed message")
    rec = w.pull_all(a, TOPIC, 0)[1]
    p = rec.properties
    seen["delivered.keys"] = keys(p)
    seen["delivered.values"] = {k: v for k, v in p.items() if k not in TIMES | EVERY_SEND}
    out = int(p["TIMER_OUT_MS"])
    seen["delivered.times"] = (out % 1000, int(p["TIMER_DEQUEUE_MS"]) >= out + 1000, rec.body())
    seen["timer.topic.config"] = w.topic_config(a, "rmq_sys_wheel_timer")
    return seen


def test_timer_like_the_real_broker(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path / "store", write_conf(tmp_path / "broker.conf"))
    with serve:
        ours = scenario(serve.broker)
        serve.stop()
    home = tmp_path / "real"
    home.mkdir()
    with real_cluster5(home) as real:
        theirs = scenario(real.broker)
    differ = {key: (ours.get(key), theirs[key]) for key in theirs if ours.get(key) != theirs[key]}
    assert differ == {}, "\n".join(f"{k}: ours {o!r} real {t!r}" for k, (o, t) in differ.items())
