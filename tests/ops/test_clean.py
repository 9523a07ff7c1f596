"""``rmq clean``: a broker's clean-up round planned offline, and applied with the usual rules."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from rmqcli.store.retention import HOUR_MS
from tests.support.cli import invoke_rmq
from tests.support.retention import TOPIC, Placed, age, build_store, commitlog_names, store_files, write_conf
from tests.support.stores import broker_lock, converges_at_every_crash_point, store_state

NOW = int(time.time() * 1000)
HOUR = time.localtime(NOW / 1000).tm_hour
OTHER_HOUR = f"{(HOUR + 12) % 24:02d}"


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, list[Placed]]:
    root = tmp_path / "store"
    placed = build_store(root, offsets={"G_BEHIND": 10, "G_AHEAD": 190})
    age(root, commitlog_names(root)[:2], NOW - 3 * HOUR_MS)  # two files written 3 hours ago
    return root, placed


def clean(*args: str, code: int = 0) -> dict:
    result = invoke_rmq("clean", *args, "--json")
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


def test_the_plan_names_files_bytes_time_range_and_the_unread_messages_groups_lose(
    store: tuple[Path, list[Placed]],
) -> None:
    root, placed = store
    names = commitlog_names(root)
    at = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(NOW / 1000))
    doc = clean(
        str(root),
        "--reserved-hours",
        "2",
        "--at",
        at,
        "--disk-ratio",
        "0.3",
        "--config",
        str(write_conf(root.parent / "b.conf", deleteWhen=f"{HOUR:02d}")),
    )
    details = doc["details"]
    assert details["reasons"] == ["time"] and details["disk"] == {"commitLog": 0.3, "consumeQueue": 0.3}
    assert [f["file"] for f in details["commitLogFiles"]] == names[:2]  # the third is young
    low = int(names[2])
    assert details["commitLogMinOffset"] == {"before": 0, "after": low}
    gone = [p for p in placed if p.physical < low]
    first_kept = {
        q: min(p.queue_offset for p in placed if p.queue_id == q and p.physical >= low) for q in (0, 1)
    }
    assert details["queues"] == [
        {"topic": TOPIC, "queueId": q, "minOffsetBefore": 0, "minOffsetAfter": first_kept[q]} for q in (0, 1)
    ]
    # G_BEHIND committed 10 on each queue and loses what lies between; G_AHEAD is past the new minimum
    assert details["unreadLost"] == [
        {
            "group": "G_BEHIND",
            "topic": TOPIC,
            "queueId": q,
            "committed": 10,
            "minOffsetAfter": first_kept[q],
            "lost": first_kept[q] - 10,
        }
        for q in (0, 1)
    ]
    assert details["storedFrom"] is not None and details["storedFrom"] <= details["storedBefore"]
    commitlog_steps = [s for s in doc["steps"] if s["path"].startswith("commitlog/")]
    assert [s["bytesRemoved"] for s in commitlog_steps] == [65536, 65536]
    cq_steps = [s["path"] for s in doc["steps"] if s["path"].startswith("consumequeue/")]
    for path in cq_steps:  # every unit of a deleted consume-queue file points below the new minimum
        assert int(Path(path).name) // 20 + 50 <= first_kept[int(Path(path).parent.name)]
    assert any("frees no space" in note and "--no-backup" in note for note in doc["notes"])
    assert not doc["applied"] and len(gone) == sum(first_kept.values())


def test_outside_the_hours_with_a_calm_disk_nothing_is_planned_and_a_full_one_deletes_at_any_age(
    store: tuple[Path, list[Placed]],
) -> None:
    root, _ = store
    conf = str(write_conf(root.parent / "b.conf", deleteWhen=OTHER_HOUR))
    assert clean(str(root), "--config", conf, "--disk-ratio", "0.3")["steps"] == []
    forcibly = clean(str(root), "--config", conf, "--disk-ratio", "0.86")
    assert forcibly["details"]["reasons"] == ["space", "forcibly"]
    assert [f["file"] for f in forcibly["details"]["commitLogFiles"]] == commitlog_names(root)[:-1]
    full = clean(str(root), "--config", conf, "--disk-ratio", "0.95")
    assert full["details"]["diskFull"] is True and any("refuses sends" in note for note in full["notes"])


def test_applied_the_files_move_into_the_backup_and_come_back(store: tuple[Path, list[Placed]]) -> None:
    root, _ = store
    before = store_state(root)
    doc = clean(str(root), "--reserved-hours", "2", "--manual", "--yes")
    assert doc["applied"] and commitlog_names(root)[0] == commitlog_names(root)[0]
    deleted = {s["path"] for s in doc["steps"]}
    assert not deleted & store_files(root)
    backup = Path(doc["backup"])
    assert invoke_rmq("restore-backup", str(root), backup.name, "--yes").exit_code == 0
    assert store_state(root) == before


def test_with_no_backup_the_files_are_gone_for_good(store: tuple[Path, list[Placed]]) -> None:
    root, _ = store
    names = commitlog_names(root)
    doc = clean(str(root), "--reserved-hours", "2", "--manual", "--no-backup", "--yes")
    assert {s["action"] for s in doc["steps"]} == {"discard"} and "deleted for good" in doc["message"]
    assert commitlog_names(root) == names[2:]
    assert not list(Path(doc["backup"]).glob("*.bin"))  # nothing kept
    refused = invoke_rmq("restore-backup", str(root), Path(doc["backup"]).name, "--yes")
    assert refused.exit_code == 2 and "cannot be put back" in refused.output
    assert clean(str(root), "--reserved-hours", "2", "--manual")["steps"] == []  # a re-run: converged


def test_a_store_a_broker_holds_is_refused(store: tuple[Path, list[Placed]]) -> None:
    root, _ = store
    before = store_state(root)
    with broker_lock(root):
        result = invoke_rmq("clean", str(root), "--reserved-hours", "0", "--manual", "--yes")
    assert result.exit_code != 0 and "lock" in result.output
    assert store_state(root) == before


@pytest.mark.parametrize("mode", ["--no-backup", "--manual"])
def test_killed_at_any_point_a_re_run_finishes_the_clean(tmp_path: Path, mode: str) -> None:
    root = tmp_path / "small"
    build_store(root, count=150)  # two CommitLog files, two consume-queue files per queue: few steps
    points, done = converges_at_every_crash_point(
        ["clean", "--reserved-hours", "0", "--manual", mode], root, tmp_path
    )
    assert points >= 3 and commitlog_names(done) == commitlog_names(root)[-1:]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--disk-ratio", "2"], "--disk-ratio: a share from 0 to 1, not 2.0"),
        (["--reserved-hours", "-1"], "--reserved-hours: must be 0 or more, not -1"),
        (["--at", "soon"], "--at: 'soon' is neither epoch milliseconds nor an ISO-8601 time"),
    ],
)
def test_bad_flags_are_one_line_usage_errors(
    store: tuple[Path, list[Placed]], args: list[str], message: str
) -> None:
    root, _ = store
    result = invoke_rmq("clean", str(root), *args)
    assert result.exit_code == 2 and result.stderr.strip() == f"rmq: error: {message}"
