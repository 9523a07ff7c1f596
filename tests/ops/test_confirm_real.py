"""Stores of a real RocketMQ 5.1.1 controller-mode pair (``tests.support.controller``): the master
goes on alone after its replica is killed, is killed in turn, the stale replica is elected
(``enableElectUncleanMaster``), and the old master rejoins as its slave and is truncated.

Facts from the real brokers: message counts per queue (``mqadmin topicStatus``), the epochs their
logs say they became master in. ``rmq`` must count the records past the checkpoint's
confirmPhyOffset as not in the log (the new master's counts are the old master's confirmed
ones), and flag what the truncation of the old master left: 5.1.1 truncates without zeroing, so
its log keeps records (and consume-queue units) of the old epoch after its new end.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from formats import epoch as efmt
from tests.support.cli import one_line_error, run_rmq
from tests.support.controller import ControllerPair, controller_pair
from tests.support.realfixtures import REAL_ROOT
from tests.support.stores import set_confirm, sparse_copy

pytestmark = [pytest.mark.java, pytest.mark.java5]

TOPIC = "T"
REAL_BASIC = REAL_ROOT / "basic-1"  # written by a real 4.9.8 broker (``controller_copy``)
_MASTER = re.compile(
    r"Change ha to master success, (?:last role is master, )?newMasterEpoch:(\d+), startOffset:(\d+)"
)


@dataclass
class Made:
    lone_master: Path  # the old master killed after writing alone: records past confirmPhyOffset
    replica: Path  # the old master after it rejoined as slave and was truncated (SIGTERM)
    master: Path  # the elected replica, master at the end (SIGTERM)
    alone: dict[int, int]  # queueId -> max offset the old master answered after writing alone
    elected: dict[int, int]  # ... the elected master answered before any new send
    final: dict[int, int]  # ... the elected master answered at the end
    epochs: set[tuple[int, int]]  # (epoch, startOffset) the brokers' logs say they became master at


def _nums(pair: ControllerPair) -> int:
    m = re.search(r"#SyncStateSetNums\s+(\d+)", pair.sync_state_set())
    return int(m.group(1)) if m else -1


def _until(check, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(1)


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, copy_function=sparse_copy)
    return dst


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Made:  # type: ignore[no-untyped-def]
    home = tmp_path_factory.mktemp("controller")
    snaps = tmp_path_factory.mktemp("stores")
    with controller_pair(home) as pair:
        pair.start("b1")
        pair.start("b2")
        m = pair.master()
        s = "b2" if m == "b1" else "b1"
        pair.mqadmin("updateTopic", "-c", "DefaultCluster", "-t", TOPIC, "-r", "4", "-w", "4")
        _until(lambda: _nums(pair) == 2, 120, "both brokers in the SyncStateSet")
        pair.send(TOPIC, 100)  # allAckInSyncStateSet: acknowledged by both
        pair.kill(s)
        _until(lambda: _nums(pair) == 1, 120, "the SyncStateSet shrunk to the master")
        pair.send(TOPIC, 50)
        alone = {q: hi for q, (_lo, hi) in pair.queue_offsets(TOPIC).items()}
        pair.kill(m)
        lone = _copy(pair.store(m), snaps / "lone-master")
        pair.start(s)
        assert pair.master(not_=m) == s
        elected = {q: hi for q, (_lo, hi) in pair.queue_offsets(TOPIC).items()}
        pair.send(TOPIC, 30)
        pair.start(m)
        _until(lambda: _nums(pair) == 2, 180, "the old master back in the SyncStateSet")
        final = {q: hi for q, (_lo, hi) in pair.queue_offsets(TOPIC).items()}
        pair.stop(m)
        pair.stop(s)
        logs = pair.broker_log(m) + pair.broker_log(s)
        epochs = {(int(e), int(o)) for e, o in _MASTER.findall(logs)}
        return Made(lone, _copy(pair.store(m), snaps / "replica"), _copy(pair.store(s), snaps / "master"),
                    alone, elected, final, epochs)  # fmt: skip


def _json(*args: str) -> dict:
    return json.loads(run_rmq(*args, "--json").stdout)


def _per_queue(stats: dict) -> dict[int, int]:
    return {q["queueId"]: q["messages"] for q in stats["queues"] if q["topic"] == TOPIC}


def _verify(store: Path):  # type: ignore[no-untyped-def]
    proc = run_rmq("verify", str(store), "--json")
    return proc, json.loads(proc.stdout)


def _kinds(report: dict) -> dict[str, str]:
    return {k["kind"]: k["severity"] for k in report["kinds"]}


# --- the healthy stores -----------------------------------------------------------------------------
def test_records_past_confirm_are_not_counted(made: Made):
    """The old master's log holds 150 records; its confirmed ones are exactly those the elected
    master had: 5.1.1's count after the unclean election."""
    stats = _json("stats", str(made.lone_master))
    assert _per_queue(stats) == made.elected
    confirm = stats["confirm"]
    assert confirm["unconfirmedRecords"] == sum(made.alone.values()) - sum(made.elected.values())
    assert {r["queueId"]: r["messages"] for r in stats["unconfirmed"]} == {
        q: made.alone[q] - made.elected[q] for q in made.alone if made.alone[q] > made.elected[q]
    }
    assert stats["commitlog"]["maxOffset"] == confirm["confirmPhyOffset"] == confirm["unconfirmedFrom"]


def test_final_stores_count_what_the_master_serves(made: Made):
    for store in (made.master, made.replica):
        assert _per_queue(_json("stats", str(store))) == made.final


def test_verify_is_clean_on_the_healthy_stores(made: Made):
    for store in (made.lone_master, made.master):
        proc, report = _verify(store)
        assert proc.returncode == 0, proc.stdout
        assert report["summary"]["errors"] == 0
    _proc, report = _verify(made.lone_master)
    assert report["summary"]["records"] == sum(made.elected.values())
    assert report["summary"]["unconfirmed"] == sum(made.alone.values()) - sum(made.elected.values())
    assert _kinds(report)["unconfirmed"] == "warning"


def test_dump_commitlog_leaves_unconfirmed_records_out(made: Made):
    plain = run_rmq("dump-commitlog", str(made.lone_master), "--output", "jsonl")
    rows = [json.loads(line) for line in plain.stdout.splitlines()]
    assert len(rows) == sum(made.elected.values())
    past = sum(made.alone.values()) - sum(made.elected.values())
    assert f"{past} record(s) from offset" in plain.stderr
    every = run_rmq("dump-commitlog", str(made.lone_master), "--output", "jsonl", "--unconfirmed")
    rows = [json.loads(line) for line in every.stdout.splitlines()]
    assert len(rows) == sum(made.alone.values())
    assert sum(1 for r in rows if r.get("confirmed") is False) == past


def test_dump_epoch_matches_the_brokers_logs(made: Made):
    for store in (made.master, made.replica):
        dump = _json("dump-epoch", str(store))
        assert {(r["epoch"], r["startOffset"]) for r in dump["epochs"]} == made.epochs
        assert dump["epochFile"]["crcOk"] is True
    rows = _json("dump-epoch", str(made.master))["epochs"]
    assert sum(r["records"] for r in rows) == sum(made.final.values())
    assert rows[-1]["records"] == sum(made.final.values()) - sum(made.elected.values())
    ident = _json("dump-epoch", str(made.master))["brokerIdentity"]
    assert (ident["clusterName"], ident["brokerName"]) == ("DefaultCluster", "broker-a")


def test_dump_checkpoint_shows_the_5x_fields(made: Made):
    cp = _json("dump-checkpoint", str(made.lone_master))
    stats = _json("stats", str(made.lone_master))
    assert cp["confirmPhyOffset"] == stats["confirm"]["confirmPhyOffset"] > 0
    assert "masterFlushedOffset" in cp


# --- what the real truncation left ---------------------------------------------------------------
def test_truncated_replica_keeps_stale_records(made: Made):
    """The old master, truncated to the new epoch's start and fed the new master's records,
    still holds old-epoch records (and units) after them: verify names them, one line, exit 4."""
    proc, report = _verify(made.replica)
    assert proc.returncode == 4
    kinds = _kinds(report)
    assert kinds["stale-past-confirm"] == "error"
    assert kinds["cq-stale"] == "error"
    one_line_error(run_rmq("verify", str(made.replica)).stderr)


# --- damaged copies ------------------------------------------------------------------------------
def test_stale_records_grafted_past_confirm(made: Made, tmp_path):
    """The healthy master with the old master's lost records put back after its end."""
    store = _copy(made.master, tmp_path / "s")
    end = _json("stats", str(store))["commitlog"]["maxOffset"]
    name = "00000000000000000000"
    old = (made.lone_master / "commitlog" / name).read_bytes()
    stale_end = (
        _json("stats", str(made.lone_master))["confirm"]["unconfirmedFrom"]
        + (_json("stats", str(made.lone_master))["confirm"]["unconfirmedBytes"])
    )
    data = bytearray((store / "commitlog" / name).read_bytes())
    data[end:stale_end] = old[end:stale_end]
    (store / "commitlog" / name).write_bytes(bytes(data))
    proc, report = _verify(store)
    assert proc.returncode == 4 and _kinds(report)["stale-past-confirm"] == "error"
    one_line_error(run_rmq("verify", str(store)).stderr)


def test_units_past_confirm(made: Made, tmp_path):
    """confirmPhyOffset set back to where the elected master's epoch began: its own units run past it."""
    store = _copy(made.master, tmp_path / "s")
    start = max(o for _e, o in made.epochs)
    set_confirm(store, start)
    proc, report = _verify(store)
    kinds = _kinds(report)
    assert kinds["cq-past-confirm"] == "warning" and kinds["unconfirmed"] == "warning"
    assert report["summary"]["unconfirmed"] == sum(made.final.values()) - sum(made.elected.values())
    assert proc.returncode == 0


def test_confirm_past_the_end(made: Made, tmp_path):
    store = _copy(made.master, tmp_path / "s")
    set_confirm(store, 1 << 30)
    proc, report = _verify(store)
    assert proc.returncode == 4 and _kinds(report)["confirm-past-end"] == "error"
    one_line_error(run_rmq("verify", str(store)).stderr)


def test_bad_epoch_crc(made: Made, tmp_path):
    store = _copy(made.master, tmp_path / "s")
    main = store / efmt.EPOCH_FILE
    lines = main.read_text().split("\n")
    lines[1] = str(int(lines[1]) ^ 1)
    main.write_text("\n".join(lines))
    bak = store / (efmt.EPOCH_FILE + efmt.BAK_SUFFIX)
    proc, report = _verify(store)
    if bak.exists():  # the broker loads the .bak: a warning
        assert _kinds(report)["epoch-file"] == "warning" and proc.returncode == 0
        bak.write_text(main.read_text())
        proc, report = _verify(store)
    assert _kinds(report)["epoch-file"] == "error" and proc.returncode == 4
    err = one_line_error(run_rmq("dump-epoch", str(store)).stderr)
    assert "epochFileCheckpoint" in err


# --- recover ---------------------------------------------------------------------------------------
def test_recover_keeps_unconfirmed_records_undispatched(made: Made, tmp_path):
    """``recoverAbnormally`` in controller mode: the CommitLog stays whole, only the confirmed
    records are re-dispatched, confirmPhyOffset stays (it is within the log)."""
    store = _copy(made.lone_master, tmp_path / "s")
    shutil.rmtree(store / "consumequeue")
    before = _json("dump-checkpoint", str(store))["confirmPhyOffset"]
    run_rmq("recover", str(store), "--yes", check=True)
    assert not (store / "abort").exists()
    assert _json("dump-checkpoint", str(store))["confirmPhyOffset"] == before
    stats = _json("stats", str(store))
    assert _per_queue(stats) == made.elected
    assert {q["queueId"]: q["cqMaxOffset"] for q in stats["queues"]} == made.elected
    assert stats["confirm"]["unconfirmedRecords"] == sum(made.alone.values()) - sum(made.elected.values())
    proc, _report = _verify(store)
    assert proc.returncode == 0, proc.stdout


# --- recover against the real 5.1.1 broker --------------------------------------------------------
def _units(store: Path) -> dict[str, list[bytes]]:
    """Queue (``topic/queueId``) -> its 20-byte units up to the first empty one, non-empty queues only."""
    out = {}
    for qdir in sorted(p for p in (store / "consumequeue").glob("*/*") if p.is_dir()):
        units = []
        for f in sorted(qdir.iterdir()):
            data = f.read_bytes()
            for at in range(0, len(data) - 19, 20):
                if data[at : at + 20] == bytes(20):
                    break
                units.append(data[at : at + 20])
        if units:
            out[qdir.relative_to(store / "consumequeue").as_posix()] = units
    return out


def _real_start(store: Path, home: Path, **settings: str) -> str:
    """The real 5.1.1 broker in controller mode started on ``store`` with no controller to reach: it
    recovers the store as it loads and stays a slave (no master is named), then is stopped by
    SIGTERM (files flushed; ``abort`` stays while records wait past the confirm offset). Returns
    its logs. ``settings``: more broker.conf keys (the store's file sizes)."""
    from tests.admin.runner import closed_port
    from tests.support.oracle import Jvm, broker_port
    from tests.support.oracle5 import KIT5, kit5_env

    home.mkdir(parents=True)
    port = broker_port()
    conf = {
        "brokerClusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": "-1",
        "brokerRole": "SLAVE",
        "enableControllerMode": "true", "controllerAddr": f"127.0.0.1:{closed_port()}",
        "allAckInSyncStateSet": "true", "listenPort": str(port), "haListenPort": str(port + 1),
        "namesrvAddr": f"127.0.0.1:{closed_port()}", "brokerIP1": "127.0.0.1", "brokerIP2": "127.0.0.1",
        "storePathRootDir": str(store), "mappedFileSizeCommitLog": "1048576", "diskMaxUsedSpaceRatio": "95",
        **settings,
    }  # fmt: skip
    (home / "broker.conf").write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
    env = kit5_env(home)
    jvm = Jvm([str(KIT5 / "bin" / "broker"), "-c", str(home / "broker.conf")], home / "broker.out", env)
    try:
        jvm.wait_for("boot success", 120)
    finally:
        jvm.stop()
    logs = sorted(Path(env["ORACLE5_STATE_DIR"]).rglob("*.log"))
    return "\n".join(p.read_text(errors="replace") for p in logs)


def _damaged(made: Made, kind: str, into: Path) -> Path:
    """``abnormal``: the lone master (killed: ``abort`` present) without its consume queues;
    ``confirm-back``: the final master with confirmPhyOffset set back to its epoch's start;
    ``confirm-past``: ... set past its end; ``grafted``: the old master's lost records put back
    after the final master's end; ``epoch-crc``: the final master with the crc line of its
    epochFileCheckpoint and of its ``.bak`` flipped (5.1.1's ``CheckpointFile.read`` fails on both
    and the broker goes on with no epochs)."""
    if kind == "epoch-crc":
        store = _copy(made.master, into)
        for name in (efmt.EPOCH_FILE, efmt.EPOCH_FILE + efmt.BAK_SUFFIX):
            path = store / name
            if path.exists():
                lines = path.read_text().split("\n")
                lines[1] = str(int(lines[1]) ^ 1)
                path.write_text("\n".join(lines))
        return store
    if kind == "abnormal":
        store = _copy(made.lone_master, into)
        shutil.rmtree(store / "consumequeue")
        assert (store / "abort").exists()
        return store
    store = _copy(made.master, into)
    if kind == "confirm-back":
        set_confirm(store, max(o for _e, o in made.epochs))
    elif kind == "confirm-past":
        set_confirm(store, 1 << 30)
    else:
        end = _json("stats", str(store))["commitlog"]["maxOffset"]
        confirm = _json("stats", str(made.lone_master))["confirm"]
        stale_end = confirm["unconfirmedFrom"] + confirm["unconfirmedBytes"]
        name = "00000000000000000000"
        data = bytearray((store / "commitlog" / name).read_bytes())
        data[end:stale_end] = (made.lone_master / "commitlog" / name).read_bytes()[end:stale_end]
        (store / "commitlog" / name).write_bytes(bytes(data))
    return store


@pytest.mark.parametrize("kind", ["abnormal", "confirm-back", "confirm-past", "grafted", "epoch-crc"])
def test_recover_leaves_what_the_real_broker_leaves(made: Made, tmp_path: Path, kind: str):
    """``rmq recover --yes`` on one damaged copy, the real 5.1.1 broker started on another in
    controller mode with a ``controllerAddr`` and NameServer nobody listens on: it loads and
    recovers its store as any 5.1.1 broker (``CommitLog.recoverNormally``/``recoverAbnormally``
    bounded by ``getConfirmOffset``), then waits as a SLAVE for a controller that never answers (no
    ``changeToMaster`` re-dispatching everything, no HA client truncating). Both leave the same
    consume-queue units, confirmPhyOffset, CommitLog bytes up to the recovered end, epoch file, and
    messages served per queue."""
    ours, theirs = _damaged(made, kind, tmp_path / "rmq"), _damaged(made, kind, tmp_path / "broker")
    proc = run_rmq("recover", str(ours), "--yes", timeout=300)
    assert proc.returncode == 0, proc.stderr
    stats = _json("stats", str(ours))
    end = stats["commitlog"]["maxOffset"] + stats.get("confirm", {}).get("unconfirmedBytes", 0)
    log = _real_start(theirs, tmp_path / "run")
    assert "recover physics file end" in log, log[-3000:]
    assert ("last shutdown abnormally" in log) == (kind == "abnormal")
    assert _units(ours) == _units(theirs)
    confirm = [_json("dump-checkpoint", str(s))["confirmPhyOffset"] for s in (ours, theirs)]
    assert confirm[0] == confirm[1], confirm
    names = [sorted(p.name for p in (s / "commitlog").iterdir()) for s in (ours, theirs)]
    assert names[0] == names[1]
    size = 1 << 20
    for name in names[0]:
        base = int(name)
        if base >= end:
            continue
        cut = min(size, end - base)
        assert (ours / "commitlog" / name).read_bytes()[:cut] == (theirs / "commitlog" / name).read_bytes()[
            :cut
        ]
    if kind == "epoch-crc":
        assert "Error happen when init epoch entries from epochFile" in log
    epochs = [
        (s / efmt.EPOCH_FILE).read_bytes() if (s / efmt.EPOCH_FILE).exists() else None for s in (ours, theirs)
    ]
    assert epochs[0] == epochs[1]
    assert _per_queue(_json("stats", str(ours))) == _per_queue(_json("stats", str(theirs)))
    assert run_rmq("recover", str(ours), "--yes").returncode == 0  # converged
    if kind == "abnormal":
        assert sum(len(u) for q, u in _units(ours).items() if q.startswith(f"{TOPIC}/")) == sum(
            made.elected.values()
        )


# --- lag, dump-cq and diff-stores ----------------------------------------------------------------
def _with_group(store: Path, into: Path) -> Path:
    """A copy of ``store`` whose config/consumerOffset.json has group G at offset 0 of every queue of
    T (the pair served no consumer)."""
    copy = _copy(store, into)
    (copy / "config").mkdir(exist_ok=True)
    table = {f"{TOPIC}@G": {str(q): 0 for q in range(4)}}
    (copy / "config" / "consumerOffset.json").write_text(json.dumps({"offsetTable": table}))
    return copy


def test_lag_counts_what_the_elected_master_served(made: Made, tmp_path):
    """The old master's queues held the units of its lone sends (topicStatus answered ``alone``); the
    broker offset counts the confirmed ones only: what the elected master answered."""
    store = _with_group(made.lone_master, tmp_path / "s")
    proc = run_rmq("lag", str(store), "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["queueId"]: r for r in json.loads(proc.stdout) if r["topic"] == TOPIC}
    assert {q: r["brokerOffset"] for q, r in rows.items()} == made.elected
    assert {q: r["brokerOffset"] + r["unconfirmed"] for q, r in rows.items()} == made.alone
    past = sum(made.alone.values()) - sum(made.elected.values())
    assert past > 0 and f"{past} consume-queue unit(s)" in proc.stderr
    final = _with_group(made.master, tmp_path / "m")
    rows = {r["queueId"]: r for r in _json("lag", str(final)) if r["topic"] == TOPIC}
    assert {q: r["brokerOffset"] for q, r in rows.items()} == made.final
    assert all(r["unconfirmed"] == 0 for r in rows.values())


def test_dump_cq_leaves_unconfirmed_units_out(made: Made):
    for q in made.alone:
        qdir = made.lone_master / "consumequeue" / TOPIC / str(q)
        for source in ([str(made.lone_master), "-t", TOPIC, "-q", str(q)], [str(sorted(qdir.iterdir())[0])]):
            plain = run_rmq("dump-cq", *source, "--output", "jsonl")
            assert len(plain.stdout.splitlines()) == made.elected[q]
            every = run_rmq("dump-cq", *source, "--output", "jsonl", "--unconfirmed")
            rows = [json.loads(line) for line in every.stdout.splitlines()]
            assert len(rows) == made.alone[q]
            assert sum(r.get("confirmed") is False for r in rows) == made.alone[q] - made.elected[q]


def test_diff_stores_reports_the_unconfirmed_tail(made: Made):
    """The old master against the elected one: they agree up to the old master's confirmPhyOffset,
    the elected master holds its new epoch's records after it (confirmed: a prefix), and the old
    master's lone records at the same offsets are its unconfirmed tail, not a divergence."""
    proc = run_rmq("diff-stores", str(made.lone_master), str(made.master), "--json")
    assert proc.returncode == 0, proc.stdout
    out = json.loads(proc.stdout)
    assert out["summary"]["verdict"] == "prefix"
    ranges = {(r["side"], r["unconfirmed"] > 0): r for r in out["ranges"]}
    assert set(ranges) == {("a", True), ("b", False)}
    lone = sum(made.alone.values()) - sum(made.elected.values())
    assert ranges[("a", True)]["records"] == ranges[("a", True)]["unconfirmed"] == lone
    assert ranges[("b", False)]["records"] == sum(made.final.values()) - sum(made.elected.values())
    table = run_rmq("diff-stores", str(made.lone_master), str(made.master)).stdout
    assert f"{lone} past its confirmPhyOffset" in table
    # the truncated old master against its new master: their confirmed records agree
    proc = run_rmq("diff-stores", str(made.master), str(made.replica), "--json")
    assert proc.returncode == 0, proc.stdout
    out = json.loads(proc.stdout)
    assert out["summary"]["verdict"] == "identical"
    assert all(r["records"] == r["unconfirmed"] for r in out["ranges"])


@pytest.mark.real
def test_real_recovery_keeps_units_past_confirm(tmp_path: Path):
    """5.1.1's recovery cuts consume queues at the log's end, not at confirmPhyOffset: the units past
    it stay until a rejoin truncates them. ``rmq lag`` counts them apart (``unconfirmed``): with the
    confirmed ones, they are every unit the real broker kept; the confirmed ones end at the first
    record past the bound (RocketMQ's own dump of basic-1)."""
    from tests.support.stores import controller_copy

    cut = 2000
    store, records = controller_copy(tmp_path, cut)
    table = {"offsetTable": {"TopicB@G": {str(q): 0 for q in range(8)}}}
    (store / "config" / "consumerOffset.json").write_text(json.dumps(table))
    conf = json.loads((REAL_BASIC / "expected.json").read_text())["variants"]["store"]["facts"][
        "store_config"
    ]
    log = _real_start(store, tmp_path / "run", **{k: str(v) for k, v in conf.items()})
    assert "recover physics file end" in log, log[-3000:]
    kept = {int(q.split("/")[1]): len(u) for q, u in _units(store).items() if q.startswith("TopicB/")}
    first_past: dict[int, int] = {}
    for r in records[cut:]:
        if r["topic"] == "TopicB":
            first_past.setdefault(r["queueId"], r["queueOffset"])
    assert any(kept[q] > first_past.get(q, kept[q]) for q in kept)  # units past the bound were kept
    rows = {r["queueId"]: r for r in _json("lag", str(store), "-g", "G")}
    assert {q: r["brokerOffset"] for q, r in rows.items()} == {
        q: first_past.get(q, n) for q, n in kept.items()
    }
    assert {q: r["brokerOffset"] + r["unconfirmed"] for q, r in rows.items()} == kept
