"""Store copies and what tests compare of them: writable copies of read-only fixtures, a store
after a crash (a torn last record, formats.md §1), and digests of a store's files."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from formats import checkpoint as ckpt_fmt
from formats import epoch as efmt
from formats import indexfile
from formats.derive import field_offsets
from rmqcli.store import Store
from rmqcli.store.settings import StoreSettings
from rmqcli.store.store import CONSUMEQUEUE_DIR
from tests.support import REAL_ROOT
from tests.support.cli import run_rmq

SAFETY_DIRS = (".rmq-backup", ".rmq-staging")  # rmq's own areas inside a store
# a CommitLog file and a consume queue file of the generated small store (conftest's ``pristine``)
CL1 = "commitlog/00000000000000065536"
CQ = "consumequeue/TopicA/0/00000000000000000000"


FILE_SIZES = ("mapped_file_size_commitlog", "mapped_file_size_consume_queue")
ALL_SIZES = (*FILE_SIZES, "max_hash_slot_num", "max_index_num")


def geometry(
    commitlog: int, consume_queue: int, hash_slots: int, index_num: int, explicit=FILE_SIZES, **other
) -> StoreSettings:
    """Store settings of a small geometry (formats.md §7), ``explicit`` naming the sizes a broker.conf
    would set."""
    return StoreSettings(
        mapped_file_size_commitlog=commitlog,
        mapped_file_size_consume_queue=consume_queue,
        max_hash_slot_num=hash_slots,
        max_index_num=index_num,
        explicit=frozenset(explicit),
        **other,
    )


# the writer tests' tiny store: 4 KiB CommitLog files, 5 units a queue file, 7 slots, 9 index entries
TINY = geometry(4096, 100, 7, 9, explicit=ALL_SIZES)


_CHUNK = 1 << 20
_ZEROS = bytes(_CHUNK)


def _data_chunks(f) -> Iterator[tuple[int, bytes]]:  # type: ignore[no-untyped-def]
    """(offset, bytes) of each 1 MiB-aligned chunk of an open file that is not all zeros; chunks
    wholly in holes (``SEEK_DATA``/``SEEK_HOLE``) are not read. Index files are 400 MiB files
    that are mostly holes."""
    fd = f.fileno()
    size = os.fstat(fd).st_size
    done = 0  # every aligned chunk before it was looked at
    while done < size:
        try:
            data = os.lseek(fd, done, os.SEEK_DATA)
            hole = os.lseek(fd, data, os.SEEK_HOLE)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # only a hole after ``done``
                return
            data, hole = done, size  # no hole support: read the rest
        start = max(done, data - data % _CHUNK)
        f.seek(start)
        while start < hole:
            chunk = f.read(min(_CHUNK, size - start))
            if not chunk:
                return
            if chunk != _ZEROS[: len(chunk)]:
                yield start, chunk
            start += len(chunk)
        done = start


def sparse_copy(src: str, dst: str) -> None:
    """``shutil.copy2`` that leaves the all-zero chunks of ``src`` as holes in ``dst``."""
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        for at, chunk in _data_chunks(fin):
            fout.seek(at)
            fout.write(chunk)
        fout.truncate(os.fstat(fin.fileno()).st_size)
    shutil.copystat(src, dst)


def file_digest(path: Path) -> str:
    """A sha256 of a file's content: its size, then each chunk that is not all zeros with its offset
    (equal content, equal digest, whatever is stored as a hole)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(os.fstat(f.fileno()).st_size.to_bytes(8, "big"))
        for at, chunk in _data_chunks(f):
            h.update(at.to_bytes(8, "big"))
            h.update(chunk)
    return h.hexdigest()


def writable_copy(source: Path, target: Path) -> Path:
    """``source`` copied to ``target`` (holes kept) with the owner's write bit on everything (the
    fixtures under ../shared are read-only)."""
    shutil.copytree(source, target, copy_function=sparse_copy)
    for path in [target, *target.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    return target


def zero_checkpoint_timestamps(root: Path) -> None:
    """Zero the checkpoint's physic, logics and index timestamps (formats.md §4), as a checkpoint
    never flushed: a recovery then checks every CommitLog file and rebuilds every index file."""
    stamps = ckpt_fmt.CheckpointFields.subcons[:3]
    assert [sub.name for sub in stamps] == [
        "physic_msg_timestamp",
        "logics_msg_timestamp",
        "index_msg_timestamp",
    ]
    with open(root / "checkpoint", "r+b") as f:
        f.write(bytes(sum(sub.sizeof() for sub in stamps)))


def tear_last_record(root: Path) -> Path:
    """Zero the second half of the store's last record and leave ``abort``: a broker killed while
    writing it."""
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


def file_bytes(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` by its relative name."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def cq_files(root: Path) -> dict[str, bytes]:
    return file_bytes(root / CONSUMEQUEUE_DIR)


def index_contents(root: Path) -> list[tuple]:
    """Per index file: header and every entry and slot (file names left out); ``root`` may be a
    staging directory, which has no CommitLog."""
    store = Store(root)
    out = []
    for f in store.index.files:
        data = f.path.read_bytes()
        slots = data[indexfile.HEADER_SIZE : indexfile.slot_position(f.hash_slot_num)]
        out.append((f.header, list(f.entries()), slots))
    store.close()
    return out


def store_state(root: Path, *, dirs: bool = False) -> dict[str, str | None]:
    """sha256 of every file under ``root`` outside rmq's own areas; with ``dirs`` every directory
    too (``name/``: None)."""
    out: dict[str, str | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == root:
            dirnames[:] = [d for d in dirnames if d not in SAFETY_DIRS]
        base = Path(dirpath)
        if dirs:
            out.update({(base / d).relative_to(root).as_posix() + "/": None for d in dirnames})
        for name in filenames:
            out[(base / name).relative_to(root).as_posix()] = file_digest(base / name)
    return dict(sorted(out.items()))


LOCKER = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0, os.SEEK_SET)
print("locked", flush=True)
sys.stdin.read()
"""


@contextmanager
def broker_lock(store: Path) -> Iterator[None]:
    """Hold the POSIX lock on STORE/lock byte 0 from another process, as a running broker does."""
    child = subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(store / "lock")], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"locked"
        yield
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=10)


def converges(
    command: list[str], source: Path, tmp_path: Path, expected: dict[str, str], crash_at: int
) -> bool:
    """Kill ``command`` at crash point ``crash_at``, re-run it: the store must end as ``expected``.

    Returns False when the command finished before reaching that crash point.
    """
    root = writable_copy(source, tmp_path / f"k{crash_at}")
    first = run_rmq(*command, str(root), "--yes", env={"RMQ_TEST_CRASH_AT": str(crash_at)})
    killed = first.returncode == -signal.SIGKILL
    run_rmq(*command, str(root), "--yes", check=True)
    assert store_state(root) == expected, (command, crash_at)
    shutil.rmtree(root)
    return killed


def converges_at_every_crash_point(command: list[str], source: Path, tmp_path: Path) -> tuple[int, Path]:
    """``rmq COMMAND --yes`` on a copy of ``source`` gives the expected bytes; on fresh copies it is
    killed at crash point 1, 2, ... and re-run, which must give the same bytes. Returns how many
    crash points the command passed, and the copy it ran on uninterrupted."""
    reference = writable_copy(source, tmp_path / "expected")
    run_rmq(*command, str(reference), "--yes", check=True)
    expected = store_state(reference)
    points = 0
    while converges(command, source, tmp_path, expected, points + 1):
        points += 1
    return points, reference


def commitlog_end(root: Path) -> int:
    """Where a store's CommitLog data ends (maxPhyOffset), read from its files (the store may be live)."""
    from rmqcli.store import Store

    store = Store.open(root)
    try:
        return store.commitlog.max_offset()
    finally:
        store.close()


def ends_meet(a: Path, b: Path) -> Callable[[], bool]:
    """A check for ``wait_until``: the two stores' CommitLogs end at the same offset."""
    return lambda: commitlog_end(a) == commitlog_end(b)


def controller_copy(tmp_path: Path, confirm_row: int) -> tuple[Path, list[dict]]:
    """basic-1 (written by a real 4.9.8 broker) made a controller-mode store: an epoch file, and
    confirmPhyOffset at the start of record ``confirm_row`` (RocketMQ's own dump of it gives the
    positions). Returns the store and the records as that dump lists them."""
    src = REAL_ROOT / "basic-1"
    store = tmp_path / "store"
    shutil.copytree(src / "store", store)
    records = [json.loads(line) for line in (src / "store.records.jsonl").read_text().splitlines()]
    (store / efmt.EPOCH_FILE).write_text(efmt.build_epoch_file([efmt.EpochEntry(1, 0)]))
    set_confirm(store, records[confirm_row]["position"])
    return store, records


def set_confirm(store: Path, value: int) -> None:
    """Write ``value`` as the checkpoint's confirmPhyOffset (formats.md §4, 5.1.1's field)."""
    at = field_offsets(ckpt_fmt.CheckpointFields)["confirm_phy_offset"]
    with open(store / "checkpoint", "r+b") as f:
        f.seek(at)
        f.write(value.to_bytes(8, "big", signed=True))
