"""``restore-backup`` loses nothing: data written after the change it undoes is backed up first.

A restore is a journalled change of its own; restoring *its* backup gives back the store as it was
before the restore, byte for byte, including what was written after the original change.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rmqcli.cli.main import app
from rmqcli.ops.safety import Change, list_backups, manifest_of, restore_backup, staging_dir
from tests.support.stores import CL1, CQ, sparse_copy, store_state

NEW_CQ = "consumequeue/NewTopic/0/00000000000000000000"


def _states(root: Path) -> dict[str, str]:
    return {b["timestamp"]: b["state"] for b in list_backups(root)}


def test_restore_after_recover_keeps_data_written_later(
    damaged_source: Path, tmp_path: Path, rmq_proc
) -> None:
    """recover --yes; records appended after the cut and a new queue file; restore-backup --yes."""
    root = tmp_path / "s"
    shutil.copytree(damaged_source, root, copy_function=sparse_copy)
    original = store_state(root)
    plan = json.loads(rmq_proc("recover", str(root), "--json", check=True).stdout)
    (cut_step,) = [s for s in plan["steps"] if s["action"] == "truncate"]
    rmq_proc("recover", str(root), "--yes", check=True)
    recovered = json.loads(rmq_proc("backups", str(root), "--json", check=True).stdout)[0]["timestamp"]

    # the broker runs again: it appends after the cut and creates a new queue
    cl = root / cut_step["path"]
    cut = cl.stat().st_size - cut_step["bytesRemoved"]
    appended = b"\x5a" * 300
    with open(cl, "r+b") as handle:
        handle.seek(cut)
        handle.write(appended)
    (root / NEW_CQ).parent.mkdir(parents=True)
    (root / NEW_CQ).write_bytes(b"\x11" * 40)
    later = store_state(root)

    dry = json.loads(rmq_proc("restore-backup", str(root), recovered, "--json", check=True).stdout)
    by_path = {s["path"]: s for s in dry["steps"]}
    assert by_path[cut_step["path"]]["bytesRemoved"] >= len(appended)
    assert "written after the change" in by_path[cut_step["path"]]["detail"]
    assert by_path["consumequeue"]["bytesRemoved"] > 0  # the queues there now, NewTopic included
    assert any("written to these paths after the change" in n for n in dry["notes"])
    assert store_state(root) == later

    done = json.loads(rmq_proc("restore-backup", str(root), recovered, "--yes", "--json", check=True).stdout)
    assert done["applied"] is True and done["backup"]
    assert store_state(root) == original  # the recover is undone ...
    restore_stamp = Path(done["backup"]).name
    states = _states(root)
    assert states == {recovered: "restored", restore_stamp: "complete"}
    # ... and what the broker wrote after it is in the restore's backup, not lost
    assert manifest_of(root, restore_stamp)["restores"] == recovered
    rmq_proc("restore-backup", str(root), restore_stamp, "--yes", check=True)
    assert store_state(root) == later
    assert (root / NEW_CQ).read_bytes() == b"\x11" * 40
    assert cl.read_bytes()[cut : cut + len(appended)] == appended
    # undoing the restore put the recover back in place: it can be restored again
    assert _states(root)[recovered] == "complete"


def test_file_created_again_and_directory_changed_later_are_backed_up(store: Path) -> None:
    """_put_file_back over a file that exists again, and the swap of a directory changed since."""
    before = store_state(store, dirs=True)
    staged = staging_dir(store, "cq")
    shutil.copytree(store / "consumequeue" / "TopicA", staged, dirs_exist_ok=True)
    with Change(store, "t") as change:
        change.delete_file("index/20231114221320001")
        change.replace_dir("consumequeue/TopicA", staged)
        change.delete_dir("consumequeue/OrderTopic")
        change.replace_file("config/new.json", b"{}")
        stamp = change.timestamp
    (store / "index" / "20231114221320001").write_bytes(b"written later")
    (store / "consumequeue" / "TopicA" / "7").mkdir()
    (store / "consumequeue" / "TopicA" / "7" / "00000000000000000000").write_bytes(b"\x07" * 20)
    (store / "consumequeue" / "OrderTopic" / "0").mkdir(parents=True)
    (store / "consumequeue" / "OrderTopic" / "0" / "00000000000000000000").write_bytes(b"\x08" * 20)
    (store / "config" / "new.json").write_bytes(b'{"edited": 1}')
    later = store_state(store, dirs=True)

    plan = restore_backup(store, stamp, yes=False)
    replaced = {s.path: s.bytes_removed for s in plan.steps}
    assert replaced == {
        "config/new.json": len(b'{"edited": 1}'),
        "consumequeue/OrderTopic": 20,
        "consumequeue/TopicA": sum(
            p.stat().st_size for p in (store / "consumequeue" / "TopicA").rglob("*") if p.is_file()
        ),
        "index/20231114221320001": len(b"written later"),
    }
    applied = restore_backup(store, stamp, yes=True)
    assert store_state(store, dirs=True) == before
    assert applied.backup is not None
    restore_backup(store, applied.backup.name, yes=True)
    assert store_state(store, dirs=True) == later


def test_restore_keeps_the_backup_it_restores_from(store: Path) -> None:
    """Pieces are copied back, not moved: restore, undo the restore, restore again."""
    before = store_state(store, dirs=True)
    with Change(store, "t") as change:
        change.truncate_file(CL1, 100)
        change.delete_file("commitlog/00000000000000131072")
        change.delete_dir("consumequeue/TopicB")
        first = change.timestamp
    after = store_state(store, dirs=True)
    pieces = sorted(p.name for p in (store / ".rmq-backup" / first).iterdir())
    again = restore_backup(store, first, yes=True).backup
    assert again is not None and store_state(store, dirs=True) == before
    assert sorted(p.name for p in (store / ".rmq-backup" / first).iterdir()) == pieces
    restore_backup(store, again.name, yes=True)
    assert store_state(store, dirs=True) == after
    third = restore_backup(store, first, yes=True).backup
    assert third is not None and store_state(store, dirs=True) == before
    states = _states(store)
    assert (
        states[first] == "restored" and states[again.name] == "restored" and states[third.name] == "complete"
    )
    with pytest.raises(Exception, match="already restored"):
        restore_backup(store, first, yes=False)


def test_a_restore_does_not_block_restoring_an_earlier_change(store: Path) -> None:
    before = store_state(store, dirs=True)
    with Change(store, "first") as change:
        change.write_range(CQ, 0, b"\x01" * 20)
        first = change.timestamp
    with Change(store, "second") as change:
        change.write_range(CQ, 10, b"\x02" * 20)
        second = change.timestamp
    with pytest.raises(Exception, match=second):
        restore_backup(store, first, yes=False)
    restore_backup(store, second, yes=True)
    restore_backup(store, first, yes=True)  # the restore of `second` does not stand in the way
    assert store_state(store, dirs=True) == before


def test_cli_help_and_plan_say_what_is_replaced(store: Path) -> None:
    runner = CliRunner()
    help_text = runner.invoke(app, ["restore-backup", "--help"], terminal_width=200).output
    assert "backed up first" in help_text and "undoes the restore" in help_text
    with Change(store, "t", ["t"]) as change:
        change.truncate_file(CL1, 100)
        stamp = change.timestamp
    with open(store / CL1, "r+b") as handle:
        handle.seek(100)
        handle.write(b"\x42" * 50)
    dry = runner.invoke(app, ["restore-backup", str(store), stamp])
    assert dry.exit_code == 0 and "50 bytes written after the change" in dry.output
    doc = json.loads(runner.invoke(app, ["restore-backup", str(store), stamp, "--yes", "--json"]).output)
    assert doc["bytesRemoved"] == 50 and "restore-backup" in doc["message"]
