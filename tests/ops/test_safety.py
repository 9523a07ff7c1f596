"""The safety layer of store-changing commands: backups, byte-exact restores, locks, plans, the CLI."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rmqcli.cli.main import app
from rmqcli.cli.plan import NOT_APPLIED, print_plan
from rmqcli.cli.render import OutputFormat, Renderer
from rmqcli.errors import NotFoundError, UsageError
from rmqcli.ops.safety import (
    Change,
    InterruptedChangeError,
    Plan,
    PlanStep,
    StoreBusyError,
    ensure_unlocked,
    finish_interrupted,
    list_backups,
    manifest_of,
    pending,
    restore_backup,
    staging_dir,
)
from rmqcli.ops.safety.journal import JOURNAL, read_journal
from rmqcli.store import Store
from tests.support import ROOT
from tests.support.stores import CL1, CQ, broker_lock, store_state

LOCK_PROBE = r"""
import sys
from pathlib import Path
from rmqcli.store import Store
print(Store(Path(sys.argv[1])).lock_held())
"""


# --- every operation: backup, then a byte-exact restore ------------------------------------------
def _staged_topic(store: Path) -> Path:
    staged = staging_dir(store, "cq")
    shutil.copytree(store / "consumequeue" / "TopicA", staged, dirs_exist_ok=True)
    (staged / "0" / "00000000000000000000").write_bytes(b"\x01" * 600)
    (staged / "9").mkdir()
    return staged


def _new_topic(store: Path) -> Path:
    staged = staging_dir(store, "new")
    (staged / "0").mkdir()
    (staged / "0" / "00000000000000000000").write_bytes(b"\x02" * 20)
    return staged


OPERATIONS: dict[str, Callable[[Change, Path], None]] = {
    "truncate-keep-size": lambda c, s: c.truncate_file(CL1, 3000),
    "truncate-cut": lambda c, s: c.truncate_file(CL1, 3000, keep_size=False),
    "truncate-to-zero": lambda c, s: c.truncate_file(CQ, 0, keep_size=False),
    "write-inside": lambda c, s: c.write_range("checkpoint", 4, b"\xff" * 12),
    "write-extends": lambda c, s: c.write_range(CQ, 590, b"\xee" * 50),
    "write-past-eof": lambda c, s: c.write_range(CQ, 700, b"\xdd" * 5),
    "delete-file": lambda c, s: c.delete_file("commitlog/00000000000000000000"),
    "replace-file": lambda c, s: c.replace_file("config/topics.json", b"{}"),
    "create-file": lambda c, s: c.replace_file("config/a/b/new.json", b"[1]"),
    "replace-dir": lambda c, s: c.replace_dir("consumequeue/TopicA", _staged_topic(s)),
    "create-dir": lambda c, s: c.replace_dir("consumequeue/NewTopic", _new_topic(s)),
    "delete-dir": lambda c, s: c.delete_dir("consumequeue/OrderTopic"),
    "several": lambda c, s: [
        c.truncate_file(CQ, 100),
        c.write_range(CQ, 0, b"\x09" * 20),
        c.replace_file(CQ, b"\x08" * 600),
        c.truncate_file(CQ, 20, keep_size=False),
        c.delete_file(CQ),
        c.delete_dir("consumequeue/TopicA/0"),
    ],
}


@pytest.mark.parametrize("name", list(OPERATIONS))
def test_round_trip_is_byte_exact(store: Path, name: str) -> None:
    before = store_state(store, dirs=True)
    with Change(store, name, ["rmq", name]) as change:
        OPERATIONS[name](change, store)
        backup = change.commit()
    after = store_state(store, dirs=True)
    assert after != before
    assert not (store / ".rmq-staging").exists()
    manifest = manifest_of(store, backup.name)
    assert manifest["state"] == "complete" and manifest["argv"] == ["rmq", name]
    for step in manifest["steps"]:  # every stored piece matches its sha256
        piece = backup / step["piece"] if "piece" in step else None
        if piece is not None and piece.is_file():
            assert hashlib.sha256(piece.read_bytes()[: step["stored"]]).hexdigest() == step["sha256"]
    plan = restore_backup(store, backup.name, yes=False)
    assert not plan.empty and store_state(store, dirs=True) == after  # a plan changes nothing
    restore_backup(store, backup.name, yes=True)
    assert store_state(store, dirs=True) == before
    assert manifest_of(store, backup.name)["state"] == "restored"
    with pytest.raises(UsageError):
        restore_backup(store, backup.name, yes=True)


def test_truncate_keeps_length_and_zeroes(store: Path) -> None:
    original = (store / CL1).read_bytes()
    with Change(store, "t") as change:
        change.truncate_file(CL1, 1000)
    data = (store / CL1).read_bytes()
    assert (
        len(data) == len(original)
        and data[:1000] == original[:1000]
        and data[1000:] == bytes(len(data) - 1000)
    )
    with Change(store, "t") as change:
        change.truncate_file(CQ, 40, keep_size=False)
    assert (store / CQ).stat().st_size == 40


def test_zero_tail_is_counted_not_stored(store: Path) -> None:
    data = (store / CL1).read_bytes()
    used = len(data.rstrip(b"\0"))
    assert used < len(data)
    with Change(store, "t") as change:
        change.truncate_file(CL1, 100)
        backup = change.commit()
    (step,) = read_journal(backup)
    assert step["stored"] == used - 100 and step["zeros"] == len(data) - used
    assert (backup / step["piece"]).stat().st_size == used - 100


def test_exception_rolls_back(store: Path) -> None:
    before = store_state(store, dirs=True)
    with pytest.raises(RuntimeError), Change(store, "boom") as change:
        change.truncate_file(CL1, 10)
        change.delete_dir("consumequeue/TopicB")
        change.replace_file("config/topics.json", b"x")
        raise RuntimeError("boom")
    assert store_state(store, dirs=True) == before
    assert list_backups(store)[-1]["state"] == "rolled-back"
    assert pending(store) == []


def test_interrupted_change_is_rolled_back_by_the_next(store: Path) -> None:
    before = store_state(store, dirs=True)
    change = Change(store, "abandoned")
    change.truncate_file(CL1, 10)
    change.delete_file("index/20231114221320001")
    change._release()  # as if the process had died: the manifest stays open
    assert pending(store) == [change.timestamp]
    assert list_backups(store)[0]["complete"] is False
    with pytest.raises(InterruptedChangeError, match="run the command again"):
        Change(store, "next")  # a plan made before this point was made from a half-changed store
    assert store_state(store, dirs=True) == before and pending(store) == []
    with Change(store, "next") as nxt:
        nxt.write_range("checkpoint", 0, b"\x01")
    states = {b["command"]: b["state"] for b in list_backups(store)}
    assert states == {"abandoned": "rolled-back", "next": "complete"}


def test_finish_interrupted_and_replan_false(store: Path) -> None:
    before = store_state(store, dirs=True)
    for resume in ("finish", "replan"):
        change = Change(store, "abandoned")
        change.replace_dir("consumequeue/TopicA", _staged_topic(store))
        change.truncate_file(CQ.replace("TopicA", "TopicB"), 0, keep_size=False)
        change._release()
        if resume == "finish":
            assert finish_interrupted(store) == [f"`abandoned` of {change.timestamp}"]
            assert finish_interrupted(store) == []
            assert store_state(store, dirs=True) == before
        else:
            with Change(store, "resumed", replan=False) as nxt:
                assert store_state(store, dirs=True) == before
                nxt.write_range("checkpoint", 0, b"\x01")
            restore_backup(store, nxt.timestamp, yes=True)
    assert store_state(store, dirs=True) == before


def test_timestamps_are_unique_and_increasing(store: Path) -> None:
    stamps = []
    for _ in range(5):
        with Change(store, "noop") as change:
            stamps.append(change.timestamp)
    assert stamps == sorted(set(stamps))
    assert all(len(s) == len("20261122T233012.123Z") and s.endswith("Z") for s in stamps)


def test_bad_paths_are_refused(store: Path) -> None:
    with Change(store, "paths") as change:
        for bad in ("../x", "/etc/passwd", ".rmq-backup/x", ".rmq-staging/x", "checkpoint.rmq-new"):
            with pytest.raises(UsageError):
                change.write_range(bad, 0, b"x")
        with pytest.raises(NotFoundError):
            change.delete_file("commitlog/missing")
        with pytest.raises(UsageError):
            change.truncate_file(CQ, 10**6)
        with pytest.raises(UsageError):
            change.replace_dir("consumequeue/TopicA", store / "consumequeue" / "TopicB")


def test_later_change_blocks_restore(store: Path) -> None:
    with Change(store, "first") as change:
        change.write_range("checkpoint", 0, b"\x01")
        first = change.commit()
    with Change(store, "second") as change:
        change.write_range("checkpoint", 1, b"\x02")
        second = change.commit()
    with pytest.raises(UsageError, match=second.name):
        restore_backup(store, first.name, yes=True)
    restore_backup(store, second.name, yes=True)
    restore_backup(store, first.name, yes=True)
    with pytest.raises(NotFoundError):
        restore_backup(store, "20000101T000000.000Z", yes=False)


# --- locks ----------------------------------------------------------------------------------------
def test_held_lock_refuses(store: Path) -> None:
    ensure_unlocked(store)
    with Change(store, "t") as change:
        change.write_range("checkpoint", 0, b"\x01")
        backup = change.commit()
    with broker_lock(store):
        with pytest.raises(StoreBusyError, match="--force-unlocked") as info:
            ensure_unlocked(store)
        assert info.value.exit_code == 7 and str(store) in str(info.value)
        ensure_unlocked(store, force=True)
        with pytest.raises(StoreBusyError):
            restore_backup(store, backup.name, yes=True)
        result = CliRunner().invoke(app, ["restore-backup", str(store), backup.name, "--yes"])
        assert result.exit_code == 7
        assert manifest_of(store, backup.name)["state"] == "complete"
        assert restore_backup(store, backup.name, yes=True, force=True).steps
    ensure_unlocked(store)


def test_change_holds_the_broker_lock_and_excludes_another_change(store: Path) -> None:
    probe = [sys.executable, "-c", LOCK_PROBE, str(store)]
    with Change(store, "t"):
        held = subprocess.run(probe, cwd=ROOT, capture_output=True, text=True, timeout=30)
        assert held.stdout.strip() == "True", held.stderr
        with pytest.raises(StoreBusyError, match="another rmq command"):
            Change(store, "second")
    free = subprocess.run(probe, cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert free.stdout.strip() == "False"


# --- readers ignore the safety directories --------------------------------------------------------
def test_readers_ignore_backup_and_staging(store: Path, pristine: Path) -> None:
    with Change(store, "t") as change:
        change.delete_dir("consumequeue/TopicB")
        change.delete_file("index/20231114221320001")
        change.truncate_file(CL1, 10)
    restore_backup(store, list_backups(store)[-1]["timestamp"], yes=True)
    with Change(store, "t") as change:  # a kept backup holding commitlog/index/consumequeue pieces
        change.delete_dir("consumequeue/TopicB")
        change.delete_file("commitlog/00000000000000131072")
    staged = staging_dir(store, "x")
    (staged / "TopicZ" / "0").mkdir(parents=True)
    (staged / "TopicZ" / "0" / "00000000000000000000").write_bytes(bytes(20))
    (store / "commitlog" / "00000000000000131072.rmq-new").write_bytes(b"junk")
    a, b = Store.open(pristine), Store.open(store)
    try:
        assert b.topics() == [t for t in a.topics() if t != "TopicB"]
        assert [f.name for f in b.commitlog.files] == [f.name for f in a.commitlog.files][:-1]
        assert [f.name for f in b.index.files] == [f.name for f in a.index.files]
        assert b.checkpoint() == a.checkpoint()
    finally:
        a.close()
        b.close()


# --- plans and the CLI ----------------------------------------------------------------------------
def test_plan_dict_and_print() -> None:
    plan = Plan("truncate", Path("/s"), [PlanStep("truncate", "commitlog/0", "cut at 10", 90)], ["data lost"])
    assert plan.to_dict()["bytesRemoved"] == 90 and not plan.empty
    assert Plan("x", Path("/s"), [], []).empty
    out = io.StringIO()
    print_plan(Renderer(OutputFormat.table, out), plan)
    text = out.getvalue()
    assert "commitlog/0" in text and "note: data lost" in text and text.rstrip().endswith(NOT_APPLIED)
    out = io.StringIO()
    print_plan(Renderer(OutputFormat.json, out), plan, applied=True, backup=Path("/s/.rmq-backup/T"))
    doc = json.loads(out.getvalue())
    assert (
        doc["applied"] is True
        and doc["steps"][0]["bytesRemoved"] == 90
        and "restore-backup" in doc["message"]
    )


def test_cli_backups_and_restore(store: Path) -> None:
    runner = CliRunner()
    before = store_state(store, dirs=True)
    with Change(store, "truncate", ["truncate", str(store)]) as change:
        change.truncate_file(CL1, 5)
        stamp = change.timestamp
    listed = json.loads(runner.invoke(app, ["backups", str(store), "--json"]).output)
    assert [(b["timestamp"], b["command"], b["complete"], b["steps"]) for b in listed] == [
        (stamp, "truncate", True, 1)
    ]
    dry = runner.invoke(app, ["restore-backup", str(store), stamp])
    assert dry.exit_code == 0 and NOT_APPLIED in dry.output and CL1 in dry.output
    assert store_state(store, dirs=True) != before
    as_json = runner.invoke(app, ["restore-backup", str(store), stamp, "--dry-run", "--json"])
    assert json.loads(as_json.output)["applied"] is False
    assert runner.invoke(app, ["restore-backup", str(store), stamp, "--dry-run", "--yes"]).exit_code == 2
    assert runner.invoke(app, ["restore-backup", str(store), "nope"]).exit_code == 3
    done = runner.invoke(app, ["restore-backup", str(store), stamp, "--yes"])
    assert done.exit_code == 0 and NOT_APPLIED not in done.output
    assert store_state(store, dirs=True) == before
    assert runner.invoke(app, ["backups", str(store / "missing")]).exit_code == 3


def test_journal_is_written_before_the_change(store: Path) -> None:
    with Change(store, "t") as change:
        change.delete_file("index/20231114221320001")
        lines = (change.dir / JOURNAL).read_text().splitlines()
        assert json.loads(lines[-1])["path"] == "index/20231114221320001"
        assert pending(store) == [change.timestamp]
    assert pending(store) == []
