"""``rmq recover|truncate|rebuild`` end to end in real processes: plans, --yes, backups, kills."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_rebuild import writable_copy

RMQ = [sys.executable, "-m", "rmqcli.cli.main"]
SKIP_DIRS = (".rmq-backup", ".rmq-staging")


def rmq(*args: str, env: dict | None = None, check: bool = False) -> subprocess.CompletedProcess:
    run_env = {**os.environ, **(env or {})}
    proc = subprocess.run([*RMQ, *args], capture_output=True, text=True, env=run_env)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def snapshot(root: Path) -> dict[str, str]:
    """sha256 of every file of the store, leaving out rmq's own backup and staging areas."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if path.is_file() and rel.parts[0] not in SKIP_DIRS:
            out[str(rel)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def damaged_source(tmp_path_factory) -> Path:
    """A generated store after a crash: a torn last record, queues and index past it, `abort`."""
    from fixtures.generate import generate
    from rmqcli.store import Store

    root = tmp_path_factory.mktemp("src") / "store"
    generate(root, "small", seed=11)
    store = Store.open(root)
    last = list(store.commitlog.records())[-1]
    mf = store.commitlog.queue.find(last.position)
    store.close()
    data = bytearray(mf.path.read_bytes())
    start = last.position - mf.from_offset
    data[start + last.total_size // 2 : start + last.total_size] = bytes(
        last.total_size - last.total_size // 2
    )
    mf.path.write_bytes(bytes(data))
    (root / "abort").touch()
    return root


def test_plan_changes_nothing_and_yes_applies(damaged_source, tmp_path):
    root = writable_copy(damaged_source, tmp_path / "s")
    before = snapshot(root)
    plan = rmq("recover", str(root), "--json", check=True)
    doc = json.loads(plan.stdout)
    assert doc["applied"] is False and doc["steps"]
    assert snapshot(root) == before

    assert rmq("recover", str(root), "--dry-run", "--yes").returncode == 2
    applied = rmq("recover", str(root), "--yes", check=True)
    assert "applied" in applied.stdout
    after = snapshot(root)
    assert after != before and "abort" not in after
    assert rmq("verify", str(root)).returncode == 0

    backups = json.loads(rmq("backups", str(root), "--json", check=True).stdout)
    assert len(backups) == 1
    rmq("restore-backup", str(root), backups[0]["timestamp"], "--yes", check=True)
    assert snapshot(root) == before


def test_truncate_and_rebuild_commands(damaged_source, tmp_path):
    from rmqcli.store import Store

    root = writable_copy(damaged_source, tmp_path / "s")
    rmq("recover", str(root), "--yes", check=True)
    store = Store.open(root)
    records = list(store.commitlog.records())
    store.close()
    cut = records[len(records) // 2]
    rmq("truncate", str(root), "--offset", str(cut.position - 1), "--yes", check=True)
    store = Store.open(root)
    assert store.commitlog.max_offset() == cut.position
    store.close()
    assert rmq("verify", str(root)).returncode == 0

    truncated = snapshot(root)
    shutil.rmtree(root / "consumequeue")
    plan = rmq("rebuild", str(root), "--cq", check=True)
    assert "pass --config" in plan.stdout  # no files left to read the queue file size from
    conf = tmp_path / "broker.conf"
    conf.write_text("mappedFileSizeConsumeQueue=600\n")
    rmq("rebuild", str(root), "--cq", "--config", str(conf), "--yes", check=True)
    assert snapshot(root) == truncated
    assert rmq("truncate", str(root)).returncode == 2  # neither --offset nor --time


def test_refuses_while_a_broker_holds_the_lock(damaged_source, tmp_path):
    root = writable_copy(damaged_source, tmp_path / "s")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl,os,sys,time;fd=os.open(sys.argv[1],os.O_RDWR);"
            "fcntl.lockf(fd,fcntl.LOCK_EX,1,0);print('locked',flush=True);time.sleep(60)",
            str(root / "lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        before = snapshot(root)
        proc = rmq("recover", str(root), "--yes")
        assert proc.returncode == 7 and "--force-unlocked" in proc.stderr
        assert snapshot(root) == before
    finally:
        holder.kill()
        holder.wait()


def _converges(
    command: list[str], source: Path, tmp_path: Path, expected: dict[str, str], crash_at: int
) -> bool:
    """Kill ``command`` at crash point ``crash_at``, re-run it: the store must end as ``expected``.

    Returns False when the command finished before reaching that crash point.
    """
    root = writable_copy(source, tmp_path / f"k{crash_at}")
    first = rmq(*command, str(root), "--yes", env={"RMQ_TEST_CRASH_AT": str(crash_at)})
    killed = first.returncode == -signal.SIGKILL
    rmq(*command, str(root), "--yes", check=True)
    assert snapshot(root) == expected, (command, crash_at)
    shutil.rmtree(root)
    return killed


@pytest.mark.parametrize("command", [["recover"], ["rebuild"]])
def test_killed_at_every_crash_point_then_rerun(command, damaged_source, tmp_path):
    reference = writable_copy(damaged_source, tmp_path / "ref")
    if command == ["rebuild"]:
        rmq("recover", str(reference), "--yes", check=True)
        source = writable_copy(reference, tmp_path / "rebuild-src")
        shutil.rmtree(source / ".rmq-backup")
        shutil.rmtree(source / "consumequeue")
        (source / "checkpoint").write_bytes(bytes(4096))  # stale: rebuild rewrites it too
    else:
        source = damaged_source
    reference = writable_copy(source, tmp_path / "ref2")
    rmq(*command, str(reference), "--yes", check=True)
    expected = snapshot(reference)
    points = 0
    while _converges(command, source, tmp_path, expected, points + 1):
        points += 1
    assert points >= 10, points  # with both commands: at least 20 distinct kill points


def test_killed_at_random_moments_then_rerun(damaged_source, tmp_path):
    """Timed SIGKILLs also land in the planning and staging phases, before any journal exists."""
    reference = writable_copy(damaged_source, tmp_path / "ref")
    rmq("recover", str(reference), "--yes", check=True)
    expected = snapshot(reference)
    for i, delay in enumerate([0.3, 0.5, 0.7, 0.9, 1.1]):
        root = writable_copy(damaged_source, tmp_path / f"t{i}")
        child = subprocess.Popen([*RMQ, "recover", str(root), "--yes"], stdout=subprocess.DEVNULL)
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        child.wait()
        rmq("recover", str(root), "--yes", check=True)
        assert snapshot(root) == expected, delay


# `rmq recover --yes` whose staging fails half-way (after the staged copy was made)
STAGING_FAILS = r"""
import sys
from rmqcli.cli.main import run
from rmqcli.errors import CorruptDataError
from rmqcli.ops import recover

def walk(*args, **kwargs):
    raise CorruptDataError("staging failed half-way")

recover.walk = walk
run(["recover", sys.argv[1], *sys.argv[2:]])
"""


@pytest.mark.parametrize("flags", [[], ["--yes"]])
def test_staging_is_removed_when_staging_fails(flags, damaged_source, tmp_path):
    root = writable_copy(damaged_source, tmp_path / "s")
    before = snapshot(root)
    repo = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, "-c", STAGING_FAILS, str(root), *flags], capture_output=True, text=True, cwd=repo
    )
    assert proc.returncode == 4 and "staging failed half-way" in proc.stderr
    assert not (root / ".rmq-staging").exists()
    assert snapshot(root) == before


def test_plans_leave_no_staging_dir(damaged_source, tmp_path):
    root = writable_copy(damaged_source, tmp_path / "s")
    rmq("recover", str(root), check=True)
    assert not (root / ".rmq-staging").exists()
    rmq("recover", str(root), "--yes", check=True)
    assert not (root / ".rmq-staging").exists()
    for command in (["rebuild"], ["truncate", "--offset", "0"], ["recover", "--yes"]):
        out = rmq(command[0], str(root), *command[1:], check=True).stdout
        assert not (root / ".rmq-staging").exists(), command
    assert out.strip().endswith("left as it is")  # an empty plan, discarded


def test_truncate_cuts_in_front_of_damage(damaged_source, tmp_path):
    """The point of truncate: a corrupt record after the cut does not stop it."""
    from rmqcli.store import Store

    root = writable_copy(damaged_source, tmp_path / "s")
    rmq("recover", str(root), "--yes", check=True)
    store = Store.open(root)
    records = list(store.commitlog.records())
    victim = records[-5]
    mf = store.commitlog.queue.find(victim.position)
    store.close()
    data = bytearray(mf.path.read_bytes())
    data[victim.file_position + 4 : victim.file_position + 8] = b"\x12\x34\x56\x78"  # bad magic
    mf.path.write_bytes(bytes(data))
    cut = records[-10]
    rmq("truncate", str(root), "--offset", str(cut.position), "--yes", check=True)
    store = Store.open(root)
    assert store.commitlog.max_offset() == cut.position
    store.close()
    assert rmq("verify", str(root)).returncode == 0
