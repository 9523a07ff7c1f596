"""``rmq diff-stores`` on copies of a real 4.9.8 store: identical, a lagging replica, a replica that
starts at its master's last file, a flipped byte, disjoint ranges, and paths that are no store."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rmqcli.store import Store
from tests.support import REAL_ROOT
from tests.support.stores import sparse_copy

REAL = REAL_ROOT / "basic-1" / "store"
pytestmark = pytest.mark.real


def replica(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(REAL, target, copy_function=sparse_copy)
    return target


def headers(root: Path) -> list:
    store = Store.open(root)
    try:
        return list(store.commitlog.headers())
    finally:
        store.close()


def commitlog_files(root: Path) -> list[Path]:
    return sorted((root / "commitlog").iterdir())


def zero_from(root: Path, offset: int) -> None:
    """Zero the CommitLog from physical ``offset`` on (a replica that has not received those bytes)."""
    for path in commitlog_files(root):
        start = int(path.name)
        size = path.stat().st_size
        if start + size <= offset:
            continue
        with path.open("r+b") as f:
            at = max(offset - start, 0)
            f.seek(at)
            f.write(b"\0" * (size - at))


def diff(rmq, a: Path, b: Path, *extra: str) -> tuple[int, dict]:
    result = rmq("diff-stores", str(a), str(b), "--json", *extra)
    return result.exit_code, json.loads(result.stdout)


def test_a_store_and_its_copy_are_identical(rmq, tmp_path: Path) -> None:
    a, b = replica(tmp_path, "a"), replica(tmp_path, "b")
    end = headers(REAL)[-1]
    code, out = diff(rmq, a, b)
    assert code == 0
    summary = out["summary"]
    assert summary["verdict"] == "identical"
    assert summary["gap"] == 0
    assert summary["comparedBytes"] == summary["a"]["maxOffset"] == end.position + end.total_size
    assert out["ranges"] == [] and out["records"] == []


def test_a_lagging_replica_is_a_prefix_and_the_records_it_lacks_are_listed(rmq, tmp_path: Path) -> None:
    a, b = replica(tmp_path, "a"), replica(tmp_path, "b")
    records = headers(REAL)
    cut = records[-3].position
    zero_from(b, cut)
    end = records[-1].position + records[-1].total_size
    code, out = diff(rmq, a, b)
    assert code == 0
    assert out["summary"]["verdict"] == "prefix"
    assert out["summary"]["gap"] == end - cut
    assert out["ranges"] == [
        {
            "side": "a",
            "fromOffset": cut,
            "toOffset": end,
            "records": 3,
            "unreadableFrom": None,
            "unconfirmed": 0,
        }
    ]
    assert [r["offset"] for r in out["records"]] == [h.position for h in records[-3:]]
    assert [r["topic"] for r in out["records"]] == [h.topic for h in records[-3:]]
    # the other way round, B is ahead: a negative gap, B's records
    code, out = diff(rmq, b, a, "--limit", "1")
    assert code == 0
    assert out["summary"]["gap"] == cut - end
    assert [(r["side"], r["offset"]) for r in out["records"]] == [("b", cut)]


def test_a_replica_served_from_its_masters_last_file_agrees(rmq, tmp_path: Path) -> None:
    """A 4.9.8 slave that starts empty gets its master's last file only: not a divergence."""
    a, b = replica(tmp_path, "a"), replica(tmp_path, "b")
    files = commitlog_files(b)
    for path in files[:-1]:
        path.unlink()
    last = int(files[-1].name)
    before = [h for h in headers(REAL) if h.position < last]
    code, out = diff(rmq, a, b)
    assert code == 0
    assert out["summary"]["verdict"] == "prefix"
    assert out["summary"]["commonFrom"] == last
    assert out["summary"]["gap"] == 0
    assert out["ranges"] == [
        {
            "side": "a",
            "fromOffset": 0,
            "toOffset": last,
            "records": len(before),
            "unreadableFrom": None,
            "unconfirmed": 0,
        }
    ]


def test_a_flipped_byte_is_found_with_its_file_position_and_record(rmq, tmp_path: Path) -> None:
    a, b = replica(tmp_path, "a"), replica(tmp_path, "b")
    records = headers(REAL)
    victim = records[len(records) // 2]
    offset = victim.position + victim.total_size - 3  # inside its properties
    path = next(p for p in commitlog_files(b) if int(p.name) <= offset < int(p.name) + p.stat().st_size)
    with path.open("r+b") as f:
        f.seek(offset - int(path.name))
        old = f.read(1)[0]
        f.seek(offset - int(path.name))
        f.write(bytes([old ^ 0x5A]))
    end = records[-1].position + records[-1].total_size
    result = rmq("diff-stores", str(a), str(b), "--json")
    assert result.exit_code == 4
    out = json.loads(result.stdout)
    d = out["summary"]["divergence"]
    assert out["summary"]["verdict"] == "diverged"
    assert (d["offset"], d["file"], d["position"]) == (offset, path.name, offset - int(path.name))
    assert (d["byteA"], d["byteB"]) == (old, old ^ 0x5A)
    assert d["recordA"] == d["recordB"] == victim.position
    assert out["summary"]["comparedBytes"] == offset
    after = sum(1 for h in records if h.position >= victim.position)
    assert [(r["side"], r["fromOffset"], r["toOffset"], r["records"]) for r in out["ranges"]] == [
        ("a", victim.position, end, after),
        ("b", victim.position, end, after),
    ]
    assert f"diverged at physical offset {offset}" in result.stderr
    table = rmq("diff-stores", str(a), str(b))
    assert table.exit_code == 4
    position = offset - int(path.name)
    assert f"diverged at physical offset {offset} ({path.name} position {position}" in table.stdout


def test_replicas_without_common_offsets_are_disjoint(rmq, tmp_path: Path) -> None:
    a, b = replica(tmp_path, "a"), replica(tmp_path, "b")
    files = commitlog_files(a)
    for path in files[1:]:
        path.unlink()  # A: the first file only
    for path in commitlog_files(b)[:-1]:
        path.unlink()  # B: the last file only
    code, out = diff(rmq, a, b)
    assert code == 4
    assert out["summary"]["verdict"] == "disjoint"
    assert {r["side"] for r in out["ranges"]} == {"a", "b"}


def test_a_path_that_is_no_store_exits_3_with_one_line(rmq, tmp_path: Path) -> None:
    a = replica(tmp_path, "a")
    result = rmq("diff-stores", str(a), str(tmp_path / "nothing"))
    assert result.exit_code == 3
    assert len(result.stderr.strip().splitlines()) == 1
    assert "nothing" in result.stderr
