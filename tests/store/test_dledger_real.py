"""Stores written by a real 4.9.8 DLedger group (``enableDLegerCommitLog=true``): ``rmq stats``,
``dump-commitlog``, ``dump-cq`` and ``verify`` against facts from the real brokers.

Once per module: three brokers n0-n2 on loopback; 40 messages under the first leader, which is
then killed (-9) and restarted; 30 under the second, also killed; 20 under the third. Facts: the
count of SEND_OK answers (``clienttest``), each queue's min/max offset from ``mqadmin topicStatus``
while the group runs, the keys clienttest gives (``K<i>``), and the term each leader took office
in, from its own broker log. Damaged copies: the right one-line error, no traceback.
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
from tests.support.dledger import dledger_group
from tests.support.stores import store_state

pytestmark = pytest.mark.java

TOPIC = "TopicD"
BATCHES = (40, 30, 20)


@dataclass(frozen=True)
class Facts:
    stores: dict[str, Path]  # selfId -> store root
    last_leader: str
    per_term: dict[int, int]  # term -> messages sent while that leader led
    queues: dict[int, tuple[int, int]]  # queueId -> (min, max) offset (mqadmin topicStatus)
    keys: Counter


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Facts:
    home = tmp_path_factory.mktemp("dledger")
    per_term: dict[int, int] = {}
    with dledger_group(home) as g:
        leader = g.leader()
        for i, count in enumerate(BATCHES):
            if i:
                g.kill(leader)
                old, leader = leader, g.leader(not_=leader)
                g.start(old)  # it rejoins as a follower
            term = g.leader_term(leader)
            per_term[term] = per_term.get(term, 0) + g.send(TOPIC, count)
        queues = g.queue_offsets(TOPIC)
        stores = {s: g.store(s) for s in g.ports}
    keys = Counter(f"K{i}" for count in BATCHES for i in range(count))
    return Facts(stores, leader, per_term, queues, keys)


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
    root = shutil.copytree(group.stores[group.last_leader], tmp_path / "store", symlinks=True)
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


@pytest.mark.parametrize(
    "command",
    [["recover", "--yes"], ["recover", "--abnormal", "--yes"], ["rebuild", "--yes"],
     ["truncate", "--offset", "0", "--yes"], ["clean", "--manual", "--yes"]],
    ids=["recover", "recover-abnormal", "rebuild", "truncate", "clean"],
)  # fmt: skip
def test_changes_to_a_dledger_store_are_refused_untouched(
    group: Facts, tmp_path: Path, command: list[str]
) -> None:
    """Until rmq plans changes to a DLedger log, every command that would change the log or the
    queues refuses with one line and leaves every byte as it was."""
    root, _ = _copy(group, tmp_path)
    before = store_state(root, dirs=True)
    proc = run_rmq(command[0], str(root), *command[1:], timeout=120)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stderr.count("\n") == 1 and "does not change it yet" in proc.stderr, proc.stderr
    assert store_state(root, dirs=True) == before
