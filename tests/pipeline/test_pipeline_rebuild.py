"""``rmq pipeline rebuild`` writes the bytes ``rmq rebuild`` writes, through the same safety machinery."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
from pathlib import Path

import pytest

from rmqcli.cli.main import invoke
from tests.support.stores import broker_lock, store_state, writable_copy


def trees(root: Path) -> dict[str, bytes]:
    """consumequeue/, index/ and checkpoint, byte for byte."""
    out = {}
    for part in ("consumequeue", "index"):
        for p in sorted((root / part).rglob("*")):
            if p.is_file():
                out[str(p.relative_to(root))] = p.read_bytes()
    out["checkpoint"] = (root / "checkpoint").read_bytes()
    return out


def pipeline(*args: str) -> tuple[int, list[dict]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = invoke(["pipeline", "rebuild", *args, "--json"])
    return code, [json.loads(line) for line in out.getvalue().splitlines() if line]


@pytest.fixture(scope="module")
def copies(all_stores, tmp_path_factory, rmq_proc):
    """Per store: a copy rebuilt by ``rmq rebuild --yes`` and a copy for the pipeline. Both lose
    their consume queues and have their index files zeroed (sizes kept: the geometry stays), so
    both rebuild from the CommitLog alone."""
    base = tmp_path_factory.mktemp("rebuild")
    pairs = []
    for i, store in enumerate(all_stores):
        ref = writable_copy(store, base / f"ref{i}")
        mine = writable_copy(store, base / f"mine{i}")
        for root in (ref, mine):
            subprocess.run(["rm", "-rf", str(root / "consumequeue")], check=True)
            for index_file in (root / "index").iterdir():
                size = index_file.stat().st_size
                with open(index_file, "r+b") as handle:
                    handle.truncate(0)
                    handle.truncate(size)
        proc = rmq_proc("rebuild", str(ref), "--yes")
        assert proc.returncode == 0, proc.stderr
        pairs.append((ref, mine))
    return pairs


def test_plan_changes_nothing_then_yes_equals_rmq_rebuild(spark, copies):
    mines = [str(m) for _, m in copies]
    before = [store_state(Path(m)) for m in mines]
    code, plans = pipeline(*mines)
    assert code == 0 and len(plans) == len(mines)
    assert all(not p["applied"] and p["steps"] for p in plans)
    assert [store_state(Path(m)) for m in mines] == before
    code, plans = pipeline(*mines, "--yes")
    assert code == 0 and all(p["applied"] and p["backup"] for p in plans)
    for ref, mine in copies:
        assert trees(mine) == trees(ref), mine
        assert not (mine / ".rmq-staging").exists()
    code, plans = pipeline(*mines, "--yes")  # re-run: nothing differs, nothing to do
    assert code == 0 and all(not p["steps"] for p in plans)


def test_cq_of_one_topic(spark, generated_stores, tmp_path, rmq_proc):
    ref = writable_copy(generated_stores[1], tmp_path / "ref")
    mine = writable_copy(generated_stores[1], tmp_path / "mine")
    for root in (ref, mine):
        subprocess.run(["rm", "-rf", str(root / "consumequeue" / "TopicB")], check=True)
    assert rmq_proc("rebuild", str(ref), "--topic", "TopicB", "--yes").returncode == 0
    code, plans = pipeline(str(mine), "--topic", "TopicB", "--yes")
    assert code == 0 and plans[0]["applied"]
    assert trees(mine) == trees(ref)


def test_refused_while_a_broker_holds_the_lock(spark, generated_stores, tmp_path):
    root = writable_copy(generated_stores[0], tmp_path / "s")
    (root / "lock").touch()
    with broker_lock(root):
        before = store_state(root)
        assert pipeline(str(root), "--yes")[0] == 7
        assert store_state(root) == before


def test_option_errors(generated_stores, rmq_proc):
    proc = rmq_proc("pipeline", "rebuild", str(generated_stores[0]), "--topic", "TopicA", "--index")
    assert proc.returncode == 2 and "--topic" in proc.stderr
    assert rmq_proc("pipeline", "rebuild", str(generated_stores[0]), "--dry-run", "--yes").returncode == 2


def test_a_corrupt_record_is_handled_as_rmq_rebuild_does(spark, generated_stores, tmp_path, rmq_proc):
    ref = writable_copy(generated_stores[1], tmp_path / "ref")
    mine = writable_copy(generated_stores[1], tmp_path / "mine")
    for root in (ref, mine):
        first = sorted((root / "commitlog").iterdir())[0]
        data = bytearray(first.read_bytes())
        data[500_000:500_008] = b"\xee" * 8  # inside some record in the middle of the file
        first.write_bytes(bytes(data))
        subprocess.run(["rm", "-rf", str(root / "consumequeue")], check=True)
    proc = rmq_proc("rebuild", str(ref), "--yes")
    assert proc.returncode == 0, proc.stderr
    code, plans = pipeline(str(mine), "--yes")
    assert code == 0 and plans[0]["applied"]
    assert trees(mine) == trees(ref)
