"""``rmq recover|truncate|rebuild`` end to end in real processes: plans, --yes, backups, kills."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rmqcli.ops.safety.journal import BACKUP_DIR, JOURNAL, STAGING_DIR
from tests.support import ROOT
from tests.support.cli import RMQ
from tests.support.stores import broker_lock, converges_at_every_crash_point, store_state, writable_copy


def test_plan_changes_nothing_and_yes_applies(damaged_source, tmp_path, rmq_proc):
    root = writable_copy(damaged_source, tmp_path / "s")
    before = store_state(root)
    plan = rmq_proc("recover", str(root), "--json", check=True)
    doc = json.loads(plan.stdout)
    assert doc["applied"] is False and doc["steps"]
    assert store_state(root) == before

    assert rmq_proc("recover", str(root), "--dry-run", "--yes").returncode == 2
    applied = rmq_proc("recover", str(root), "--yes", check=True)
    assert "applied" in applied.stdout
    after = store_state(root)
    assert after != before and "abort" not in after
    assert rmq_proc("verify", str(root)).returncode == 0

    backups = json.loads(rmq_proc("backups", str(root), "--json", check=True).stdout)
    assert len(backups) == 1
    rmq_proc("restore-backup", str(root), backups[0]["timestamp"], "--yes", check=True)
    assert store_state(root) == before


def test_truncate_and_rebuild_commands(damaged_source, tmp_path, rmq_proc):
    from rmqcli.store import Store

    root = writable_copy(damaged_source, tmp_path / "s")
    rmq_proc("recover", str(root), "--yes", check=True)
    store = Store.open(root)
    records = list(store.commitlog.records())
    store.close()
    cut = records[len(records) // 2]
    rmq_proc("truncate", str(root), "--offset", str(cut.position - 1), "--yes", check=True)
    store = Store.open(root)
    assert store.commitlog.max_offset() == cut.position
    store.close()
    assert rmq_proc("verify", str(root)).returncode == 0

    truncated = store_state(root)
    shutil.rmtree(root / "consumequeue")
    plan = rmq_proc("rebuild", str(root), "--cq", check=True)
    assert "pass --config" in plan.stdout  # no files left to read the queue file size from
    conf = tmp_path / "broker.conf"
    conf.write_text("mappedFileSizeConsumeQueue=600\n")
    rmq_proc("rebuild", str(root), "--cq", "--config", str(conf), "--yes", check=True)
    assert store_state(root) == truncated
    assert rmq_proc("truncate", str(root)).returncode == 2  # neither --offset nor --time


def test_refuses_while_a_broker_holds_the_lock(damaged_source, tmp_path, rmq_proc):
    root = writable_copy(damaged_source, tmp_path / "s")
    with broker_lock(root):
        before = store_state(root)
        proc = rmq_proc("recover", str(root), "--yes")
        assert proc.returncode == 7 and "--force-unlocked" in proc.stderr
        assert store_state(root) == before


@pytest.mark.parametrize("command", [["recover"], ["rebuild"]])
def test_killed_at_every_crash_point_then_rerun(command, damaged_source, tmp_path, rmq_proc):
    reference = writable_copy(damaged_source, tmp_path / "ref")
    if command == ["rebuild"]:
        rmq_proc("recover", str(reference), "--yes", check=True)
        source = writable_copy(reference, tmp_path / "rebuild-src")
        shutil.rmtree(source / ".rmq-backup")
        shutil.rmtree(source / "consumequeue")
        (source / "checkpoint").write_bytes(bytes(4096))  # stale: rebuild rewrites it too
    else:
        source = damaged_source
    points, _ = converges_at_every_crash_point(command, source, tmp_path)
    assert points >= 10, points  # with both commands: at least 20 distinct kill points


def phase_left(root: Path) -> str:
    """Where a killed ``rmq recover`` was, from what it left: a journal (applying), a staged copy
    and no journal (staging), or nothing (planning: it had written nothing yet)."""
    if any((root / BACKUP_DIR).glob(f"*/{JOURNAL}")):
        return "applying"
    if (root / STAGING_DIR / "recover").exists():
        return "staging"
    return "planning"


def killed_when(root: Path, seen: Callable[[], bool], limit: float = 60.0) -> str:
    """``rmq recover --yes`` of ``root`` SIGKILLed as soon as ``seen()`` holds (polled every
    millisecond): the phase it left (``done`` when it finished first)."""
    child = subprocess.Popen([*RMQ, "recover", str(root), "--yes"], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + limit
    while child.poll() is None and not seen() and time.monotonic() < deadline:
        time.sleep(0.001)
    finished = child.poll() is not None
    child.send_signal(signal.SIGKILL)
    child.wait()
    return "done" if finished else phase_left(root)


def test_killed_at_random_moments_then_rerun(damaged_source, tmp_path, rmq_proc):
    """SIGKILLs land in the planning phase (before anything is written), in the staging phase (a
    staged copy, no journal yet; killed the moment it appears) and at moments spread over a run; each
    kill's phase is read from what it left, and every rerun converges on the same store."""
    reference = writable_copy(damaged_source, tmp_path / "ref")
    started = time.monotonic()
    rmq_proc("recover", str(reference), "--yes", check=True)
    whole = time.monotonic() - started
    expected = store_state(reference)
    phases: list[str] = []
    for i in range(12):
        root = writable_copy(damaged_source, tmp_path / f"t{i}")
        if i % 3 == 0:  # the moment its staging area appears
            phase = killed_when(root, lambda root=root: (root / STAGING_DIR / "recover").exists())
        else:
            at = time.monotonic() + whole * (0.1 + 0.9 * i / 12)
            phase = killed_when(root, lambda at=at: time.monotonic() >= at)
        phases.append(phase)
        rmq_proc("recover", str(root), "--yes", check=True)
        assert store_state(root) == expected, phases
    assert {"planning", "staging"} <= set(phases), phases


# `rmq recover --yes` whose staging fails half-way (after the staged copy was made)
STAGING_FAILS = r"""
import sys
from rmqcli.cli.main import run
from rmqcli.errors import CorruptDataError
from rmqcli.ops import recover, recover_bulk

def walk(*args, **kwargs):
    raise CorruptDataError("staging failed half-way")

recover.walk = recover_bulk.walk = walk
run(["recover", sys.argv[1], *sys.argv[2:]])
"""


@pytest.mark.parametrize("flags", [[], ["--yes"]])
def test_staging_is_removed_when_staging_fails(flags, damaged_source, tmp_path):
    root = writable_copy(damaged_source, tmp_path / "s")
    before = store_state(root)
    proc = subprocess.run(
        [sys.executable, "-c", STAGING_FAILS, str(root), *flags], capture_output=True, text=True, cwd=ROOT
    )
    assert proc.returncode == 4 and "staging failed half-way" in proc.stderr
    assert not (root / ".rmq-staging").exists()
    assert store_state(root) == before


def test_plans_leave_no_staging_dir(damaged_source, tmp_path, rmq_proc):
    root = writable_copy(damaged_source, tmp_path / "s")
    rmq_proc("recover", str(root), check=True)
    assert not (root / ".rmq-staging").exists()
    rmq_proc("recover", str(root), "--yes", check=True)
    assert not (root / ".rmq-staging").exists()
    for command in (["rebuild"], ["truncate", "--offset", "0"], ["recover", "--yes"]):
        out = rmq_proc(command[0], str(root), *command[1:], check=True).stdout
        assert not (root / ".rmq-staging").exists(), command
    assert out.strip().endswith("left as it is")  # an empty plan, discarded


def test_truncate_cuts_in_front_of_damage(damaged_source, tmp_path, rmq_proc):
    """The point of truncate: a corrupt record after the cut does not stop it."""
    from rmqcli.store import Store

    root = writable_copy(damaged_source, tmp_path / "s")
    rmq_proc("recover", str(root), "--yes", check=True)
    store = Store.open(root)
    records = list(store.commitlog.records())
    victim = records[-5]
    mf = store.commitlog.queue.find(victim.position)
    store.close()
    data = bytearray(mf.path.read_bytes())
    data[victim.file_position + 4 : victim.file_position + 8] = b"\x12\x34\x56\x78"  # bad magic
    mf.path.write_bytes(bytes(data))
    cut = records[-10]
    rmq_proc("truncate", str(root), "--offset", str(cut.position), "--yes", check=True)
    store = Store.open(root)
    assert store.commitlog.max_offset() == cut.position
    store.close()
    assert rmq_proc("verify", str(root)).returncode == 0
