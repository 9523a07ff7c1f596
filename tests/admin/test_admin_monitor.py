"""``rmq startMonitoring`` (4.9.8's MonitorService): against ``rmq serve`` with a real C++ consumer
that lags (its one consume thread held while messages arrive) and with the OFFSET_MOVED_EVENT a
moved pull leaves, and against the real 4.9.8 broker, which writes the same events, where the kit's
own ``mqadmin startMonitoring`` logs the same ``[MONITOR]`` lines."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rmqcli.admin.mqclient import PullConsumer
from rmqcli.admin.session import AdminSession
from rmqcli.remoting.json_body import MessageQueue
from tests.admin.runner import closed_port
from tests.support import ROOT
from tests.support.broker_drivers import run_driver
from tests.support.cli import RMQ, one_line_error, rmq_env
from tests.support.components import require
from tests.support.oracle import KIT, Jvm, real_cluster, stop_by_file
from tests.support.served import BROKER, CLUSTER, Served, route, wait_for

# A C++ push consumer with one consume thread; while the block file exists the callback waits,
# so the group's committed offsets stop where the first held message is.
HOLDER = textwrap.dedent(
    r"""
    import json, os, sys, time
    from rocketmq.client import PushConsumer, RecvMessage
    from rocketmq.ffi import dll

    ns, group, topic, out, block, stop = sys.argv[1:7]
    log = open(out, "a", buffering=1)
    c = PushConsumer(group)
    c.set_namesrv_addr(ns)
    c.set_thread_count(1)
    c.set_message_batch_max_size(1)

    def on_message(consumer, handle):
        msg = RecvMessage(handle)
        event = {"key": msg.keys.decode(), "queue": msg.queue_id, "offset": msg.queue_offset}
        log.write(json.dumps(event) + "\n")
        while os.path.exists(block) and not os.path.exists(stop):
            time.sleep(0.05)
        return 0

    dll.Subscribe(c._handle, topic.encode(), b"*")
    c._register_callback(on_message)
    c.start()
    log.write(json.dumps({"started": True}) + "\n")
    while not os.path.exists(stop):
        time.sleep(0.05)
    c.shutdown()
    log.write(json.dumps({"done": True}) + "\n")
    """
)
LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (.*)$")


class Holder:
    def __init__(self, tmp: Path, ns: str, group: str, topic: str):
        (tmp / "holder.py").write_text(HOLDER)
        self.home = tmp / "home"
        self.home.mkdir(exist_ok=True)
        self.out, self.block, self.stop_file = tmp / "holder.jsonl", tmp / "holder.block", tmp / "holder.stop"
        self.out.write_text("")
        args = [ns, group, topic, str(self.out), str(self.block), str(self.stop_file)]
        self.proc = subprocess.Popen(
            [sys.executable, str(tmp / "holder.py"), *args],
            cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**os.environ, "HOME": str(tmp / "home")},
        )  # fmt: skip

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.out.read_text().splitlines() if x.endswith("}")]

    def keys(self) -> list[str]:
        return [e["key"] for e in self.events() if "key" in e]

    def commits(self, topic: str) -> list[int]:
        """The offsets the client committed for ``topic``'s queues, in order (its log's lines)."""
        logs = sorted((self.home / "logs" / "rocketmq-cpp").glob(f"{self.proc.pid}_rocketmq-cpp.log*"))
        text = "".join(path.read_text(errors="replace") for path in logs)
        queue = rf"mq:MessageQueue \[topic={re.escape(topic)}, [^]]*\]"
        return [
            int(n) for n in re.findall(rf"updateConsumeOffsetToBroker of {queue}, its offset is:(\d+)", text)
        ]

    def stop(self) -> None:
        stop_by_file(self.proc, self.stop_file, 30)


def monitor(ns: str, *extra: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RMQ, "startMonitoring", "-n", ns, *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=rmq_env(None),
    )  # fmt: skip


def reports(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


@pytest.mark.cpp
def test_monitor_reports_a_lagging_cpp_consumer(served: Served, tmp_path: Path) -> None:
    s = served
    topic, group = "MonitorTopic", "CG_MONITOR"
    s.rmq("updateTopic", "-c", CLUSTER, "-t", topic, "-r", "4", "-w", "4")
    wait_for(lambda: route(s, topic), f"{topic} in the route")
    holder = Holder(tmp_path, s.ns, group, topic)
    try:
        wait_for(lambda: any(e.get("started") for e in holder.events()), "the C++ consumer to start", 30)
        produce = {"op": "produce", "namesrv": s.ns, "topic": topic, "group": "PG_MONITOR"}
        run_driver(tmp_path, "first", {**produce, "keys": [f"a{i}" for i in range(8)]})
        wait_for(lambda: len(holder.keys()) == 8, "the first 8 messages consumed", 40)

        def offsets() -> dict[int, dict[str, Any]]:
            rows = s.json("consumerProgress", "-g", group)["queues"]
            return {r["queueId"]: r for r in rows if r["topic"] == topic}

        wait_for(lambda: sum(r["consumerOffset"] for r in offsets().values()) == 8, "8 committed", 20)
        holder.block.touch()  # the next message holds the only consume thread
        run_driver(tmp_path, "second", {**produce, "keys": [f"b{i}" for i in range(6)]})
        wait_for(lambda: len(holder.keys()) == 9, "one held message", 40)
        # the C++ client's next offset commit (every 5 s, one line a queue in its log) after the
        # hold: it commits no further than the held message, still 8 in all
        held_at = len(holder.commits(topic))
        wait_for(lambda: len(holder.commits(topic)) >= held_at + 4, "a commit round during the hold", 30)
        assert sum(holder.commits(topic)[held_at : held_at + 4]) == 8
        progress = offsets()
        assert sum(r["brokerOffset"] for r in progress.values()) == 14
        assert sum(r["consumerOffset"] for r in progress.values()) == 8

        done = monitor(s.ns, "--delay", "0", "--rounds", "1", "--json")
        assert done.returncode == 0, done.stderr
        got = reports(done.stdout)
        kinds = [r["kind"] for r in got]
        assert kinds[0] == "beginRound" and kinds[-2:] == ["endRound", "roundSpent"], kinds
        (mine,) = [r for r in got if r["kind"] == "reportUndoneMsgs" and r.get("topic") == topic]
        # what the store says: the diffs, and the last message's store time against lastTimestamp
        diffs = [r["brokerOffset"] - r["consumerOffset"] for r in progress.values()]
        with AdminSession([s.ns]) as session:
            puller = PullConsumer(session)
            delays = []
            for q, r in progress.items():
                if r["lastTimestamp"] > 0:
                    mq = MessageQueue(broker_name=BROKER, queue_id=q, topic=topic)
                    last = puller.pull(mq, "*", r["brokerOffset"] - 1, 1).messages[0]
                    delays.append(last.store_timestamp - r["lastTimestamp"])
        assert (mine["consumerGroup"], mine["undoneMsgsTotal"]) == (group, 6)
        assert mine["undoneMsgsSingleMQ"] == max(diffs)
        assert mine["undoneMsgsDelayTimeMills"] == max([0, *delays]) > 0
        assert mine["text"] == (
            f"[MONITOR] reportUndoneMsgs: UndoneMsgs [consumerGroup={group}, topic={topic}, "
            f"undoneMsgsTotal=6, undoneMsgsSingleMQ={max(diffs)}, "
            f"undoneMsgsDelayTimeMills={mine['undoneMsgsDelayTimeMills']}]"
        )
        # the monitor's own push consumer was online for the round, as MonitorService's is
        assert any(r.get("consumerGroup") == "__MONITOR_CONSUMER" for r in got), kinds

        text = monitor(s.ns, "--delay", "0", "--rounds", "1")
        assert text.returncode == 0, text.stderr
        lines = [LINE.match(line) for line in text.stdout.splitlines()]
        assert all(lines), text.stdout
        bodies = [m.group(1) for m in lines if m]
        assert bodies[0] == "[MONITOR] =========================================beginRound"
        assert bodies[-2] == "[MONITOR] =========================================endRound"
        assert bodies[-1].startswith("Execute one round monitor work, spent timemills: ")
        assert f"[MONITOR] reportUndoneMsgs: UndoneMsgs [consumerGroup={group}, topic={topic}, " \
            f"undoneMsgsTotal=6, undoneMsgsSingleMQ={max(diffs)}, " in text.stdout  # fmt: skip

        # DefaultMonitorListener's process-queue check on the C++ client's real running info, a
        # minute and more later: the held queues are reported as blocked
        from rmqcli.admin.group import consumer_connection, running_info
        from rmqcli.admin.monitor import analyze_process_queue, analyze_subscription

        with AdminSession([s.ns]) as session:
            (conn,) = consumer_connection(session, group).connection_set
            info = running_info(session, group, conn.client_id)
        now = int(time.time() * 1000)
        assert analyze_process_queue(conn.client_id, info, now) == ""
        assert analyze_subscription({conn.client_id: info}, now + 10 * 60 * 1000)
        later = analyze_process_queue(conn.client_id, info, now + 10 * 60 * 1000)
        held = sorted(
            q for mq, q in ((mq, mq.queue_id) for mq in info.mq_table) if info.mq_table[mq].cached_msg_count
        )
        assert held and [re.sub(r"\d+ms$", "", x) for x in later.splitlines()] == [
            f"{conn.client_id} MessageQueue [topic={topic}, brokerName={BROKER}, queueId={q}] "
            "can't consume for a while, maybe blocked, "
            for q in held
        ]
    finally:
        holder.stop()


def moved_pull(ns: str, broker: str, topic: str) -> None:
    """A pull far past the end of an empty queue: PULL_OFFSET_MOVED, and an OffsetMovedEvent."""
    from rmqcli.remoting import headers as hd
    from rmqcli.remoting.codes import RequestCode, ResponseCode

    with AdminSession([ns]) as session:
        header = hd.PullMessageRequestHeader(
            consumer_group="CG_MOVED", topic=topic, queue_id=0, queue_offset=1000, max_msg_nums=1,
            sys_flag=hd.PULL_FLAG_SUBSCRIPTION, commit_offset=0, suspend_timeout_millis=0, subscription="*",
            sub_version=0, expression_type="TAG",
        )  # fmt: skip
        answer = session.call(broker, RequestCode.PULL_MESSAGE, header, ok=(ResponseCode.PULL_OFFSET_MOVED,))
        assert answer.code == ResponseCode.PULL_OFFSET_MOVED


def stored_events(ns: str) -> list[bytes]:
    """The bodies in OFFSET_MOVED_EVENT's queue 0, read with a pull consumer."""
    with AdminSession([ns]) as session:
        queue = MessageQueue(topic="OFFSET_MOVED_EVENT", broker_name=BROKER, queue_id=0)
        found = PullConsumer(session, "CG_EVENT_READER").pull(queue, "*", 0, 32)
    return [m.body for m in found.messages]


def test_a_moved_pull_on_rmq_serve_is_reported_as_a_delete_event(served: Served) -> None:
    """``rmq serve`` writes 4.9.8's OffsetMovedEvent (tags and keys the group, fastjson body) and
    the monitor reports it."""
    s = served
    s.rmq("updateTopic", "-c", CLUSTER, "-t", "MovedHere", "-r", "1", "-w", "1")
    wait_for(lambda: route(s, "MovedHere"), "MovedHere in the route")
    moved_pull(s.ns, s.broker, "MovedHere")
    body = (
        '{"consumerGroup":"CG_MOVED","messageQueue":{"brokerName":"' + BROKER + '","queueId":0,'
        '"topic":"MovedHere"},"offsetNew":0,"offsetRequest":1000}'
    )
    assert body.encode() in stored_events(s.ns)
    done = monitor(s.ns, "--delay", "0", "--rounds", "1", "--json")
    assert done.returncode == 0, done.stderr
    events = [r for r in reports(done.stdout) if r["kind"] == "reportDeleteMsgsEvent"]
    assert [(e["consumerGroup"], e["topic"], e["offsetRequest"], e["offsetNew"]) for e in events] == [
        ("CG_MOVED", "MovedHere", 1000, 0)
    ]


def test_monitor_unreachable_name_server() -> None:
    done = monitor(f"127.0.0.1:{closed_port()}", "--delay", "0", "--rounds", "1")
    assert done.returncode == 5, (done.stdout, done.stderr)
    assert "connection refused" in one_line_error(done.stderr)
    bodies = [m.group(1) for m in map(LINE.match, done.stdout.splitlines()) if m]
    assert bodies[0].endswith("beginRound") and bodies[1].startswith("doMonitorWork Exception: ")
    assert "endRound" not in done.stdout and "Traceback" not in done.stderr


def test_monitor_stops_on_ctrl_c(served: Served) -> None:
    s = served
    proc = subprocess.Popen(
        [*RMQ, "startMonitoring", "-n", s.ns, "--delay", "30"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=rmq_env(None),
    )  # fmt: skip
    try:
        # its consumer of OFFSET_MOVED_EVENT comes online at once, the first round waits 30 s
        conn = wait_for(lambda: _online(s, "__MONITOR_CONSUMER"), "__MONITOR_CONSUMER online", 20)
        assert conn["subscriptionTable"].keys() == {"OFFSET_MOVED_EVENT", "%RETRY%__MONITOR_CONSUMER"}
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert out == ""
    assert _online(s, "__MONITOR_CONSUMER") is None  # unregistered on the way out


def _online(s: Served, group: str) -> dict[str, Any] | None:
    from typer.testing import CliRunner

    from rmqcli.cli.main import app

    result = CliRunner().invoke(app, ["consumerConnection", "-n", s.ns, "-g", group, "--json"])
    return json.loads(result.stdout) if result.exit_code == 0 else None


def test_monitor_options_are_checked() -> None:
    done = monitor("127.0.0.1:1", "--interval", "0")
    assert done.returncode == 2 and "--interval" in one_line_error(done.stderr)


# --- the real 4.9.8 broker -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def real_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    """The real NameServer and Broker; yields their addresses and a directory for more."""
    require("java")
    tmp = tmp_path_factory.mktemp("real-monitor")
    with real_cluster(tmp, "RealCluster", "real-a") as real:
        yield real.namesrv, real.broker, tmp


@pytest.mark.java
def test_monitor_reports_the_real_brokers_offset_moved_events(real_broker: tuple[str, str, Path]) -> None:
    from rmqcli.remoting import headers as hd
    from rmqcli.remoting.codes import RequestCode, ResponseCode

    ns, broker, _ = real_broker
    made = subprocess.run(
        [*RMQ, "updateTopic", "-b", broker, "-t", "MovedTopic", "-r", "1", "-w", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=30, env=rmq_env(None),
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    # a pull far past the end of an empty queue: the broker answers PULL_OFFSET_MOVED and writes
    # an OffsetMovedEvent to OFFSET_MOVED_EVENT
    with AdminSession([ns]) as session:
        header = hd.PullMessageRequestHeader(
            consumer_group="CG_MOVED", topic="MovedTopic", queue_id=0, queue_offset=1000, max_msg_nums=1,
            sys_flag=hd.PULL_FLAG_SUBSCRIPTION, commit_offset=0, suspend_timeout_millis=0, subscription="*",
            sub_version=0, expression_type="TAG",
        )  # fmt: skip
        answer = session.call(broker, RequestCode.PULL_MESSAGE, header, ok=(ResponseCode.PULL_OFFSET_MOVED,))
        assert answer.code == ResponseCode.PULL_OFFSET_MOVED

    # a new __MONITOR_CONSUMER starts at offset 0 of the small queue (QUERY_CONSUMER_OFFSET answers 0)
    done = monitor(ns, "--delay", "0", "--rounds", "1", "--json")
    assert done.returncode == 0, done.stderr
    events = [r for r in reports(done.stdout) if r["kind"] == "reportDeleteMsgsEvent"]
    assert [
        (e["consumerGroup"], e["topic"], e["queueId"], e["offsetRequest"], e["offsetNew"]) for e in events
    ] == [("CG_MOVED", "MovedTopic", 0, 1000, 0)]
    (event,) = events
    assert event["text"] == (
        "[MONITOR] reportDeleteMsgsEvent: DeleteMsgsEvent [offsetMovedEvent=OffsetMovedEvent "
        "[consumerGroup=CG_MOVED, messageQueue=MessageQueue [topic=MovedTopic, brokerName=real-a, "
        "queueId=0], "
        f"offsetRequest=1000, offsetNew=0], eventTimestamp={event['eventTimestamp']}]"
    )
    ours = [r["text"] for r in reports(done.stdout) if r["kind"] != "roundSpent"]

    # the kit's mqadmin startMonitoring writes the same lines to its client log, once the
    # group's offset is back to 0 (its first round comes after 20 s; it never ends by itself)
    with AdminSession([ns]) as session:
        back = hd.UpdateConsumerOffsetRequestHeader(
            consumer_group="__MONITOR_CONSUMER", topic="OFFSET_MOVED_EVENT", queue_id=0, commit_offset=0
        )
        session.call(broker, RequestCode.UPDATE_CONSUMER_OFFSET, back)
    state = real_broker[2] / "mqadmin"
    kit = Jvm([str(KIT / "bin" / "mqadmin"), "startMonitoring", "-n", ns], real_broker[2] / "mqadmin.out",
              {**os.environ, "ORACLE_STATE_DIR": str(state)})  # fmt: skip
    log = state / "logs" / "rocketmq_client.log"
    try:
        wait_for(lambda: log.exists() and "endRound" in log.read_text(), "the kit's first round", 45)
    finally:
        kit.stop()
    theirs = [line.split(" - ", 1)[1] for line in log.read_text().splitlines() if " - [MONITOR] " in line]
    assert theirs == ours, (theirs, ours)

    # the monitor committed what it consumed: a second run reports no event again
    again = monitor(ns, "--delay", "0", "--rounds", "1", "--json")
    assert again.returncode == 0, again.stderr
    assert not [r for r in reports(again.stdout) if r["kind"] == "reportDeleteMsgsEvent"]
    undone = [r for r in reports(again.stdout) if r["kind"] == "reportUndoneMsgs"]
    assert ("__MONITOR_CONSUMER", "OFFSET_MOVED_EVENT", 0) in [
        (r["consumerGroup"], r["topic"], r["undoneMsgsTotal"]) for r in undone
    ]
