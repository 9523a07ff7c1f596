"""``rmq verify`` tells the truth (issue 14): not-a-store directories, file geometry, unfinished
changes, index coverage, deleted topics, custom delay levels and where recovery re-checks CRCs.

Every case damages a writable copy of a store written by a real 4.9.8 broker (or one written by
the fixtures generator) the way the issue describes, and runs the real command on it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from formats import commitlog as fmt
from rmqcli.cli.main import invoke
from rmqcli.ops.verify import VerifyReport, verify_store
from rmqcli.store import Store
from tests.support.components import require
from tests.support.realfixtures import REAL_ROOT
from tests.support.stores import geometry, writable_copy

BASIC = REAL_ROOT / "basic-1" / "store"
IPV6 = REAL_ROOT / "ipv6" / "store"
BASIC_CONF = REAL_ROOT / "basic-1" / "broker.conf"


def _copy(src: Path, dst: Path) -> Path:
    if not src.is_dir():
        require("real")
    return writable_copy(src, dst)


def _verify(path: Path, config: Path | None = None) -> VerifyReport:
    store = Store.open(path, config)
    try:
        return verify_store(store)
    finally:
        store.close()


def _kinds(report: VerifyReport) -> dict[tuple[str, str], int]:
    return {(k.kind, k.severity): k.count for k in report.kinds}


def _problems(report: VerifyReport, kind: str) -> list:
    return [p for p in report.problems if p.kind == kind]


# --- (a) a directory without a CommitLog is not a store --------------------------------------------
@pytest.mark.parametrize(
    "argv",
    [
        ["verify"],
        ["stats"],
        ["recover"],
        ["rebuild"],
        ["backups"],
        ["dump-config"],
        ["dump-commitlog"],
    ],
)
def test_an_empty_directory_is_not_a_store(argv, tmp_path, capsys) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert invoke([*argv, str(empty)]) == 3
    err = capsys.readouterr().err
    assert f"{empty}: not a RocketMQ store (no commitlog/)" in err
    assert "Traceback" not in err
    assert list(empty.iterdir()) == []  # nothing was created in it


def test_a_store_and_its_config_directory_still_dump(tmp_path, capsys) -> None:
    store = _copy(BASIC, tmp_path / "store")
    assert invoke(["dump-config", str(store), "topics", "--json"]) == 0
    assert any(t["topicName"] == "TopicA" for t in json.loads(capsys.readouterr().out))
    assert invoke(["dump-config", str(store / "config"), "topics", "--json"]) == 0
    assert any(t["topicName"] == "TopicA" for t in json.loads(capsys.readouterr().out))
    assert invoke(["backups", str(store), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


# --- (b) file sizes: from --config, else from the store's own files --------------------------------
@pytest.mark.parametrize("cut", [5915, 5900, 5980, 20])
def test_a_consume_queue_file_of_the_wrong_size_is_an_error(cut, tmp_path) -> None:
    """The queue's only file, cut: its size no longer matches the other queues' 6,000-byte files,
    and ``MappedFileQueue.load`` refuses a file whose length is not mappedFileSizeConsumeQueue."""
    store = _copy(BASIC, tmp_path / "store")
    victim = store / "consumequeue" / "TopicB" / "0" / "00000000000000000000"
    os.truncate(victim, cut)
    report = _verify(store)
    assert not report.clean
    (bad,) = _problems(report, "cq-file-size")
    assert bad.file == "consumequeue/TopicB/0/00000000000000000000" and bad.severity == "error"
    assert f"file is {cut} bytes, expected 6000" in bad.message
    (geo,) = _problems(report, "geometry")
    assert geo.severity == "warning" and "mappedFileSizeConsumeQueue=6000" in geo.message
    assert f"1 of {cut} bytes" in geo.message and "--config" in geo.message
    # with the broker's own broker.conf the same file is refused, and nothing is assumed
    with_conf = _verify(store, BASIC_CONF)
    assert [p.file for p in _problems(with_conf, "cq-file-size")] == [bad.file]
    assert not _problems(with_conf, "geometry")


def test_the_commitlog_file_of_the_wrong_size_is_the_one_blamed(tmp_path) -> None:
    """A 2 MiB file among 1 MiB files named 1 MiB apart: the names give the size, so the big file
    is wrong, not the three others (a broker with mappedFileSizeCommitLog=1048576 refuses it)."""
    store = _copy(REAL_ROOT / "crash-1" / "store-raw", tmp_path / "store")
    last = sorted((store / "commitlog").iterdir())[-1]
    os.truncate(last, 2 * 1024 * 1024)
    report = _verify(store)
    assert [p.file for p in _problems(report, "commitlog-file-size")] == [f"commitlog/{last.name}"]
    (geo,) = _problems(report, "geometry")
    assert "mappedFileSizeCommitLog=1048576" in geo.message and "1 of 2097152 bytes" in geo.message


def test_default_sizes_assumed_are_named(tmp_path) -> None:
    """No consume-queue and no index file, no --config: the sizes a repair would write them with are
    RocketMQ's defaults, and verify says so."""
    store = _copy(BASIC, tmp_path / "store")
    shutil.rmtree(store / "consumequeue")
    shutil.rmtree(store / "index")
    (geo,) = _problems(_verify(store), "geometry")
    assert "mappedFileSizeConsumeQueue=6000000" in geo.message
    assert "maxHashSlotNum=5000000 maxIndexNum=20000000" in geo.message and "--config" in geo.message
    assert not _problems(_verify(store, BASIC_CONF), "geometry")
    assert not _problems(_verify(_copy(BASIC, tmp_path / "clean")), "geometry")


# --- (c) a change rmq left unfinished ---------------------------------------------------------------
def _killed_recover(store: Path) -> None:
    """Run the real ``rmq recover --yes`` and SIGKILL it at its first crash point (a journalled step
    is done, the change is not committed), as ``kill -9`` would."""
    from rmqcli.ops.safety.journal import CRASH_ENV

    env = dict(os.environ, **{CRASH_ENV: "1"})
    argv = [sys.executable, "-m", "rmqcli.cli.main", "recover", str(store), "--yes"]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr


def test_verify_reports_a_change_killed_half_way(tmp_path, capsys) -> None:
    store = _copy(REAL_ROOT / "crash-1" / "store-raw", tmp_path / "store")
    _killed_recover(store)
    assert invoke(["verify", str(store), "--json"]) == 4
    data = json.loads(capsys.readouterr().out)
    (bad,) = [p for p in data["problems"] if p["kind"] == "unfinished-change"]
    assert bad["severity"] == "error" and bad["file"].startswith(".rmq-backup/")
    assert "was interrupted" in bad["message"] and "rmq backups" in bad["message"]
    assert f"recover {store} --yes" in bad["message"] and "restore-backup" in bad["message"]
    # re-running the command rolls the change back, then does it: nothing is left unfinished
    assert invoke(["recover", str(store), "--yes"]) == 0
    capsys.readouterr()
    report = _verify(store)
    assert not _problems(report, "unfinished-change") and report.clean


# --- (d) records the index does not cover -----------------------------------------------------------
def _keyed_records(before: int | None = None, after: int | None = None) -> int:
    """Records of basic-1 (as its broker's dump lists them) with a key ``buildIndex`` indexes."""
    from tests.support.realfixtures import variants

    (variant,) = [v for v in variants() if v.id == "basic-1/store"]
    rollback = int(fmt.TransactionType.ROLLBACK)
    return sum(
        1
        for r in variant.records
        if (r["properties"].get(fmt.PROPERTY_UNIQ_KEY) or r["properties"].get(fmt.PROPERTY_KEYS))
        and (r["sysFlag"] & fmt.TRANSACTION_MASK) != rollback
        and (before is None or r["position"] < before)
        and (after is None or r["position"] > after)
    )


def _index_files(store: Path) -> list[Path]:
    return sorted((store / "index").iterdir())


def test_records_before_the_first_index_file_are_counted(tmp_path) -> None:
    """A broker that crashed deletes its newest index files on start and re-indexes only from where
    its recovery starts: with one index file per store, the records before it are never indexed."""
    from rmqcli.store.read.index import IndexFile

    store = _copy(BASIC, tmp_path / "store")
    first, second = _index_files(store)[:2]
    begin = IndexFile(second).header.begin_phy_offset
    first.unlink()
    (warn,) = _problems(_verify(store), "index-uncovered")
    assert warn.severity == "warning" and warn.file == "commitlog/00000000000000000000"
    assert f"does not cover {_keyed_records(before=begin)} record(s)" in warn.message
    assert f"before the first index file's beginPhyOffset {begin}" in warn.message
    assert "`rmq rebuild --index`" in warn.message


def test_records_after_the_last_index_file_are_counted(tmp_path) -> None:
    """The consume queues are complete, so a starting broker dispatches nothing again: the records
    after the last index file stay unindexed (not "indexed when dispatched")."""
    from rmqcli.store.read.index import IndexFile

    store = _copy(BASIC, tmp_path / "store")
    *_, before_last, last = _index_files(store)
    end = IndexFile(before_last).header.end_phy_offset
    last.unlink()
    report = _verify(store)
    assert not _problems(report, "index-behind")
    (warn,) = _problems(report, "index-uncovered")
    assert f"does not cover {_keyed_records(after=end)} record(s)" in warn.message
    assert f"after the last index file's endPhyOffset {end}" in warn.message


def test_no_index_file_at_all(tmp_path) -> None:
    store = _copy(BASIC, tmp_path / "store")
    for f in _index_files(store):
        f.unlink()
    (warn,) = _problems(_verify(store), "index-uncovered")
    assert f"no index file: the index does not cover {_keyed_records()} record(s)" in warn.message
    # after an unclean shutdown the broker re-indexes from where its recovery starts: all of it here
    crashed = _copy(REAL_ROOT / "crash-1" / "store-raw", tmp_path / "crashed")
    for f in _index_files(crashed):
        f.unlink()
    assert not _problems(_verify(crashed), "index-uncovered")


# --- (e) records of a deleted topic -----------------------------------------------------------------
def _delete_topic(store: Path, topic: str) -> None:
    """What ``deleteTopic`` does to a stopped broker's files: the topic leaves topics.json
    (``TopicConfigManager.deleteTopicConfig`` persists it: the previous version becomes the .bak)
    and ``cleanUnusedTopic`` destroys its consume queues; its records stay in the CommitLog."""
    from rmqcli.store import configfiles as cfg

    config = store / "config"
    data = cfg.load_config(config, cfg.TOPICS).data
    del data["topicConfigTable"][topic]
    cfg.write_config(config, cfg.TOPICS, data)
    shutil.rmtree(store / "consumequeue" / topic)


def test_records_of_a_deleted_topic_are_a_warning(tmp_path, capsys) -> None:
    store = _copy(BASIC, tmp_path / "store")
    _delete_topic(store, "TopicB")
    assert invoke(["verify", str(store), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert not [p for p in data["problems"] if p["severity"] == "error"]
    (warn,) = [p for p in data["problems"] if p["kind"] == "deleted-topic"]
    assert warn["file"] == "consumequeue/TopicB" and "TopicB is not in config/topics.json" in warn["message"]
    from tests.support.realfixtures import variants

    (variant,) = [v for v in variants() if v.id == "basic-1/store"]
    dispatched = (fmt.TransactionType.NOT_TYPE, fmt.TransactionType.COMMIT)
    queued = [r for r in variant.records if r["topic"] == "TopicB" and r["sysFlag"] & 0xC in dispatched]
    assert f"{len(queued)} record(s) of topic TopicB (8 queue(s)" in warn["message"]


def test_a_configured_topic_without_its_queues_is_still_an_error(tmp_path) -> None:
    """Only topics.json tells a deleted topic from lost queues: with the topic still configured, and
    for the topics whose queues cleanUnusedTopic keeps although they are not configured."""
    store = _copy(BASIC, tmp_path / "store")
    shutil.rmtree(store / "consumequeue" / "TopicB")
    shutil.rmtree(store / "consumequeue" / "RMQ_SYS_TRANS_OP_HALF_TOPIC")
    report = _verify(store)
    assert not _problems(report, "deleted-topic")
    lost = {p.file.split("/")[1] for p in _problems(report, "missing-queue") if p.severity == "error"}
    assert lost == {"TopicB", "RMQ_SYS_TRANS_OP_HALF_TOPIC"}


# --- (f) a store written with other delay levels ------------------------------------------------------
CUSTOM_LEVELS = "1s 7s 1m 2h"  # level 2 is 7 s (default 5 s), level 3 one minute (default 10 s)


def _delayed_store(root: Path, levels: str) -> Path:
    """A store written with ``messageDelayLevel=levels``: delayed sends of levels 1 to 3, each put
    in ``SCHEDULE_TOPIC_XXXX`` queue level-1 with its delivery time as the unit's tagsCode."""
    from rmqcli.store.write.messages import Message
    from rmqcli.store.write.writer import StoreWriter

    settings = geometry(64 * 1024, 600, 64, 256, message_delay_level=levels)
    now = [1_700_000_000_000]

    def clock() -> int:
        now[0] += 7
        return now[0]

    writer = StoreWriter(root, settings, clock=clock)
    for i in range(12):
        props = {fmt.PROPERTY_DELAY: str(1 + i % 3), fmt.PROPERTY_KEYS: f"k{i}", fmt.PROPERTY_TAGS: "T"}
        writer.append(Message("TopicA", i % 4, f"delayed {i}".encode(), props, born_timestamp=clock()))
    writer.close()
    return root


def test_unknown_delay_levels_are_a_warning_saying_why(tmp_path, capsys) -> None:
    store = _delayed_store(tmp_path / "store", CUSTOM_LEVELS)
    assert invoke(["verify", str(store), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert not [p for p in data["problems"] if p["severity"] == "error"]
    warns = {p["file"]: p["message"] for p in data["problems"] if p["kind"] == "cq-delay-levels"}
    assert set(warns) == {f"consumequeue/SCHEDULE_TOPIC_XXXX/{q}/00000000000000000000" for q in (1, 2)}
    level2 = warns["consumequeue/SCHEDULE_TOPIC_XXXX/1/00000000000000000000"]
    assert "4 unit(s) of delay level 2" in level2 and "store time + 7000 ms" in level2
    assert "default messageDelayLevel gives 5000 ms" in level2 and "--config" in level2
    # given the broker's levels there is nothing to warn about; given other levels it is an error
    conf = tmp_path / "broker.conf"
    conf.write_text(f"messageDelayLevel={CUSTOM_LEVELS}\n")
    assert _verify(store, conf).problems == []
    conf.write_text("messageDelayLevel=1s 5s 10s\n")
    wrong = _verify(store, conf)
    assert _kinds(wrong) == {("cq-tags-mismatch", "error"): 8}
    conf.write_text("mappedFileSizeCommitLog=65536\n")  # a broker.conf without levels: the defaults
    assert _kinds(_verify(store, conf)) == {("cq-tags-mismatch", "error"): 8}


# --- CRC errors: what a recovering broker does with them ----------------------------------------------
def _flip_body_byte(store: Path, file_no: int) -> tuple[str, int]:
    """Flip the first body byte of the first record with a body in the ``file_no``-th CommitLog file;
    returns (file, record position in the file)."""
    from tests.support.realfixtures import variants

    (variant,) = [v for v in variants() if v.id == "basic-1/store"]
    name = sorted(p.name for p in (store / "commitlog").iterdir())[file_no]
    rec = next(r for r in variant.records if r["file"] == name and r["bodyLength"] > 0)
    path = store / "commitlog" / name
    data = bytearray(path.read_bytes())
    data[rec["filePos"] + rec["bodyOffsetInRecord"]] ^= 0xFF
    path.write_bytes(bytes(data))
    return f"commitlog/{name}", rec["filePos"]


def test_a_crc_error_before_the_files_recovery_reads_is_served(tmp_path) -> None:
    """After a clean shutdown ``recoverNormally`` reads the last three of the five files: a bad body
    in the second is served as it is, not a place where recovery stops."""
    store = _copy(BASIC, tmp_path / "store")
    early = _flip_body_byte(store, 1)
    late = _flip_body_byte(store, 3)
    found = {(p.file, p.offset): p.message for p in _problems(_verify(store), "crc-mismatch")}
    assert set(found) == {early, late}
    assert "recovery does not re-check this file: it serves this record with its bad body" in found[early]
    assert "`rmq recover --salvage --yes` tombstones it" in found[early]
    assert "stops here" not in found[early]
    assert "recovery (checkCRCOnRecover) stops here" in found[late]
    conf = tmp_path / "broker.conf"
    conf.write_text("checkCRCOnRecover=false\n")
    unchecked = _problems(_verify(store, conf), "crc-mismatch")
    assert len(unchecked) == 2 and all("recovery checks no CRC" in p.message for p in unchecked)
