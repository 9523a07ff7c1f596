"""The clean-up of a DLedger member's log while it serves (4.9.8 ``DLedgerCommitLog`` hands DLedger's
``CleanSpaceService`` ``fileReservedHours`` = ``fileReservedTime`` + 1, ``deleteWhen`` and the disk
ratios): with ``fileReservedTime=1`` a data file last written 3 h ago goes, one of 1.5 h stays (a
plain CommitLog would lose both), and so does every later one; the ledger's first index moves to
the first entry of the file now first (``reviseLedgerBeginIndex``), the consume queues' minimum
offsets to the first message still held, and a restart reads the log from there."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from rmqcli.store import Store
from tests.support.broker_drivers import Driver
from tests.support.dledger import GROUP
from tests.support.serve import ServeProcess, free_port, wait_until, write_conf

pytestmark = pytest.mark.cpp

TOPIC = "TopicCleanUp"
HOUR = 3600


def runtime(rmq, addr: str) -> dict[str, str]:  # type: ignore[no-untyped-def]
    out = rmq("brokerStatus", "-b", addr, "--json")
    assert out.exit_code == 0, out.stdout + out.stderr
    (status,) = json.loads(out.stdout)
    return status["table"]


def queue_mins(rmq, namesrv: str) -> int:  # type: ignore[no-untyped-def]
    """The sum of the topic's queues' minimum offsets (``rmq topicStatus``)."""
    out = rmq("topicStatus", "-n", namesrv, "-t", TOPIC, "--json")
    assert out.exit_code == 0, out.stdout + out.stderr
    return sum(q["minOffset"] for q in json.loads(out.stdout))


def topic_records(store: Path) -> list[tuple[int, int]]:
    """(entry index, entry position) of the topic's messages in the log, in order."""
    log = Store.open(store)
    try:
        out = []
        for r in log.commitlog.records():
            if r.topic == TOPIC:
                extra = log.commitlog.record_extra(r)
                out.append((extra["entryIndex"], extra["entryPos"]))
        return out
    finally:
        log.close()


def test_a_member_deletes_expired_data_files_while_it_serves(rmq, tmp_path: Path) -> None:
    conf = write_conf(
        tmp_path / "n0.conf", brokerName=GROUP, enableDLegerCommitLog="true", dLegerGroup=GROUP,
        dLegerPeers=f"n0-127.0.0.1:{free_port()}", dLegerSelfId="n0", mappedFileSizeCommitLog=str(1 << 20),
        fileReservedTime="1", deleteWhen="99",  # only the manual rounds of deleteExpiredCommitLog
    )  # fmt: skip
    store = tmp_path / "store"
    data = store / "dledger-n0" / "data"
    with ServeProcess(store, conf, ["--verbose"]) as s:
        wait_until(lambda: "now SYNC_MASTER, brokerId 0" in s.output(), 20, "the election")
        made = rmq("updateTopic", "-n", s.namesrv, "-c", "DefaultCluster", "-t", TOPIC, "-r", "2", "-w", "2")
        assert made.exit_code == 0, made.stdout + made.stderr
        load = Driver(tmp_path, "load", {"op": "load", "namesrv": s.namesrv, "topic": TOPIC, "prefix": "c"})
        try:  # bodies of 100..2000 bytes: four 1 MiB data files
            wait_until(lambda: data.exists() and len(list(data.iterdir())) >= 4, 120, "four data files")
        finally:
            load.kill()
        files = sorted(data.iterdir())
        in_first = sum(1 for r in topic_records(store) if r[1] < int(files[1].name))
        now = time.time()
        os.utime(files[0], (now - 3 * HOUR, now - 3 * HOUR))  # expired for DLedger (2 h)
        os.utime(files[1], (now - 1.5 * HOUR, now - 1.5 * HOUR))  # within DLedger's 2 h, not 1 h
        before = runtime(rmq, s.broker)
        assert before["dLedgerBeginIndex"] == "0" and before["commitLogMinOffset"] == "0"
        mins_before = queue_mins(rmq, s.namesrv)
        assert mins_before == 0
        done = rmq("deleteExpiredCommitLog", "-n", s.namesrv, "-c", "DefaultCluster")
        assert done.exit_code == 0, done.stdout + done.stderr
        wait_until(lambda: "clean-up: deleted CommitLog files" in s.output(), 20, "the round's deletions")
        assert not files[0].exists()
        assert all(f.exists() for f in files[1:])
        after = runtime(rmq, s.broker)
        assert int(after["commitLogMinOffset"]) == int(files[1].name)
        begin = int(after["dLedgerBeginIndex"])
        assert begin > 0
        wait_until(lambda: queue_mins(rmq, s.namesrv) > 0, 20, "the queues' minimum offsets moved")
        mins_after = queue_mins(rmq, s.namesrv)
        assert s.stop() == 0
    held = topic_records(store)
    assert held[0][0] == begin and held[0][1] == int(files[1].name)
    assert mins_after == in_first  # each queue starts at its first message still held
    with ServeProcess(store, conf, ["--verbose"]) as s:  # a restart reads the log from there
        wait_until(lambda: "now SYNC_MASTER, brokerId 0" in s.output(), 20, "the election again")
        again = runtime(rmq, s.broker)
        assert (again["dLedgerBeginIndex"], again["commitLogMinOffset"]) == (
            str(begin),
            files[1].name.lstrip("0"),
        )
