"""Stores written by a real 4.9.8 DLedger group (``enableDLegerCommitLog=true``): ``rmq stats``,
``dump-commitlog``, ``dump-cq`` and ``verify`` against facts from the real brokers.

Once per test run (``tests.support.dledger.three_terms``, shared with the pipeline's tests): three
brokers n0-n2 on loopback; 40 messages under the first leader, which is then killed (-9) and
restarted; 30 under the second, also killed; 20 under the third. Facts: the count of SEND_OK
answers (``clienttest``), each queue's min/max offset from ``mqadmin topicStatus`` while the group
runs, the keys clienttest gives (``K<i>``), and the term each leader took office in, from its own
broker log. Damaged copies: the right one-line error, no traceback.

Repairs (``rmq recover``, ``truncate``, ``rebuild``): a real 4.9.8 broker in DLedger mode, alone in
its group (``tests.support.dledger.lone_broker``), is started on a damaged copy and rmq recovers
another: the entry the broker's recovery ends at (its "Recover data to the end" line), its
checkpoint, its queues (``mqadmin topicStatus``) and rmq's agree; then the broker is started on
what rmq wrote and every message is consumed from it (``clienttest ... consume``).
"""

from __future__ import annotations

import json
import shutil
import struct
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from formats import dledger as dfmt
from tests.support.cli import run_rmq
from tests.support.dledger import THREE_TERMS_BATCHES, THREE_TERMS_TOPIC, lone_broker, three_terms
from tests.support.stores import sparse_copy, store_state

pytestmark = pytest.mark.java

TOPIC = THREE_TERMS_TOPIC
BATCHES = THREE_TERMS_BATCHES


@dataclass(frozen=True)
class Facts:
    stores: dict[str, Path]  # selfId -> store root
    last_leader: str
    per_term: dict[int, int]  # term -> messages sent while that leader led
    queues: dict[int, tuple[int, int]]  # queueId -> (min, max) offset (mqadmin topicStatus)
    keys: Counter


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Facts:
    made = three_terms(tmp_path_factory)
    keys = Counter(f"K{i}" for count in BATCHES for i in range(count))
    return Facts(made.stores, made.last_leader, made.per_term, made.queues, keys)


def _json(*args: str) -> dict | list:
    proc = run_rmq(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_stats_match_the_brokers_queue_offsets(group: Facts) -> None:
    stats = _json("stats", str(group.stores[group.last_leader]))
    assert stats["commitlog"]["records"] == sum(BATCHES)
    assert {f["kind"] for f in stats["files"]} >= {"dledger", "consumequeue", "config", "checkpoint"}
    queues = {q["queueId"]: q for q in stats["queues"] if q["topic"] == TOPIC}
    assert set(queues) == set(group.queues)
    for qid, (low, high) in group.queues.items():
        q = queues[qid]
        assert (q["cqMinOffset"], q["cqMaxOffset"]) == (low, high)
        assert (q["minQueueOffset"], q["maxQueueOffset"], q["messages"]) == (low, high - 1, high - low)


def test_dump_commitlog_gives_entries_terms_and_keys(group: Facts) -> None:
    rows = _json("dump-commitlog", str(group.stores[group.last_leader]))
    assert Counter(" ".join(r["keys"]) for r in rows) == group.keys
    assert Counter(r["entryTerm"] for r in rows) == Counter(group.per_term)
    assert [r["entryIndex"] for r in rows] == list(range(sum(BATCHES)))
    assert all(r["position"] == r["entryPos"] + dfmt.BODY_OFFSET == r["physicalOffset"] for r in rows)


def test_dump_cq_points_at_the_records(group: Facts) -> None:
    root = group.stores[group.last_leader]
    positions = {r["position"]: r for r in _json("dump-commitlog", str(root))}
    for qid, (low, high) in group.queues.items():
        units = _json("dump-cq", str(root / "consumequeue" / TOPIC / str(qid) / "00000000000000000000"))
        assert [u["queueOffset"] for u in units] == list(range(low, high))
        for u in units:
            rec = positions[u["commitLogOffset"]]
            assert (rec["queueId"], rec["queueOffset"], rec["totalSize"]) == (
                qid,
                u["queueOffset"],
                u["size"],
            )


def test_verify_passes_on_every_replica(group: Facts) -> None:
    for self_id, root in group.stores.items():
        proc = run_rmq("verify", str(root))
        assert proc.returncode == 0, (self_id, proc.stdout, proc.stderr)
        assert proc.stdout.splitlines()[-1].startswith("OK:"), proc.stdout  # warnings may precede it


def _copy(group: Facts, tmp_path: Path) -> tuple[Path, Path]:
    root = shutil.copytree(
        group.stores[group.last_leader], tmp_path / "store", symlinks=True, copy_function=sparse_copy
    )
    (root / "lock").unlink(missing_ok=True)
    return root, root / f"dledger-{group.last_leader}"


def _entries(data: Path) -> list[tuple[int, int]]:
    """(pos, size) of every entry, read from the index file the broker wrote (not from the data)."""
    index = (data.parent / "index" / "00000000000000000000").read_bytes()
    units = [dfmt.INDEX_UNIT_STRUCT.unpack_from(index, i * 32) for i in range(sum(BATCHES))]
    return [(u[1], u[2]) for u in units]


def _one_line_error(proc, file: Path, offset: int, words: str) -> None:
    assert proc.returncode == 4, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    rows = [ln.split("\t") for ln in proc.stdout.splitlines()]
    errors = [r for r in rows if r[0] == "error" and len(r) == 5]  # severity kind file offset message
    # the damage is the first error; the units and index entries that point at it follow
    assert (errors[0][1], Path(errors[0][2]).name, errors[0][3]) == (words, file.name, str(offset)), (
        proc.stdout
    )


def test_verify_reports_a_torn_last_entry(group: Facts, tmp_path: Path) -> None:
    root, home = _copy(group, tmp_path)
    data = home / "data" / "00000000000000000000"
    pos, size = _entries(home / "data")[-1]
    with open(data, "r+b") as f:
        f.seek(pos + size // 2)
        f.write(b"\0" * (size - size // 2))
    _one_line_error(run_rmq("verify", str(root)), data, pos + dfmt.BODY_OFFSET, "bad-record")
    proc = run_rmq("stats", str(root))
    assert proc.returncode == 4 and "Traceback" not in proc.stderr
    assert (
        f"{data} at byte {pos + dfmt.BODY_OFFSET}" in proc.stderr
        or str(pos + dfmt.BODY_OFFSET) in proc.stderr
    )


def test_verify_reports_a_bad_entry_magic(group: Facts, tmp_path: Path) -> None:
    root, home = _copy(group, tmp_path)
    data = home / "data" / "00000000000000000000"
    pos, _ = _entries(home / "data")[5]
    with open(data, "r+b") as f:
        f.seek(pos)
        f.write(struct.pack(">i", 7))
    _one_line_error(run_rmq("verify", str(root)), data, pos, "bad-entry")


def test_verify_reports_an_index_unit_past_the_data(group: Facts, tmp_path: Path) -> None:
    root, home = _copy(group, tmp_path)
    index = home / "index" / "00000000000000000000"
    with open(index, "r+b") as f:
        f.seek(3 * dfmt.INDEX_UNIT_SIZE + 4)  # the pos of entry 3's unit
        f.write(struct.pack(">q", 1 << 40))
    _one_line_error(run_rmq("verify", str(root)), index, 3 * dfmt.INDEX_UNIT_SIZE, "index-mismatch")


def test_serve_refuses_a_dledger_store(group: Facts, tmp_path: Path) -> None:
    root, _ = _copy(group, tmp_path)
    proc = run_rmq("serve", str(root), "--port", "1", timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "DLedger" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (root / "commitlog").exists()


def _damage(home: Path, kind: str) -> None:
    """Damage the leader's copy: ``torn`` (the last entry's message half zeroed, header intact),
    ``torn-header`` (the last entry zeroed after its magic), ``magic`` (entry 5's magic 7),
    ``index`` (entry 3's index unit pointing past the data)."""
    data = home / "data" / "00000000000000000000"
    entries = _entries(home / "data")
    with open(data, "r+b") as f, open(home / "index" / "00000000000000000000", "r+b") as index:
        if kind == "torn":
            pos, size = entries[-1]
            f.seek(pos + size // 2)
            f.write(b"\0" * (size - size // 2))
        elif kind == "torn-header":
            pos, size = entries[-1]
            f.seek(pos + 4)
            f.write(b"\0" * (size - 4))
        elif kind == "magic":
            f.seek(entries[5][0])
            f.write(struct.pack(">i", 7))
        else:
            index.seek(3 * dfmt.INDEX_UNIT_SIZE + 4)
            index.write(struct.pack(">q", 1 << 40))


def _rmq_queues(root: Path) -> dict[int, tuple[int, int]]:
    """queueId -> (min, max) offset of ``TOPIC`` from the consume-queue files (``rmq dump-cq``)."""
    out = {}
    for qdir in sorted((root / "consumequeue" / TOPIC).iterdir()):
        units = [u for f in sorted(qdir.iterdir()) for u in _json("dump-cq", str(f))]
        offsets = [u["queueOffset"] for u in units]
        out[int(qdir.name)] = (min(offsets), max(offsets) + 1) if offsets else (0, 0)
    return out


def _checkpoint(home: Path) -> dict[str, int]:
    lines = (home / dfmt.CHECKPOINT_FILE).read_text().split()
    return {k: int(v) for k, v in (line.split("=") for line in lines)}


# (entries kept, consume queues' units): what the real broker keeps on each damaged copy
KEPT = {"torn": 90, "torn-header": 89, "magic": 5, "index": 90}


@pytest.mark.parametrize("kind", list(KEPT))
def test_recover_leaves_what_the_real_broker_leaves(group: Facts, tmp_path: Path, kind: str) -> None:
    theirs, their_home = _copy(group, tmp_path / "broker")
    ours, our_home = _copy(group, tmp_path / "rmq")
    _damage(their_home, kind)
    _damage(our_home, kind)
    proc = run_rmq("recover", str(ours), "--yes", "--json", timeout=300)
    assert proc.returncode == 0, proc.stderr
    details = json.loads(proc.stdout)["details"]
    end, last = details["end"], details["lastIndex"]
    assert last + 1 == KEPT[kind]
    with lone_broker(tmp_path / "run-broker", theirs) as broker:
        assert broker.recovered() == (last, end)
        their_queues = broker.queue_offsets(TOPIC)
    assert their_queues == _rmq_queues(ours)
    assert sum(high - low for low, high in their_queues.values()) == KEPT[kind]
    assert _checkpoint(their_home)["endIndex"] == _checkpoint(our_home)["endIndex"] == last
    assert sorted(p.name for p in (their_home / "data").iterdir()) == sorted(
        p.name for p in (our_home / "data").iterdir()
    )
    again = run_rmq("recover", str(ours), "--yes", timeout=300)  # converged: nothing left to do
    assert again.returncode == 0 and "nothing to do" in again.stdout, again.stdout
    if kind == "torn":  # the broker keeps the torn entry too: its queue cannot be consumed whole
        return
    assert run_rmq("verify", str(ours)).returncode == 0
    with lone_broker(tmp_path / "run-rmq", ours) as broker:
        assert broker.recovered() == (last, end)
        assert broker.queue_offsets(TOPIC) == their_queues
        assert broker.consume(TOPIC, KEPT[kind]) == (KEPT[kind], KEPT[kind])


def test_rebuild_gives_the_brokers_queues_and_serves(group: Facts, tmp_path: Path) -> None:
    root, home = _copy(group, tmp_path)
    before = {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in (root / "consumequeue").rglob("*")
        if p.is_file()
    }
    shutil.rmtree(root / "consumequeue")
    shutil.rmtree(root / "index")
    proc = run_rmq("rebuild", str(root), "--yes", timeout=300)
    assert proc.returncode == 0, proc.stderr
    after = {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in (root / "consumequeue").rglob("*")
        if p.is_file()
    }
    assert after == before  # unit physical offset = entry pos + 48, byte for byte the broker's
    assert run_rmq("verify", str(root)).returncode == 0
    total = sum(BATCHES)
    with lone_broker(tmp_path / "run", root) as broker:
        assert broker.recovered() == (
            total - 1,
            _entries(home / "data")[-1][0] + _entries(home / "data")[-1][1],
        )
        assert broker.queue_offsets(TOPIC) == group.queues
        assert broker.consume(TOPIC, total) == (total, total)


def test_truncate_cuts_before_an_entry(group: Facts, tmp_path: Path) -> None:
    root, home = _copy(group, tmp_path)
    pos, _ = _entries(home / "data")[60]
    proc = run_rmq("truncate", str(root), "--offset", str(pos + dfmt.BODY_OFFSET), "--yes", timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = _json("dump-commitlog", str(root))
    assert [r["entryIndex"] for r in rows] == list(range(60))
    assert _checkpoint(home) == {"committedIndex": 59, "endIndex": 59}
    assert sum(high - low for low, high in _rmq_queues(root).values()) == 60
    assert run_rmq("verify", str(root)).returncode == 0
    data = (home / "data" / "00000000000000000000").read_bytes()
    assert not any(data[pos:])  # the cut entries are zeroed (and backed up)
    again = run_rmq("truncate", str(root), "--offset", str(pos + dfmt.BODY_OFFSET), "--yes", timeout=300)
    assert again.returncode == 0 and "already cut" in again.stdout


def test_a_sound_store_needs_no_recovery(group: Facts, tmp_path: Path) -> None:
    root, _ = _copy(group, tmp_path)
    before = store_state(root, dirs=True)
    for mode in ("--normal", "--abnormal"):
        proc = run_rmq("recover", str(root), mode, "--yes", timeout=300)
        assert proc.returncode == 0 and "nothing to do" in proc.stdout, (proc.stdout, proc.stderr)
    assert store_state(root, dirs=True) == before
