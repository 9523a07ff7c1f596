"""The broker's VIP channel (4.9.8's ``fastRemotingServer`` on listenPort − 2): the main port's
requests but the pulls (and 5.1.1's POP family), which only the main port registers, so the admin
processor answers them REQUEST_CODE_NOT_SUPPORTED there. One scenario runs against ``rmq serve`` and
against the real 4.9.8 broker (skipped without Java 17 or the kit) and their answers are compared;
``--fast-port`` moves or closes it; a port in use stops the start with one line; ACL guards it."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import yaml

from rmqcli.remoting import headers as hd
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.support.acl import ACL, USER, exchange, is_refusal, send_request, signed, start_serve
from tests.support.cli import one_line_error
from tests.support.oracle import real_cluster
from tests.support.popwire import call, create_topic, dispatched, pop_header, pull_all, send
from tests.support.serve import ServeProcess, free_port, free_port_pair, write_conf

TOPIC = "TopicVip"


def vip(addr: str) -> str:
    host, _, port = addr.rpartition(":")
    return f"{host}:{int(port) - 2}"


def pull_header(queue_offset: int = 0) -> hd.PullMessageRequestHeader:
    return hd.PullMessageRequestHeader(
        consumer_group="CG_VIP", topic=TOPIC, queue_id=0, queue_offset=queue_offset, max_msg_nums=32,
        sys_flag=hd.PULL_FLAG_SUBSCRIPTION, commit_offset=0, suspend_timeout_millis=0, subscription="*",
        sub_version=0, expression_type="TAG",
    )  # fmt: skip


def scenario(broker: str) -> list[tuple[str, object]]:
    """What a client sees on ``broker``'s VIP channel, step by step."""
    fast = vip(broker)
    seen: list[tuple[str, object]] = [("create", create_topic(fast, TOPIC, 1).code)]
    seen.append(("send", send(fast, TOPIC, b"over the VIP channel").code))
    dispatched(broker, TOPIC, 1)
    seen.append(("stored", [r.body() for r in pull_all(broker, TOPIC, 0)]))
    answer = call(fast, RC.PULL_MESSAGE, pull_header())
    seen.append(("pull", (answer.code, answer.remark)))
    answer = call(fast, RC.POP_MESSAGE, pop_header("CG_VIP", TOPIC))
    seen.append(("pop", (answer.code, answer.remark)))
    topics = json.loads(call(fast, RC.GET_ALL_TOPIC_CONFIG).body)["topicConfigTable"]
    seen.append(("topic config", {k: topics[TOPIC][k] for k in ("readQueueNums", "writeQueueNums", "perm")}))
    update = hd.UpdateConsumerOffsetRequestHeader(
        consumer_group="CG_VIP", topic=TOPIC, queue_id=0, commit_offset=1
    )
    seen.append(("commit offset", call(fast, RC.UPDATE_CONSUMER_OFFSET, update).code))
    query = hd.QueryConsumerOffsetRequestHeader(consumer_group="CG_VIP", topic=TOPIC, queue_id=0)
    answer = call(fast, RC.QUERY_CONSUMER_OFFSET, query)
    seen.append(("offset", (answer.code, answer.ext_fields.get("offset"))))
    return seen


def rmq_scenario(tmp_path: Path) -> list[tuple[str, object]]:
    tmp_path.mkdir(exist_ok=True)
    with ServeProcess(tmp_path / "store", write_conf(tmp_path / "broker.conf")) as server:
        seen = scenario(server.broker)
        assert f"(VIP channel {server.port - 2})" in server.output()
        return seen


def test_the_vip_channel_serves_all_but_the_pulls(tmp_path: Path) -> None:
    seen = dict(rmq_scenario(tmp_path))
    assert seen["create"] == seen["send"] == seen["commit offset"] == RS.SUCCESS
    assert seen["stored"] == [b"over the VIP channel"]
    assert seen["pull"] == (RS.REQUEST_CODE_NOT_SUPPORTED, f" request type {RC.PULL_MESSAGE} not supported")
    assert seen["pop"] == (RS.REQUEST_CODE_NOT_SUPPORTED, f" request type {RC.POP_MESSAGE} not supported")
    assert seen["offset"] == (RS.SUCCESS, "1")


@pytest.mark.java
def test_the_vip_channel_answers_as_the_real_4_9_8_brokers(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    with real_cluster(tmp_path / "real") as real:
        expected = scenario(real.broker)
    assert rmq_scenario(tmp_path / "rmq") == expected


def test_fast_port_moves_or_closes_the_vip_channel(tmp_path: Path) -> None:
    moved = free_port()
    conf = write_conf(tmp_path / "broker.conf")
    with ServeProcess(tmp_path / "a", conf, extra=["--fast-port", str(moved)]) as server:
        assert send(f"127.0.0.1:{moved}", "TBW102", b"x").code == RS.SUCCESS  # the default topic
        assert f"(VIP channel {moved})" in server.output()
    with ServeProcess(tmp_path / "b", conf, extra=["--fast-port", "0"]) as server:
        assert "(VIP channel off)" in server.output()
        with pytest.raises(OSError), socket.create_connection(("127.0.0.1", server.port - 2), timeout=2):
            pass


def test_a_vip_port_in_use_stops_the_start_with_one_line(tmp_path: Path, rmq_proc) -> None:
    port = free_port_pair()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port - 2))
        taken.listen()
        args = ["--namesrv-port", str(free_port()), "--port", str(port), "--grpc-port", "0"]
        proc = rmq_proc("serve", str(tmp_path / "store"), *args, timeout=60)
    assert proc.returncode == 5, (proc.stdout, proc.stderr)
    assert proc.stdout == ""
    assert one_line_error(proc.stderr) == (
        f"rmq: error: broker VIP channel: cannot listen on 127.0.0.1:{port - 2}: address already in use\n"
    )
    assert not (tmp_path / "store" / "abort").exists()


def test_acl_guards_the_vip_channel_as_the_main_port(tmp_path: Path) -> None:
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(yaml.safe_dump(ACL, sort_keys=False))
    server = start_serve(tmp_path / "store", acl_file)
    try:
        fast = vip(server.broker)
        assert is_refusal(exchange(fast, send_request("TopicFrame")), "No accessKey is configured")
        assert exchange(fast, signed(send_request("TopicFrame"), USER)).code == RS.SUCCESS
        denied = exchange(fast, signed(send_request("TopicDenied"), USER))
        assert denied.code == RS.NO_PERMISSION
        main = exchange(server.broker, signed(send_request("TopicDenied"), USER))
        assert (denied.code, denied.remark) == (main.code, main.remark)
        server.stop()
    finally:
        server.kill()
