"""recover / truncate / restore-backup on a store whose CommitLog lives outside it (storePathCommitLog).

The same damaged store is laid out twice: the default way (STORE/commitlog) and with its CommitLog
files moved to one or two directories elsewhere, named by a broker.conf. Both must end with the same
bytes, the plans must name the real files, and every removed byte must be in the backup.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from fixtures.generate import generate
from rmqcli.store import Store
from tests.support.stores import sparse_copy, store_state, tear_last_record

CONF = "mappedFileSizeCommitLog=65536\nmappedFileSizeConsumeQueue=600\nmaxHashSlotNum=64\nmaxIndexNum=256\n"


def whole(root: Path, dirs: list[Path]) -> dict[str, str | None]:
    """The store's files plus the CommitLog files wherever they are, as ``commitlog/<name>``."""
    out = store_state(root, dirs=True)
    for d in dirs:
        out.update({f"commitlog/{k}": v for k, v in store_state(d, dirs=True).items()})
    out.setdefault("commitlog/", None)
    return out


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated store after a crash: a torn last record, queues and index past it, `abort`."""
    root = tmp_path_factory.mktemp("cl") / "store"
    generate(root, "small", seed=1)
    return tear_last_record(root)


def layouts(damaged: Path, tmp_path: Path, ndirs: int) -> tuple[Path, Path, list[Path], Path]:
    """(default store, store with its CommitLog elsewhere, those directories, its broker.conf)."""
    plain = tmp_path / "plain"
    shutil.copytree(damaged, plain, copy_function=sparse_copy)
    moved = tmp_path / "moved"
    shutil.copytree(damaged, moved, copy_function=sparse_copy)
    dirs = [tmp_path / f"elsewhere{i}" / "commitlog" for i in range(ndirs)]
    for d in dirs:
        d.mkdir(parents=True)
    for i, f in enumerate(sorted((moved / "commitlog").iterdir())):
        shutil.move(f, dirs[i % ndirs] / f.name)
    (moved / "commitlog").rmdir()
    conf = tmp_path / "broker.conf"
    conf.write_text(CONF + "storePathCommitLog=" + ",".join(map(str, dirs)) + "\n")
    return plain, moved, dirs, conf


@pytest.mark.parametrize("ndirs", [1, 2])
def test_recover_with_the_commitlog_elsewhere(damaged: Path, tmp_path: Path, ndirs: int, rmq_proc) -> None:
    plain, moved, dirs, conf = layouts(damaged, tmp_path, ndirs)
    original = whole(moved, dirs)
    assert original == whole(plain, [])

    plan = json.loads(rmq_proc("recover", str(moved), "--config", str(conf), "--json", check=True).stdout)
    cl_steps = [s for s in plan["steps"] if "0000000000" in s["path"]]
    assert cl_steps, plan
    for step in cl_steps:  # the real files, not STORE/commitlog/<name>
        assert Path(step["path"]).is_absolute() and Path(step["path"]).is_file(), step
        assert any(Path(step["path"]).parent == d for d in dirs)

    rmq_proc("recover", str(plain), "--yes", check=True)
    applied = json.loads(
        rmq_proc("recover", str(moved), "--config", str(conf), "--yes", "--json", check=True).stdout
    )
    assert applied["applied"] is True
    assert whole(moved, dirs) == whole(plain, [])
    assert not (moved / "commitlog").exists()

    backup = Path(applied["backup"])
    manifest = json.loads((backup / "manifest.json").read_text())
    assert manifest["roots"] == [str(d) for d in dirs]
    # every byte the recover removed from the outside files is in the backup
    assert sum(s["stored"] + s["zeros"] for s in manifest["steps"] if Path(s["path"]).is_absolute()) == sum(
        s["bytesRemoved"] for s in cl_steps
    )
    rmq_proc("restore-backup", str(moved), backup.name, "--yes", check=True)
    assert whole(moved, dirs) == original


def test_truncate_with_the_commitlog_elsewhere(damaged: Path, tmp_path: Path, rmq_proc) -> None:
    plain, moved, dirs, conf = layouts(damaged, tmp_path, 2)
    rmq_proc("recover", str(plain), "--yes", check=True)
    rmq_proc("recover", str(moved), "--config", str(conf), "--yes", check=True)
    recovered = whole(moved, dirs)
    store = Store.open(plain)
    second_file = [r for r in store.commitlog.records() if 65536 < r.position < 131072]
    store.close()
    cut = str(second_file[len(second_file) // 2].position - 10)  # within the second file

    plan = json.loads(
        rmq_proc("truncate", str(moved), "--config", str(conf), "--offset", cut, "--json").stdout
    )
    cl_steps = {s["action"]: s["path"] for s in plan["steps"] if "0000000000" in s["path"]}
    assert set(cl_steps) == {"truncate", "delete"}
    assert all(Path(p).is_absolute() and Path(p).is_file() for p in cl_steps.values())

    rmq_proc("truncate", str(plain), "--offset", cut, "--yes", check=True)
    done = json.loads(
        rmq_proc(
            "truncate", str(moved), "--config", str(conf), "--offset", cut, "--yes", "--json", check=True
        ).stdout
    )
    assert whole(moved, dirs) == whole(plain, [])
    rmq_proc("restore-backup", str(moved), Path(done["backup"]).name, "--yes", check=True)
    assert whole(moved, dirs) == recovered


def test_change_takes_absolute_paths_only_inside_its_roots(tmp_path: Path) -> None:
    from rmqcli.errors import UsageError
    from rmqcli.ops.safety import Change, plan_path

    root, outside, other = tmp_path / "store", tmp_path / "cl", tmp_path / "other"
    for d in (root, outside, other):
        d.mkdir()
    (outside / "00000000000000000000").write_bytes(b"\x01" * 100)
    (other / "x").write_bytes(b"x")
    (root / "checkpoint").write_bytes(bytes(4096))
    assert plan_path(root, outside / "00000000000000000000") == str(outside / "00000000000000000000")
    assert plan_path(root, root / "commitlog" / "0") == "commitlog/0"
    with Change(root, "t", roots=[outside]) as change:
        for bad in (str(other / "x"), str(outside), f"{outside}/../other/x", str(root / ".rmq-backup" / "x")):
            with pytest.raises(UsageError):
                change.truncate_file(bad, 0)
        change.truncate_file(str(outside / "00000000000000000000"), 10)
        change.write_range(str(root / "checkpoint"), 0, b"\x02")  # inside the store: made relative
        stamp = change.timestamp
    steps = json.loads((root / ".rmq-backup" / stamp / "manifest.json").read_text())["steps"]
    assert [s["path"] for s in steps] == [str(outside / "00000000000000000000"), "checkpoint"]
    with pytest.raises(UsageError), Change(root, "t") as change:  # not a root of this change
        change.truncate_file(str(outside / "00000000000000000000"), 0)
    assert os.path.getsize(outside / "00000000000000000000") == 100
