"""Reports and comparisons on stores written by a real 4.9.8 DLedger group (``enableDLegerCommitLog``):
``rmq dump-index``, ``lag``, ``delay-report``, ``tx-report``, ``offset``, ``msgid decode`` and
``diff-stores`` against facts from the real brokers.

Once per module: three brokers n0-n2 on loopback; 40 messages (``clienttest``, keys ``K<i>``) under
the first leader, which is killed (-9) and restarted; 30 under the second; then a small Java program
sends 4 messages delayed by level 18 (2 h: still waiting) and 3 transactional messages whose state
stays unknown (open), printing the offsetMsgId the broker answered; a fresh consumer group consumes
TopicD (``clienttest ... consume``) and 10 more messages are sent after it. Facts, while the group
runs: ``mqadmin consumerProgress``, ``topicStatus`` (TopicD, SCHEDULE_TOPIC_XXXX), ``queryMsgByKey``.
The brokers are then stopped (SIGTERM: config files flushed). ``diff-stores`` compares the replicas,
and copies with a changed term, a torn last entry, or an uncommitted suffix.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from formats import dledger as dfmt
from tests.support.cli import run_rmq
from tests.support.dledger import SELF_IDS, dledger_group
from tests.support.java import run_program
from tests.support.oracle import KIT, kit_env
from tests.support.stores import sparse_copy

pytestmark = pytest.mark.java

TOPIC = "TopicD"
SCHEDULE = "SCHEDULE_TOPIC_XXXX"
DELAYED, HALF, AFTER = 4, 3, 10
CONSUMED = 40 + 30

# sends DELAYED messages at delay level 18 and HALF transactions left unknown; prints each answer
PROGRAM = """
import org.apache.rocketmq.client.producer.*;
import org.apache.rocketmq.common.message.*;
public class DelayTx {
    public static void main(String[] a) throws Exception {
        String ns = a[0], topic = a[1];
        int delayed = Integer.parseInt(a[2]), tx = Integer.parseInt(a[3]);
        long stamp = System.currentTimeMillis();
        DefaultMQProducer p = new DefaultMQProducer("dl_pg_" + stamp);
        p.setNamesrvAddr(ns); p.setInstanceName("dl_p_" + stamp); p.setSendMsgTimeout(30000);
        p.start();
        for (int i = 0; i < delayed; i++) {
            Message m = new Message(topic, "TagD", "D" + i, ("delayed-" + i).getBytes("UTF-8"));
            m.setDelayTimeLevel(18);
            SendResult r = p.send(m);
            System.out.printf("delayed %s %s %s%n", r.getSendStatus(), r.getOffsetMsgId(), r.getMsgId());
        }
        p.shutdown();
        TransactionMQProducer t = new TransactionMQProducer("dl_tx_" + stamp);
        t.setNamesrvAddr(ns); t.setInstanceName("dl_t_" + stamp); t.setSendMsgTimeout(30000);
        t.setTransactionListener(new TransactionListener() {
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return LocalTransactionState.UNKNOW;
            }
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                return LocalTransactionState.UNKNOW;
            }
        });
        t.start();
        for (int i = 0; i < tx; i++) {
            Message m = new Message(topic, "TagT", "T" + i, ("tx-" + i).getBytes("UTF-8"));
            SendResult r = t.sendMessageInTransaction(m, null);
            System.out.printf("half %s %s %s%n", r.getSendStatus(), r.getOffsetMsgId(), r.getMsgId());
        }
        t.shutdown();
    }
}
"""
_ANSWER = re.compile(r"^(delayed|half) (\w+) ([0-9A-F]+|null) ([0-9A-F]+)$", re.M)
_CONSUMED = re.compile(r"consumed \(consume, group (\S+)\)")


@dataclass(frozen=True)
class Facts:
    stores: dict[str, Path]  # selfId -> store root
    confs: dict[str, Path]  # selfId -> broker.conf
    leader: str
    terms: set[int]  # the terms the two leaders took office in (their logs)
    group: str  # the consumer group
    progress: dict[int, tuple[int, int]]  # queueId -> (broker offset, consumer offset), consumerProgress
    schedule: dict[int, tuple[int, int]]  # SCHEDULE_TOPIC_XXXX queueId -> (min, max), topicStatus
    by_key: set[tuple[str, int, int]]  # queryMsgByKey TopicD K5: (msgId, queueId, queueOffset)
    # delayed|half -> (offsetMsgId, msgId) per send (a transaction's answer has no offsetMsgId: "null")
    answers: dict[str, list[tuple[str, str]]]


def _compile(out: Path) -> Path:
    if shutil.which("javac") is None:
        pytest.skip("javac is missing")
    out.mkdir(parents=True)
    (out / "DelayTx.java").write_text(PROGRAM)
    javac = ["javac", "-nowarn", "-d", str(out), "-cp", str(KIT / "lib" / "*"), str(out / "DelayTx.java")]
    made = subprocess.run(javac, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    return out


def _rows(out: str, first: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.split()[:1] == [first]]


def _progress(g, group: str) -> dict[int, tuple[int, int]]:  # noqa: ANN001  (a DLedgerGroup)
    """TopicD's rows of ``consumerProgress -g``, once the consumer's last commit has reached the broker."""
    deadline = time.monotonic() + 120
    while True:
        rows = _rows(g.mqadmin("consumerProgress", "-g", group), TOPIC)
        got = {int(r[2]): (int(r[3]), int(r[4])) for r in rows}
        if sum(c for _, c in got.values()) == CONSUMED:
            return got
        assert time.monotonic() < deadline, f"consumerProgress never showed {CONSUMED} consumed: {rows}"
        time.sleep(2)


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Facts:
    home = tmp_path_factory.mktemp("dledger")
    classes = _compile(home / "classes")
    with dledger_group(home) as g:
        leader = g.leader()
        g.send(TOPIC, 40)
        terms = {g.leader_term(leader)}
        g.kill(leader)
        old, leader = leader, g.leader(not_=leader)
        g.start(old)  # it rejoins as a follower
        terms.add(g.leader_term(leader))
        g.send(TOPIC, 30)
        out = run_program(classes, home, "DelayTx", g.namesrv, TOPIC, str(DELAYED), str(HALF), timeout=300)
        answers: dict[str, list[tuple[str, str]]] = {"delayed": [], "half": []}
        for kind, status, offset_id, msg_id in _ANSWER.findall(out):
            assert status == "SEND_OK", out
            answers[kind].append((offset_id, msg_id))
        assert [len(answers["delayed"]), len(answers["half"])] == [DELAYED, HALF], out
        client = [str(KIT / "bin" / "clienttest"), g.namesrv, TOPIC, str(CONSUMED), "consume", "120"]
        consume = subprocess.run(client, capture_output=True, text=True, timeout=300, env=kit_env(home))
        found = _CONSUMED.search(consume.stdout)
        assert consume.returncode == 0 and found, consume.stdout[-3000:]
        g.send(TOPIC, AFTER)
        progress = _progress(g, found.group(1))
        schedule = {int(r[1]): (int(r[2]), int(r[3])) for r in _rows(g.mqadmin("topicStatus", "-t", SCHEDULE),
                                                                        "RaftNode00")}  # fmt: skip
        hits = g.mqadmin("queryMsgByKey", "-t", TOPIC, "-k", "K5")
        by_key = {(c[0], int(c[1]), int(c[2])) for c in map(str.split, hits.splitlines())
                  if len(c) == 3 and c[1].isdigit() and c[2].isdigit()}  # fmt: skip
        stores = {s: g.store(s) for s in SELF_IDS}
        confs = {s: g.conf(s) for s in SELF_IDS}
    assert len(terms) == 2
    return Facts(stores, confs, leader, terms, found.group(1), progress, schedule, by_key, answers)


def _json(*args: str) -> dict | list:
    proc = run_rmq(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _records(root: Path) -> list[dict]:
    return _json("dump-commitlog", str(root))  # type: ignore[return-value]


# --- dump-index -------------------------------------------------------------------------------------
def test_dump_index_finds_what_query_msg_by_key_finds(group: Facts) -> None:
    """The leader that answered queryMsgByKey: the same hits. A replica that was killed (-9) lost the
    index file its broker had not checkpointed (``IndexService.load`` after an abnormal exit) and
    holds fewer: each of its hits is one of the leader's."""
    assert len(group.by_key) == 3  # K5 was sent in each of the three batches of TopicD
    for self_id, root in group.stores.items():
        rows = {r["position"]: r for r in _records(root)}
        for path in (root, *sorted((root / "index").iterdir())):  # the store, and its index files alone
            proc = run_rmq("dump-index", str(path), "--topic", TOPIC, "--key", "K5", "--json")
            assert proc.returncode in (0, 3) and "Traceback" not in proc.stderr, proc.stderr  # 3: not found
            hits = json.loads(proc.stdout)["hits"]
            assert (proc.returncode == 3) == (not hits)
            found = {(h["uniqKey"], h["queueId"], h["queueOffset"]) for h in hits}
            if self_id == group.leader and path == root:
                assert found == group.by_key
            assert found <= group.by_key, (self_id, path)
            for h in hits:
                rec = rows[h["phyOffset"]]  # index entries hold the entry's pos + 48
                assert h["entryPos"] == h["phyOffset"] - dfmt.BODY_OFFSET == rec["entryPos"]
                assert (h["entryIndex"], h["entryTerm"]) == (rec["entryIndex"], rec["entryTerm"])


# --- lag, delay-report, tx-report -------------------------------------------------------------------
def test_lag_matches_consumer_progress(group: Facts) -> None:
    rows = _json("lag", str(group.stores[group.leader]), "--group", group.group, "--topic", TOPIC)
    got = {r["queueId"]: (r["brokerOffset"], r["consumerOffset"]) for r in rows}  # type: ignore[index]
    assert got == group.progress
    assert sum(r["diff"] for r in rows) == AFTER  # type: ignore[union-attr]


def test_delay_report_matches_the_schedule_queue(group: Facts) -> None:
    root = group.stores[group.leader]
    levels = {r["level"]: r for r in _json("delay-report", str(root))}  # type: ignore[union-attr]
    assert levels[18]["maxOffset"] == group.schedule[17][1] == DELAYED
    assert levels[18]["waiting"] == DELAYED
    assert all(r["waiting"] == 0 for level, r in levels.items() if level != 18)
    waiting = _json("delay-report", str(root), "--list")
    assert sorted(w["keys"] for w in waiting) == [f"D{i}" for i in range(DELAYED)]  # type: ignore[index]
    assert {w["uniqKey"] for w in waiting} == {m for _, m in group.answers["delayed"]}  # type: ignore[index]
    assert {w["topic"] for w in waiting} == {TOPIC}  # type: ignore[index]


def test_tx_report_lists_the_open_transactions(group: Facts) -> None:
    rows = _json("tx-report", str(group.stores[group.leader]))
    pending = [r for r in rows if r["state"] == "pending"]  # type: ignore[index]
    assert sorted(r["keys"] for r in pending) == [f"T{i}" for i in range(HALF)], rows
    assert {r["transactionId"] for r in pending} == {m for _, m in group.answers["half"]}
    assert {r["topic"] for r in pending} == {TOPIC}


# --- offset, msgid ----------------------------------------------------------------------------------
def test_offset_message_ids_point_at_the_records(group: Facts) -> None:
    """The offsetMsgId a DLedger broker answers holds the entry's pos + 48: the record's offset."""
    root = group.stores[group.leader]
    conf = group.confs[group.leader]
    rows = {r["position"]: r for r in _records(root)}
    for offset_id, msg_id in group.answers["delayed"]:
        (decoded,) = _json("msgid", "decode", offset_id, "--config", str(conf))  # type: ignore[misc]
        offset = decoded["offsetId"]["offset"]
        rec = rows[offset]
        assert rec["uniqKey"] == msg_id and rec["entryPos"] == offset - dfmt.BODY_OFFSET
        (place,) = _json("offset", str(offset), "--config", str(conf))  # type: ignore[misc]
        assert (place["file"], place["position"]) == (rec["file"], rec["filePos"])
        assert (root / f"dledger-{group.leader}" / "data" / place["file"]).is_file()


# --- diff-stores ------------------------------------------------------------------------------------
def _diff(a: Path, b: Path) -> tuple[int, dict]:
    proc = run_rmq("diff-stores", str(a), str(b), "--json")
    assert "Traceback" not in proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_replicas_agree_entry_by_entry(group: Facts) -> None:
    lead = group.stores[group.leader]
    count = len(_records(lead))
    for self_id, root in group.stores.items():
        if self_id == group.leader:
            continue
        code, doc = _diff(lead, root)
        assert code == 0, doc
        entries = doc["entries"]
        assert entries["verdict"] in ("identical", "prefix")
        assert entries["a"]["entries"] == count and entries["a"]["lastIndex"] == count - 1
        assert entries["equal"] == entries["b"]["entries"]
        assert set(map(int, entries["a"]["terms"])) == group.terms
        assert entries["a"]["committedIndex"] == count - 1


def _copy(group: Facts, self_id: str, to: Path) -> tuple[Path, Path]:
    root = shutil.copytree(group.stores[self_id], to, symlinks=True, copy_function=sparse_copy)
    (root / "lock").unlink(missing_ok=True)
    return root, root / f"dledger-{self_id}"


def _units(home: Path) -> list[tuple[int, int, int]]:
    """(pos, size, term) of each entry, from the index file the broker wrote."""
    index = (home / "index" / "00000000000000000000").read_bytes()
    out = []
    for at in range(0, len(index), dfmt.INDEX_UNIT_SIZE):
        magic, pos, size, _, term = dfmt.INDEX_UNIT_STRUCT.unpack_from(index, at)
        if magic != dfmt.MAGIC_1:
            break
        out.append((pos, size, term))
    return out


def _follower(group: Facts) -> str:
    return next(s for s in SELF_IDS if s != group.leader)


def test_a_changed_term_is_where_replicas_diverge(group: Facts, tmp_path: Path) -> None:
    self_id = _follower(group)
    root, home = _copy(group, self_id, tmp_path / "copy")
    units = _units(home)
    pos, _, term = units[-1]
    with open(home / "data" / "00000000000000000000", "r+b") as f:
        f.seek(pos + dfmt.ENTRY_AT["term"])
        f.write(struct.pack(">q", term + 1))
    code, doc = _diff(group.stores[group.leader], root)
    assert code == 4
    m = doc["entries"]["mismatch"]
    assert (m["index"], m["what"], m["termA"], m["termB"]) == (len(units) - 1, "term", term, term + 1)
    assert doc["summary"]["divergence"]["offset"] == pos + dfmt.ENTRY_AT["term"] + 7  # the low byte
    text = run_rmq("diff-stores", str(group.stores[group.leader]), str(root))
    assert f"entries diverge at index {len(units) - 1} (term)" in text.stderr
    assert text.stderr.count("\n") == 1


def test_a_torn_last_entry_is_where_replicas_diverge(group: Facts, tmp_path: Path) -> None:
    self_id = _follower(group)
    root, home = _copy(group, self_id, tmp_path / "copy")
    units = _units(home)
    pos, size, _ = units[-1]
    torn = dfmt.BODY_OFFSET + 8  # the entry header, the message's TOTALSIZE and MAGICCODE were written
    with open(home / "data" / "00000000000000000000", "r+b") as f:
        f.seek(pos + torn)
        f.write(b"\0" * (size - torn))
    code, doc = _diff(group.stores[group.leader], root)
    assert code == 4
    m = doc["entries"]["mismatch"]
    assert (m["index"], m["what"]) == (len(units) - 1, "bytes") and torn <= m["byte"] < size
    assert m["recordA"] is None and str(pos + dfmt.BODY_OFFSET) in m["recordB"]
    assert doc["entries"]["equal"] == len(units) - 1


def test_a_rejected_entry_header_ends_a_replicas_entries(group: Facts, tmp_path: Path) -> None:
    root, home = _copy(group, _follower(group), tmp_path / "copy")
    units = _units(home)
    pos = units[5][0]
    with open(home / "data" / "00000000000000000000", "r+b") as f:
        f.seek(pos)
        f.write(struct.pack(">i", 7))
    code, doc = _diff(group.stores[group.leader], root)
    assert code == 4
    entries = doc["entries"]
    assert (entries["verdict"], entries["equal"], entries["b"]["entries"]) == ("diverged", 5, 5)
    assert f"at byte {pos}: bad entry magic 7" in entries["b"]["stopped"]
    (only,) = entries["only"]
    assert (only["side"], only["fromIndex"], only["toIndex"]) == ("a", 5, len(units) - 1)
    proc = run_rmq("diff-stores", str(group.stores[group.leader]), str(root))
    assert proc.stderr.count("\n") == 1 and "B's entries stop at" in proc.stderr, proc.stderr


def test_a_plain_store_is_not_compared_with_a_dledger_store(group: Facts, pristine: Path) -> None:
    proc = run_rmq("diff-stores", str(pristine), str(group.stores[group.leader]))
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert proc.stderr.count("\n") == 1 and "framed differently" in proc.stderr


def test_an_uncommitted_suffix_is_shown(group: Facts, tmp_path: Path) -> None:
    """A: a leader whose log ends 3 entries earlier; B: a follower holding those 3 entries past its
    committedIndex. B's suffix is only B's, all uncommitted: the stores agree where both hold data."""
    a, home_a = _copy(group, group.leader, tmp_path / "a")
    b, home_b = _copy(group, _follower(group), tmp_path / "b")
    units = _units(home_a)
    keep = len(units) - 3
    with open(home_a / "data" / "00000000000000000000", "r+b") as f:
        f.seek(units[keep][0])
        f.write(b"\0" * (units[-1][0] + units[-1][1] - units[keep][0]))
    for home, end in ((home_a, keep - 1), (home_b, len(units) - 1)):
        (home / dfmt.CHECKPOINT_FILE).write_text(f"committedIndex={keep - 1}\nendIndex={end}\n")
    code, doc = _diff(a, b)
    assert code == 0, doc
    entries = doc["entries"]
    assert (entries["verdict"], entries["equal"]) == ("prefix", keep)
    (only,) = entries["only"]
    assert (only["side"], only["fromIndex"], only["toIndex"]) == ("b", keep, len(units) - 1)
    assert only["entries"] == only["uncommitted"] == 3
    text = run_rmq("diff-stores", str(a), str(b)).stdout
    assert f"entries only on B: 3 [{keep}, {len(units) - 1}]" in text and "3 past its committedIndex" in text
