"""Kill a store change with SIGKILL at every crash point, re-run it, and get the same bytes.

A child process applies a scripted ``Change`` (every operation) to a copy of a generated store.
``RMQ_TEST_CRASH_AT=N`` makes it SIGKILL itself at the Nth crash point (``safety.journal.crashpoint``).
Re-running the script must converge to the bytes of an uninterrupted run, and restoring the
completed change's backup must give back the original bytes.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rmqcli.ops.safety import list_backups, pending, restore_backup
from rmqcli.ops.safety.journal import CRASH_ENV
from tests.support import ROOT
from tests.support.stores import sparse_copy, store_state

SCRIPT = r"""
import shutil, sys
from pathlib import Path
from rmqcli.ops.safety import Change, ensure_unlocked, finish_interrupted, list_backups, staging_dir
from rmqcli.ops.safety.journal import crashpoints_passed

root = Path(sys.argv[1])
ensure_unlocked(root)
finish_interrupted(root)  # before reading the store to plan, as the real commands do
# like a real command, whose plan is empty on a store it already changed
if any(b["complete"] and b["command"] == "scripted" for b in list_backups(root)):
    sys.exit(0)
cut = (root / "commitlog" / "00000000000000065536").stat().st_size // 16
staged = staging_dir(root, "cq-TopicA")
shutil.copytree(root / "consumequeue" / "TopicA", staged, dirs_exist_ok=True)
(staged / "0" / "00000000000000000000").write_bytes(b"\x00" * 600)
fresh = staging_dir(root, "cq-New")
(fresh / "0").mkdir()
(fresh / "0" / "00000000000000000000").write_bytes(b"\x07" * 40)
with Change(root, "scripted", ["scripted", str(root)]) as change:
    change.truncate_file("commitlog/00000000000000065536", cut)
    change.truncate_file("consumequeue/TopicB/0/00000000000000000600", 60, keep_size=False)
    change.write_range("checkpoint", 8, b"\x01\x02\x03\x04\x05\x06\x07\x08")
    change.write_range("consumequeue/TopicA/2/00000000000000000000", 590, b"Z" * 30)
    change.delete_file("commitlog/00000000000000131072")
    change.delete_file("index/20231114221415867")
    change.replace_file("config/topics.json", b'{"topicConfigTable":{}}')
    change.replace_file("config/extra/new.json", b"{}")
    change.replace_dir("consumequeue/TopicA", staged)
    change.replace_dir("consumequeue/NewTopic", fresh)
    change.delete_dir("consumequeue/TxTopic")
    change.commit()
print(crashpoints_passed())
"""

RESTORE = r"""
import sys
from pathlib import Path
from rmqcli.ops.safety import restore_backup
restore_backup(Path(sys.argv[1]), sys.argv[2], yes=True)
"""


def run(code: str, *args: str, crash_at: int | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop(CRASH_ENV, None)
    if crash_at is not None:
        env[CRASH_ENV] = str(crash_at)
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.fixture(scope="module")
def original(pristine: Path) -> Path:
    """The generated small store every case copies."""
    return pristine


@pytest.fixture(scope="module")
def reference(original: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, int]:
    """The final bytes of an uninterrupted run, and how many crash points it passes."""
    store = tmp_path_factory.mktemp("kill") / "reference"
    shutil.copytree(original, store, copy_function=sparse_copy)
    done = run(SCRIPT, str(store))
    assert done.returncode == 0, done.stderr
    return store_state(store, dirs=True), int(done.stdout.split()[-1])


def _killed_then_rerun(original: Path, work: Path, points: list[int]) -> tuple[Path, list[int]]:
    """Copy the store, run with a kill at each of ``points`` in turn, then run to completion."""
    store = work / ("store-" + "-".join(map(str, points)))
    shutil.copytree(original, store, copy_function=sparse_copy)
    codes = [run(SCRIPT, str(store), crash_at=p).returncode for p in points]
    final = run(SCRIPT, str(store))
    assert final.returncode == 0, final.stderr
    return store, codes


def test_kill_at_every_point_converges(original: Path, reference: tuple[dict, int], tmp_path: Path) -> None:
    final_ref, total = reference
    assert total >= 20, f"only {total} crash points"
    before = store_state(original, dirs=True)
    assert final_ref != before
    # every single point, plus kills during the rollback that the re-run does first
    cases = [[p] for p in range(1, total + 1)] + [[p, 2] for p in (5, 12, 20, total - 2)]
    cases += [[total // 2, 4, 1]]
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 2)) as pool:
        results = list(pool.map(lambda pts: _killed_then_rerun(original, tmp_path, pts), cases))
    killed = 0
    for (store, codes), points in zip(results, cases, strict=True):
        assert codes[0] == -signal.SIGKILL, (points, codes)
        killed += codes.count(-signal.SIGKILL)
        assert store_state(store, dirs=True) == final_ref, f"killed at {points}: final store differs"
        assert pending(store) == []
        done = [b for b in list_backups(store) if b["complete"]]
        assert len(done) == 1, points
        rolled = [b for b in list_backups(store) if b["state"] == "rolled-back"]
        if len(points) == 1:  # the last point follows the commit: nothing to roll back
            assert len(rolled) == (0 if points == [total] else 1), points
        else:
            assert rolled, points
        restore_backup(store, done[0]["timestamp"], yes=True)
        assert store_state(store, dirs=True) == before, (
            f"killed at {points}: restore did not give the original bytes"
        )
    assert killed >= total


def test_kill_during_restore_is_rolled_back_then_redone(
    original: Path, reference: tuple[dict, int], tmp_path: Path
) -> None:
    """A restore is a change of its own: killed at any crash point, it is rolled back as a whole (by
    the next change, or by re-running it), and a re-run restores the original bytes."""
    store = tmp_path / "store"
    shutil.copytree(original, store, copy_function=sparse_copy)
    assert run(SCRIPT, str(store)).returncode == 0
    stamp = list_backups(store)[-1]["timestamp"]
    before = store_state(original, dirs=True)

    full = tmp_path / "full"
    shutil.copytree(store, full, copy_function=sparse_copy)
    done = run(RESTORE_COUNTING, str(full), stamp)
    assert done.returncode == 0, done.stderr
    total = int(done.stdout.split()[-1])
    assert total >= 20, total
    assert store_state(full, dirs=True) == before

    def killed_then_finished(point: int) -> tuple[int, bool, dict | None, dict]:
        copy = tmp_path / f"copy-{point}"
        shutil.copytree(store, copy, copy_function=sparse_copy)
        killed = run(RESTORE, str(copy), stamp, crash_at=point)
        committed = any(b["command"] == "restore-backup" and b["complete"] for b in list_backups(copy))
        rolled_back = None
        if not committed and point % 2:
            assert run(RESTORE, str(copy), stamp).returncode == 0  # re-run: rolled back, then redone
        elif not committed:
            assert run(FINISH, str(copy)).returncode == 0  # as the next command on the store does
            rolled_back = store_state(copy, dirs=True)
            assert run(RESTORE, str(copy), stamp).returncode == 0
        else:
            assert run(FINISH, str(copy)).returncode == 0
        restores = [b for b in list_backups(copy) if b["command"] == "restore-backup" and b["complete"]]
        assert len(restores) == 1 and pending(copy) == [], point
        return killed.returncode, committed, rolled_back, store_state(copy, dirs=True)

    points = list(range(1, total + 1))
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 2)) as pool:
        results = list(pool.map(killed_then_finished, points))
    assert not results[0][1] and results[-1][1]  # killed before and after the commit
    for point, (code, _committed, rolled_back, final) in zip(points, results, strict=True):
        assert code == -signal.SIGKILL, point
        if rolled_back is not None:
            assert rolled_back == reference[0], f"killed at {point}: the rollback is not the changed store"
        assert final == before, f"killed at {point}: the restore did not end with the original bytes"


FINISH = r"""
import sys
from pathlib import Path
from rmqcli.ops.safety import ensure_unlocked, finish_interrupted
ensure_unlocked(Path(sys.argv[1]))
finish_interrupted(Path(sys.argv[1]))
"""

RESTORE_COUNTING = r"""
import sys
from pathlib import Path
from rmqcli.ops.safety import restore_backup
from rmqcli.ops.safety.journal import crashpoints_passed
restore_backup(Path(sys.argv[1]), sys.argv[2], yes=True)
print(crashpoints_passed())
"""
