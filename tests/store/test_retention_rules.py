"""The clean-up rules of ``rmqcli.store.retention`` against 4.9.8's ``CleanCommitLogService``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rmqcli.errors import UsageError
from rmqcli.store import retention as rules

HOUR = rules.HOUR_MS
CONFIG = rules.RetentionConfig()


def files(*mtimes: int) -> list[rules.CommitLogFile]:
    return [rules.CommitLogFile(Path(f"{i:020d}"), i * 100, 100, m) for i, m in enumerate(mtimes)]


@pytest.mark.parametrize(
    ("given", "used"), [(0, 0.10), (5, 0.10), (10, 0.10), (75, 0.75), (95, 0.95), (99, 0.95)]
)
def test_disk_max_used_space_ratio_is_clamped_as_4_9_8_clamps_it(given: int, used: float) -> None:
    assert rules.RetentionConfig(disk_max_used_space_ratio=given).max_used_ratio == used


def test_delete_when_is_a_list_of_hours() -> None:
    assert rules.delete_hours("04") == [4]
    assert rules.delete_hours("04;16") == [4, 16]
    with pytest.raises(UsageError, match="deleteWhen='4am'"):
        rules.delete_hours("4am")


def test_broker_conf_keys_are_read_and_checked() -> None:
    config = rules.retention_from_properties(
        {
            "fileReservedTime": "1",
            "deleteWhen": "01;13",
            "cleanFileForciblyEnable": "false",
            "deleteFileBatchMax": "3",
        }
    )
    assert (config.file_reserved_time, config.delete_when, config.clean_file_forcibly_enable) == (
        1,
        "01;13",
        False,
    )
    assert config.delete_file_batch_max == 3 and config.reserved_ms == HOUR
    for bad in (
        {"fileReservedTime": "x"},
        {"cleanFileForciblyEnable": "yes"},
        {"cleanResourceInterval": "0"},
    ):
        with pytest.raises(UsageError, match=next(iter(bad))):
            rules.retention_from_properties(bad)


def test_a_round_deletes_at_a_delete_hour_or_when_the_disk_is_fuller_than_the_ratio() -> None:
    calm = rules.Disk(0.30, 0.30)
    assert rules.decide(CONFIG, 4, calm, False).reasons() == ["time"]
    assert not rules.decide(CONFIG, 5, calm, False).deletes
    assert rules.decide(CONFIG, 5, calm, True).reasons() == ["manual"]
    fuller = rules.decide(CONFIG, 5, rules.Disk(0.80, 0.30), False)
    assert fuller.reasons() == ["space"] and fuller.disk_full is False
    unmeasured = rules.decide(CONFIG, 5, rules.Disk(-1.0, 0.30), False)  # a path that cannot be measured
    assert unmeasured.space_full and not unmeasured.clean_at_once


def test_past_the_forcibly_ratio_files_go_at_any_age_and_past_the_warning_level_the_disk_is_full() -> None:
    forcibly = rules.decide(CONFIG, 5, rules.Disk(0.86, 0.86), False)
    assert forcibly.clean_at_once and forcibly.disk_full is None  # left as it was
    full = rules.decide(CONFIG, 5, rules.Disk(0.91, 0.91), False)
    assert full.clean_at_once and full.disk_full is True and full.space_full
    off = rules.decide(
        rules.RetentionConfig(clean_file_forcibly_enable=False), 5, rules.Disk(0.91, 0.91), False
    )
    assert not off.clean_at_once and off.disk_full is True


def test_the_consume_queue_disk_has_the_last_word_when_the_commitlog_disk_did_not_decide() -> None:
    # diskMaxUsedSpaceRatio 95: a CommitLog disk at 0.92 is marked full but does not end the test;
    # the consume queues' disk at 0.50 then marks it writable again (4.9.8's getAndMakeDiskOK)
    config = rules.RetentionConfig(disk_max_used_space_ratio=95)
    decision = rules.decide(config, 5, rules.Disk(0.92, 0.50), False)
    assert decision.disk_full is False and decision.clean_at_once and not decision.space_full


def test_expired_files_go_oldest_first_up_to_the_first_young_one_never_the_last() -> None:
    now = 100 * HOUR
    old, young = now - 73 * HOUR, now - HOUR
    assert [
        f.from_offset for f in rules.expired_commitlog(files(old, old, young, old), now, CONFIG, False)
    ] == [0, 100]
    assert rules.expired_commitlog(files(old), now, CONFIG, False) == []  # the last file stays
    everything = rules.expired_commitlog(files(young, young, young), now, CONFIG, True)
    assert [f.from_offset for f in everything] == [0, 100]
    batch = rules.RetentionConfig(delete_file_batch_max=2)
    assert len(rules.expired_commitlog(files(*[old] * 6), now, batch, False)) == 2
    zero = rules.RetentionConfig(file_reserved_time=0)
    assert len(rules.expired_commitlog(files(now, now, now), now, zero, False)) == 2


def test_queue_and_index_files_go_while_wholly_below_the_new_minimum() -> None:
    assert rules.expired_queue_files([90, 190, 290, 390], 200) == 2
    assert rules.expired_queue_files([90, None, 10], 200) == 1  # stops at a file without units
    assert rules.expired_queue_files([90], 200) == 0
    assert rules.expired_index_files([50, 150, 250], 1000) == 2


def test_disk_used_ratio_is_used_over_used_plus_usable_rounded_up(tmp_path: Path) -> None:
    st = os.statvfs(tmp_path)
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    entire = used + st.f_bavail * st.f_frsize
    expected = -(-used * 100 // entire) / 100
    assert rules.disk_used_ratio(tmp_path) == expected
    assert rules.disk_used_ratio(tmp_path / "missing") == -1.0
