"""``rmq serve`` on the wire: NameServer and Broker answers (protocol.md B.2, B.3, B.7) and robustness
(A.1: oversized frames, undecodable headers, unknown codes, clients that do not read).

Requests are made with rmq's own remoting client and with raw sockets against a real ``rmq serve``
subprocess (one per module, SYNC_FLUSH to cover the group commit).
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from formats import fastjson
from rmqcli.remoting import headers as hd
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.client import RemotingClient
from rmqcli.remoting.codec import FrameDecoder, RemotingCommand, decode, encode
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.support.serve import ServeProcess, wait_until, write_conf


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    tmp = tmp_path_factory.mktemp("serve")
    conf = write_conf(tmp / "broker.conf", flushDiskType="SYNC_FLUSH")
    with ServeProcess(tmp / "store", conf) as proc:
        yield proc


def call(addr: str, code: int, header: dict | None = None, body: bytes = b"", *, version: int = 407,
         timeout: float = 10.0) -> RemotingCommand:  # fmt: skip
    async def go() -> RemotingCommand:
        async with RemotingClient() as client:
            request = RemotingCommand.request(code, header, body, version=version)
            return await client.invoke(addr, request, timeout)

    return asyncio.run(go())


def send(addr: str, topic: str, body: bytes, tags: str = "", queue_id: int = 0) -> RemotingCommand:
    props = f"TAGS\x01{tags}\x02" if tags else ""
    header = hd.SendMessageRequestHeaderV2(
        a="PG", b=topic, c="TBW102", d=4, e=queue_id, f=0, g=int(time.time() * 1000), h=0, i=props
    )
    return call(addr, RC.SEND_MESSAGE_V2, header.to_ext_fields(), body)


def pull_header(topic: str, offset: int, *, sys_flag: int = 0x4, sub: str = "*", suspend: int = 0) -> dict:
    return hd.PullMessageRequestHeader(
        consumer_group="G_PROTO", topic=topic, queue_id=0, queue_offset=offset, max_msg_nums=32,
        sys_flag=sys_flag, commit_offset=0, suspend_timeout_millis=suspend, subscription=sub, sub_version=0,
    ).to_ext_fields()  # fmt: skip


def test_route_json_dialect_follows_the_client_version(server: ServeProcess) -> None:
    old = call(server.namesrv, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}, version=63)
    assert old.code == RS.SUCCESS
    assert b'"brokerAddrs":{0:"' in old.body  # fastjson bare key for C++ / old clients
    new = call(server.namesrv, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}, version=407)
    assert b'"brokerAddrs":{"0":"' in new.body
    route = json.loads(new.body)
    assert route["brokerDatas"][0]["brokerAddrs"]["0"] == server.broker
    assert route["queueDatas"][0]["perm"] == 7
    missing = call(server.namesrv, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "NoSuchTopic"})
    assert missing.code == RS.TOPIC_NOT_EXIST
    info = fastjson.loads(call(server.namesrv, RC.GET_BROKER_CLUSTER_INFO).body)
    assert info["clusterAddrTable"] == {"DefaultCluster": ["broker-a"]}
    assert call(server.namesrv, 9999).code == RS.REQUEST_CODE_NOT_SUPPORTED


def test_namesrv_kv_and_write_perm(server: ServeProcess) -> None:
    kv = {"namespace": "NS", "key": "k", "value": "v"}
    assert call(server.namesrv, RC.PUT_KV_CONFIG, kv).code == RS.SUCCESS
    got = call(server.namesrv, RC.GET_KV_CONFIG, {"namespace": "NS", "key": "k"})
    assert got.ext_fields["value"] == "v"
    assert call(server.namesrv, RC.DELETE_KV_CONFIG, {"namespace": "NS", "key": "k"}).code == RS.SUCCESS
    assert call(server.namesrv, RC.GET_KV_CONFIG, {"namespace": "NS", "key": "k"}).code == RS.QUERY_NOT_FOUND
    wiped = call(server.namesrv, RC.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert int(wiped.ext_fields["wipeTopicCount"]) >= 1
    added = call(server.namesrv, RC.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert added.ext_fields["addTopicCount"] == wiped.ext_fields["wipeTopicCount"]
    topics = json.loads(call(server.namesrv, RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body)["topicList"]
    assert "TBW102" in topics


def test_send_auto_creates_and_pull_maps_offsets(server: ServeProcess) -> None:
    topic = "TopicProto"
    r = send(server.broker, topic, b"first", tags="A")
    assert r.code == RS.SUCCESS, r.remark
    assert r.ext_fields["queueOffset"] == "0" and len(r.ext_fields["msgId"]) == 32
    assert r.ext_fields["MSG_REGION"] == "DefaultRegion"
    send(server.broker, topic, b"second", tags="B")
    found = call(server.broker, RC.PULL_MESSAGE, pull_header(topic, 0))
    assert found.code == RS.SUCCESS and found.remark == "FOUND"
    assert found.ext_fields["nextBeginOffset"] == "2" and found.ext_fields["maxOffset"] == "2"
    assert b"first" in found.body and b"second" in found.body
    only_b = call(server.broker, RC.PULL_MESSAGE, pull_header(topic, 0, sub="B"))
    assert only_b.code == RS.SUCCESS and b"second" in only_b.body and b"first" not in only_b.body
    none = call(server.broker, RC.PULL_MESSAGE, pull_header(topic, 0, sub="C"))
    assert none.code == RS.PULL_RETRY_IMMEDIATELY and none.ext_fields["nextBeginOffset"] == "2"
    at_end = call(server.broker, RC.PULL_MESSAGE, pull_header(topic, 2))
    assert at_end.code == RS.PULL_NOT_FOUND and at_end.remark == "OFFSET_OVERFLOW_ONE"
    beyond = call(server.broker, RC.PULL_MESSAGE, pull_header(topic, 9))
    assert beyond.code == RS.PULL_OFFSET_MOVED
    assert (
        call(server.broker, RC.GET_MAX_OFFSET, {"topic": topic, "queueId": "0"}).ext_fields["offset"] == "2"
    )
    assert (
        call(server.broker, RC.GET_MIN_OFFSET, {"topic": topic, "queueId": "0"}).ext_fields["offset"] == "0"
    )
    search = call(
        server.broker, RC.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": topic, "queueId": "0", "timestamp": "0"}
    )
    assert search.ext_fields["offset"] == "0"
    msg_id = r.ext_fields["msgId"]
    view = call(server.broker, RC.VIEW_MESSAGE_BY_ID, {"offset": str(int(msg_id[-16:], 16))})
    assert view.code == RS.SUCCESS and b"first" in view.body
    bad_view = call(server.broker, RC.VIEW_MESSAGE_BY_ID, {"offset": "7"})
    assert bad_view.code == RS.SYSTEM_ERROR
    unknown = call(server.broker, RC.PULL_MESSAGE, pull_header("NoSuchTopic", 0))
    assert unknown.code == RS.TOPIC_NOT_EXIST
    assert call(server.broker, 9999).code == RS.REQUEST_CODE_NOT_SUPPORTED


def test_offsets_commit_and_query(server: ServeProcess) -> None:
    topic = "TopicOffsets"
    send(server.broker, topic, b"x")
    q = {"consumerGroup": "G_OFF", "topic": topic, "queueId": "0"}
    assert call(server.broker, RC.QUERY_CONSUMER_OFFSET, q).ext_fields["offset"] == "0"  # min 0, in memory
    assert call(server.broker, RC.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": "1"}).code == RS.SUCCESS
    assert call(server.broker, RC.QUERY_CONSUMER_OFFSET, q).ext_fields["offset"] == "1"
    # an empty or unknown queue: 0, as the real 4.9.8 broker answers (no unit at offset 0 "in disk")
    empty = {"consumerGroup": "G_OFF", "topic": "TopicNeverWritten", "queueId": "0"}
    answer = call(server.broker, RC.QUERY_CONSUMER_OFFSET, empty)
    assert answer.code == RS.SUCCESS and answer.ext_fields["offset"] == "0"


def test_long_polling_wakes_on_arrival_and_times_out(server: ServeProcess) -> None:
    topic = "TopicLongPoll"
    send(server.broker, topic, b"m0")

    async def go() -> tuple[RemotingCommand, float, RemotingCommand, float]:
        async with RemotingClient() as client:
            start = time.monotonic()
            held = asyncio.create_task(
                client.invoke(
                    server.broker,
                    RemotingCommand.request(
                        RC.PULL_MESSAGE, pull_header(topic, 1, sys_flag=0x6, suspend=15000)
                    ),
                    20,
                )
            )
            # held, not answered: a pull past the end waits for the 15 s suspend (a loaded machine
            # only makes an early answer less likely); were it not at the broker yet, m1 would be
            # found by it at once, which the checks below accept as well
            await asyncio.sleep(0.5)
            assert not held.done()
            await asyncio.to_thread(send, server.broker, topic, b"m1")
            woken = await held
            woken_after = time.monotonic() - start
            start = time.monotonic()
            timed_out = await client.invoke(
                server.broker,
                RemotingCommand.request(RC.PULL_MESSAGE, pull_header(topic, 2, sys_flag=0x6, suspend=700)),
                10,
            )
            return woken, woken_after, timed_out, time.monotonic() - start

    woken, woken_after, timed_out, waited = asyncio.run(go())
    assert woken.code == RS.SUCCESS and b"m1" in woken.body
    assert 0.4 < woken_after < 5
    assert timed_out.code == RS.PULL_NOT_FOUND and 0.6 < waited < 5


def _frame_socket(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def _read_command(sock: socket.socket) -> RemotingCommand:
    decoder = FrameDecoder()
    while True:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("closed")
        frames = decoder.feed(data)
        if frames:
            return decode(frames[0])


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, TimeoutError, OSError):
        return True


def test_bad_frames_close_only_their_connection(server: ServeProcess) -> None:
    # a frame announcing more than 16 MiB
    big = _frame_socket(server.port)
    big.sendall(struct.pack(">ii", 32 * 1024 * 1024, 10))
    assert _closed(big)
    # a JSON header that does not parse
    bad = _frame_socket(server.port)
    header = b"{not json"
    bad.sendall(struct.pack(">ii", 4 + len(header), len(header)) + header)
    assert _closed(bad)
    # a header declared longer than its frame
    worse = _frame_socket(server.port)
    worse.sendall(struct.pack(">ii", 8, 1000) + b"abcd")
    assert _closed(worse)
    # the server still answers, and a missing required header field is SYSTEM_ERROR, not a crash
    r = call(server.broker, RC.GET_MAX_OFFSET, {"topic": "x"})
    assert r.code == RS.SYSTEM_ERROR and "queueId" in (r.remark or "")
    assert call(server.broker, RC.HEART_BEAT, body=b"[not a heartbeat").code == RS.SYSTEM_ERROR
    # a oneway request gets no answer; the next request on the socket does
    s = _frame_socket(server.port)
    s.sendall(encode(RemotingCommand.request(RC.UPDATE_CONSUMER_OFFSET, {"x": "1"}, oneway=True, opaque=1)))
    s.sendall(encode(RemotingCommand.request(9999, opaque=2)))
    answer = _read_command(s)
    assert answer.opaque == 2 and answer.code == RS.REQUEST_CODE_NOT_SUPPORTED and answer.is_response
    s.close()


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _unsent(port: int, peer: int) -> int:
    """Bytes the local TCP socket on ``port`` connected to ``peer`` has sent and not had
    acknowledged, or holds unsent (/proc/net/tcp's tx_queue)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, remote = int(fields[1].rsplit(":", 1)[1], 16), int(fields[2].rsplit(":", 1)[1], 16)
            if (local, remote) == (port, peer):
                return int(fields[4].split(":")[0], 16)
    return 0


def test_a_client_that_does_not_read_does_not_block_others(server: ServeProcess) -> None:
    topic = "TopicSlowReader"
    assert send(server.broker, topic, b"z" * 200_000).code == RS.SUCCESS
    assert server.proc is not None
    rss_before = _rss_kib(server.proc.pid)
    slow = _frame_socket(server.port)
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.setblocking(False)
    frame = encode(RemotingCommand.request(RC.PULL_MESSAGE, pull_header(topic, 0)))
    sent = 0
    for _ in range(1000):  # 1000 answers of 200 kB = 200 MB the slow client never reads
        try:
            slow.sendall(frame)
            sent += 1
        except BlockingIOError:
            break
    # the broker answers until the slow client's socket is full: its answers wait in the kernel
    wait_until(
        lambda: _unsent(server.port, slow.getsockname()[1]) > 0, 20, "answers the client does not read"
    )
    # a broker that went on reading and answering would pile up 200 kB a request from now on, at
    # loopback speed: 1 s is ample for it to grow past the bound below (and a loaded machine only
    # slows the growth, it cannot make a correct broker grow)
    time.sleep(1.0)
    for _ in range(3):  # others are served meanwhile
        assert call(server.broker, RC.GET_MAX_OFFSET, {"topic": topic, "queueId": "0"}).code == RS.SUCCESS
    assert sent > 100
    assert _rss_kib(server.proc.pid) - rss_before < 64 * 1024  # the answers are not piled up in memory
    slow.close()
    assert call(server.broker, RC.GET_MAX_OFFSET, {"topic": topic, "queueId": "0"}).code == RS.SUCCESS


def test_heartbeat_membership_and_consumer_list(server: ServeProcess) -> None:
    heartbeat = jb.HeartbeatData(
        client_id="127.0.0.1@proto",
        consumer_data_set=[
            jb.ConsumerData(
                group_name="G_MEMBERS",
                subscription_data_set=[jb.SubscriptionData(topic="TopicMembers", sub_string="*")],
            )
        ],
    )

    async def go() -> tuple[RemotingCommand, RemotingCommand, list[int]]:
        notified: list[int] = []
        async with RemotingClient() as client:
            client.register(RC.NOTIFY_CONSUMER_IDS_CHANGED, lambda req, addr: notified.append(req.code))
            beat = await client.invoke(
                server.broker, RemotingCommand.request(RC.HEART_BEAT, body=jb.encode(heartbeat))
            )
            listed = await client.invoke(
                server.broker,
                RemotingCommand.request(RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G_MEMBERS"}),
            )
            deadline = time.monotonic() + 20  # NOTIFY_CONSUMER_IDS_CHANGED, oneway: at once, 20 s at most
            while not notified and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            return beat, listed, notified

    beat, listed, notified = asyncio.run(go())
    assert beat.code == RS.SUCCESS
    assert json.loads(listed.body)["consumerIdList"] == ["127.0.0.1@proto"]
    assert notified == [RC.NOTIFY_CONSUMER_IDS_CHANGED]
    # the connection closed: the group is empty again
    members = {"consumerGroup": "G_MEMBERS"}
    wait_until(
        lambda: call(server.broker, RC.GET_CONSUMER_LIST_BY_GROUP, members).code == RS.SYSTEM_ERROR,
        20,
        "the group emptied by the closed connection",
    )
    # and the retry topic exists now
    assert call(server.namesrv, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "%RETRY%G_MEMBERS"}).code == RS.SUCCESS


def create_topic(topic: str, queues: int) -> dict[str, str]:
    """UPDATE_AND_CREATE_TOPIC's header for ``topic`` with ``queues`` read and write queues."""
    return hd.CreateTopicRequestHeader(
        topic=topic, default_topic="TBW102", read_queue_nums=queues, write_queue_nums=queues, perm=6,
        topic_filter_type="SINGLE_TAG",
    ).to_ext_fields()  # fmt: skip


def test_admin_topic_requests(server: ServeProcess) -> None:
    create = RC.UPDATE_AND_CREATE_TOPIC
    assert call(server.broker, create, create_topic("TopicAdmin", 2)).code == RS.SUCCESS
    table = fastjson.loads(call(server.broker, RC.GET_ALL_TOPIC_CONFIG).body)["topicConfigTable"]
    assert table["TopicAdmin"]["readQueueNums"] == 2
    assert call(server.broker, create, create_topic("bad topic", 1)).code == RS.SYSTEM_ERROR
    runtime = json.loads(call(server.broker, RC.GET_BROKER_RUNTIME_INFO).body)["table"]
    for key in (
        "brokerVersionDesc",
        "putTps",
        "getTransferedTps",
        "earliestMessageTimeStamp",
        "commitLogDiskRatio",
    ):
        assert key in runtime
    wait_until(  # the broker re-registers after the change
        lambda: call(server.namesrv, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicAdmin"}).code == RS.SUCCESS,
        20,
        "TopicAdmin routed by the NameServer",
    )


def test_a_second_serve_on_the_same_store_is_refused(server: ServeProcess, tmp_path: Path) -> None:
    other = ServeProcess(server.store, server.conf)
    with pytest.raises(AssertionError, match="lock"):
        other.start(timeout=60)  # it exits on the lock at once; a loaded machine starts it slowly
    other.kill()


def test_restart_after_sigkill_recovers_and_keeps_acknowledged_messages(tmp_path: Path) -> None:
    import subprocess
    import sys

    conf = write_conf(tmp_path / "broker.conf", flushDiskType="SYNC_FLUSH")
    store = tmp_path / "store"
    first = ServeProcess(store, conf)
    try:
        first.start()
        for i in range(5):
            assert send(first.broker, "TopicCrash", f"crash-{i}".encode()).code == RS.SUCCESS
        assert first.proc is not None
        first.proc.kill()  # SIGKILL: no clean shutdown, abort stays
        first.proc.wait(10)
        assert (store / "abort").exists()
        second = ServeProcess(store, conf)
        second.start()
        try:
            assert "recovered the store (abnormal" in second.output()
            r = call(second.broker, RC.PULL_MESSAGE, pull_header("TopicCrash", 0))
            assert r.code == RS.SUCCESS and all(f"crash-{i}".encode() in r.body for i in range(5))
            assert send(second.broker, "TopicCrash", b"after").ext_fields["queueOffset"] == "5"
            assert second.stop() == 0
        finally:
            second.kill()
    finally:
        first.kill()
    verify = subprocess.run(
        [sys.executable, "-m", "rmqcli.cli.main", "verify", str(store), "--config", str(conf)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert verify.returncode == 0, verify.stdout + verify.stderr
