"""The record table ``rmq verify`` joins on (issue 20: a 4 GiB store under 200 MB): columns in the
narrowest type that holds their values, the index keys in temporary files read back a run at a
time, store times read from the records' files. Checked against the records of a generated store
and of the real basic-1 store, read one by one (real bytes, no mocks)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fixtures.generate import generate
from formats import commitlog as fmt
from rmqcli.ops import verify_table
from rmqcli.ops.verify_commitlog import CommitLogVerifier
from rmqcli.ops.verify_common import Collector
from rmqcli.ops.verify_table import RecordTable, narrowest
from rmqcli.store import Store
from tests.support.components import require
from tests.support.realfixtures import REAL_ROOT

BASIC = REAL_ROOT / "basic-1" / "store"


@pytest.fixture(scope="module", params=["generated", "basic-1"])
def store_dir(request, tmp_path_factory) -> Path:
    if request.param == "basic-1":
        require("real")
        return BASIC
    path = tmp_path_factory.mktemp("columns") / "small"
    generate(path, "small")
    return path


def _scan(path: Path) -> tuple[Store, RecordTable]:
    store = Store.open(path)
    settings = store.geometry().settings
    table = CommitLogVerifier(
        store.commitlog.files, settings.mapped_file_size_commitlog, Collector(store.root)
    ).scan()
    return store, table


@pytest.mark.parametrize(
    ("lo", "hi", "dtype"),
    [
        (0, 0, np.int8),
        (-128, 127, np.int8),
        (0, 128, np.int16),
        (-(2**15), 2**15 - 1, np.int16),
        (0, 2**15, np.int32),
        (-(2**31), 2**31 - 1, np.int32),
        (0, 2**31, np.int64),
        (-(2**63), 2**63 - 1, np.int64),
    ],
)
def test_narrowest_type_holds_the_bounds(lo: int, hi: int, dtype) -> None:
    assert narrowest(lo, hi) is dtype


def test_the_columns_hold_every_record_exactly(store_dir: Path) -> None:
    store, table = _scan(store_dir)
    try:
        records = list(store.commitlog.records())
        assert len(table) == len(records) > 0
        assert table.position.dtype == np.int64 and table.sys_flag.dtype == np.uint8
        assert table.queue_id.dtype == np.int8 and table.topic_id.dtype == np.int8  # few queues, topics
        assert table.position.tolist() == [r.position for r in records]
        assert table.total_size.tolist() == [r.total_size for r in records]
        assert table.queue_id.tolist() == [r.queue_id for r in records]
        assert table.queue_offset.tolist() == [r.queue_offset for r in records]
        assert [table.topics[t] for t in table.topic_id.tolist()] == [r.topic for r in records]
        bits = fmt.TRANSACTION_MASK | fmt.INNER_BATCH_FLAG
        assert table.sys_flag.tolist() == [r.sys_flag & bits for r in records]
        times = [r.store_timestamp for r in records]
        assert table.store_timestamps(np.arange(len(records))).tolist() == times
        assert table.max_store_timestamp == max(times)
    finally:
        table.keys.close()
        store.close()


@pytest.mark.parametrize("keys_at_once", [3, 1 << 18])
def test_the_keys_read_back_in_runs_are_the_records_keys(
    store_dir: Path, keys_at_once: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(verify_table, "_KEYS_AT_ONCE", keys_at_once)
    store, table = _scan(store_dir)
    try:
        keys = table.keys
        rec, hashes = keys.records(), keys.hashes()
        assert len(rec) == len(hashes) == len(keys) > 0
        assert np.all(np.diff(rec) >= 0) and rec[-1] < len(table)
        runs = list(keys.runs())
        assert runs[0][0] == 0 and runs[-1][1] == len(keys)
        assert np.array_equal(np.concatenate([keys.records(lo, hi) for lo, hi in runs]), rec)
        assert np.array_equal(np.concatenate([keys.hashes(lo, hi) for lo, hi in runs]), hashes)
        for row in [0, 1, int(rec[len(rec) // 2]), int(rec[-1]), int(rec[-1]) + 1, len(table) + 5]:
            assert keys.first_of(row) == int(np.searchsorted(rec, row))
        assert keys.records(len(keys), len(keys) + 3).size == 0
    finally:
        table.keys.close()
        store.close()
