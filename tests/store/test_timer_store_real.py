"""The timer store of a real RocketMQ 5.1.1 broker (``../shared/rocketmq-5.1.1``): ``rmq dump-timer``
lists exactly what that broker delivers when started again on the store (each message, its
``TIMER_OUT_MS`` and topic; a cancelled one and one delivered before the stop are not listed and not
delivered), ``rmq verify`` passes it, and damaged copies (a bad timerlog unit, a wheel slot pointing
past the timerlog) give their one-line errors."""

from __future__ import annotations

import shutil
import struct
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import pytest

from formats import timer as tfmt
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.store.timer import TimerCheckpoint, read_timer_checkpoint
from tests.broker.test_timer_serve import tsend
from tests.support import popwire as w
from tests.support.cli import one_line_error, rmq_json, run_rmq
from tests.support.oracle import RealCluster
from tests.support.oracle5 import real_cluster5
from tests.support.serve import wait_until
from tests.support.stores import sparse_copy

pytestmark = [pytest.mark.java, pytest.mark.java5]

TOPICS = ("TimerA", "TimerB")
PRECISION_MS = 1000


@dataclass
class Made:
    home: Path
    pristine: Path  # a copy of the store as the broker left it
    before: dict[str, int]  # messages in each topic at the stop


def now_ms() -> int:
    return int(time.time() * 1000)


def cluster(home: Path) -> AbstractContextManager[RealCluster]:
    """The 5.1.1 NameServer and broker on ``home/store`` (stopped with SIGTERM: a clean shutdown)."""
    return real_cluster5(home, clean_stop=True)


def timer_check(home: Path) -> TimerCheckpoint:
    """The broker's ``config/timercheck`` as it is now (flushed every second)."""
    return read_timer_checkpoint(home / "store" / tfmt.CHECKPOINT_FILE) or TimerCheckpoint()


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Made]:
    home = tmp_path_factory.mktemp("timer-store-real")
    with cluster(home) as real:
        for topic in TOPICS:
            assert w.create_topic(real.broker, topic, 1).code == RS.SUCCESS
        # delivered before the stop: neither listed nor delivered again
        assert tsend(real.broker, {"UNIQ_KEY": "EARLY", "TIMER_DELAY_SEC": "1"}, topic=TOPICS[0]).code == 0
        wait_until(lambda: w.pull_all(real.broker, TOPICS[0], 0), 30, "the early timer")
        base = now_ms() + 50_000
        for i in range(6):
            props = {"UNIQ_KEY": f"K{i}", "TIMER_DELIVER_MS": str(base + i * 3000)}
            assert tsend(real.broker, props, topic=TOPICS[i % 2]).code == 0
        # a cancel marker for K2, in its slot
        marker = {"UNIQ_KEY": "C2", "TIMER_DEL_UNIQKEY": "K2", "TIMER_DELIVER_MS": str(base + 2 * 3000)}
        assert tsend(real.broker, marker, topic=TOPICS[0]).code == 0
        sent = 8  # units in the timer queue
        wait_until(lambda: timer_check(home).master_timer_queue_offset >= sent, 30, "the timer checkpoint")
        before = {t: len(w.pull_all(real.broker, t, 0)) for t in TOPICS}
    pristine = home / "pristine"
    shutil.copytree(home / "store", pristine, copy_function=sparse_copy)
    (pristine / "lock").unlink(missing_ok=True)
    yield Made(home, pristine, before)


def copy(made: Made, tmp_path: Path) -> Path:
    target = tmp_path / "store"
    shutil.copytree(made.pristine, target, copy_function=sparse_copy)
    return target


def pending_of(dump: dict) -> set[tuple[str, str, int]]:
    return {(t["topic"], t["msgId"], t["outMs"]) for t in dump["timers"] if t["state"] == "pending"}


def test_dump_timer_is_what_the_real_broker_delivers(made: Made, tmp_path: Path) -> None:
    store = copy(made, tmp_path)
    dump = rmq_json("dump-timer", str(store), "--json", "--all")
    assert isinstance(dump, dict)
    listed = pending_of(dump)
    states = {t["msgId"]: t["state"] for t in dump["timers"]}
    assert states["K2"] == "cancelled" and states["C2"] == "marker" and "EARLY" not in states
    assert {m for _, m, _ in listed} == {"K0", "K1", "K3", "K4", "K5"}
    # 5.1.1's own count per topic (+1 a timer, -1 a marker, -1 a delivery) matches here
    assert (
        dump["progress"]["metrics"]
        == {r["topic"]: r["pending"] for r in dump["topics"]}
        == {
            TOPICS[0]: 2,
            TOPICS[1]: 3,
        }
    )
    verify = run_rmq("verify", str(store))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    last = max(out for _, _, out in listed)
    with cluster(made.home) as real:  # the original store, started again
        wait_until(
            lambda: timer_check(made.home).last_read_time_ms > last + PRECISION_MS, 120, "the last slot read"
        )
        delivered = {
            (topic, r.properties["UNIQ_KEY"], int(r.properties["TIMER_OUT_MS"]))
            for topic in TOPICS
            for r in w.pull_all(real.broker, topic, 0)[made.before[topic] :]
        }
    assert delivered == listed


def problems(out: str, kind: str) -> list[str]:
    """The rows of verify's problem list (severity, kind, file, offset, message) of ``kind``."""
    return [
        line for line in out.splitlines() if line.startswith(f"error\t{kind}\t") and line.count("\t") == 4
    ]


def _flip_unit_magic(store: Path, unit: int) -> int:
    pos = unit * tfmt.UNIT_SIZE
    with open(store / tfmt.TIMERLOG_DIR / f"{0:020d}", "r+b") as f:
        f.seek(pos + tfmt.UNIT_OFFSETS["magic"])
        f.write(struct.pack(">i", 0x7654320))
    return pos


def test_bad_timerlog_unit(made: Made, tmp_path: Path) -> None:
    store = copy(made, tmp_path)
    pos = _flip_unit_magic(store, 3)
    proc = run_rmq("verify", str(store))
    assert proc.returncode == 4
    one_line_error(proc.stderr)
    lines = problems(proc.stdout, "timerlog-bad-unit")
    assert lines == [
        f"error\ttimerlog-bad-unit\ttimerlog/{0:020d}\t{pos}\tbad timerlog unit (size 52, magic 0x7654320)"
    ]
    dump = run_rmq("dump-timer", str(store), "--json")
    assert dump.returncode == 0 and "Traceback" not in dump.stderr
    assert f"{0:020d} at byte {pos}: bad timerlog unit" in dump.stderr


def test_wheel_slot_past_the_timerlog(made: Made, tmp_path: Path) -> None:
    store = copy(made, tmp_path)
    dump = rmq_json("dump-timer", str(store), "--json")
    assert isinstance(dump, dict)
    out = max(t["outMs"] for t in dump["timers"])
    end = dump["progress"]["timerlogEnd"]
    index = tfmt.slot_index(out, PRECISION_MS)
    with open(store / tfmt.WHEEL_FILE, "r+b") as f:
        f.seek(index * tfmt.SLOT_SIZE + 16)  # last_pos
        f.write(struct.pack(">q", end + 10 * tfmt.UNIT_SIZE))
    proc = run_rmq("verify", str(store))
    assert proc.returncode == 4
    one_line_error(proc.stderr)
    lines = problems(proc.stdout, "timer-slot-past-end")
    assert len(lines) == 1
    assert lines[0].startswith(
        f"error\ttimer-slot-past-end\ttimerwheel\t{index * tfmt.SLOT_SIZE}\tslot {index} "
    )
    assert f"past the timerlog's end {end}" in lines[0]
