"""The broker's clean-up rounds (``rmqcli.broker.services.retention``) over a store of several
CommitLog files, in this process; the disk usage figure is the test's (the thresholds are the broker's)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from rmqcli.broker.config import BrokerConfig
from rmqcli.broker.controller import BrokerController
from rmqcli.store.retention import HOUR_MS, RetentionConfig
from rmqcli.store.write.writer import StoreWriter
from tests.support.retention import TOPIC, Placed, age, build_store, commitlog_names, settings

NOW = int(time.time() * 1000)
HOUR = time.localtime(NOW / 1000).tm_hour
OTHER_HOUR = f"{(HOUR + 12) % 24:02d}"


@contextmanager
def broker(root: Path, usage: list[float], **retention: object) -> Iterator[BrokerController]:
    writer = StoreWriter(root, settings())
    try:
        config = BrokerConfig(broker_ip1="127.0.0.1", retention=RetentionConfig(**retention))  # type: ignore[arg-type]
        yield BrokerController(config, writer, [], disk_usage=lambda _path: usage[0])
    finally:
        writer.close()


def clean_round(ctl: BrokerController, now: int = NOW) -> list[str]:
    return asyncio.run(ctl.retention.round(now))


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, list[Placed]]:
    root = tmp_path / "store"
    placed = build_store(root)
    names = commitlog_names(root)
    age(root, names[:-1], NOW - 2 * HOUR_MS)  # all but the last written two hours ago
    return root, placed


def first_kept(placed: list[Placed], low: int, queue_id: int) -> int:
    return min(p.queue_offset for p in placed if p.queue_id == queue_id and p.physical >= low)


def test_at_a_delete_hour_expired_files_go_and_the_queues_follow(store: tuple[Path, list[Placed]]) -> None:
    root, placed = store
    names = commitlog_names(root)
    cq_before = sorted((root / "consumequeue" / TOPIC / "0").iterdir())
    with broker(root, [0.30], file_reserved_time=1, delete_when=f"{HOUR:02d}") as ctl:
        assert clean_round(ctl) == names[:-1]
        low = ctl.writer.commitlog.files[0].from_offset
        assert commitlog_names(root) == names[-1:] and low == int(names[-1])
        for queue_id in (0, 1):
            assert ctl.store.min_offset(TOPIC, queue_id) == first_kept(placed, low, queue_id)
            assert ctl.store.max_offset(TOPIC, queue_id) == 200
        cq_after = sorted((root / "consumequeue" / TOPIC / "0").iterdir())
        assert len(cq_after) < len(cq_before) and cq_after[-1] == cq_before[-1]
        # what stays is served as before
        unit = ctl.store.units(TOPIC, 0, ctl.store.min_offset(TOPIC, 0), 1)[0]
        assert unit.physical_offset >= low and ctl.store.read(unit.physical_offset, unit.size) is not None
        assert clean_round(ctl) == []  # nothing left to expire


def test_outside_the_delete_hours_a_calm_disk_keeps_everything(store: tuple[Path, list[Placed]]) -> None:
    root, _ = store
    names = commitlog_names(root)
    with broker(root, [0.30], file_reserved_time=1, delete_when=OTHER_HOUR) as ctl:
        assert clean_round(ctl) == []
        assert commitlog_names(root) == names and not ctl.store.disk_full


def test_a_disk_fuller_than_the_ratio_deletes_expired_files_and_past_the_forcibly_ratio_young_ones(
    store: tuple[Path, list[Placed]],
) -> None:
    root, _ = store
    names = commitlog_names(root)
    age(root, names[2:3], NOW)  # the third file is young
    usage = [0.80]
    with broker(
        root, usage, file_reserved_time=1, delete_when=OTHER_HOUR, delete_commit_log_files_interval=0
    ) as ctl:
        assert clean_round(ctl) == names[:2]  # expired ones, up to the young file
        usage[0] = 0.86
        assert clean_round(ctl) == names[2:3]  # cleanImmediately: whatever its age
        assert commitlog_names(root) == names[-1:] and not ctl.store.disk_full


def test_above_the_warning_level_the_store_is_full_until_space_returns(tmp_path: Path) -> None:
    usage = [0.95]
    with broker(tmp_path / "store", usage, delete_when=OTHER_HOUR) as ctl:
        clean_round(ctl)
        assert ctl.store.disk_full
        usage[0] = 0.88  # between the forcibly and the warning ratios: left as it is
        clean_round(ctl)
        assert ctl.store.disk_full
        usage[0] = 0.50
        clean_round(ctl)
        assert not ctl.store.disk_full


def test_a_manual_delete_gives_twenty_rounds_whatever_the_hour(store: tuple[Path, list[Placed]]) -> None:
    root, _ = store
    names = commitlog_names(root)
    with broker(root, [0.30], file_reserved_time=1, delete_when=OTHER_HOUR, delete_file_batch_max=1) as ctl:
        ctl.retention.delete_manually()
        assert [clean_round(ctl) for _ in range(3)] == [[n] for n in names[:3]]
        assert ctl.retention.manual_rounds == 17
        for _ in range(17):
            clean_round(ctl)
        assert ctl.retention.manual_rounds == 0


def _immutable(path: Path, on: bool) -> bool:
    if shutil.which("chattr") is None:
        return False
    return subprocess.run(["chattr", "+i" if on else "-i", str(path)], capture_output=True).returncode == 0


def test_a_file_that_cannot_be_deleted_stays_readable_and_is_deleted_again_later(
    store: tuple[Path, list[Placed]],
) -> None:
    root, _ = store
    names = commitlog_names(root)
    directory = root / "commitlog"
    with broker(
        root, [0.30], file_reserved_time=1, delete_when=f"{HOUR:02d}", redelete_hanged_file_interval=0
    ) as ctl:
        if not _immutable(directory, True):  # unlink in it fails with EPERM, even for root
            pytest.skip("chattr +i is not available on this file system")
        try:
            assert clean_round(ctl) == []
            hanged = ctl.retention.hanged
            assert hanged is not None and hanged.path == directory / names[0]
            assert ctl.store.read(0, 4) is not None  # still mapped and served
        finally:
            _immutable(directory, False)
        ctl.config = BrokerConfig(
            broker_ip1="127.0.0.1",
            retention=RetentionConfig(
                file_reserved_time=1, delete_when=OTHER_HOUR, redelete_hanged_file_interval=0
            ),
        )
        time.sleep(0.01)
        assert clean_round(ctl) == []  # no regular deletion outside the hours ...
        assert ctl.retention.deleted_commitlog == names[:1]  # ... but the hanged file went again
        assert commitlog_names(root) == names[1:] and ctl.retention.hanged is None
