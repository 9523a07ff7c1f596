"""RocketMQ 5's controller-mode files without a broker: ``epochFileCheckpoint`` as 5.1.1's
``CheckpointFile`` writes and reads it, ``brokerIdentity``, and what ``rmq`` makes of a 4.9.8
store (its checkpoint has no confirmPhyOffset: it reads exactly as before)."""

from __future__ import annotations

import json

import pytest

from formats import epoch as efmt
from rmqcli.store import Store
from rmqcli.store.epochs import read_epochs
from tests.support.cli import one_line_error, run_rmq
from tests.support.realfixtures import REAL_ROOT
from tests.support.stores import controller_copy, set_confirm

# CheckpointFile's own javadoc example (5.1.1 common/utils/CheckpointFile.java)
JAVADOC = "2\n773307083\n7-7000\n8-8000\n"


def test_epoch_file_as_the_javadoc_shows_it():
    entries = [efmt.EpochEntry(7, 7000), efmt.EpochEntry(8, 8000)]
    assert efmt.build_epoch_file(entries) == JAVADOC
    parsed = efmt.parse_epoch_file(JAVADOC)
    assert parsed.entries == entries and parsed.crc_ok and parsed.count_ok


@pytest.mark.parametrize(
    ("text", "crc_ok", "count_ok"),
    [
        ("2\n773307084\n7-7000\n8-8000\n", False, True),  # CRC off by one
        ("2\n0\n7-7000\n8-8000\n", True, True),  # 0: NOT_CHECK_CRC_MAGIC_CODE
        ("3\n773307083\n7-7000\n8-8000\n", True, False),
        (
            "1\n" + str(efmt.java_crc32(b"7-7000\nnoise\n")) + "\n7-7000\nnoise\n",
            True,
            True,
        ),  # no entry, in the CRC
    ],
)
def test_epoch_file_checks(text, crc_ok, count_ok):
    parsed = efmt.parse_epoch_file(text)
    assert (parsed.crc_ok, parsed.count_ok) == (crc_ok, count_ok)


@pytest.mark.parametrize("text", ["", "2\n", "x\n1\n", "1\n1\n7-x\n"])
def test_epoch_file_syntax_errors(text):
    with pytest.raises(efmt.EpochSyntaxError):
        efmt.parse_epoch_file(text)


def test_identity():
    ident = efmt.parse_identity("DefaultCluster#broker-a#2")
    assert (ident.cluster, ident.broker_name, ident.broker_id) == ("DefaultCluster", "broker-a", 2)
    with pytest.raises(ValueError):
        efmt.parse_identity("DefaultCluster#broker-a")


def test_bak_stands_in_for_a_damaged_file(tmp_path):
    (tmp_path / efmt.EPOCH_FILE).write_text("2\n1\n7-7000\n8-8000\n")
    (tmp_path / (efmt.EPOCH_FILE + ".bak")).write_text(efmt.build_epoch_file([efmt.EpochEntry(7, 7000)]))
    epochs = read_epochs(tmp_path)
    assert epochs.main.problem and "CRC" in epochs.main.problem
    assert epochs.source == tmp_path / (efmt.EPOCH_FILE + ".bak") and epochs.entries == [
        efmt.EpochEntry(7, 7000)
    ]


@pytest.mark.real
def test_a_4x_store_has_no_confirm_bound():
    """4.9.8 wrote 24 bytes of checkpoint (confirmPhyOffset reads 0) and no controller files: every
    record counts, as before."""
    store = Store.open(REAL_ROOT / "basic-1" / "store")
    try:
        assert not store.controller_mode and store.confirm_bound() is None
        assert store.checkpoint().confirm_phy_offset == 0
    finally:
        store.close()
    out = json.loads(run_rmq("stats", str(REAL_ROOT / "basic-1" / "store"), "--json").stdout)
    assert "confirm" not in out and "unconfirmed" not in out


def _counts(records) -> dict[tuple[str, int], int]:
    out: dict[tuple[str, int], int] = {}
    for r in records:
        out[(r["topic"], r["queueId"])] = out.get((r["topic"], r["queueId"]), 0) + 1
    return out


@pytest.mark.real
def test_confirmed_records_of_a_real_store(tmp_path):
    cut = 2000
    store, records = controller_copy(tmp_path, cut)
    proc = run_rmq("stats", str(store), "--json")
    stats = json.loads(proc.stdout)
    confirmed = {(q["topic"], q["queueId"]): q["messages"] for q in stats["queues"] if q["messages"]}
    assert confirmed == _counts(records[:cut])
    assert stats["confirm"]["unconfirmedRecords"] == len(records) - cut
    assert stats["commitlog"]["maxOffset"] == records[cut]["position"]
    assert f"{len(records) - cut} record(s)" in proc.stderr
    # the records after it were all dispatched by the 4.9.8 broker: units past confirm, a warning
    verify = run_rmq("verify", str(store), "--json")
    report = json.loads(verify.stdout)
    kinds = {k["kind"]: k["severity"] for k in report["kinds"]}
    assert kinds["unconfirmed"] == kinds["cq-past-confirm"] == "warning"
    assert "stale-past-confirm" not in kinds
    assert verify.returncode == 0 and report["summary"]["unconfirmed"] == len(records) - cut
    # a broker.conf saying otherwise wins: no bound
    conf = tmp_path / "broker.conf"
    conf.write_text("enableControllerMode=false\n")
    plain = json.loads(run_rmq("stats", str(store), "--json", "--config", str(conf)).stdout)
    assert "confirm" not in plain and sum(q["messages"] for q in plain["queues"]) == len(records)


@pytest.mark.real
def test_epoch_damage_is_one_line(tmp_path):
    store, _records = controller_copy(tmp_path, 10)
    (store / efmt.EPOCH_FILE).write_text("1\n12345\n1-0\n")  # CRC wrong, no .bak
    proc = run_rmq("verify", str(store))
    assert proc.returncode == 4 and "epoch-file" in proc.stdout
    one_line_error(proc.stderr)
    dump = run_rmq("dump-epoch", str(store))
    assert dump.returncode == 4
    one_line_error(dump.stderr)
    (store / efmt.EPOCH_FILE).write_text(
        efmt.build_epoch_file([efmt.EpochEntry(2, 0), efmt.EpochEntry(1, 10 << 40)])
    )
    report = json.loads(run_rmq("verify", str(store), "--json").stdout)
    messages = [p["message"] for p in report["problems"] if p["kind"] in ("epoch-order", "epoch-offset")]
    assert any("must increase" in m for m in messages) and any("outside the CommitLog" in m for m in messages)


# --- lag, dump-cq and diff-stores on a controller-mode copy of basic-1 --------------------------------
def _progress(group: str) -> dict[tuple[str, int], int]:
    """(topic, queueId) -> #Broker Offset the live 4.9.8 broker answered (``consumerProgress``)."""
    path = REAL_ROOT / "basic-1" / "mqadmin" / f"consumerProgress_{group}.txt"
    rows = [line.split() for line in path.read_text().splitlines()[1:] if line.strip()]
    return {(r[0], int(r[2])): int(r[3]) for r in rows if len(r) > 6 and r[2].isdigit()}


def _first_past(records, cut: int) -> dict[tuple[str, int], int]:
    """(topic, queueId) -> the queue offset of its first record from row ``cut`` on (RocketMQ's dump)."""
    out: dict[tuple[str, int], int] = {}
    for r in records[cut:]:
        out.setdefault((r["topic"], r["queueId"]), r["queueOffset"])
    return out


@pytest.mark.real
def test_lag_counts_only_confirmed_units(tmp_path):
    """The broker offset of each queue stops at its first unit past confirmPhyOffset (5.1.1's reput
    builds none after it); the units cut are counted per row and warned about once."""
    cut = 2000
    store, records = controller_copy(tmp_path, cut)
    served = _progress("GroupB")
    first_past = _first_past(records, cut)
    proc = run_rmq("lag", str(store), "-g", "GroupB", "--json")
    rows = json.loads(proc.stdout)
    assert {(r["topic"], r["queueId"]): r["brokerOffset"] for r in rows} == {
        k: first_past.get(k, v) for k, v in served.items()
    }
    cut_units = {(r["topic"], r["queueId"]): r["unconfirmed"] for r in rows}
    assert cut_units == {k: v - first_past[k] if k in first_past else 0 for k, v in served.items()}
    assert sum(cut_units.values()) > 0
    assert f"{sum(cut_units.values())} consume-queue unit(s)" in proc.stderr
    table = run_rmq("lag", str(store), "-g", "GroupB")
    assert "unconfirmed:" in table.stdout
    # without controller mode every unit counts, as the live broker answered
    conf = tmp_path / "broker.conf"
    conf.write_text("enableControllerMode=false\n")
    plain = json.loads(run_rmq("lag", str(store), "-g", "GroupB", "--json", "--config", str(conf)).stdout)
    assert {(r["topic"], r["queueId"]): r["brokerOffset"] for r in plain} == served
    assert all(r["unconfirmed"] == 0 for r in plain)


@pytest.mark.real
def test_dump_cq_leaves_unconfirmed_units_out(tmp_path):
    cut = 2000
    store, records = controller_copy(tmp_path, cut)
    boundary = records[cut]["position"]
    units = [
        json.loads(line)
        for line in (REAL_ROOT / "basic-1" / "store.cq.jsonl").read_text().splitlines()
        if line.startswith('{"topic":"TopicB","queueId":0,')
    ]
    confirmed = [u["phyOffset"] for u in units if u["phyOffset"] < boundary]
    assert 0 < len(confirmed) < len(units)
    cq_file = next((store / "consumequeue" / "TopicB" / "0").iterdir())
    for source in (["dump-cq", str(store), "-t", "TopicB", "-q", "0"], ["dump-cq", str(cq_file)]):
        proc = run_rmq(*source, "--output", "jsonl")
        assert [json.loads(line)["commitLogOffset"] for line in proc.stdout.splitlines()] == confirmed
        assert f"{len(units) - len(confirmed)} unit(s) point at records from offset {boundary}" in proc.stderr
        every = [
            json.loads(line)
            for line in run_rmq(*source, "--output", "jsonl", "--unconfirmed").stdout.splitlines()
        ]
        assert [u["commitLogOffset"] for u in every] == [u["phyOffset"] for u in units]
        assert [u.get("confirmed", True) for u in every] == [u["phyOffset"] < boundary for u in units]
    assert "NO" in run_rmq("dump-cq", str(cq_file), "--unconfirmed").stdout
    # a CQ file outside any store: dumped whole, as before
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / cq_file.name).write_bytes(cq_file.read_bytes())
    proc = run_rmq("dump-cq", str(alone / cq_file.name), "--output", "jsonl")
    assert len(proc.stdout.splitlines()) == len(units) and "confirmPhyOffset" not in proc.stderr


@pytest.mark.real
def test_diff_stores_compares_confirmed_records(tmp_path):
    """Two replicas whose records past their confirmPhyOffset differ: identical, the tails reported
    as past it; one confirming more: a prefix. Without controller mode the bytes diverge."""
    cut = 2000
    a, records = controller_copy(tmp_path / "a", cut)
    b, _ = controller_copy(tmp_path / "b", cut)
    past = records[cut + 5]
    name = past["file"]
    data = bytearray((b / "commitlog" / name).read_bytes())
    data[past["filePos"] + past["bodyOffsetInRecord"]] ^= 0xFF  # a body byte of an unconfirmed record
    (b / "commitlog" / name).write_bytes(bytes(data))
    proc = run_rmq("diff-stores", str(a), str(b), "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["summary"]["verdict"] == "identical"
    sides = (out["summary"]["a"], out["summary"]["b"])
    assert [s["maxOffset"] for s in sides] == [records[cut]["position"]] * 2
    tails = {r["side"]: r for r in out["ranges"]}
    assert tails["a"]["records"] == tails["a"]["unconfirmed"] == len(records) - cut
    assert tails["b"]["unconfirmed"] == len(records) - cut
    assert all(r["confirmed"] is False for r in out["records"])
    table = run_rmq("diff-stores", str(a), str(b)).stdout
    assert f"{len(records) - cut} past its confirmPhyOffset" in table and "identical" in table
    conf = tmp_path / "broker.conf"
    conf.write_text("enableControllerMode=false\n")
    plain = run_rmq("diff-stores", str(a), str(b), "--json", "--config", str(conf))
    assert plain.returncode == 4 and json.loads(plain.stdout)["summary"]["verdict"] == "diverged"
    set_confirm(b, records[cut + 100]["position"])  # B confirms 100 records more
    out = json.loads(run_rmq("diff-stores", str(a), str(b), "--json").stdout)
    assert out["summary"]["verdict"] == "prefix"
    ranges = [(r["side"], r["records"], r["unconfirmed"]) for r in out["ranges"]]
    assert ranges == [
        ("b", 100, 0),
        ("a", len(records) - cut, len(records) - cut),
        ("b", len(records) - cut - 100, len(records) - cut - 100),
    ]
