"""``rmq pipeline stats``: per store the numbers of ``rmq stats``, plus histograms that match the records."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest

from rmqcli.cli.main import invoke
from rmqcli.pipeline.stats import PERCENTILES
from rmqcli.store import Store
from tests.support.cli import rmq_json
from tests.support.stores import writable_copy

STATS_SECTIONS = ("store", "commitlog", "topics", "queues", "files")


@pytest.fixture(scope="module")
def pipeline_docs(spark, all_stores, tmp_path_factory):
    """``rmq pipeline stats --json`` over every store at once, also written as Parquet."""
    import contextlib
    import io

    out = io.StringIO()
    parquet = tmp_path_factory.mktemp("stats") / "parquet"
    with contextlib.redirect_stdout(out):
        code = invoke(["pipeline", "stats", *map(str, all_stores), "--json", "--parquet", str(parquet)])
    assert code == 0
    return json.loads(out.getvalue())["stores"], parquet


def test_equals_rmq_stats(pipeline_docs, all_stores):
    docs, _ = pipeline_docs
    assert len(docs) == len(all_stores)
    for store, doc in zip(all_stores, docs, strict=True):
        want = rmq_json("stats", str(store), "--json")
        assert {k: doc[k] for k in STATS_SECTIONS} == want, store


def test_histograms_match_the_records(pipeline_docs, all_stores):
    docs, _ = pipeline_docs
    for store, doc in zip(all_stores, docs, strict=True):
        s = Store.open(store)
        tags: Counter = Counter()
        props: Counter = Counter()
        sizes: dict[str, Counter] = {}
        for rec in s.commitlog.records():
            tags[(rec.topic, rec.tags)] += 1
            props.update((rec.topic, name) for name in rec.properties)
            sizes.setdefault(rec.topic, Counter())[rec.total_size] += 1
        s.close()
        assert Counter({(r["topic"], r["tag"]): r["messages"] for r in doc["tags"]}) == tags, store
        assert Counter({(r["topic"], r["property"]): r["messages"] for r in doc["properties"]}) == props, (
            store
        )
        assert doc["sizes"] == [{"topic": t, **nearest_rank(sizes[t])} for t in sorted(sizes)]


def nearest_rank(sizes: Counter) -> dict:
    """The expected row, from the sorted list of every size: count, min, max, mean to one decimal,
    and each percentile as the size at rank ceil(p% of n) (nearest rank)."""
    ordered = sorted(size for size, n in sizes.items() for _ in range(n))
    row = {"messages": len(ordered), "min": ordered[0], "max": ordered[-1]}
    row["mean"] = round(sum(ordered) / len(ordered), 1)
    for p in PERCENTILES:
        row[f"p{p}"] = ordered[max(1, math.ceil(p * len(ordered) / 100)) - 1]
    return row


def test_parquet_tables(spark, pipeline_docs):
    docs, parquet = pipeline_docs
    queues = spark.read.parquet(str(parquet / "queues")).collect()
    assert len(queues) == sum(len(d["queues"]) for d in docs)
    assert sum(r["messages"] for r in queues) == sum(d["commitlog"]["records"] for d in docs)


def test_corrupt_record_is_one_line_with_file_and_offset(spark, generated_stores, tmp_path, capsys, rmq_proc):
    root = writable_copy(generated_stores[0], tmp_path / "s")
    first = sorted((root / "commitlog").iterdir())[0]
    data = bytearray(first.read_bytes())
    data[1000:1008] = b"\xff" * 8  # inside a record: its checks fail
    first.write_bytes(bytes(data))
    want = rmq_proc("stats", str(root))
    assert want.returncode == 4
    assert invoke(["pipeline", "stats", str(root)]) == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(first) in err and "at byte" in err
    assert err == want.stderr


def test_a_controller_mode_store_counts_the_confirmed_records_as_rmq_stats(spark, tmp_path):
    """Records past confirmPhyOffset are not in the log (5.1.1's recovery): the pipeline counts them
    apart as ``rmq stats`` does, histograms included."""
    import contextlib
    import io

    from tests.support.stores import controller_copy

    cut = 2000
    store, records = controller_copy(tmp_path, cut)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert invoke(["pipeline", "stats", str(store), "--json"]) == 0
    (doc,) = json.loads(out.getvalue())["stores"]
    want = rmq_json("stats", str(store), "--json")
    sections = (*STATS_SECTIONS, "confirm", "unconfirmed")
    assert {k: doc[k] for k in sections} == {k: want[k] for k in sections}
    assert want["confirm"]["unconfirmedRecords"] == len(records) - cut
    confirmed = Counter(r["topic"] for r in records[:cut])
    assert {row["topic"]: row["messages"] for row in doc["sizes"]} == confirmed
