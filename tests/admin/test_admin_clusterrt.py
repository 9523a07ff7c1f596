"""clusterRT end to end (4.9.8 ``CLusterSendMsgRTCommand``): ``rmq clusterRT`` against ``rmq serve``
(one server for the module) and against the real 4.9.8 NameServer and Broker of the kit
(``java``): its rows in mqadmin's formats, and the messages it sent found in the topic named
after the broker (its queue's max offset, and the records pulled back)."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from formats.javatext import java_fixed, java_round_half_up
from rmqcli.admin.mqclient import PullConsumer
from rmqcli.admin.session import AdminSession
from rmqcli.cli.admin.format import gmt8_stamp
from rmqcli.remoting import json_body as jb
from tests.support.cli import invoke_rmq, one_line_error
from tests.support.components import require
from tests.support.oracle import KIT
from tests.support.serve import ServeProcess, write_conf

HEADER = "#Cluster Name             #Broker Name              #RT   #successCount  #failCount\n"


def row_pattern(cluster: str, broker: str, success: int, fail: int, rt: str = r"\d+\.\d\d") -> str:
    """mqadmin's row: ``%-24s  %-24s  %-8s  %-16s  %-16s%n`` (trailing spaces kept)."""
    return (
        re.escape(f"{cluster:<24}  {broker:<24}  ")
        + f"({rt}) *"
        + re.escape(f"  {success:<16}  {fail:<16}")
        + "\n"
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    root = tmp_path_factory.mktemp("clusterrt")
    conf = write_conf(root / "broker.conf")
    with ServeProcess(root / "store", conf) as server:
        yield server
        server.stop()


def run(ns: str, *args: str, code: int = 0) -> str:
    result = invoke_rmq("clusterRT", "-n", ns, *args)
    assert result.exit_code == code, (args, result.stdout, result.stderr)
    return result.stdout if code == 0 else result.stderr


def max_offset(ns: str, topic: str) -> int:
    rows = json.loads(invoke_rmq("topicStatus", "-n", ns, "-t", topic, "--json", check=True).stdout)
    return sum(r["maxOffset"] for r in rows)


def stored(ns: str, topic: str, begin: int, end: int) -> list[jb.MessageQueue]:
    """The records of queue 0 of ``topic`` from ``begin`` to ``end``, pulled back."""
    with AdminSession([ns]) as session:
        consumer = PullConsumer(session)
        mq = jb.MessageQueue(broker_name=topic, queue_id=0, topic=topic)
        out: list = []
        offset = begin
        while offset < end:
            result = consumer.pull(mq, "*", offset, 32)
            assert result.status == "FOUND", result.status
            out += result.messages
            offset = result.next_begin_offset
        return out[: end - begin]


def test_rounds_send_to_the_topic_named_after_the_broker(served: ServeProcess) -> None:
    before = max_offset(served.namesrv, "broker-a")
    out = run(served.namesrv, "-a", "5", "-s", "16", "-i", "0", "--rounds", "2")
    assert out.startswith(HEADER) and out.count("#Cluster Name") == 1  # the header once
    assert re.fullmatch(row_pattern("DefaultCluster", "broker-a", 5, 0) * 2, out[len(HEADER) :]), out
    assert max_offset(served.namesrv, "broker-a") == before + 10
    records = stored(served.namesrv, "broker-a", before, before + 10)
    assert [m.body for m in records] == [b"a" * 16] * 10
    # one Message object per broker and round: its five sends share one UNIQ_KEY, as in mqadmin
    keys = [m.properties["UNIQ_KEY"] for m in records]
    assert len(set(keys[:5])) == 1 and len(set(keys[5:])) == 1 and keys[0] != keys[5]
    assert all("TAGS" not in m.properties and "KEYS" not in m.properties for m in records)


def test_one_message_is_nan_and_none_is_minus_zero(served: ServeProcess) -> None:
    before = max_offset(served.namesrv, "broker-a")
    out = run(served.namesrv, "-a", "1", "--rounds", "1")
    assert out == HEADER + f"{'DefaultCluster':<24}  {'broker-a':<24}  {'NaN':<8}  {'1':<16}  {'0':<16}\n"
    out = run(served.namesrv, "-a", "0", "--rounds", "1")
    assert out == HEADER + f"{'DefaultCluster':<24}  {'broker-a':<24}  {'-0.00':<8}  {'0':<16}  {'0':<16}\n"
    assert max_offset(served.namesrv, "broker-a") == before + 1


def test_tlog_lines_with_p_true(served: ServeProcess) -> None:
    before = max_offset(served.namesrv, "broker-a")
    start = datetime.now(UTC) + timedelta(hours=8)
    out = run(served.namesrv, "-a", "4", "-p", "true", "-m", "roomX", "-i", "0", "--rounds", "2")
    lines = out.splitlines(keepends=True)
    assert len(lines) == 2 and "#Cluster Name" not in out
    for line in lines:
        match = re.fullmatch(
            r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\|roomX\|DefaultCluster\|broker-a\|(\d+)\n", line
        )
        assert match, line
        stamp = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
        assert abs((stamp - start.replace(microsecond=0)).total_seconds()) < 60  # GMT+8, not local
    assert max_offset(served.namesrv, "broker-a") == before + 8
    # -p is true only when its value parses as true; -m defaults to noname
    out = run(served.namesrv, "-a", "2", "-p", "yes", "--rounds", "1")
    assert out.startswith(HEADER)
    # mqadmin cannot print NaN as a tlog (BigDecimal of NaN): refused before anything is sent
    err = run(served.namesrv, "-a", "1", "-p", "TRUE", "--rounds", "1", code=2)
    assert "NaN" in one_line_error(err)


def test_unknown_cluster_repeats_without_newline(served: ServeProcess) -> None:
    out = run(served.namesrv, "-c", "NoCluster", "-i", "0", "--rounds", "3")
    assert out == HEADER + "cluster [NoCluster] not exist" * 3
    out = run(served.namesrv, "-c", " DefaultCluster ", "-a", "2", "--rounds", "1")
    assert re.fullmatch(re.escape(HEADER) + row_pattern("DefaultCluster", "broker-a", 2, 0), out), out


def test_a_body_the_client_refuses_counts_as_failures(served: ServeProcess) -> None:
    before = max_offset(served.namesrv, "broker-a")
    out = run(served.namesrv, "-a", "3", "-s", "0", "--rounds", "1")
    assert re.fullmatch(re.escape(HEADER) + row_pattern("DefaultCluster", "broker-a", 0, 3), out), out
    assert max_offset(served.namesrv, "broker-a") == before


def test_json_one_document_per_round(served: ServeProcess) -> None:
    before = max_offset(served.namesrv, "broker-a")
    out = run(served.namesrv, "-a", "3", "-i", "0", "--rounds", "2", "--json")
    decoder, docs, pos = json.JSONDecoder(), [], 0
    while pos < len(out.strip()):
        doc, end = decoder.raw_decode(out, pos)
        docs.append(doc)
        pos = end + 1
    assert [d["round"] for d in docs] == [1, 2]
    for doc in docs:
        (row,) = doc["rows"]
        assert (row["cluster"], row["brokerName"], row["successCount"], row["failCount"]) == (
            "DefaultCluster",
            "broker-a",
            3,
            0,
        )
        assert isinstance(row["rt"], float) and row["rt"] >= 0 and doc["missingCluster"] is None
    assert max_offset(served.namesrv, "broker-a") == before + 6
    doc = json.loads(run(served.namesrv, "-a", "1", "--rounds", "1", "--json"))
    assert doc["rows"][0]["rt"] is None  # NaN
    doc = json.loads(run(served.namesrv, "-c", "Nope", "--rounds", "1", "--json"))
    assert doc == {"round": 1, "rows": [], "missingCluster": "Nope"}


def test_every_cluster_and_broker_in_javas_order() -> None:
    """Brokers of two clusters (one with a slave), in this process: clusters in ``HashMap`` order,
    broker names in ``HashSet`` order, each broker's messages in its own topic, on its master."""
    from formats.javahash import hashmap_order
    from tests.admin.adminserver import AdminServer

    brokers = (("C1", "broker-a", 0), ("C1", "broker-a", 1), ("C1", "broker-b", 0), ("C2", "broker-c", 0))
    with AdminServer(brokers) as s:
        out = run(s.namesrv, "-a", "3", "--rounds", "1")
        expected = [(c, b) for c in hashmap_order(["C1", "C2"]) for b in hashmap_order(
            {"C1": ["broker-a", "broker-b"], "C2": ["broker-c"]}[c]
        )]  # fmt: skip
        pattern = "".join(row_pattern(c, b, 3, 0) for c, b in expected)
        assert re.fullmatch(re.escape(HEADER) + pattern, out), out
        for name in ("broker-a", "broker-b", "broker-c"):
            assert len(s.broker(name).units(name, 0)) == 3
        assert 310 not in s.codes(s.broker("broker-a", 1).addr)
        out = run(s.namesrv, "-c", "C2", "-a", "2", "--rounds", "1")
        assert re.fullmatch(re.escape(HEADER) + row_pattern("C2", "broker-c", 2, 0), out), out


def test_number_formats_are_javas() -> None:
    """``String.format("%.2f")`` rounds the shortest decimal half up; ``BigDecimal(d)`` is exact."""
    assert [java_fixed(x, 2) for x in (0.125, 1.005, 3.888888888888889, -0.0, float("nan"), 7.0)] == [
        "0.13",
        "1.01",
        "3.89",
        "-0.00",
        "NaN",
        "7.00",
    ]
    assert [java_round_half_up(x) for x in (2.5, 0.49, -0.0, 4.6)] == ["3", "0", "0", "5"]
    assert gmt8_stamp(1795670240000) == "2026-11-26 13:17:20"  # 05:17:20 UTC


# --- the real 4.9.8 broker --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    require("java")
    from tests.admin.test_admin_export import real_kit

    with real_kit(tmp_path_factory.mktemp("real-rt")) as (ns, broker, _env):
        yield ns, broker


@pytest.mark.java
def test_rows_and_counts_against_the_real_broker(real: tuple[str, str]) -> None:
    ns, _ = real
    for _ in range(3):  # again while the real broker let a send time out (a very loaded machine)
        before = max_offset(ns, "broker-a")
        out = run(ns, "-a", "6", "-i", "0", "--rounds", "2")
        if all(line.split()[-1] == "0" for line in out.splitlines()[1:]):
            break
    assert re.fullmatch(re.escape(HEADER) + row_pattern("DefaultCluster", "broker-a", 6, 0) * 2, out), out
    assert max_offset(ns, "broker-a") == before + 12
    records = stored(ns, "broker-a", before, before + 12)
    assert [m.body for m in records] == [b"a" * 128] * 12
    assert len({m.properties["UNIQ_KEY"] for m in records}) == 2


@pytest.mark.java
def test_mqadmin_prints_the_same_header_and_rows(real: tuple[str, str], tmp_path: Path) -> None:
    """The kit's mqadmin clusterRT, stopped after its first row: same header, same row layout."""
    ns, _ = real
    from tests.support.oracle import kit_env

    before = max_offset(ns, "broker-a")
    log = tmp_path / "mqadmin.out"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [str(KIT / "bin" / "mqadmin"), "clusterRT", "-n", ns, "-a", "3", "-i", "60"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=kit_env(tmp_path),
        )
    try:
        deadline = time.monotonic() + 60
        while log.read_text().count("\n") < 2:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
    finally:
        proc.kill()
        proc.wait(10)
    text = log.read_text()
    start = text.index("#Cluster Name")
    assert re.fullmatch(re.escape(HEADER) + row_pattern("DefaultCluster", "broker-a", 3, 0), text[start:]), (
        text
    )
    assert max_offset(ns, "broker-a") == before + 3
