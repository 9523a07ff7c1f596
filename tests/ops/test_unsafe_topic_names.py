"""Topic names that cannot name a consume-queue directory: nothing is written outside the store.

A CommitLog record whose topic is ``%RETRY%x/../../../outside`` or ``../../evil`` would make a
broker's dispatch create its consume queue outside ``consumequeue/``. The stores here are written
by ``StoreWriter`` under placeholder topics of the same length whose bytes are then replaced in the
CommitLog (so the store does not depend on the dispatch under test). Each topic climbs out of the
directory the command under test dispatches into, to ``tmp_path/outside``, a sibling of the store;
the tests check that nothing appears there (or anywhere else outside the store) and that every
command says which records it left out.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from rmqcli.cli.main import invoke
from rmqcli.errors import CorruptDataError, UnsafeNameError, UsageError
from rmqcli.store import Store
from rmqcli.store.naming import (
    NAME_MAX,
    consume_queue_dir,
    is_safe_topic_dir,
    topic_dir,
    topic_dir_problem,
)
from rmqcli.store.write.messages import Message
from rmqcli.store.write.writer import StoreWriter
from tests.support.stores import geometry

SETTINGS = geometry(64 * 1024, 6000, 64, 256)
EVIL = "../../evil"
COMMITLOG_FILE = "commitlog/00000000000000000000"


# --- the naming rule ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name",
    ["", ".", "..", "a/b", "/abs", "x/../../y", "a\\b", "a\0b", "x" * (NAME_MAX + 1), "é" * 128, "\ud800"],
)
def test_names_that_cannot_be_a_queue_directory(name, tmp_path):
    assert topic_dir_problem(name) is not None
    assert not is_safe_topic_dir(name)
    with pytest.raises(UnsafeNameError) as caught:
        consume_queue_dir(tmp_path, name, 0)
    assert caught.value.exit_code == CorruptDataError.exit_code
    assert "\n" not in str(caught.value)
    with pytest.raises(UnsafeNameError):
        topic_dir(tmp_path, name)


@pytest.mark.parametrize(
    "name",
    ["TopicA", "%RETRY%group", "...", "a..b", "x" * NAME_MAX, "é" * 127, "Evil\n", " spaced ", "tab\there"],
)
def test_names_that_can(name, tmp_path):
    # newlines, spaces and other control characters neither lead out of consumequeue/ nor make
    # the filesystem fail: a broker writes such queues, and so does rmq
    assert topic_dir_problem(name) is None
    path = consume_queue_dir(tmp_path, name, 3)
    assert path == tmp_path / "consumequeue" / name / "3"
    path.mkdir(parents=True)  # the filesystem takes it
    assert path.is_dir()


def test_a_symlinked_topic_directory_leading_out_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "store" / "consumequeue").mkdir(parents=True)
    (tmp_path / "store" / "consumequeue" / "Linked").symlink_to(outside)
    with pytest.raises(UnsafeNameError, match="outside"):
        consume_queue_dir(tmp_path / "store", "Linked", 0)
    # a symlinked consumequeue/ itself (queues on another disk) is fine
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "consumequeue").symlink_to(tmp_path / "elsewhere")
    assert consume_queue_dir(tmp_path / "other", "T", 1) == tmp_path / "other" / "consumequeue" / "T" / "1"


# --- stores with such records ---------------------------------------------------------------------
def climbing(levels: int) -> str:
    """A retry topic whose queue lands in ``outside``, ``levels`` directories above the directory
    holding ``consumequeue/`` (the issue's ``%RETRY%x/../../..``)."""
    return "%RETRY%x/" + "../" * (levels + 2) + "outside"


def make_store(tmp_path: Path, climb: str, extra: tuple[str, ...] = ()) -> tuple[Path, dict[str, int]]:
    """``tmp_path/store``: TopicA records around one record of ``climb``, one of ``EVIL`` and one of
    each ``extra`` topic; returns the store and the CommitLog offset of each unsafe record."""
    root = tmp_path / "store"
    placeholders = {
        topic: letter * len(topic.encode())
        for topic, letter in zip((climb, EVIL, *extra), "QRSTUV", strict=False)
    }
    clock = iter(range(1_700_000_000_000, 1_700_000_100_000, 1000))
    offsets = {}
    with StoreWriter(root, SETTINGS, clock=lambda: next(clock)) as w:
        for i in range(6):
            w.append(Message("TopicA", i % 2, b"m" * 100, {"KEYS": f"k{i}", "TAGS": "a"}))
        for topic, placeholder in placeholders.items():
            offsets[topic] = w.append(Message(placeholder, 0, b"u" * 50, {"TAGS": "b"})).physical_offset
        w.append(Message("TopicA", 0, b"m" * 100, {"KEYS": "last", "TAGS": "a"}))
    path = root / COMMITLOG_FILE
    data = path.read_bytes()
    for topic, placeholder in placeholders.items():
        assert data.count(placeholder.encode()) == 1
        data = data.replace(placeholder.encode(), topic.encode())
        shutil.rmtree(root / "consumequeue" / placeholder)
    path.write_bytes(data)
    return root, offsets


def outside_entries(tmp_path: Path, *, allowed: tuple[str, ...] = ()) -> list[str]:
    """Everything under ``tmp_path`` that is not the store (nor ``allowed``), and anything inside the
    store named like an escaped queue."""
    keep = ("store", *allowed)
    found = [str(p.relative_to(tmp_path)) for p in tmp_path.iterdir() if p.name not in keep]
    store = tmp_path / "store"
    found += [str(p.relative_to(tmp_path)) for p in store.rglob("*") if p.name in ("evil", "outside")]
    queues = store / "consumequeue"
    if queues.is_dir():
        found += [str(p.relative_to(tmp_path)) for p in queues.iterdir() if p.name != "TopicA"]
    return found


def cq_files(root: Path) -> dict[str, bytes]:
    base = root / "consumequeue"
    return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}


def assert_skipped(plan: dict, root: Path, offsets: dict[str, int]) -> None:
    skipped = {s["topic"]: s for s in plan["skipped"]}
    assert set(skipped) == set(offsets)
    for topic, offset in offsets.items():
        entry = skipped[topic]
        assert entry["kind"] == "unsafe-topic" and entry["records"] == 1
        assert (entry["file"], entry["offset"]) == (COMMITLOG_FILE, offset)
        assert entry["reason"] == topic_dir_problem(topic)
        assert any(repr(topic) in note and COMMITLOG_FILE in note for note in plan["notes"])


def test_verify_reports_each_record_with_its_file_and_offset(tmp_path, rmq_proc):
    root, offsets = make_store(tmp_path, climbing(1))
    proc = rmq_proc("verify", str(root), "--json")
    assert proc.returncode == CorruptDataError.exit_code, proc.stderr
    doc = json.loads(proc.stdout)
    errors = [p for p in doc["problems"] if p["severity"] == "error"]
    assert sorted((p["kind"], p["file"], p["offset"]) for p in errors) == sorted(
        ("unsafe-topic", COMMITLOG_FILE, offset) for offset in offsets.values()
    )
    assert all("consume-queue directory" in p["message"] for p in errors)
    assert "Traceback" not in proc.stderr and outside_entries(tmp_path) == []
    # table output names them too
    proc = rmq_proc("verify", str(root))
    assert proc.returncode == 4 and "unsafe-topic" in proc.stdout and "CORRUPT" in proc.stdout


def test_verify_of_one_unsafe_topic_looks_nowhere_outside(tmp_path, rmq_proc):
    root, offsets = make_store(tmp_path, climbing(1))
    queue = tmp_path / "evil" / "0"  # a consume queue where ../../evil leads, with garbage in it
    queue.mkdir(parents=True)
    (queue / "00000000000000000000").write_bytes(b"\xff" * 6000)
    proc = rmq_proc("verify", str(root), "--topic", EVIL, "--json")
    assert proc.returncode == 4, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["summary"]["queues"] == 0
    assert {(p["kind"], p["offset"]) for p in doc["problems"] if p["severity"] == "error"} == {
        ("unsafe-topic", offset) for offset in offsets.values()
    }


def test_rebuild_writes_nothing_outside_and_says_so(tmp_path, rmq_proc):
    root, offsets = make_store(tmp_path, climbing(3))  # rebuild dispatches into .rmq-staging/rebuild
    before = cq_files(root)
    proc = rmq_proc("rebuild", str(root), "--cq", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert outside_entries(tmp_path) == []
    assert "'../../evil'" in proc.stdout and "go to no consume queue" in proc.stdout
    assert cq_files(root) == before  # the other queues are the broker's
    proc = rmq_proc("rebuild", str(root), "--cq", "--yes", "--json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert_skipped(plan, root, offsets)
    assert outside_entries(tmp_path) == []


def test_rebuild_record_by_record_and_in_bulk_agree(tmp_path):
    """``until`` takes the per-record ``Dispatcher``; a whole rebuild takes ``FastDispatcher``."""
    from rmqcli.ops.rebuild import discard, stage_rebuild

    root, offsets = make_store(tmp_path, climbing(3))
    shutil.rmtree(root / "consumequeue")
    store = Store.open(root)
    try:
        bulk = stage_rebuild(store, index=False)
        bulk_files, bulk_unsafe = cq_files(bulk.staged), bulk.plan.skipped
        discard(bulk)
        each = stage_rebuild(store, index=False, until=store.commitlog.max_offset())
        assert cq_files(each.staged) == bulk_files and set(bulk_files)
        assert each.plan.skipped == bulk_unsafe and len(bulk_unsafe) == 2
        discard(each)
    finally:
        store.close()
    assert outside_entries(tmp_path) == []


def test_rebuild_of_an_unsafe_topic_option_is_a_usage_error(tmp_path, rmq_proc):
    root, _ = make_store(tmp_path, climbing(3))
    for topic in (EVIL, climbing(3), ".."):
        proc = rmq_proc("rebuild", str(root), "--cq", "--topic", topic, "--yes")
        assert proc.returncode == UsageError.exit_code, proc.stderr
        assert proc.stderr.count("\n") == 1 and "--topic" in proc.stderr
    proc = rmq_proc("dump-cq", str(root), "--topic", EVIL, "--queue", "0")
    assert proc.returncode == UsageError.exit_code and proc.stderr.count("\n") == 1
    assert outside_entries(tmp_path) == []


@pytest.mark.parametrize("mode", ["normal", "abnormal"])
def test_recover_writes_nothing_outside_and_says_so(mode, tmp_path, rmq_proc):
    root, offsets = make_store(tmp_path, climbing(3))  # recover dispatches into .rmq-staging/recover
    if mode == "normal":
        shutil.rmtree(root / "consumequeue")  # the reput dispatches every record again
    proc = rmq_proc("recover", str(root), f"--{mode}", "--yes", "--json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["applied"]
    assert_skipped(plan, root, offsets)
    assert outside_entries(tmp_path) == []
    assert sorted(p.name for p in (root / "consumequeue").iterdir()) == ["TopicA"]
    proc = rmq_proc("recover", str(root), f"--{mode}", "--yes")  # again: nothing to do, still said
    assert proc.returncode == 0 and "'../../evil'" in proc.stdout, proc.stdout
    assert outside_entries(tmp_path) == []


def test_stats_lists_the_topics(tmp_path, rmq_proc):
    root, offsets = make_store(tmp_path, climbing(1))
    proc = rmq_proc("stats", str(root), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    unsafe = {u["topic"]: u for u in doc["unsafeTopics"]}
    assert set(unsafe) == set(offsets)
    assert all(u["messages"] == 1 and u["queues"] == 1 for u in unsafe.values())
    assert proc.stderr.count("warning") == 2 and "'../../evil'" in proc.stderr
    assert outside_entries(tmp_path) == []


def test_the_writer_dispatches_no_such_record(tmp_path):
    """``StoreWriter`` (what ``rmq serve`` stores with) keeps the record and writes no queue for it."""
    root = tmp_path / "store"
    clock = iter(range(1_700_000_000_000, 1_700_000_100_000, 1000))
    with StoreWriter(root, SETTINGS, clock=lambda: next(clock)) as w:
        w.append(Message("TopicA", 0, b"a"))
        kept = w.append(Message(climbing(1), 0, b"escape"))
        w.append(Message(EVIL, 1, b"evil"))
        w.append(Message("TopicA", 0, b"b"))
        assert w.queue_max_offset("TopicA", 0) == 2
        assert set(w.dispatcher.unsafe) == {climbing(1), EVIL}
    assert outside_entries(tmp_path) == []
    assert json.loads((root / "config" / "topics.json").read_text())["topicConfigTable"].keys() == {"TopicA"}
    store = Store.open(root)
    try:
        assert store.commitlog.read(kept.physical_offset).topic == climbing(1)
    finally:
        store.close()
    with StoreWriter(root, SETTINGS, clock=lambda: next(clock)):  # reopened: the catch-up reput too
        pass
    assert outside_entries(tmp_path) == []


# --- the pipeline ---------------------------------------------------------------------------------
def _invoke_json(*args: str) -> tuple[int, str, list[dict]]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = invoke(list(args))
    text = out.getvalue()
    try:
        docs = [json.loads(text)]
    except ValueError:
        docs = [json.loads(line) for line in text.splitlines() if line]
    return code, err.getvalue(), docs


def test_pipeline_rebuild_writes_nothing_outside_and_says_so(spark, tmp_path):
    root, offsets = make_store(tmp_path, climbing(3))
    shutil.rmtree(root / "consumequeue")
    code, _, plans = _invoke_json("pipeline", "rebuild", str(root), "--cq", "--yes", "--json")
    assert code == 0 and plans[0]["applied"]
    assert_skipped(plans[0], root, offsets)
    assert outside_entries(tmp_path) == []
    assert sorted(p.name for p in (root / "consumequeue").iterdir()) == ["TopicA"]


def test_partition_directories_of_names_spark_does_not_escape():
    from rmqcli.pipeline.parquet import partition_dir

    assert partition_dir({"topic": "a\0b", "storeDate": "2024-01-02"}) == "topic=a%00b/storeDate=2024-01-02"
    assert partition_dir({"topic": "x" * 249, "storeDate": "d"}) == "topic=" + "x" * 249 + "/storeDate=d"
    with pytest.raises(CorruptDataError, match="partition directory") as caught:
        partition_dir({"topic": "/" * 100, "storeDate": "d", "file": COMMITLOG_FILE, "filePos": 7})
    assert caught.value.path == COMMITLOG_FILE and caught.value.offset == 7


def test_pipeline_stats_and_export_stay_inside(spark, tmp_path):
    root, offsets = make_store(tmp_path, climbing(1), ("NUL\0topic",))
    code, err, docs = _invoke_json("pipeline", "stats", str(root), "--json")
    assert code == 0
    assert {u["topic"] for u in docs[0]["stores"][0]["unsafeTopics"]} == set(offsets)
    assert "'../../evil'" in err
    out = tmp_path / "export"
    code, _, _ = _invoke_json("pipeline", "export", str(root), "--out", str(out), "--json")
    assert code == 0
    assert outside_entries(tmp_path, allowed=("export",)) == []
    topics = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert topics == [
        "topic=%25RETRY%25x%2F..%2F..%2F..%2Foutside",
        "topic=..%2F..%2Fevil",
        "topic=NUL%00topic",
        "topic=TopicA",
    ]
    assert not any(p.name in ("evil", "outside") for p in out.rglob("*"))
