"""``rmq pipeline search`` finds exactly the records a CommitLog scan finds."""

from __future__ import annotations

import contextlib
import io
import json
import re

import pytest

from rmqcli.cli.main import invoke
from rmqcli.store import Store


def scan(stores, predicate) -> list[tuple[str, int]]:
    found = []
    for store in stores:
        s = Store.open(store)
        found += [(str(store.resolve()), r.position) for r in s.commitlog.records() if predicate(r)]
        s.close()
    return found


def search(*args: str) -> list[dict]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert invoke(["pipeline", "search", *args, "--output", "jsonl"]) == 0
    return [json.loads(line) for line in out.getvalue().split("\n") if line]


@pytest.fixture(scope="module")
def sample(all_stores):
    """A key, a unique key and a property value that occur in the stores."""
    s = Store.open(all_stores[1])
    recs = [r for r in s.commitlog.records() if r.keys and r.uniq_key and r.tags]
    s.close()
    rec = recs[len(recs) // 2]
    return rec.keys[0], rec.uniq_key, rec.tags


def test_by_key(spark, all_stores, sample):
    key = sample[0]
    rows = search(*map(str, all_stores), "--key", key)
    assert [(r["store"], r["position"]) for r in rows] == scan(all_stores, lambda r: key in r.keys)
    assert rows and all(key in r["keys"] for r in rows)


def test_by_uniq_key_and_property_with_topic(spark, all_stores, sample):
    _, uniq, tag = sample
    rows = search(*map(str, all_stores), "--uniq-key", uniq)
    assert [(r["store"], r["position"]) for r in rows] == scan(all_stores, lambda r: r.uniq_key == uniq)
    assert len(rows) >= 1
    rows = search(*map(str, all_stores), "--property", f"TAGS={tag}", "--topic", "TopicB")
    want = scan(all_stores, lambda r: r.topic == "TopicB" and r.properties.get("TAGS") == tag)
    assert [(r["store"], r["position"]) for r in rows] == want and want


def test_by_body_regex(spark, all_stores):
    pattern = re.compile(r"large body \d+7 ")  # inside compressed bodies too
    rows = search(*map(str, all_stores), "--body-regex", pattern.pattern, "--body", "sha256")
    want = scan(all_stores, lambda r: pattern.search(r.body().decode("utf-8", "replace")) is not None)
    assert [(r["store"], r["position"]) for r in rows] == want and want
    assert all("bodySha256" in r for r in rows)


def test_bad_queries_are_usage_errors(generated_stores, rmq_proc):
    store = str(generated_stores[0])
    assert rmq_proc("pipeline", "search", store).returncode == 2
    assert rmq_proc("pipeline", "search", store, "--body-regex", "(").returncode == 2
    assert rmq_proc("pipeline", "search", store, "--property", "novalue").returncode == 2


def test_a_store_given_as_url(spark, all_stores, sample):
    key = sample[0]
    url = all_stores[1].resolve().as_uri()
    rows = search(url, "--key", key)
    assert [r["position"] for r in rows] == [p for _, p in scan(all_stores[1:2], lambda r: key in r.keys)]
    assert {r["store"] for r in rows} == {url}


def test_stats_and_rebuild_need_directories(generated_stores, rmq_proc):
    url = generated_stores[0].resolve().as_uri()
    for command in ("stats", "rebuild"):
        proc = rmq_proc("pipeline", command, url)
        assert proc.returncode == 2 and "not a URL" in proc.stderr


def test_a_controller_mode_store_finds_only_confirmed_records(spark, tmp_path, capsys):
    """A key of a record past confirmPhyOffset is not found (not in the log, as ``rmq
    dump-commitlog`` shows it); one of a confirmed record is."""
    from tests.support.stores import controller_copy

    cut = 2000
    store, records = controller_copy(tmp_path, cut)
    capsys.readouterr()
    key_of = {}
    for r in records:
        for k in (r.get("properties") or {}).get("KEYS", "").split():
            key_of.setdefault(k, []).append(r["position"])
    before = next(k for k, at in key_of.items() if all(p < records[cut]["position"] for p in at))
    after = next(k for k, at in key_of.items() if all(p >= records[cut]["position"] for p in at))
    assert [r["position"] for r in search(str(store), "--key", before)] == key_of[before]
    assert search(str(store), "--key", after) == []
    assert f"from offset {records[cut]['position']}" in capsys.readouterr().err
