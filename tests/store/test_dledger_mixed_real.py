"""A store a real 4.9.8 broker wrote first as a plain broker and then in DLedger CommitLog mode
(``enableDLegerCommitLog=true`` set on the existing store, the documented way to DLedger): its old
``commitlog/`` files below ``dividedCommitlogOffset`` and the DLedger entries from there on.

Once per module: a plain broker sends 200 messages to TopicM1 and 150 to TopicM2 (64 KiB files, so
two old CommitLog files), a consumer group reads TopicM1, the broker stops cleanly; the same store
is started again in DLedger mode, a group of one peer (n0), which sends 250 more to TopicM1 and 100
to TopicM3, a second group reads TopicM3, the broker stops. Facts from the real broker only: each
queue's min/max (``mqadmin topicStatus``), the hits of ``queryMsgByKey``, ``consumerProgress`` of
both groups, and the ``dividedCommitlogOffset`` of its "Recover old commitlog" log line.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from formats import dledger as dfmt
from tests.support.cli import run_rmq
from tests.support.oracle import (
    KIT,
    LOADED_MACHINE,
    RealCluster,
    broker_port,
    clienttest_send,
    kit_cluster,
    kit_env,
    kit_mqadmin,
)
from tests.support.serve import free_port
from tests.support.stores import sparse_copy, store_state

pytestmark = pytest.mark.java

FILE_SIZE = 1 << 16  # mappedFileSizeCommitLog: old CommitLog files and DLedger data files alike
OLD = {"TopicM1": 200, "TopicM2": 150}  # sent by the plain broker
NEW = {"TopicM1": 250, "TopicM3": 100}  # sent in DLedger mode
GROUP = "RaftNode00"
_DIVIDED = re.compile(
    r"Recover old commitlog needWriteMagicCode=(\w+) pos=(\d+) file=\S+ dividedCommitlogOffset=(\d+)"
)
_CONSUMED = re.compile(r"consumed \(consume, group (\S+)\): received=(\d+) distinct=(\d+)")


def _conf(store: Path, ns: str, port: int, dledger: bool, raft: int) -> dict[str, str]:
    conf = {
        "brokerClusterName": "DefaultCluster", "brokerName": GROUP, "brokerId": "0",
        "brokerRole": "ASYNC_MASTER", "listenPort": str(port), "haListenPort": str(port + 1),
        "namesrvAddr": ns, "brokerIP1": "127.0.0.1", "brokerIP2": "127.0.0.1",
        "storePathRootDir": str(store), "mappedFileSizeCommitLog": str(FILE_SIZE),
        "diskMaxUsedSpaceRatio": "95", **LOADED_MACHINE,
    }  # fmt: skip
    if dledger:
        conf |= {"enableDLegerCommitLog": "true", "dLegerGroup": GROUP,
                 "dLegerPeers": f"n0-127.0.0.1:{raft}", "dLegerSelfId": "n0"}  # fmt: skip
    return conf


@dataclass
class Broker:
    cluster: RealCluster
    env: dict[str, str]
    conf: Path

    def mqadmin(self, *args: str) -> str:
        return kit_mqadmin(KIT, kit_env(self.cluster.home), self.cluster.namesrv, *args)

    def log(self) -> str:
        logs = sorted((Path(self.env["ORACLE_STATE_DIR"]) / "logs").rglob("*.log"))
        return "\n".join(p.read_text(errors="replace") for p in logs)

    def send(self, topic: str, count: int) -> None:
        clienttest_send(self.cluster.home, self.cluster.namesrv, topic, count)

    def consume(self, topic: str, count: int) -> tuple[str, int]:
        """A new group reads ``topic`` from its first offset: (group, distinct messages)."""
        run = subprocess.run([str(KIT / "bin" / "clienttest"), self.cluster.namesrv, topic, str(count),
                              "consume", "90"], capture_output=True, text=True, timeout=240,
                             env=kit_env(self.cluster.home))  # fmt: skip
        m = _CONSUMED.search(run.stdout)
        assert m, run.stdout[-3000:] + run.stderr[-2000:]
        return m.group(1), int(m.group(3))

    def topic_status(self, topic: str) -> dict[int, tuple[int, int]]:
        rows = [
            ln.split() for ln in self.mqadmin("topicStatus", "-t", topic).splitlines() if ln.startswith(GROUP)
        ]
        assert rows, f"no topicStatus rows for {topic}"
        return {int(r[1]): (int(r[2]), int(r[3])) for r in rows}

    def key_hits(self, topic: str, key: str) -> list[tuple[int, int]]:
        """(queueId, queue offset) of each message ``queryMsgByKey`` finds."""
        out = self.mqadmin("queryMsgByKey", "-t", topic, "-k", key)
        rows = [ln.split() for ln in out.splitlines() if re.match(r"^[0-9A-F]{32}\s", ln)]
        assert rows, out
        return sorted((int(r[1]), int(r[2])) for r in rows)

    def offsets(self) -> tuple[int, int]:
        """(commitLogMinOffset, commitLogMaxOffset) of ``brokerStatus``."""
        out = self.mqadmin("brokerStatus", "-b", self.cluster.broker)
        got = dict(re.findall(r"^(commitLog(?:Min|Max)Offset)\s*:\s*(\d+)", out, re.M))
        assert len(got) == 2, out
        return int(got["commitLogMinOffset"]), int(got["commitLogMaxOffset"])

    def progress(self, group: str) -> dict[tuple[str, int], tuple[int, int]]:
        """(topic, queueId) -> (broker offset, consumer offset) of ``consumerProgress``."""
        out = self.mqadmin("consumerProgress", "-g", group)
        rows = [ln.split() for ln in out.splitlines() if ln.startswith("Topic")]
        assert rows, out
        return {(r[0], int(r[2])): (int(r[3]), int(r[4])) for r in rows}


@contextmanager
def broker(home: Path, store: Path, dledger: bool) -> Iterator[Broker]:
    """The 4.9.8 kit's NameServer and one broker on ``store`` (in DLedger mode: alone in its group,
    so it elects itself), until the block ends (SIGTERM: a clean stop)."""
    home.mkdir(parents=True, exist_ok=True)
    ns_port, port = free_port(), broker_port()
    conf = _conf(store, f"127.0.0.1:{ns_port}", port, dledger, free_port())
    (home / "broker.conf").write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
    env = kit_env(home)
    with kit_cluster(KIT, home, ns_port, port, lambda: env) as cluster:
        yield Broker(cluster, env, home / "broker.conf")


@dataclass(frozen=True)
class Facts:
    store: Path
    conf: Path  # the DLedger-mode broker.conf
    divided: int  # dividedCommitlogOffset (the broker's log)
    wrote_blank: bool  # needWriteMagicCode
    old_end: int  # pos: where the old records ended
    queues: dict[str, dict[int, tuple[int, int]]]  # topic -> queueId -> (min, max), topicStatus
    key_hits: list[tuple[int, int]]  # K5 of TopicM1: (queueId, queue offset), queryMsgByKey
    offsets: tuple[int, int]  # commitLogMinOffset, commitLogMaxOffset (brokerStatus)
    progress: dict[str, dict[tuple[str, int], tuple[int, int]]]  # group -> consumerProgress

    def messages(self) -> int:
        return sum(high - low for queues in self.queues.values() for low, high in queues.values())


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Facts:
    home = tmp_path_factory.mktemp("mixed")
    store = home / "store"
    with broker(home / "plain", store, dledger=False) as b:
        for topic, count in OLD.items():
            b.send(topic, count)
        old_group, got = b.consume("TopicM1", OLD["TopicM1"])
        assert got == OLD["TopicM1"]
    with broker(home / "dledger", store, dledger=True) as b:
        m = _DIVIDED.search(b.log())
        assert m, "no 'Recover old commitlog' line in the broker's log"
        for topic, count in NEW.items():
            b.send(topic, count)
        new_group, got = b.consume("TopicM3", NEW["TopicM3"])
        assert got == NEW["TopicM3"]
        queues = {t: b.topic_status(t) for t in ("TopicM1", "TopicM2", "TopicM3")}
        hits = b.key_hits("TopicM1", "K5")
        progress = {g: b.progress(g) for g in (old_group, new_group)}
        offsets = b.offsets()
        conf = b.conf
    divided, wrote, old_end = int(m.group(3)), m.group(1) == "true", int(m.group(2))
    return Facts(store, conf, divided, wrote, old_end, queues, hits, offsets, progress)


def _json(*args: str) -> list | dict:
    proc = run_rmq(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_broker_divided_the_log_at_a_file_boundary(mixed: Facts) -> None:
    assert mixed.divided % FILE_SIZE == 0 and mixed.divided >= FILE_SIZE * 2
    old = sorted((mixed.store / "commitlog").iterdir())
    data = sorted((mixed.store / "dledger-n0" / "data").iterdir())
    assert int(old[-1].name) + FILE_SIZE == mixed.divided == int(data[0].name)
    assert len(data) >= 2 and mixed.wrote_blank


def test_stats_match_the_broker(mixed: Facts) -> None:
    stats = _json("stats", str(mixed.store))
    log = stats["commitlog"]
    assert (log["minOffset"], log["maxOffset"]) == mixed.offsets
    assert log["records"] == mixed.messages()
    assert {f["kind"] for f in stats["files"]} >= {"commitlog", "dledger", "consumequeue"}
    got = {(q["topic"], q["queueId"]): (q["cqMinOffset"], q["cqMaxOffset"]) for q in stats["queues"]}
    assert got == {(t, q): v for t, queues in mixed.queues.items() for q, v in queues.items()}


def test_dump_commitlog_gives_old_records_then_entries(mixed: Facts) -> None:
    rows = _json("dump-commitlog", str(mixed.store))
    old = [r for r in rows if r["position"] < mixed.divided]
    new = [r for r in rows if r["position"] >= mixed.divided]
    assert len(rows) == mixed.messages()
    assert all(r.get("entryIndex") is None and r.get("entryTerm") is None for r in old)
    assert old[-1]["position"] + old[-1]["totalSize"] == mixed.old_end  # the broker's "pos"
    assert [r["entryIndex"] for r in new] == list(range(len(new)))
    assert new[0]["entryPos"] == mixed.divided
    assert all(r["position"] == r["entryPos"] + dfmt.BODY_OFFSET == r["physicalOffset"] for r in new)
    per_topic = {t: sum(high - low for low, high in q.values()) for t, q in mixed.queues.items()}
    assert Counter(r["topic"] for r in rows) == per_topic


def test_dump_cq_points_at_old_records_and_entries(mixed: Facts) -> None:
    positions = {r["position"]: r for r in _json("dump-commitlog", str(mixed.store))}
    sides = Counter()
    for topic, queues in mixed.queues.items():
        for qid, (low, high) in queues.items():
            path = mixed.store / "consumequeue" / topic / str(qid) / "00000000000000000000"
            units = _json("dump-cq", str(path))
            assert [u["queueOffset"] for u in units] == list(range(low, high))
            for u in units:
                rec = positions[u["commitLogOffset"]]
                assert (rec["topic"], rec["queueId"], rec["queueOffset"], rec["totalSize"]) == (
                    topic, qid, u["queueOffset"], u["size"],
                )  # fmt: skip
                sides[u["commitLogOffset"] < mixed.divided] += 1
    assert sides[True] and sides[False]


def test_dump_index_finds_a_key_in_both_parts(mixed: Facts) -> None:
    found = _json("dump-index", str(mixed.store), "-t", "TopicM1", "-k", "K5")
    hits = [h for h in found["hits"] if h["status"] == "match"]
    assert sorted((h["queueId"], h["queueOffset"]) for h in hits) == mixed.key_hits
    assert sorted(h.get("entryIndex") is None for h in hits) == [False, True]


def test_verify_passes(mixed: Facts) -> None:
    proc = run_rmq("verify", str(mixed.store))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("OK:") and "0 errors, 0 warnings" in proc.stdout


def test_lag_equals_consumer_progress(mixed: Facts) -> None:
    rows = _json("lag", str(mixed.store))
    for group, queues in mixed.progress.items():
        got = {(r["topic"], r["queueId"]): (r["brokerOffset"], r["consumerOffset"]) for r in rows
               if r["group"] == group and not r["topic"].startswith("%RETRY%")}  # fmt: skip
        assert got == queues


def test_serve_refuses_the_store_in_one_line(mixed: Facts, tmp_path: Path) -> None:
    root = shutil.copytree(mixed.store, tmp_path / "store", symlinks=True, copy_function=sparse_copy)
    (root / "lock").unlink(missing_ok=True)
    conf = tmp_path / "broker.conf"
    # the broker's own conf, less the test's send-queue wait (rmq would name it as not implemented)
    lines = [
        line
        for line in mixed.conf.read_text().splitlines(keepends=True)
        if not line.startswith(tuple(LOADED_MACHINE))
    ]
    conf.write_text("".join(lines).replace(f"={mixed.store}\n", f"={root}\n"))
    proc = run_rmq("serve", str(root), "--config", str(conf), timeout=120)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "commitlog/ files below a DLedger log" in proc.stderr and len(proc.stderr.splitlines()) == 1


# --- repairs: a real broker on what rmq wrote ---------------------------------------------------
def _copy(mixed: Facts, tmp_path: Path) -> Path:
    root = shutil.copytree(mixed.store, tmp_path / "store", symlinks=True, copy_function=sparse_copy)
    (root / "lock").unlink(missing_ok=True)
    return root


def _tear_last_entry(root: Path) -> int:
    """Zeros over the last entry (its unit in the index the broker wrote says where): DLedger's
    recovery ends the data there. Returns its pos."""
    index = (root / "dledger-n0" / "index" / "00000000000000000000").read_bytes()
    units = [
        dfmt.INDEX_UNIT_STRUCT.unpack_from(index, at) for at in range(0, len(index), dfmt.INDEX_UNIT_SIZE)
    ]
    _, pos, size, _, _ = [u for u in units if u[0] == dfmt.MAGIC_1][-1]
    data = [p for p in sorted((root / "dledger-n0" / "data").iterdir()) if int(p.name) <= pos][-1]
    with open(data, "r+b") as f:
        f.seek(pos - int(data.name))
        f.write(b"\0" * size)
    return pos


def _rmq_queues(root: Path) -> dict[str, dict[int, tuple[int, int]]]:
    out: dict[str, dict[int, tuple[int, int]]] = {}
    for q in _json("stats", str(root))["queues"]:
        if not q["topic"].startswith("%"):
            out.setdefault(q["topic"], {})[q["queueId"]] = (q["cqMinOffset"], q["cqMaxOffset"])
    return out


def _served_as_rmq_says(root: Path, home: Path) -> None:
    """The 4.9.8 broker in DLedger mode on ``root``: each topic's queues as rmq's stats, and a new
    group consumes every message of each."""
    want = _rmq_queues(root)
    with broker(home, root, dledger=True) as b:
        for topic, queues in want.items():
            assert b.topic_status(topic) == queues, topic
            count = sum(high - low for low, high in queues.values())
            assert b.consume(topic, count)[1] == count, topic


def test_recover_ends_the_log_where_the_broker_does_and_the_broker_serves_it(
    mixed: Facts, tmp_path: Path
) -> None:
    root = _copy(mixed, tmp_path)
    pos = _tear_last_entry(root)
    (root / "abort").touch()
    proc = run_rmq("recover", str(root), "--abnormal", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    stats = _json("stats", str(root))["commitlog"]
    assert (stats["records"], stats["maxOffset"]) == (mixed.messages() - 1, pos)
    assert run_rmq("verify", str(root)).returncode == 0
    assert not (root / "abort").exists()
    _served_as_rmq_says(root, tmp_path / "broker")


def test_rebuild_writes_queues_and_index_the_broker_serves(mixed: Facts, tmp_path: Path) -> None:
    root = _copy(mixed, tmp_path)
    shutil.rmtree(root / "consumequeue")
    shutil.rmtree(root / "index")
    proc = run_rmq("rebuild", str(root), "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _rmq_queues(root) == mixed.queues
    found = _json("dump-index", str(root), "-t", "TopicM1", "-k", "K5")
    assert (
        sorted((h["queueId"], h["queueOffset"]) for h in found["hits"] if h["status"] == "match")
        == mixed.key_hits
    )
    _served_as_rmq_says(root, tmp_path / "broker")


def test_recover_refuses_a_store_before_its_first_start_in_dledger_mode(mixed: Facts, tmp_path: Path) -> None:
    root = _copy(mixed, tmp_path)
    for data in (root / "dledger-n0" / "data").iterdir():
        data.unlink()
    proc = run_rmq("recover", str(root), "--yes")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert "the first start in DLedger mode divides the log" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_clean_and_a_cut_of_the_old_part_are_refused_in_one_line(mixed: Facts, tmp_path: Path) -> None:
    root = _copy(mixed, tmp_path)
    before = store_state(root)
    for args, words in (
        (("clean", str(root), "--yes"), "rmq clean does not take such a store"),
        (("truncate", str(root), "--offset", "0", "--yes"), f"below dividedCommitlogOffset {mixed.divided}"),
    ):
        proc = run_rmq(*args)
        assert proc.returncode == 2 and words in proc.stderr, proc.stdout + proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
    assert store_state(root) == before


def test_diff_stores_compares_the_entries_only(mixed: Facts, tmp_path: Path) -> None:
    """The replicas' DLedger entries are compared; the old commitlog/ files are not entries."""
    same = _copy(mixed, tmp_path / "same")
    proc = run_rmq("diff-stores", str(mixed.store), str(same), "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["summary"]["verdict"] == "identical"
    torn = _copy(mixed, tmp_path / "torn")
    _tear_last_entry(torn)
    proc = run_rmq("diff-stores", str(mixed.store), str(torn), "--json")
    summary = json.loads(proc.stdout)["summary"]
    assert (proc.returncode, summary["verdict"]) == (0, "prefix"), proc.stdout + proc.stderr
