"""mqadmin commands that need online clients (a real C++ consumer, a hand-made client answering
relayed requests) and the clean-ups on a store of their own, against ``rmq serve``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fixtures.generate import SentMessage
from rmqcli.cli.main import app
from rmqcli.remoting.codec import RemotingCommand
from tests.support.served import (
    BROKER,
    CLUSTER,
    CQ_UNITS_PER_FILE,
    Served,
    dispatched,
    route,
    start,
    wait_for,
)

# --- an online C++ consumer --------------------------------------------------------------------
LIVE = textwrap.dedent(
    r"""
    import json, sys
    from rocketmq.client import Message, Producer, PushConsumer

    ns, group, topic = sys.argv[1:4]
    got = []
    consumer = PushConsumer(group)
    consumer.set_namesrv_addr(ns)
    consumer.subscribe(topic, lambda m: got.append([m.keys.decode(), m.queue_id, m.queue_offset]), "*")
    producer = Producer("PG_LIVE")
    producer.set_namesrv_addr(ns)
    producer.start()
    consumer.start()
    print("STARTED", flush=True)
    for line in sys.stdin:
        words = line.split()
        if words[0] == "send":
            m = Message(topic)
            m.set_keys(words[1])
            m.set_body(words[1])
            print(json.dumps({"sent": producer.send_sync(m).msg_id}), flush=True)
        elif words[0] == "got":
            print(json.dumps({"got": list(got)}), flush=True)
        elif words[0] == "quit":
            break
    consumer.shutdown()
    producer.shutdown()
    print(json.dumps({"bye": True}), flush=True)
    """
)


class LiveClient:
    """A C++ push consumer and producer in a child process, driven line by line over stdin."""

    def __init__(self, root: Path, ns: str, group: str, topic: str):
        script = root / "live.py"
        script.write_text(LIVE)
        home = root / "home"
        home.mkdir(exist_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, str(script), ns, group, topic],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            cwd=root, env={**os.environ, "HOME": str(home)},
        )  # fmt: skip
        assert self.readline() == "STARTED"

    def readline(self, timeout: float = 30.0) -> str:
        import selectors

        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout):
                raise AssertionError("the C++ client did not answer")
        return self.proc.stdout.readline().strip()

    def ask(self, line: str) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return json.loads(self.readline())

    def got(self) -> list[list[Any]]:
        return self.ask("got")["got"]

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.ask("quit")
                self.proc.wait(20)
            except (AssertionError, OSError, ValueError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(10)


@pytest.mark.cpp
def test_online_consumer_commands(served: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = served
    s.rmq("updateTopic", "-c", CLUSTER, "-t", "LiveTopic", "-r", "4", "-w", "4")
    wait_for(lambda: route(s, "LiveTopic"), "LiveTopic in the route")
    before_sends = int(time.time() * 1000) - 1
    client = LiveClient(tmp_path, s.ns, "CG_LIVE", "LiveTopic")
    try:
        keys = [f"live-{i}" for i in range(8)]
        ids = [client.ask(f"send {k}")["sent"] for k in keys]
        wait_for(lambda: len(client.got()) >= 8, "the C++ consumer to get 8 messages", 40)
        assert sorted(k for k, _, _ in client.got()) == keys

        def caught_up() -> list[dict[str, Any]] | None:
            rows = [
                r for r in s.json("consumerProgress", "-g", "CG_LIVE")["queues"] if r["topic"] == "LiveTopic"
            ]
            return rows if sum(r["consumerOffset"] for r in rows) == 8 else None

        rows = wait_for(caught_up, "CG_LIVE's committed offsets", 20)
        assert sum(r["brokerOffset"] for r in rows) == 8 and all(r["diff"] == 0 for r in rows)

        conn = s.json("consumerConnection", "-g", "CG_LIVE")
        (member,) = conn["connectionSet"]
        client_id = member["clientId"]
        assert client_id.startswith(f"{client.proc.pid}-") and member["language"] == "CPP"
        assert set(conn["subscriptionTable"]) == {"LiveTopic", "%RETRY%CG_LIVE"}
        assert (conn["consumeType"], conn["messageModel"]) == ("CONSUME_PASSIVELY", "CLUSTERING")
        producers = s.json("producerConnection", "-g", "PG_LIVE", "-t", "LiveTopic")
        assert [c["clientId"] for c in producers["connectionSet"]] == [client_id]
        summary = [g for g in s.json("consumerProgress") if g["group"] == "CG_LIVE"]
        assert [(g["count"], g["type"], g["model"]) for g in summary] == [(1, "PUSH", "CLUSTERING")]
        with_ip = s.json("consumerProgress", "-g", "CG_LIVE", "-s", "true")["queues"]
        assert {r["clientIp"] for r in with_ip if r["topic"] == "LiveTopic"} == {client_id.split("@")[0]}

        monkeypatch.chdir(tmp_path)
        status = s.json("consumerStatus", "-g", "CG_LIVE")
        assert [r["clientId"] for r in status["clients"]] == [client_id]
        written = (tmp_path / status["clients"][0]["path"]).read_text()
        assert "#Consumer Subscription#" in written and "LiveTopic" in written
        one = s.json("consumerStatus", "-g", "CG_LIVE", "-i", client_id)["runningInfo"]
        assert {sub["topic"] for sub in one["subscriptionSet"]} == {"LiveTopic", "%RETRY%CG_LIVE"}
        commits = {k: v["commitOffset"] for k, v in one["mqTable"].items() if k.startswith("LiveTopic/")}
        assert sum(commits.values()) == 8

        tracks = s.json("queryMsgByUniqueKey", "-t", "LiveTopic", "-i", ids[0])[0]["tracks"]
        assert {"consumerGroup": "CG_LIVE", "trackType": "CONSUMED", "exceptionDesc": None} in tracks
        # The C++ client leaves CONSUME_MESSAGE_DIRECTLY unanswered: after its 10 s the broker
        # answers CONSUME_MSG_TIMEOUT, as a real one does (mqadmin waits 15 s).
        err = s.rmq(
            "queryMsgByUniqueKey", "-t", "LiveTopic", "-i", ids[0], "-g", "CG_LIVE", "-d", client_id, code=6
        )
        assert "CONSUME_MSG_TIMEOUT(207)" in err and f"consumer <CG_LIVE> <{client_id}> Timeout" in err
        cq = s.json("queryCq", "-t", "LiveTopic", "-q", "0", "-i", "0", "-g", "CG_LIVE")
        assert cq["subscriptionData"]["topic"] == "LiveTopic"

        s.rmq("cloneGroupOffset", "-s", "CG_LIVE", "-d", "CG_COPY", "-t", "LiveTopic")

        def cloned() -> bool:
            table = s.config("consumerOffset.json")["offsetTable"]
            return table.get("LiveTopic@CG_COPY") == table.get("LiveTopic@CG_LIVE") is not None

        wait_for(cloned, "LiveTopic@CG_COPY in consumerOffset.json")
        s.rmq("deleteSubGroup", "-b", s.broker, "-g", "CG_COPY", "-r", "true")
        wait_for(
            lambda: "LiveTopic@CG_COPY" not in s.config("consumerOffset.json")["offsetTable"], "removeOffset"
        )

        reset = s.json("resetOffsetByTime", "-g", "CG_LIVE", "-t", "LiveTopic", "-s", str(before_sends), "-c")
        assert reset["offline"] is False
        assert sorted((r["queueId"], r["offset"]) for r in reset["rows"]) == [(q, 0) for q in range(4)]
        again = wait_for(lambda: len(client.got()) >= 16 and client.got(), "the reset to replay", 40)
        assert Counter(k for k, _, _ in again) == {k: 2 for k in keys}

        skipped = s.json("skipAccumulatedMessage", "-g", "CG_LIVE", "-t", "LiveTopic")
        assert skipped["offline"] is False
        assert sum(r["offset"] for r in skipped["rows"]) == 8
    finally:
        client.close()
    err = wait_for(
        lambda: CliRunner().invoke(app, ["consumerConnection", "-n", s.ns, "-g", "CG_LIVE"]).exit_code == 6,
        "CG_LIVE to go offline",
    )
    assert err


# --- requests relayed to one client ----------------------------------------------------------
class HandClient:
    """A consumer on a plain socket, written with the project's codec: it registers with HEART_BEAT
    (as a Java 4.9.7 client, ``ip@instance``) and answers CONSUME_MESSAGE_DIRECTLY (309) and
    GET_CONSUMER_RUNNING_INFO (307) the way a Java client does, keeping what the broker sent."""

    def __init__(self, broker: str, group: str, topic: str, client_id: str):
        import socket
        import threading

        from rmqcli.remoting import json_body as jb
        from rmqcli.remoting.codec import FrameDecoder, RemotingCommand, encode

        host, port = broker.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.received: list[RemotingCommand] = []
        self.decoder = FrameDecoder()
        self.sub = jb.SubscriptionData(topic=topic, sub_string="*", tags_set=[], sub_version=1)
        data = jb.HeartbeatData(
            client_id=client_id,
            consumer_data_set=[jb.ConsumerData(group_name=group, subscription_data_set=[self.sub])],
        )
        self.sock.sendall(encode(RemotingCommand.request(34, None, jb.encode(data), opaque=1)))
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        from rmqcli.admin.beans import ConsumeMessageDirectlyResult, ConsumerRunningInfo
        from rmqcli.remoting import json_body as jb
        from rmqcli.remoting.codec import encode

        while True:
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            for command in self.decoder.feed_commands(chunk):
                if command.is_response:
                    continue
                self.received.append(command)
                if command.code == 309:
                    body = ConsumeMessageDirectlyResult(
                        consume_result="CR_SUCCESS", remark=f"{len(command.body)} bytes", spent_time_mills=3
                    )
                else:
                    body = ConsumerRunningInfo(properties={"PROP_HAND": "yes"}, subscription_set=[self.sub])
                self.sock.sendall(encode(command.response(body=jb.encode(body))))

    def close(self) -> None:
        import socket

        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.thread.join(5)


def test_requests_relayed_to_a_client(served: Served) -> None:
    from rmqcli.admin.message import decode_messages

    s = served
    client = HandClient(s.broker, "CG_HAND", "TopicA", "10.9.8.7@hand")
    try:
        wait_for(lambda: route(s, "%RETRY%CG_HAND"), "the heartbeat's retry topic")
        sent = s.json("sendMessage", "-t", "TopicA", "-p", "direct body", "-k", "direct")
        result = s.json("queryMsgByUniqueKey", "-t", "TopicA", "-i", sent["msgId"], "-g", "CG_HAND",
                        "-d", "10.9.8.7@hand")  # fmt: skip
        assert (result["consumeResult"], result["spentTimeMills"]) == ("CR_SUCCESS", 3)
        (direct,) = [c for c in client.received if c.code == 309]
        assert direct.ext_fields["brokerName"] == BROKER and direct.ext_fields["msgId"] == sent["offsetMsgId"]
        (msg,) = decode_messages(direct.body)  # the stored record itself
        assert (msg.msg_id, msg.body) == (sent["msgId"], b"direct body")
        assert result["remark"] == f"{len(direct.body)} bytes"

        info = s.json("consumerStatus", "-g", "CG_HAND", "-i", "10.9.8.7@hand")["runningInfo"]
        assert info["properties"] == {"PROP_HAND": "yes"}
        assert [c.ext_fields["clientId"] for c in client.received if c.code == 307] == ["10.9.8.7@hand"]
        err = s.rmq("consumerStatus", "-g", "CG_HAND", "-i", "nobody@0", code=6)
        assert "The Consumer <CG_HAND> <nobody@0> not online" in err
    finally:
        client.close()


# --- clean-ups, on a store of their own --------------------------------------------------------
def _drop_tx_topic(store: Path) -> None:
    """A topic whose config is gone but whose queues are still on disk."""
    path = store / "config" / "topics.json"
    data = json.loads(path.read_text())
    del data["topicConfigTable"]["TxTopic"]
    path.write_text(json.dumps(data))


def test_clean_ups(tmp_path: Path) -> None:
    s = start(tmp_path, _drop_tx_topic)
    try:
        files = sorted(p.name for p in (s.store / "commitlog").iterdir())
        assert len(files) == 3
        low = int(files[-1])
        s.rmq("deleteExpiredCommitLog", "-b", s.broker)  # fileReservedTime 72 h: nothing expired
        assert sorted(p.name for p in (s.store / "commitlog").iterdir()) == files
        s.rmq("updateBrokerConfig", "-b", s.broker, "-k", "fileReservedTime", "-v", "0")
        assert "success" in s.rmq("deleteExpiredCommitLog", "-c", CLUSTER)
        assert sorted(p.name for p in (s.store / "commitlog").iterdir()) == files[-1:]
        status = s.json("brokerStatus", "-b", s.broker)[0]["table"]
        assert status["commitLogMinOffset"] == str(low)

        def expected_min(records: list[SentMessage]) -> int:
            """``deleteExpiredFileByOffset`` then ``correctMinOffset`` over 30-unit files."""
            files = [records[i : i + CQ_UNITS_PER_FILE] for i in range(0, len(records), CQ_UNITS_PER_FILE)]
            while len(files) > 1 and files[0][-1].physical_offset < low:
                files.pop(0)
            return next(
                (m.queue_offset for m in files[0] if m.physical_offset >= low), files[0][0].queue_offset
            )

        topic_a = dispatched(s.summary, "TopicA")
        mins = {q["queueId"]: q["minOffset"] for q in s.json("topicStatus", "-t", "TopicA")}
        assert mins == {q: expected_min(records) for q, records in topic_a.items()}
        assert any(mins.values())

        queues = {(m.topic, m.queue_id) for m in s.summary.sent if m.dispatched}
        last = {
            k: max(m.physical_offset for m in s.summary.sent if (m.topic, m.queue_id) == k) for k in queues
        }
        expired = {k for k, off in last.items() if off < low and k[0] != "SCHEDULE_TOPIC_XXXX"}
        assert expired, "the generated store should leave some queue entirely below the new minimum"
        s.rmq("cleanExpiredCQ", "-c", CLUSTER)
        for topic, queue_id in queues:
            exists = (s.store / "consumequeue" / topic / str(queue_id)).is_dir()
            assert exists == ((topic, queue_id) not in expired), (topic, queue_id)

        assert (s.store / "consumequeue" / "TxTopic").is_dir()
        s.rmq("cleanUnusedTopic", "-b", s.broker)
        assert not (s.store / "consumequeue" / "TxTopic").exists()
        assert (s.store / "consumequeue" / "TopicB").is_dir()
        assert s.server.stop() == 0, s.server.output()
    finally:
        s.server.kill()
