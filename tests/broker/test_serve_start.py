"""``rmq serve`` starting: on a port in use (exit 5, one line, the store closed cleanly), on a new
directory (a store ``verify`` accepts); and ``queryMsgById`` on it telling an offset message id from
a unique key (with the real C++ client)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from formats.commitlog import offset_msg_id
from tests.support.broker_drivers import run_driver
from tests.support.cli import one_line_error
from tests.support.foreign import HttpLike
from tests.support.serve import ServeProcess, free_port_pair, write_conf


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


@pytest.mark.parametrize("which", ["--port", "--namesrv-port"])
def test_serve_on_a_port_in_use_exits_5_without_a_stopped_line(
    tmp_path: Path, taken_port: int, which: str, rmq_proc
) -> None:
    other = "--namesrv-port" if which == "--port" else "--port"
    store = tmp_path / "store"
    proc = rmq_proc("serve", str(store), which, str(taken_port), other, str(free_port_pair()), timeout=60)
    server = "broker" if which == "--port" else "namesrv"
    assert proc.returncode == 5, (proc.stdout, proc.stderr)
    assert proc.stdout == ""  # neither "serving" nor "stopped; store flushed and closed"
    assert one_line_error(proc.stderr) == (
        f"rmq: error: {server}: cannot listen on 127.0.0.1:{taken_port}: address already in use\n"
    )
    assert not (store / "abort").exists()  # the store it opened is closed cleanly


@pytest.mark.cpp
def test_query_msg_by_id_tells_offset_ids_from_unique_keys(tmp_path: Path, rmq) -> None:
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
            result = rmq("queryMsgById", "-n", ns, *args, "--json")
            code = result.exit_code
            return code, (json.loads(result.stdout) if code == 0 else []), result.stderr

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


def test_serve_on_a_new_directory_leaves_a_store_verify_accepts(tmp_path: Path, rmq_proc) -> None:
    """The broker creates commitlog/ and consumequeue/ at start (``ensureDirOK``): a store that
    has not had a message yet is still a store."""
    server = ServeProcess(tmp_path / "fresh").start()
    try:
        assert (tmp_path / "fresh" / "commitlog").is_dir() and (tmp_path / "fresh" / "consumequeue").is_dir()
        proc = rmq_proc("verify", str(tmp_path / "fresh"))
        assert proc.returncode == 0, proc.stderr
    finally:
        server.stop()
