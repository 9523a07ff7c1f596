"""``rmq pipeline export``: the rows equal ``rmq dump-commitlog --output jsonl``'s, record for record."""

from __future__ import annotations

import base64
import json
from collections import Counter
from pathlib import Path

import pytest

from rmqcli.cli.main import invoke
from rmqcli.pipeline.schema import COLUMNS
from tests.support.cli import rmq_jsonl

EXTRA = {"store", "storeDate", "body"}


def read_back(spark, out: Path, fmt: str = "parquet") -> list[dict]:
    frame = spark.read.parquet(str(out)) if fmt == "parquet" else spark.read.json(str(out))
    return [row.asDict(recursive=True) for row in frame.collect()]


def by_store(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for row in sorted(rows, key=lambda r: (r["store"], r["position"])):
        out.setdefault(row["store"], []).append(row)
    return out


@pytest.fixture(scope="module")
def exported(spark, all_stores, tmp_path_factory):
    """One export of every store with --body raw, through the command, read back with Spark."""
    out = tmp_path_factory.mktemp("export") / "parquet"
    code = invoke(["pipeline", "export", *map(str, all_stores), "--out", str(out), "--body", "raw", "--json"])
    assert code == 0
    return out, by_store(read_back(spark, out))


def test_rows_equal_dump_commitlog(exported, all_stores):
    out, rows = exported
    assert len(rows) == len(all_stores)
    for store in all_stores:
        dump = rmq_jsonl("dump-commitlog", str(store), "--output", "jsonl", "--body", "base64")
        mine = rows[str(store.resolve())]
        assert len(mine) == len(dump), store
        for want, got in zip(dump, map(dict, mine), strict=True):
            assert got.pop("body") == base64.b64decode(want.pop("body"))
            for key, value in want.items():
                assert got[key] == value, (store, want["position"], key)
            assert all(got[k] is None for k in set(got) - set(want) - EXTRA), (store, want["position"])


def test_partitioned_by_topic_and_store_date(exported):
    out, rows = exported
    topics = {r["topic"] for rs in rows.values() for r in rs}
    on_disk = {p.name.removeprefix("topic=") for p in out.iterdir() if p.is_dir()}
    assert len(on_disk) == len(topics)  # one directory per topic (names escaped by Spark)
    for r in next(iter(rows.values())):
        from datetime import UTC, datetime

        assert r["storeDate"] == datetime.fromtimestamp(r["storeTimestamp"] / 1000, UTC).strftime("%Y-%m-%d")
    assert all(any(p.name.startswith("storeDate=") for p in d.iterdir()) for d in out.iterdir() if d.is_dir())


def test_schema_is_the_declared_one(spark, exported):
    out, _ = exported
    names = {f.name for f in spark.read.parquet(str(out)).schema.fields}
    assert names == {name for name, _, _ in COLUMNS} | {"body"}


def test_jsonl_text_body_and_filters(spark, generated_stores, tmp_path, capsys):
    store = generated_stores[1]
    dump = rmq_jsonl("dump-commitlog", str(store), "--output", "jsonl", "--body", "utf8")
    times = sorted(r["storeTimestamp"] for r in dump)
    since, until = times[len(times) // 4], times[3 * len(times) // 4]
    out = tmp_path / "jsonl"
    args = ["pipeline", "export", str(store), "--out", str(out), "--format", "jsonl", "--body", "text"]
    args += ["--topic", "TopicA", "--topic", "TopicB", "--since", str(since), "--until", str(until), "--json"]
    assert invoke(args) == 0
    report = json.loads(capsys.readouterr().out)
    want = [r for r in dump if r["topic"] in ("TopicA", "TopicB") and since <= r["storeTimestamp"] <= until]
    assert report["records"] == len(want) and report["format"] == "jsonl"
    got = sorted(read_back(spark, out, "jsonl"), key=lambda r: r["position"])
    assert [r["position"] for r in got] == [r["position"] for r in want]
    assert [r["body"] for r in got] == [r["body"] for r in want]
    assert Counter(r["topic"] for r in got) == Counter(r["topic"] for r in want)


def test_existing_output_is_refused(generated_stores, tmp_path, rmq_proc):
    proc = rmq_proc("pipeline", "export", str(generated_stores[0]), "--out", str(tmp_path))
    assert proc.returncode == 2 and "--overwrite" in proc.stderr


def test_missing_store_is_not_found(tmp_path, rmq_proc):
    proc = rmq_proc("pipeline", "export", str(tmp_path / "nope"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 3 and proc.stderr.startswith("rmq: error:") and proc.stderr.count("\n") == 1


def test_a_store_given_as_url_is_read_through_spark(spark, exported, generated_stores, tmp_path, capsys):
    """``file://`` goes through Spark's binaryFile source, as hdfs:// or s3a:// would."""
    _, rows = exported
    store = generated_stores[1]
    url = store.resolve().as_uri()
    out = tmp_path / "url"
    assert invoke(["pipeline", "export", url, "--out", str(out), "--body", "raw", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["commitlogFiles"] is None
    got = by_store(read_back(spark, out))
    assert list(got) == [url]
    want = rows[str(store.resolve())]
    assert len(got[url]) == len(want)
    for mine, ref in zip(got[url], want, strict=True):
        assert {**mine, "store": None} == {**ref, "store": None}


def test_a_missing_url_store_is_not_found(spark, tmp_path, capsys):
    url = (tmp_path / "nothing").as_uri()
    assert invoke(["pipeline", "export", url, "--out", str(tmp_path / "out")]) == 3
    assert capsys.readouterr().err.count("\n") == 1


def test_parquet_to_a_url_goes_through_sparks_writer(spark, exported, generated_stores, tmp_path):
    _, rows = exported
    store = generated_stores[0]
    out = tmp_path / "via-spark"
    assert invoke(["pipeline", "export", str(store), "--out", out.as_uri(), "--body", "raw"]) == 0
    assert not any(p.name.startswith("part-0000-") for p in out.rglob("*.parquet"))  # Spark's own names
    assert by_store(read_back(spark, out)) == {str(store.resolve()): rows[str(store.resolve())]}


def test_partition_names_are_escaped_as_spark_does():
    from rmqcli.pipeline.parquet import escape_path_name

    assert escape_path_name("%RETRY%group") == "%25RETRY%25group"
    assert escape_path_name("a/b:c=d") == "a%2Fb%3Ac%3Dd"
    assert escape_path_name("主题-Ünïcode") == "主题-Ünïcode"


def test_a_controller_mode_store_exports_what_dump_commitlog_shows(spark, tmp_path, capsys):
    """Records past confirmPhyOffset are not in the log (5.1.1's recovery): the export leaves them
    out as ``rmq dump-commitlog`` does, and says from which offset."""
    from tests.support.stores import controller_copy

    cut = 2000
    store, records = controller_copy(tmp_path, cut)
    out = tmp_path / "out"
    assert invoke(["pipeline", "export", str(store), "--out", str(out), "--json"]) == 0
    err = capsys.readouterr().err
    assert f"from offset {records[cut]['position']}" in err and "left out" in err
    rows = sorted(read_back(spark, out), key=lambda r: r["position"])
    dump = rmq_jsonl("dump-commitlog", str(store), "--output", "jsonl")
    assert (
        [r["position"] for r in rows]
        == [d["position"] for d in dump]
        == [r["position"] for r in records[:cut]]
    )
