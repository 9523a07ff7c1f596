"""``rmq serve``'s gRPC endpoint with the real Apache RocketMQ 5.x Python client
(``rocketmq-python-client`` 5.1.2, in ``.venv-rmq5``: ``make test`` makes it; skipped without it),
run as a child process (``grpc5_client.py``): its producer starts (QueryRoute, Telemetry settings,
Heartbeat), sends with tag, key and properties, fails on a topic the broker does not have, and says
goodbye (NotifyClientTermination); TLS with a self-signed certificate (openssl). What it stored is
read back with ``rmq queryMsgByUniqueKey`` and consumed by the 4.x C++ client. And one send of the
5.x Node.js client (npm ``rocketmq-client-nodejs``, in tests/js; ``js`` marker)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import JS
from tests.support.broker_drivers import Driver
from tests.support.cli import rmq_json, run_rmq
from tests.support.client5 import PYTHON5, needs_client5
from tests.support.grpcserve import server_fixture
from tests.support.serve import ServeProcess, wait_until, write_conf

CLIENT = Path(__file__).with_name("grpc5_client.py")
TOPIC = "TopicG5"


def client5(spec: dict, env: dict[str, str] | None = None, home: Path | None = None) -> dict:
    """Run the 5.x client with ``spec``; its JSON result (HOME apart: it logs to ~/logs)."""
    environ = {**os.environ, **(env or {})}
    if home is not None:
        environ["HOME"] = str(home)
    proc = subprocess.run(
        [str(PYTHON5), str(CLIENT), json.dumps(spec)], capture_output=True, text=True, timeout=60, env=environ
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


server = server_fixture(TOPIC, extra=["-v"])


@needs_client5
def test_sends_of_the_5x_python_client_are_stored_as_the_proxy_stores_them(
    server: ServeProcess, tmp_path: Path
) -> None:
    messages = [
        {"body": "hello-0", "tag": "TagA", "key": "k0", "properties": {"color": "red", "n": "0"}},
        {"body": "hello-1", "tag": "TagB", "key": "k1", "properties": {"color": "blue"}},
        {"body": "hello-2", "tag": "TagA", "key": "k2"},
    ]
    spec = {"endpoint": server.grpc, "topic": TOPIC, "messages": messages, "missing": "NoSuchTopicG5"}
    result = client5({**spec, "linger": 1.6}, home=tmp_path)
    assert result["done"] and len(result["sent"]) == 3
    assert "NoSuchTopicG5" in result["missing_error"] and "route" in result["missing_error"]
    ids = [sent["message_id"] for sent in result["sent"]]
    assert all(len(i) == 34 and i.startswith("01") for i in ids)  # the 5.x client's own message ids
    for message, message_id in zip(messages, ids, strict=True):
        [found] = rmq_json(
            "queryMsgByUniqueKey", "-n", server.namesrv, "-t", TOPIC, "-i", message_id, "--json"
        )
        stored = found["message"]
        assert stored["body"] == message["body"] and stored["tags"] == message["tag"]
        assert stored["keys"] == message["key"]
        props = stored["properties"]
        for key, value in message.get("properties", {}).items():
            assert props[key] == value
        assert props["UNIQ_KEY"] == message_id and props["PGROUP"] == TOPIC
        assert props["RECONSUME_TIME"] == "0" and props["BORN_TIMESTAMP"].isdigit() and props["__BORNHOST"]
        assert stored["bornTimestamp"] == int(props["BORN_TIMESTAMP"])
        assert "__SHARDINGKEY" not in props and "TRAN_MSG" not in props
    log = server.output()  # the server's INFO lines (-v): settings, heartbeat, goodbye
    assert "(PRODUCER, PYTHON 5.1.2)" in log and f"publishing {TOPIC}" in log
    assert "first heartbeat (PRODUCER)" in log
    assert "terminated (PRODUCER)" in log


@needs_client5
@pytest.mark.cpp
def test_a_4x_client_consumes_what_the_5x_client_sent(server: ServeProcess, tmp_path: Path) -> None:
    topic = "TopicG5Cpp"
    run_rmq("updateTopic", "-n", server.namesrv, "-c", "DefaultCluster", "-t", topic, check=True)
    messages = [{"body": f"body-c{i}", "tag": "T", "key": f"c{i}"} for i in range(4)]
    result = client5({"endpoint": server.grpc, "topic": topic, "messages": messages}, home=tmp_path)
    ids = {sent["message_id"] for sent in result["sent"]}
    consumer = Driver(
        tmp_path, "cpp", {"op": "consume", "group": "CG_G5", "namesrv": server.namesrv, "topic": topic}
    )
    try:
        wait_until(lambda: len({e.get("key") for e in consumer.events()} & {f"c{i}" for i in range(4)}) == 4,
                   60, "the C++ consumer's messages")  # fmt: skip
    finally:
        consumer.stop()
    seen = {e["key"]: e for e in consumer.events() if "key" in e}
    assert {seen[f"c{i}"]["len"] for i in range(4)} == {len("body-c0")}
    assert {seen[f"c{i}"]["id"] for i in range(4)} == ids  # the client's ids are the UNIQ_KEYs
    assert all(seen[f"c{i}"]["topic"] == topic for i in range(4))


def _self_signed(tmp: Path) -> tuple[Path, Path] | None:
    if shutil.which("openssl") is None:
        return None
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    proc = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        capture_output=True, timeout=60,
    )  # fmt: skip
    return (cert, key) if proc.returncode == 0 else None


@needs_client5
def test_tls_with_a_self_signed_certificate(tmp_path: Path) -> None:
    pair = _self_signed(tmp_path)
    if pair is None:
        pytest.skip("no openssl to make a certificate")
    cert, key = pair
    extra = ["-v", "--grpc-cert", str(cert), "--grpc-key", str(key)]
    with ServeProcess(tmp_path / "store", write_conf(tmp_path / "broker.conf"), extra=extra, grpc=True) as s:
        assert f"gRPC (TLS) on 127.0.0.1:{s.grpc_port}" in s.output()
        run_rmq("updateTopic", "-n", s.namesrv, "-c", "DefaultCluster", "-t", TOPIC, check=True)
        spec = {"endpoint": s.grpc, "topic": TOPIC, "messages": [{"body": "secret", "tag": "S"}], "tls": True}
        # the client trusts only the system's roots; gRPC's own variable adds ours
        result = client5(spec, env={"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(cert)}, home=tmp_path)
        [found] = rmq_json(
            "queryMsgByUniqueKey",
            "-n",
            s.namesrv,
            "-t",
            TOPIC,
            "-i",
            result["sent"][0]["message_id"],
            "--json",
        )
        assert found["message"]["body"] == "secret"
        assert "terminated (PRODUCER)" in s.output()


@pytest.mark.js
def test_a_send_of_the_5x_nodejs_client(server: ServeProcess, tmp_path: Path) -> None:
    proc = subprocess.run(
        ["node", str(JS / "grpc5_send.js"), server.grpc, TOPIC],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": str(tmp_path)},
    )  # fmt: skip
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, proc.stdout[-2000:] + proc.stderr[-2000:]  # its logger may complain at shutdown
    message_id = json.loads(lines[0][len("RESULT ") :])["messageId"]
    [found] = rmq_json("queryMsgByUniqueKey", "-n", server.namesrv, "-t", TOPIC, "-i", message_id, "--json")
    stored = found["message"]
    assert (stored["body"], stored["tags"], stored["keys"]) == ("hello from node", "TagNode", "kn1 kn2")
    assert stored["properties"]["from"] == "node" and stored["properties"]["PGROUP"] == TOPIC


@needs_client5
def test_an_orphaned_transaction_is_checked_over_telemetry(tmp_path: Path) -> None:
    """A half message the 5.x producer leaves open: the broker's transaction check reaches the
    producer on its Telemetry stream (recover_orphaned_transaction_command), its checker commits
    (EndTransaction, source SERVER_CHECK), and the message is stored in its topic."""
    config = tmp_path / "store" / "config"
    config.mkdir(parents=True)
    topic = {"topicName": "TopicTx5", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
             "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False,
             "attributes": {"message.type": "TRANSACTION"}}  # fmt: skip
    tables = {"dataVersion": {"counter": 1, "timestamp": 0}, "topicConfigTable": {"TopicTx5": topic}}
    (config / "topics.json").write_text(json.dumps(tables))
    conf = write_conf(tmp_path / "broker.conf", transactionTimeOut="500", transactionCheckInterval="500")
    with ServeProcess(tmp_path / "store", conf, extra=["-v"], grpc=True) as s:
        spec = {"endpoint": s.grpc, "topic": "TopicTx5", "messages": [], "orphan": "left open", "linger": 4}
        result = client5(spec, home=tmp_path)
        [sent] = result["sent"]
        assert result["checked"] == [sent["message_id"]]
        stored = rmq_json(
            "queryMsgByUniqueKey", "-n", s.namesrv, "-t", "TopicTx5", "-i", sent["message_id"], "--json"
        )
        assert [m["message"]["body"] for m in stored] == ["left open"]
