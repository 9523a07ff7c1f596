"""``rmq serve`` after a crash that cost the index: it serves at once and rebuilds the index behind
the CommitLog (``rmqcli.broker.services.indexbehind``); the index it ends with is the one a full rebuild
writes, the records sent meanwhile included, and queries by key find old and new records."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from formats import commitlog as fmt
from rmqcli.store import Store
from tests.support import ROOT
from tests.support.broker_drivers import run_driver
from tests.support.cli import RMQ
from tests.support.serve import ServeProcess, write_conf
from tests.support.stores import index_contents, sparse_copy, zero_checkpoint_timestamps

pytestmark = pytest.mark.cpp

SMALL = {
    "mappedFileSizeCommitLog": "65536",
    "mappedFileSizeConsumeQueue": "600",
    "maxHashSlotNum": "64",
    "maxIndexNum": "256",
}


def rmq(*args: str) -> str:
    proc = subprocess.run([*RMQ, *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def old_key(root: Path, conf: Path) -> tuple[str, str, list[str]]:
    """A topic, a KEYS token of a record in the middle of the store, and the record's queue id and
    queue offset (as ``queryMsgByKey`` prints them)."""
    store = Store.open(root, conf)
    try:
        records = [r for r in store.commitlog.records() if r.properties.get(fmt.PROPERTY_KEYS)]
    finally:
        store.close()
    rec = records[len(records) // 2]
    return (
        rec.topic,
        rec.properties[fmt.PROPERTY_KEYS].split(fmt.KEY_SEPARATOR)[0],
        [str(rec.queue_id), str(rec.queue_offset)],
    )


def found(namesrv: str, topic: str, key: str) -> list[list[str]]:
    """The rows of ``queryMsgByKey``: message id, queue id, queue offset."""
    out = rmq("queryMsgByKey", "-n", namesrv, "-t", topic, "-k", key)
    return [line.split() for line in out.splitlines()[1:] if line.strip()]


def test_the_index_is_rebuilt_behind_the_commitlog_after_a_crash(tmp_path: Path) -> None:
    from fixtures.generate import generate

    store = tmp_path / "store"
    generate(store, "small", seed=7)
    conf = write_conf(tmp_path / "broker.conf", **SMALL)
    topic, key, where = old_key(store, conf)
    files_before = len(list((store / "index").iterdir()))
    assert files_before > 1  # the rebuild goes on across files
    (store / "abort").touch()
    zero_checkpoint_timestamps(store)  # every index file is newer than the checkpoint: all are rebuilt

    server = ServeProcess(store, conf).start()
    try:
        keys = [f"behind-{i}" for i in range(20)]
        events = run_driver(
            tmp_path, "produce", {"op": "produce", "namesrv": server.namesrv, "topic": topic, "keys": keys}
        )
        assert sum(1 for e in events if e.get("status") == 0) == len(keys)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and where not in [
            row[1:] for row in found(server.namesrv, topic, key)
        ]:
            time.sleep(0.2)  # the old records are indexed behind
        assert where in [row[1:] for row in found(server.namesrv, topic, key)]
        assert [e["id"] for e in events if e.get("key") == "behind-19"] == [
            row[0] for row in found(server.namesrv, topic, "behind-19")
        ]
    finally:
        assert server.stop() == 0
    assert not (store / "abort").exists()

    rebuilt = tmp_path / "rebuilt"
    shutil.copytree(store, rebuilt, ignore=shutil.ignore_patterns(".rmq-backup"), copy_function=sparse_copy)
    rmq("rebuild", str(rebuilt), "--index", "--config", str(conf), "--yes")
    served = [(header, entries) for header, entries, _ in index_contents(store)]
    assert served == [(header, entries) for header, entries, _ in index_contents(rebuilt)]
    assert sum(len(entries) for _, entries in served) > 2 * len(keys)
