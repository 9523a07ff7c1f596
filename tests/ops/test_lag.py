"""``rmq lag`` against the ``consumerProgress`` a live 4.9.8 broker answered for the same store."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.support import REAL_ROOT
from tests.support.cli import invoke_rmq
from tests.support.realfixtures import real_params
from tests.support.retention import TOPIC, age, build_store, commitlog_names

CAPTURES = sorted(REAL_ROOT.glob("*/mqadmin/consumerProgress_*.txt"))


def _capture_id(path: Path) -> str:
    return f"{path.parts[-3]}/{path.stem}"


def lag(*args: str) -> list[dict]:
    result = invoke_rmq("lag", *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def captured(path: Path) -> list[list[str]]:
    return [
        line.split()
        for line in path.read_text().splitlines()[1:]
        if line.strip() and not line.startswith(("Consume TPS", "Diff Total"))
    ]


@pytest.mark.parametrize(
    "capture",
    real_params([c for c in CAPTURES if not c.name.endswith("_all.txt")], _capture_id),
)
def test_every_group_s_numbers_equal_the_live_consumer_progress(capture: Path) -> None:
    group = capture.stem.removeprefix("consumerProgress_")
    rows = lag(str(capture.parents[1] / "store"), "-g", group)
    expected = []
    for fields in captured(capture):
        topic, _broker, qid, broker_offset, consumer_offset, diff = fields[:6]
        last = " ".join(fields[6:])
        expected.append((topic, int(qid), int(broker_offset), int(consumer_offset), int(diff), last))
    got = [
        (
            r["topic"],
            r["queueId"],
            r["brokerOffset"],
            r["consumerOffset"],
            r["diff"],
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["lastTimestamp"] / 1000))
            if r["lastTimestamp"]
            else "N/A",
        )
        for r in rows
    ]
    assert got == expected


@pytest.mark.parametrize(
    "capture", real_params([c for c in CAPTURES if c.name.endswith("_all.txt")], _capture_id)
)
def test_each_group_s_diff_total_equals_the_live_one(capture: Path) -> None:
    totals = {}
    for row in lag(str(capture.parents[1] / "store")):
        totals[row["group"]] = totals.get(row["group"], 0) + row["diff"]
    for fields in captured(capture):
        assert totals.get(fields[0], 0) == int(fields[-1]), fields[0]


def test_offsets_below_the_minimum_and_past_the_end_are_flagged(tmp_path: Path) -> None:
    root = tmp_path / "store"
    placed = build_store(root, offsets={"G_OLD": 3, "G_FAR": 500, "G_OK": 150})
    names = commitlog_names(root)
    age(root, names[:2], int(time.time() * 1000) - 3 * 3_600_000)
    done = invoke_rmq("clean", str(root), "--reserved-hours", "2", "--manual", "--no-backup", "--yes")
    assert done.exit_code == 0, done.output
    rows = {(r["group"], r["queueId"]): r for r in lag(str(root), "-t", TOPIC)}
    low = int(names[2])
    first_kept = min(p.queue_offset for p in placed if p.queue_id == 0 and p.physical >= low)
    old = rows[("G_OLD", 0)]
    assert old["minOffset"] == first_kept and old["flags"] == ["below-min"] and old["diff"] == 200 - 3
    kept = next(p for p in placed if p.queue_id == 0 and p.queue_offset == first_kept)
    assert old["oldestUnconsumedTimestamp"] is not None and kept.physical >= low
    assert rows[("G_FAR", 0)]["flags"] == ["past-max"] and rows[("G_FAR", 0)]["diff"] == -300
    ok = rows[("G_OK", 1)]
    assert ok["flags"] == [] and ok["diff"] == 50 and ok["lastTimestamp"] is not None
    empty = rows[("G_OK", 2)]  # a read queue without messages or a committed offset
    assert (empty["brokerOffset"], empty["consumerOffset"], empty["flags"]) == (0, 0, [])


@pytest.mark.parametrize(
    "capture", real_params([c for c in CAPTURES if c.name.endswith("_all.txt")][:1], _capture_id)
)
def test_several_processes_give_the_rows_one_gives(capture: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rmqcli.ops import lag as ops
    from rmqcli.store import Store

    store = Store.open(capture.parents[1] / "store")
    one = [row.to_dict() for row in ops.lag_rows(store)]
    monkeypatch.setattr(ops, "PARALLEL_QUEUES", 2)
    assert ops._workers(len(one)) > 1 or (os.cpu_count() or 1) == 1
    assert [row.to_dict() for row in ops.lag_rows(store)] == one
