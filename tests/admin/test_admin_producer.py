"""``rmq producer`` (GET_ALL_PRODUCER_INFO, 328) and ``rmq serve``'s answer to it: a real C++
producer on ``rmq serve``; a real Java 4.9.8 producer on the real broker and on ``rmq serve``,
whose answers must have the same shape."""

from __future__ import annotations

import json
import os
import re
import subprocess
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rmqcli.admin.session import AdminSession
from rmqcli.remoting.codes import RequestCode
from tests.admin.runner import closed_port, rmq, rmq_fail, run
from tests.support.broker_drivers import Driver
from tests.support.cli import one_line_error
from tests.support.components import require
from tests.support.oracle import KIT, real_cluster, stop_by_file
from tests.support.served import Served, wait_for

LINE = re.compile(
    r"^producer group \((?P<group>[^)]*)\) instance : clientId=(?P<clientId>[^,]*),"
    r"remoteIP=(?P<remoteIP>/[0-9.]+:\d+), language=(?P<language>[A-Z_]+), version=(?P<version>\d+), "
    r"lastUpdateTimestamp=(?P<lastUpdateTimestamp>\d+)$"
)


def raw_table(ns: str, broker: str) -> bytes:
    """The body of 328 as the broker wrote it."""
    with AdminSession([ns]) as session:
        return bytes(session.call(broker, RequestCode.GET_ALL_PRODUCER_INFO).body)


def producer_json(s: Served, broker: str) -> dict[str, Any]:
    return json.loads(s.rmq("producer", "-b", broker, "--json"))


@pytest.mark.cpp
def test_producer_lists_a_cpp_producer_of_rmq_serve(served: Served, tmp_path: Path) -> None:
    s = served
    # no producer yet: 4.9.8 answers SUCCESS with an empty table, and mqadmin prints nothing
    assert raw_table(s.ns, s.broker) == b'{"data":{}}'
    assert s.rmq("producer", "-b", s.broker) == ""
    assert producer_json(s, s.broker) == {}

    before = int(time.time() * 1000)
    load = Driver(tmp_path, "load", {"op": "load", "namesrv": s.ns, "topic": "ProducerTopic",
                                     "group": "PG_CPP", "prefix": "p", "min": 10, "max": 20})  # fmt: skip
    try:
        load.wait_for(lambda events: any("id" in e for e in events), 30, "a send")
        # the C++ client's first heartbeat to a broker may wait for its 30 s heartbeat period
        table = wait_for(lambda: producer_json(s, s.broker) or None, "PG_CPP registered", 45)
        assert list(table) == ["PG_CPP"]
        (mine,) = table["PG_CPP"]
        (conn,) = s.json("producerConnection", "-g", "PG_CPP", "-t", "ProducerTopic")["connectionSet"]
        assert mine["clientId"] == conn["clientId"] and mine["clientId"].startswith(f"{load.proc.pid}-")
        assert mine["remoteIP"] == "/" + conn["clientAddr"] and mine["remoteIP"].startswith("/127.0.0.1:")
        assert (mine["language"], mine["version"]) == ("CPP", conn["version"])
        assert before <= mine["lastUpdateTimestamp"] <= int(time.time() * 1000)
        text = s.rmq("producer", "-b", s.broker)
        prefix = (  # the timestamp moves on with the producer's heartbeats: at least the one above
            f"producer group (PG_CPP) instance : clientId={mine['clientId']},remoteIP={mine['remoteIP']}, "
            f"language=CPP, version={conn['version']}, lastUpdateTimestamp="
        )
        assert text.startswith(prefix) and text.endswith("\n"), text
        assert mine["lastUpdateTimestamp"] <= int(text[len(prefix) : -1]) <= int(time.time() * 1000)
        assert json.loads(raw_table(s.ns, s.broker))["data"]["PG_CPP"][0]["remoteIP"] == mine["remoteIP"]
    finally:
        load.stop()
    wait_for(lambda: producer_json(s, s.broker) == {}, "PG_CPP gone after its shutdown", 20)


def test_producer_needs_a_reachable_broker() -> None:
    code, err = rmq_fail("producer", "-b", f"127.0.0.1:{closed_port()}")
    assert code == 5 and "connection refused" in err
    missing = run("producer")
    assert missing.returncode == 2 and "--broker" in one_line_error(missing.stderr)


def test_producer_text_of_bodies_a_broker_may_write() -> None:
    """An empty or null list is ``instances are empty``; a null or empty table prints nothing; the
    groups come in ``HashMap`` order (``G_C`` before ``G_B`` here, whatever the wire order)."""
    from rmqcli.admin.group.producers import ProducerTableInfo, ordered
    from rmqcli.cli.admin.format_groups import producer
    from rmqcli.remoting import json_body as jb

    def text(body: bytes) -> str:
        return producer(ordered(jb.decode(ProducerTableInfo, body)))

    one = b'{"clientId":"c@1","language":"JAVA","lastUpdateTimestamp":5,"remoteIP":"/127.0.0.1:9",'
    one += b'"version":409}'
    assert text(b'{"data":{"G_B":null,"G_A":[' + one + b'],"G_C":[]}}') == (
        "producer group (G_A) instance : clientId=c@1,remoteIP=/127.0.0.1:9, language=JAVA, version=409, "
        "lastUpdateTimestamp=5\n"
        "producer group (G_C) instances are empty\n"
        "producer group (G_B) instances are empty\n"
    )
    assert text(b'{"data":null}') == text(b'{"data":{}}') == text(b"{}") == ""


# --- the real 4.9.8 broker and a real Java producer ------------------------------------------------
HOLD_PRODUCER = textwrap.dedent(
    """
    import java.io.File;
    import org.apache.rocketmq.client.producer.DefaultMQProducer;

    public class HoldProducer {
        public static void main(String[] args) throws Exception {
            DefaultMQProducer producer = new DefaultMQProducer(args[1]);
            producer.setNamesrvAddr(args[0]);
            producer.setInstanceName(args[2]);
            producer.start();
            System.out.println("STARTED");
            while (!new File(args[3]).exists()) {
                Thread.sleep(50);
            }
            producer.shutdown();
        }
    }
    """
)


class JavaProducer:
    """``DefaultMQProducer`` of the kit, online until its stop file exists."""

    def __init__(self, classes: Path, ns: str, group: str, instance: str, env: dict[str, str]):
        self.stop_file = classes / f"{instance}.stop"
        self.log = classes / f"{instance}.out"
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(
                ["java", "-Xmx128m", "-cp", f"{classes}:{KIT / 'lib'}/*", "HoldProducer",
                 ns, group, instance, str(self.stop_file)],
                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=classes,
            )  # fmt: skip

    def stop(self) -> None:
        stop_by_file(self.proc, self.stop_file, 20)


@pytest.fixture(scope="module")
def real_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path, dict[str, str]]]:
    """The real NameServer and Broker, and HoldProducer compiled; yields the two addresses, the
    classes directory and the JVMs' environment."""
    require("java")
    tmp = tmp_path_factory.mktemp("real-producer")
    env = {**os.environ, "ORACLE_STATE_DIR": str(tmp / "state")}
    classes = tmp / "classes"
    classes.mkdir()
    (classes / "HoldProducer.java").write_text(HOLD_PRODUCER)
    javac = subprocess.run(
        ["javac", "-cp", f"{KIT / 'lib'}/*", "-d", str(classes), str(classes / "HoldProducer.java")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert javac.returncode == 0, javac.stderr
    with real_cluster(tmp, "RealCluster", "real-a", env=env) as real:
        yield real.namesrv, real.broker, classes, env


def _with_groups(body: bytes, *groups: str) -> bytes | None:
    """``body`` once it has every group: a real broker registers a heartbeat's groups one by one,
    and may answer 328 in between."""
    return body if set(groups) <= json.loads(body)["data"].keys() else None


def _shape(body: bytes) -> list[tuple[str, list[str], list[str]]]:
    """Per group: the group, then the property names of each instance in the order written, then
    the types of their values."""
    table = json.loads(body)
    assert list(table) == ["data"]
    return sorted(
        (group, list(info), [type(v).__name__ for v in info.values()])
        for group, infos in table["data"].items()
        for info in infos
    )


@pytest.mark.java
def test_producer_lists_a_java_producer_alike_on_the_real_broker_and_rmq_serve(
    real_broker: tuple[str, str, Path, dict[str, str]], served: Served
) -> None:
    ns, broker, classes, env = real_broker
    s = served
    assert raw_table(ns, broker) == raw_table(s.ns, s.broker) == b'{"data":{}}'
    producers = [
        JavaProducer(classes, ns, "PG_JAVA", "real", env),
        JavaProducer(classes, s.ns, "PG_JAVA", "serve", env),
    ]
    try:
        seen = {}
        # the Java client heartbeats 1 s after its start, then every 30 s; on a loaded machine its
        # first route look-up may come after that first beat, which then reaches no broker
        for name, (n, b) in {"real": (ns, broker), "serve": (s.ns, s.broker)}.items():
            seen[name] = wait_for(
                lambda n=n, b=b: _with_groups(raw_table(n, b), "PG_JAVA", "CLIENT_INNER_PRODUCER"), name, 75
            )
        # the same groups (the Java client adds CLIENT_INNER_PRODUCER), properties and types
        assert _shape(seen["real"]) == _shape(seen["serve"]), seen
        assert [g for g, _, _ in _shape(seen["real"])] == ["CLIENT_INNER_PRODUCER", "PG_JAVA"]
        for name, (n, b) in {"real": (ns, broker), "serve": (s.ns, s.broker)}.items():
            text = rmq("producer", "-b", b)
            rows = [LINE.match(line) for line in text.splitlines()]
            assert all(rows) and len(rows) == 2, text
            by_group = {m["group"]: m for m in rows if m}
            connections = rmq("producerConnection", "-n", n, "-g", "PG_JAVA", "-t", "TBW102", "--json")
            (conn,) = json.loads(connections)["connectionSet"]
            java = by_group["PG_JAVA"]
            assert java["clientId"] == conn["clientId"] and java["clientId"].endswith(f"@{name}")
            assert java["remoteIP"] == "/" + conn["clientAddr"]
            assert (java["language"], int(java["version"])) == ("JAVA", conn["version"])
            assert by_group["CLIENT_INNER_PRODUCER"]["clientId"] == conn["clientId"]
    finally:
        for p in producers:
            p.stop()
