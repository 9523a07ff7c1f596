"""Rolled timers (``timerRollWindowSlot``) against the real RocketMQ 5.1.1 broker
(``../shared/rocketmq-5.1.1``): with a window of 10 slots at 1000 ms, a timer 10 s or more ahead is
put into the window's slot (half of it when less than a third of a window would be left), put back
into ``rmq_sys_wheel_timer`` with ``TIMER_ROLL_TIMES`` one more when that slot comes, and read again
(``TimerMessageStore.doEnqueue``, ``convert``). ``rmq serve`` and the real broker, given the same
settings and the same sends, roll each timer as often, write as many timer-queue records and
deliver each at its time within the precision; a store either left with a rolled timer pending is
read the same by ``rmq dump-timer`` and delivered by the other."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rmqcli.remoting.codes import ResponseCode as RS
from tests.broker.test_timer_files_real import PRECISION_MS, now_ms, timer_check
from tests.broker.test_timer_serve import tsend
from tests.support import popwire as w
from tests.support.cli import rmq_json, run_rmq
from tests.support.oracle5 import real_cluster5
from tests.support.serve import ServeProcess, wait_until, write_conf

pytestmark = [pytest.mark.java, pytest.mark.java5]

TOPIC = "TimerRoll"
TIMER_TOPIC = "rmq_sys_wheel_timer"
WINDOW = "10"  # timerRollWindowSlot of both
# key -> seconds ahead: no roll; rolled to half the window once; rolled once; rolled three times
AHEAD = {"R0": 5, "R1": 12, "R2": 18, "R3": 40}
ROLLS = {"R0": None, "R1": "1", "R2": "1", "R3": "3"}


def settings() -> dict[str, str]:
    return {"timerRollWindowSlot": WINDOW, "timerPrecisionMs": str(PRECISION_MS)}


def serve(home: Path) -> ServeProcess:
    home.mkdir(parents=True, exist_ok=True)
    conf = write_conf(home / "serve.conf", mappedFileSizeCommitLog="16777216", **settings())
    return ServeProcess(home / "store", conf)


def send(broker: str, ahead: dict[str, int]) -> dict[str, int]:
    """Each key's timer ``ahead`` seconds from the last whole second (+500 ms: TIMER_OUT_MS is
    that whole second); returns key -> TIMER_OUT_MS."""
    assert w.create_topic(broker, TOPIC, 1).code == RS.SUCCESS
    base = now_ms() // 1000 * 1000
    out = {}
    for key, seconds in ahead.items():
        deliver = base + seconds * 1000 + 500
        assert tsend(broker, {"UNIQ_KEY": key, "TIMER_DELIVER_MS": str(deliver)}, topic=TOPIC).code == 0
        out[key] = base + seconds * 1000
    return out


def delivered(broker: str, count: int, timeout: float) -> dict[str, Any]:
    """key -> (TIMER_ROLL_TIMES, TIMER_OUT_MS, store time) of the first ``count`` deliveries."""
    wait_until(lambda: len(w.pull_all(broker, TOPIC, 0)) >= count, timeout, "the deliveries")
    return {
        r.properties["UNIQ_KEY"]: (
            r.properties.get("TIMER_ROLL_TIMES"),
            int(r.properties["TIMER_OUT_MS"]),
            r.store_timestamp,
        )
        for r in w.pull_all(broker, TOPIC, 0)
    }


def lateness(got: dict[str, Any]) -> dict[str, int]:
    return {k: store - out for k, (_r, out, store) in got.items()}


def scenario(broker: str) -> dict[str, Any]:
    out = send(broker, AHEAD)
    got = delivered(broker, len(AHEAD), max(AHEAD.values()) + 60)
    assert {k: v[1] for k, v in got.items()} == out
    return got


def timer_records(store: Path) -> list[tuple[str, str]]:
    """(UNIQ_KEY, TIMER_ROLL_TIMES) of every record the store holds in the timer topic, sorted."""
    proc = run_rmq("dump-commitlog", str(store), "--output", "jsonl", "--topic", TIMER_TOPIC)
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    return sorted((r["properties"]["UNIQ_KEY"], r["properties"].get("TIMER_ROLL_TIMES", "")) for r in rows)


def test_rolls_like_the_real_broker(tmp_path: Path) -> None:
    ours = serve(tmp_path / "rmq").start()
    try:
        got = scenario(ours.broker)
    finally:
        ours.stop()
    (tmp_path / "real").mkdir()
    with real_cluster5(tmp_path / "real", **settings()) as real:
        real_got = scenario(real.broker)
    print("real", lateness(real_got), "rmq", lateness(got))
    assert {k: v[0] for k, v in real_got.items()} == ROLLS
    assert {k: v[0] for k, v in got.items()} == ROLLS
    real_records = timer_records(tmp_path / "real" / "store")
    assert timer_records(tmp_path / "rmq" / "store") == real_records
    assert len(real_records) == len(AHEAD) + 5
    for late in (lateness(got), lateness(real_got)):
        assert all(0 <= ms <= 2 * PRECISION_MS for ms in late.values()), late
    assert all(abs(lateness(got)[k] - lateness(real_got)[k]) <= PRECISION_MS for k in AHEAD)


def pending_rolled(store: Path) -> list[tuple[str, bool, int]]:
    """(UNIQ_KEY, rolled, TIMER_OUT_MS) of each timer ``rmq dump-timer`` lists as pending."""
    dump = rmq_json("dump-timer", str(store), "--json")
    assert isinstance(dump, dict)
    return sorted((t["msgId"], t["rolled"], t["outMs"]) for t in dump["timers"] if t["state"] == "pending")


@pytest.mark.parametrize("first", ["real", "rmq"])
def test_rolled_timer_across_brokers(tmp_path: Path, first: str) -> None:
    """A timer 60 s ahead, the first broker stopped once it has rolled it once: ``rmq dump-timer``
    lists it as a rolled wheel timer of its TIMER_OUT_MS, and the other broker rolls it on and
    delivers it at its time, or at once when it came up later than that. 60 s leaves the switch
    (the real broker's clean stop and start take 10-30 s on a loaded machine) time to finish first."""
    store = tmp_path / "store"
    home = tmp_path
    if first == "real":
        with real_cluster5(home, clean_stop=True, **settings()) as real:
            out = send(real.broker, {"R3": 60})
            wait_until(lambda: timer_check(store).master_timer_queue_offset >= 2, 30, "the first roll read")
        (store / "lock").unlink(missing_ok=True)
    else:
        ours = serve(home).start()
        try:
            out = send(ours.broker, {"R3": 60})
            wait_until(lambda: timer_check(store).master_timer_queue_offset >= 2, 30, "the first roll read")
        finally:
            ours.stop()
    listed = pending_rolled(store)
    assert listed == [("R3", True, out["R3"])], listed
    if first == "real":
        ours = serve(home).start()
        try:
            ready = now_ms()
            got = delivered(ours.broker, 1, 120)
        finally:
            ours.stop()
    else:
        with real_cluster5(home, clean_stop=True, **settings()) as real:
            ready = now_ms()
            got = delivered(real.broker, 1, 120)
    # rolled once by the first; the second rolls it each time its slot comes while 10 s or more are
    # left (every 10 s, the last one 5 s before its time): 4 more when it was up 40 s ahead, 1 when
    # it came up later than 10 s ahead
    rolls, out_ms, stored = got["R3"]
    assert rolls in ("2", "3", "4", "5") and out_ms == out["R3"], got
    came_up = f"up {ready - out_ms} ms from its time"
    assert out_ms <= stored <= max(out_ms, ready) + 2 * PRECISION_MS, (got, came_up)
