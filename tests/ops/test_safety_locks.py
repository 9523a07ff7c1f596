"""Lock handling fails closed: a held or unusable ``lock`` stops every change, unless --force-unlocked."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from rmqcli.ops.safety import Change, StoreBusyError, ensure_unlocked, finish_interrupted
from rmqcli.store import Store
from tests.support import ROOT
from tests.support.stores import broker_lock, sparse_copy, store_state, writable_copy

# `rmq recover --yes` in which a broker starts (in another process) while the plan is being staged,
# i.e. after the command checked the lock and before it opens its Change
BROKER_STARTS_DURING_STAGING = r"""
import subprocess, sys
from rmqcli.cli.main import run
from rmqcli.ops import recover
from tests.support.stores import LOCKER

real = recover.stage_recover
children = []

def stage_then_broker_starts(store, **kwargs):
    result = real(store, **kwargs)
    lock, pipe = str(store.root / "lock"), subprocess.PIPE
    child = subprocess.Popen([sys.executable, "-c", LOCKER, lock], stdin=pipe, stdout=pipe)
    assert child.stdout.readline().strip() == b"locked"
    children.append(child)
    return result

recover.stage_recover = stage_then_broker_starts
run(["recover", sys.argv[1], "--yes", *sys.argv[2:]])
"""


def test_change_refuses_while_a_broker_holds_the_lock(store: Path) -> None:
    """``_Locks`` no longer carries on without the broker's lock."""
    before = store_state(store, dirs=True)
    with broker_lock(store):
        with pytest.raises(StoreBusyError, match="running broker holds the store lock") as info:
            Change(store, "t")
        assert info.value.exit_code == 7 and "--force-unlocked" in str(info.value)
        assert store_state(store, dirs=True) == before
        assert not [p for p in (store / ".rmq-backup").iterdir() if p.is_dir()]  # no change was begun
        with Change(store, "t", force_unlocked=True) as change:  # the operator's decision
            change.write_range("checkpoint", 0, b"\x01")
    with Change(store, "t") as change:  # free again; and the flock was released after the refusal
        change.write_range("checkpoint", 1, b"\x02")


def test_a_lock_that_cannot_be_checked_counts_as_held(store: Path) -> None:
    """A lock file that exists but cannot be opened (here: a symlink loop) is not "free"."""
    (store / "lock").unlink()
    assert not Store(store).lock_held()  # no lock file: no broker
    os.symlink("lock", store / "lock")  # ELOOP on open, even for root
    assert Store(store).lock_held()
    with pytest.raises(StoreBusyError, match="cannot check the store lock"):
        ensure_unlocked(store)
    with pytest.raises(StoreBusyError, match="cannot take the store lock"):
        Change(store, "t")
    ensure_unlocked(store, force=True)
    with Change(store, "t", force_unlocked=True) as change:
        change.write_range("checkpoint", 0, b"\x01")
    assert finish_interrupted(store) == []


def an_unreadable_lock_refuses(store: Path) -> None:
    """The lock file free and readable: nothing held; made unreadable (mode 0, by its owner): held,
    and a change is refused for that reason (EACCES), not another."""
    assert not Store(store).lock_held()
    (store / "lock").chmod(0)
    assert Store(store).lock_held()
    with pytest.raises(StoreBusyError, match="cannot check the store lock .*: Permission denied"):
        ensure_unlocked(store)
    with pytest.raises(StoreBusyError, match="cannot take the store lock .*: Permission denied") as info:
        Change(store, "t")
    assert info.value.exit_code == 7


# as root (CI's) the modes mean nothing: the check runs in a child that has dropped to ``nobody``
# (no capabilities left) after its imports (the interpreter lives under /root, which ``nobody``
# cannot read), on a copy of the store that ``nobody`` owns
AS_NOBODY = r"""
import os, pwd, sys
from pathlib import Path
from tests.ops.test_safety_locks import an_unreadable_lock_refuses

nobody = pwd.getpwnam("nobody")
os.setgroups([])
os.setgid(nobody.pw_gid)
os.setuid(nobody.pw_uid)
status = dict(line.split(":\t", 1) for line in open("/proc/self/status").read().splitlines())
assert os.geteuid() == nobody.pw_uid and int(status["CapEff"], 16) == 0, status["CapEff"]
an_unreadable_lock_refuses(Path(sys.argv[1]))
print("refused as", os.geteuid())
"""


def test_an_unreadable_lock_counts_as_held(store: Path) -> None:
    if os.geteuid() != 0:
        an_unreadable_lock_refuses(store)
        return
    nobody = pwd.getpwnam("nobody")
    home = Path(tempfile.mkdtemp(prefix="rmq-unreadable-lock-"))  # in /tmp: nobody may reach it
    try:
        copy = shutil.copytree(store, home / "store", copy_function=sparse_copy)
        for path in [home, *home.rglob("*")]:
            os.chown(path, nobody.pw_uid, nobody.pw_gid)
        proc = subprocess.run(
            [sys.executable, "-c", AS_NOBODY, str(copy)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0 and proc.stdout == f"refused as {nobody.pw_uid}\n", proc.stderr
    finally:
        shutil.rmtree(home)


def recover_while_a_broker_starts(root: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """``rmq recover ROOT --yes FLAGS`` during whose staging a broker takes the store lock."""
    return subprocess.run(
        [sys.executable, "-c", BROKER_STARTS_DURING_STAGING, str(root), *flags],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_broker_started_during_planning_stops_the_change(
    damaged_source: Path, tmp_path: Path, rmq_proc
) -> None:
    """The lock is checked before planning and taken again by the Change: a broker that started in
    between (another process) makes ``recover --yes`` refuse with exit 7, touching nothing."""
    root = writable_copy(damaged_source, tmp_path / "s")
    before = store_state(root)
    proc = recover_while_a_broker_starts(root)
    assert proc.returncode == 7, proc.stderr
    assert "running broker holds the store lock" in proc.stderr
    assert store_state(root) == before
    assert not (root / ".rmq-staging").exists()
    # with --force-unlocked the operator overrides it
    forced = recover_while_a_broker_starts(root, "--force-unlocked")
    assert forced.returncode == 0, forced.stderr
    assert store_state(root) != before
    assert rmq_proc("verify", str(root)).returncode == 0
