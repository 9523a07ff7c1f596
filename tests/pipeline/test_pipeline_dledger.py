"""``rmq pipeline`` on stores written by a real 4.9.8 DLedger group (``enableDLegerCommitLog``), on
local[2] Spark: export, stats, search, lag and rebuild give what the single-process commands give,
and the counts the brokers answered.

Once per test run (``tests.support.dledger.three_terms``, shared with tests/store/): three brokers
n0-n2 on loopback; 40, 30 and 20 messages (``clienttest``, keys ``K<i>``) under three leaders in
turn, each killed (-9) and restarted; a fresh consumer group consumes 30 of them (``clienttest ...
consume``); ``mqadmin topicStatus`` while the group runs.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from rmqcli.cli.main import invoke
from tests.support.cli import rmq_json, rmq_jsonl, run_rmq
from tests.support.dledger import SELF_IDS, THREE_TERMS_BATCHES, THREE_TERMS_TOPIC, three_terms
from tests.support.stores import sparse_copy

pytestmark = pytest.mark.java

TOPIC = THREE_TERMS_TOPIC
BATCHES = THREE_TERMS_BATCHES
STATS_SECTIONS = ("store", "commitlog", "topics", "queues", "files")


@dataclass(frozen=True)
class Facts:
    stores: list[Path]  # n0, n1, n2
    queues: dict[int, tuple[int, int]]  # queueId -> (min, max) offset (mqadmin topicStatus)
    terms: set[int]
    group: str


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Facts:
    made = three_terms(tmp_path_factory)
    stores = [made.stores[s] for s in SELF_IDS]
    return Facts(stores, made.queues, set(made.per_term), made.consumer_group)


def _invoke(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = invoke(["pipeline", *args])
    assert code == 0
    return out.getvalue()


def test_export_rows_equal_dump_commitlog(spark, group: Facts, tmp_path: Path) -> None:
    out = tmp_path / "parquet"
    _invoke("export", *map(str, group.stores), "--out", str(out), "--body", "raw", "--json")
    rows: dict[str, list[dict]] = {}
    for row in spark.read.parquet(str(out)).collect():
        rows.setdefault(row["store"], []).append(row.asDict(recursive=True))
    for store in group.stores:
        dump = rmq_jsonl("dump-commitlog", str(store), "--output", "jsonl", "--body", "base64")
        mine = sorted(rows[str(store.resolve())], key=lambda r: r["position"])
        assert len(mine) == len(dump) == sum(BATCHES), store
        for want, got in zip(dump, mine, strict=True):
            assert got.pop("body") == base64.b64decode(want.pop("body"))
            assert {k: got[k] for k in want} == want, (store, want["position"])
            assert got["entryPos"] + 48 == got["position"]
        assert {r["entryTerm"] for r in mine} == group.terms
        per_queue = {q: sum(1 for r in mine if r["queueId"] == q) for q in group.queues}
        assert per_queue == {q: high - low for q, (low, high) in group.queues.items()}


def test_stats_equal_rmq_stats(spark, group: Facts) -> None:
    docs = json.loads(_invoke("stats", *map(str, group.stores), "--json"))["stores"]
    for store, doc in zip(group.stores, docs, strict=True):
        assert {k: doc[k] for k in STATS_SECTIONS} == rmq_json("stats", str(store), "--json")
        queues = {q["queueId"]: (q["cqMinOffset"], q["cqMaxOffset"]) for q in doc["queues"]}
        assert queues == group.queues
        assert doc["tags"] == [{"topic": TOPIC, "tag": "TagA", "messages": sum(BATCHES)}]


def test_search_by_key_finds_the_records_of_dump_commitlog(spark, group: Facts) -> None:
    out = _invoke("search", *map(str, group.stores), "--key", "K5", "--output", "jsonl")
    rows = [json.loads(line) for line in out.splitlines() if line]
    assert len(rows) == len(BATCHES) * len(group.stores)  # K5 was sent once per batch
    for store in group.stores:
        want = [r for r in rmq_jsonl("dump-commitlog", str(store), "--output", "jsonl") if "K5" in r["keys"]]
        path = str(store.resolve())
        got = [{k: v for k, v in r.items() if k != "store"} for r in rows if r["store"] == path]
        assert got == want


def test_lag_equals_rmq_lag(spark, group: Facts) -> None:
    rows = json.loads(_invoke("lag", *map(str, group.stores), "--json"))
    expected = []
    for store in group.stores:
        expected += [{"store": str(store.resolve()), **row} for row in rmq_json("lag", str(store), "--json")]
    assert rows == expected
    assert any(r["group"] == group.group and r["topic"] == TOPIC for r in rows)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _units(root: Path) -> dict[int, list[dict]]:
    cq = root / "consumequeue" / TOPIC
    return {int(q.name): rmq_json("dump-cq", str(q / "00000000000000000000"), "--json") for q in cq.iterdir()}


def test_rebuild_writes_what_rmq_rebuild_writes(spark, group: Facts, tmp_path: Path) -> None:
    """Consume queues and index files rebuilt from scratch: byte for byte ``rmq rebuild``'s, and the
    units those of the broker that wrote the log."""
    src = group.stores[0]
    copies = []
    for name in ("pipeline", "rmq"):
        root = shutil.copytree(src, tmp_path / name, symlinks=True, copy_function=sparse_copy)
        (root / "lock").unlink(missing_ok=True)
        shutil.rmtree(root / "consumequeue")
        shutil.rmtree(root / "index")
        copies.append(root)
    _invoke("rebuild", str(copies[0]), "--yes")
    run_rmq("rebuild", str(copies[1]), "--yes", check=True)
    for sub in ("consumequeue", "index"):
        assert _files(copies[0] / sub) == _files(copies[1] / sub) != {}
    assert _units(copies[0]) == _units(src)
