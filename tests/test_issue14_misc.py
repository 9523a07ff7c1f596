"""Issue 14's smaller promises: ``rmq serve`` on a port in use, a non-RocketMQ answer, "not found"
in ``dump-cq``/``dump-index``, ``dump-index --max`` past the broker's 64, and ``queryMsgById``
telling an offset message id from a unique key (with ``rmq serve`` and the real C++ client)."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from formats.commitlog import offset_msg_id
from rmqcli.cli.main import app
from tests.broker_drivers import HAVE_CLIENT, run_driver
from tests.realfixtures import REAL_ROOT
from tests.test_broker_client import RMQ, ROOT, ServeProcess, free_port, write_conf


def rmq(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def one_line_error(err: str) -> str:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


# --- rmq serve on a port in use ----------------------------------------------------------------
@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


@pytest.mark.parametrize("which", ["--port", "--namesrv-port"])
def test_serve_on_a_port_in_use_exits_5_without_a_stopped_line(
    tmp_path: Path, taken_port: int, which: str
) -> None:
    other = "--namesrv-port" if which == "--port" else "--port"
    store = tmp_path / "store"
    proc = subprocess.run(
        [*RMQ, "serve", str(store), which, str(taken_port), other, str(free_port())],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    server = "broker" if which == "--port" else "namesrv"
    assert proc.returncode == 5, (proc.stdout, proc.stderr)
    assert proc.stdout == ""  # neither "serving" nor "stopped; store flushed and closed"
    assert one_line_error(proc.stderr) == (
        f"rmq: error: {server}: cannot listen on 127.0.0.1:{taken_port}: address already in use\n"
    )
    assert not (store / "abort").exists()  # the store it opened is closed cleanly


# --- an answer that is not RocketMQ's ------------------------------------------------------------
class HttpLike:
    """A TCP server that answers any bytes with an HTTP 400, as a web server on the port would."""

    def __init__(self, answer: bytes = b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n"):
        self.answer = answer
        self.connections = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.addr = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                conn.recv(65536)
                conn.sendall(self.answer)

    def close(self) -> None:
        self.sock.close()


@pytest.mark.parametrize(
    ("answer", "shown"),
    [
        (b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n", "'HTTP/1.1 400 Bad Request'"),
        (b"SSH-2.0-OpenSSH_9.6\r\n", "'SSH-2.0-OpenSSH_9.6'"),
        (b"\x15\x03\x03\x00\x02\x02\x32", "bytes 15 03 03 00 02 02 32"),  # a TLS alert
        (b"\x00\x00\x01", "bytes 00 00 01"),  # a piece of a length word, then the end
    ],
    ids=["http", "ssh", "tls", "cut"],
)
def test_a_non_rocketmq_answer_is_named_so(answer: bytes, shown: str) -> None:
    server = HttpLike(answer)
    try:
        code, _, err = rmq("clusterList", "-n", server.addr)
    finally:
        server.close()
    assert code == 5
    assert one_line_error(err) == f"rmq: error: not a RocketMQ server at {server.addr}: it answered {shown}\n"


def test_a_rocketmq_shaped_frame_keeps_its_precise_error() -> None:
    """A length word, serialize type JSON and a header length that fits: a RocketMQ frame whose
    header is bad, which is reported as such, not as another kind of server."""
    server = HttpLike(b"\x00\x00\x00\x10\x00\x00\x00\x05{bad}xxxxxxx")
    try:
        code, _, err = rmq("clusterList", "-n", server.addr)
    finally:
        server.close()
    assert code == 5 and one_line_error(err).startswith(f"rmq: error: {server.addr}: ")
    assert "not a RocketMQ server" not in err


# --- "not found" in the store dumps ------------------------------------------------------------
REAL_BASIC = REAL_ROOT / "basic-1" / "store"
needs_basic = pytest.mark.skipif(not REAL_BASIC.is_dir(), reason="../shared/fixtures/real is absent")


@needs_basic
@pytest.mark.parametrize(
    ("topic", "queue", "says"),
    [
        ("TopicA", "9", "consume queue TopicA:9 not found (topic TopicA has queues 0-3)"),
        (
            "NoSuch",
            "0",
            "topic NoSuch not found (no consume queue of it, and no entry in config/topics.json)",
        ),
        (
            "SELF_TEST_TOPIC",
            "0",
            "consume queue SELF_TEST_TOPIC:0 not found (topic SELF_TEST_TOPIC is in config/topics.json, "
            "readQueueNums 1, but has no consume queue on disk)",
        ),
    ],
    ids=["queue", "topic", "configured-only"],
)
def test_dump_cq_of_a_missing_queue_is_not_found(topic: str, queue: str, says: str) -> None:
    code, out, err = rmq("dump-cq", str(REAL_BASIC), "-t", topic, "-q", queue)
    assert code == 3 and out == ""
    assert one_line_error(err) == f"rmq: error: {REAL_BASIC}: {says}\n"


@needs_basic
def test_dump_cq_range_that_selects_nothing_is_not_an_error() -> None:
    code, out, err = rmq("dump-cq", str(REAL_BASIC), "-t", "TopicA", "-q", "0", "--from", "999999", "--json")
    assert (code, out.strip(), err) == (0, "[]", "")


@needs_basic
def test_dump_index_key_not_found_exits_3_after_its_output() -> None:
    code, out, err = rmq("dump-index", str(REAL_BASIC), "-t", "TopicB", "-k", "hot-key", "--json")
    assert code == 3
    query = json.loads(out)["query"]
    assert (query["count"], query["matched"]) == (0, 0)
    assert (
        one_line_error(err)
        == f"rmq: error: {REAL_BASIC}: key hot-key of topic TopicB not found in the index\n"
    )


# --- dump-index --max past the broker's 64 -------------------------------------------------------
def records_with_key(store: Path, topic: str, key: str) -> list[int]:
    """Physical offsets of the records carrying ``key``, from a full CommitLog scan, newest first."""
    code, out, _ = rmq("dump-commitlog", str(store), "--output", "jsonl")
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    found = [r["physicalOffset"] for r in rows if r["topic"] == topic and key in (r.get("keys") or [])]
    return sorted(found, reverse=True)


@needs_basic
def test_dump_index_max_reads_past_the_brokers_64_and_says_so() -> None:
    every = records_with_key(REAL_BASIC, "TopicA", "hot-key")
    assert len(every) == 114  # more than the broker's maxMsgsNumBatch
    code, out, err = rmq(
        "dump-index", str(REAL_BASIC), "-t", "TopicA", "-k", "hot-key", "--max", "500", "--json"
    )
    assert code == 0
    query = json.loads(out)["query"]
    assert (query["count"], query["matched"], query["more"], query["brokerCount"]) == (114, 114, False, 64)
    assert sorted(query["phyOffsets"], reverse=True) == every
    assert err == (
        "rmq: warning: a broker's queryMessage returns only the newest 64 of these entries "
        "(maxMsgsNumBatch); the rest are read here from the hash chains\n"
    )
    # the default (the broker's 64) and a smaller --max say that more entries exist
    for cap in ("64", "10"):
        code, out, err = rmq(
            "dump-index", str(REAL_BASIC), "-t", "TopicA", "-k", "hot-key", "--max", cap, "--json"
        )
        query = json.loads(out)["query"]
        assert code == 0 and query["count"] == int(cap) and query["more"] is True
        assert query["phyOffsets"] == every[: int(cap)]  # the newest first, as the broker walks
        assert err == (
            f"rmq: warning: --max {cap} reached: more index entries carry the hash of TopicA#hot-key "
            "(raise --max)\n"
        )
    # exactly all of them: nothing more to say
    code, out, err = rmq(
        "dump-index", str(REAL_BASIC), "-t", "TopicA", "-k", "hot-key", "--max", "114", "--json"
    )
    assert code == 0 and json.loads(out)["query"]["more"] is False and "--max" not in err


# --- queryMsgById: an offset message id or a unique key -------------------------------------------
@pytest.mark.skipif(not HAVE_CLIENT, reason="the rocketmq C++ client is not installed")
def test_query_msg_by_id_tells_offset_ids_from_unique_keys(tmp_path: Path) -> None:
    """The C++ client's msgIds are unique keys: found through the topic's brokers (QUERY_MESSAGE),
    never by connecting to the address they would decode to; offset ids are read from the broker
    the NameServer lists; an id naming an unlisted address is never connected to, unless -b says."""
    conf = write_conf(tmp_path / "broker.conf")
    with ServeProcess(tmp_path / "store", conf) as server:
        ns = server.namesrv
        keys = ["id-a", "id-b", "id-c"]
        sent = run_driver(
            tmp_path, "produce", {"op": "produce", "namesrv": ns, "topic": "TopicId", "keys": keys}
        )
        ids = {e["key"]: e["id"] for e in sent if "id" in e}
        assert sorted(ids) == keys and all(e.get("status") == 0 for e in sent if "key" in e)
        uniq = ids["id-b"]

        def query(*args: str) -> tuple[int, list[dict], str]:
            code, out, err = rmq("queryMsgById", "-n", ns, *args, "--json")
            return code, (json.loads(out) if code == 0 else []), err

        # a unique key: with -t, without (every topic, every master), and on -b's broker only
        for extra in ([], ["-t", "TopicId"], ["-b", server.broker]):
            code, views, err = query("-i", uniq, *extra)
            assert code == 0, (extra, err)
            msg = views[0]["message"]
            assert (msg["msgId"], msg["topic"], msg["body"], msg["keys"]) == (
                uniq,
                "TopicId",
                "body-id-b",
                "id-b",
            )
        # its offset id is read from the listed broker by VIEW_MESSAGE_BY_ID; both forms in one -i
        offset_id = msg["offsetMsgId"]
        code, views, err = query("-i", f"{offset_id},{ids['id-c']}")
        assert code == 0, err
        assert [(v["message"]["offsetMsgId"], v["message"]["body"]) for v in views] == [
            (offset_id, "body-id-b"),
            (views[1]["message"]["offsetMsgId"], "body-id-c"),
        ]
        # an id that no message has: not found, one line
        code, _, err = query("-i", "0" * 31 + "1", "-t", "TopicId")
        assert code == 3 and one_line_error(err).startswith(
            f"rmq: error: message {'0' * 31}1 not found: no message of topic TopicId has it as its unique key"
        )
        # an id naming an address the NameServer does not list: never connected to ...
        trap = HttpLike()
        try:
            host, port = trap.addr.split(":")
            foreign = offset_msg_id(socket.inet_aton(host), int(port), 0)
            code, _, err = query("-i", foreign, "-t", "TopicId")
            assert code == 3 and trap.connections == 0
            assert one_line_error(err) == (
                f"rmq: error: message {foreign} not found: no message of topic TopicId has it as its "
                f"unique key (as an offset message id it would name {trap.addr}, which the NameServer "
                "does not list; -b names a broker to trust)\n"
            )
            # ... unless -b names it
            code, _, err = query("-i", foreign, "-b", trap.addr)
            assert code == 5 and trap.connections == 1
            assert f"not a RocketMQ server at {trap.addr}" in one_line_error(err)
        finally:
            trap.close()
        assert server.stop() == 0


def test_serve_on_a_new_directory_leaves_a_store_verify_accepts(tmp_path: Path) -> None:
    """The broker creates commitlog/ and consumequeue/ at start (``ensureDirOK``): a store that
    has not had a message yet is still a store."""
    server = ServeProcess(tmp_path / "fresh").start()
    try:
        assert (tmp_path / "fresh" / "commitlog").is_dir() and (tmp_path / "fresh" / "consumequeue").is_dir()
        proc = subprocess.run(
            [*RMQ, "verify", str(tmp_path / "fresh")], cwd=ROOT, capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stderr
    finally:
        server.stop()
