"""Crash test: ``rmq serve`` under a steady SYNC_FLUSH load from the C++ client is killed with SIGKILL
at random moments and restarted (the abnormal recovery runs, ``abort`` being there). Every send the
client saw acknowledged must then be consumable exactly once by a fresh group, and ``rmq verify``
must find nothing wrong (DESIGN.md "Nothing is lost"; ``CommitLog.recoverAbnormally`` of 4.9.x).
"""

from __future__ import annotations

import random
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.support.broker_drivers import Driver
from tests.support.cli import RMQ
from tests.support.serve import ServeProcess, write_conf

pytestmark = pytest.mark.cpp

ROUNDS = 20
TOPIC = "TopicCrash"


def test_sigkill_under_sync_flush_load_loses_no_acknowledged_message(tmp_path: Path) -> None:
    rnd = random.Random(20261123)
    conf = write_conf(
        tmp_path / "broker.conf", flushDiskType="SYNC_FLUSH", mappedFileSizeCommitLog=str(1024 * 1024)
    )
    store = tmp_path / "store"
    server = ServeProcess(store, conf)
    server.start()
    load = Driver(
        tmp_path,
        "load",
        {"op": "load", "namesrv": server.namesrv, "topic": TOPIC, "prefix": "c", "timeout_ms": 2000},
    )
    consumer: Driver | None = None
    try:
        load.wait_for(lambda ev: any("id" in e for e in ev), 30, "the first acknowledged send")
        for _ in range(ROUNDS):
            acked = sum(1 for e in load.events() if "id" in e)
            load.wait_for(lambda ev, n=acked: sum(1 for e in ev if "id" in e) > n, 30, "acks after a restart")
            time.sleep(rnd.uniform(0.05, 0.6))  # then kill at a random moment of the load
            server.kill()  # SIGKILL: no flush, no unregister, abort stays
            assert (store / "abort").exists()
            server.start()
        events = load.stop()
        assert server.stop() == 0  # a clean stop after the last recovery
        verify = subprocess.run(
            [*RMQ, "verify", str(store), "--config", str(conf)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert verify.returncode == 0, verify.stdout[-3000:] + verify.stderr[-3000:]

        acked = [e["key"] for e in events if "id" in e]
        assert len(acked) == len(set(acked))
        server.start()
        drain = {
            "op": "consume",
            "namesrv": server.namesrv,
            "group": "CG_FRESH",
            "topic": TOPIC,
            "threads": 4,
        }
        consumer = Driver(tmp_path, "drain", drain)
        want = {e["id"] for e in events if "id" in e}
        consumer.wait_for(lambda ev: {e.get("id") for e in ev} >= want, 120, "every acknowledged message")
        consumed = [e for e in consumer.stop() if "key" in e]
        consumer = None
    finally:
        load.kill()
        if consumer is not None:
            consumer.kill()
        server.kill()
    # by message id (UNIQ_KEY): the client's own retry of a send whose answer was lost in a kill is a
    # new message (new id, maybe another queue) stored beside the unanswered first attempt
    ids = {e["id"] for e in events if "id" in e}
    counts = Counter(e["id"] for e in consumed)
    wrong = [i for i in ids if counts[i] != 1]
    detail = [e for e in consumed if e["id"] in wrong[:5]]
    assert not wrong, f"{len(wrong)} acknowledged messages not consumed exactly once: {detail}"
    tried = {e["key"] for e in events if "key" in e}
    assert {e["key"] for e in consumed} <= tried
    assert all(e["len"] >= len(e["key"]) + 1 for e in consumed)
    assert len(ids) >= ROUNDS


def test_the_checkpoint_is_flushed_while_serving(tmp_path: Path) -> None:
    """The thorough flush writes the checkpoint too (``FlushConsumeQueueService``): after a SIGKILL
    the abnormal recovery starts from the file its timestamps name, not from the first file, and
    loses nothing."""
    from rmqcli.ops.recover import start_file_index
    from rmqcli.store import Store
    from rmqcli.store.checkpoint import read_checkpoint
    from tests.support.broker_drivers import run_driver

    conf = write_conf(tmp_path / "broker.conf", mappedFileSizeCommitLog=str(64 * 1024))
    store = tmp_path / "store"
    keys = [f"k{i}" for i in range(1600)]
    with ServeProcess(store, conf) as server:
        events = []
        for part, chunk in enumerate((keys[:800], keys[800:])):
            if part:  # recovery starts 3 s before the checkpoint's time: leave older files behind
                time.sleep(3.5)
            cmd = {"op": "produce", "namesrv": server.namesrv, "topic": TOPIC, "keys": chunk}
            events += run_driver(tmp_path, f"produce-{part}", cmd)
        reader = Store.open(store)
        last = max(h.store_timestamp for h in reader.commitlog.headers())
        files = len(reader.commitlog.files)
        reader.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            path = store / "checkpoint"
            if path.exists() and read_checkpoint(path).physic_msg_timestamp >= last:
                break
            time.sleep(0.2)
        server.kill()
    assert files >= 4 and (store / "abort").exists()
    checkpoint = read_checkpoint(store / "checkpoint")
    assert checkpoint.physic_msg_timestamp == checkpoint.logics_msg_timestamp == last
    recovered_from = start_file_index(Store.open(store), abnormal=True)
    assert recovered_from > 0
    # the abnormal recovery runs at start, then a clean stop (SIGTERM), which waits for the index
    # built behind the CommitLog (indexbehind); leaving a ``with`` block would SIGKILL it, maybe
    # mid-build, and verify would then read an index file the next start deletes
    restarted = ServeProcess(store, conf).start()
    try:
        assert restarted.stop(timeout=60) == 0
    finally:
        restarted.kill()
    assert not (store / "abort").exists()
    verify = subprocess.run(
        [*RMQ, "verify", str(store), "--config", str(conf), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert verify.returncode == 0, verify.stdout[-3000:]
    reader = Store.open(store)
    stored = [h for h in reader.commitlog.headers() if h.topic == TOPIC]
    reader.close()
    assert len(stored) == len(keys) == sum(1 for e in events if "id" in e)
