"""``rmq serve`` on the wire: consumer send-back (36), delayed delivery, transactions (37, 39), offsets of
unknown queues (protocol.md B.3; ``SendMessageProcessor``, ``ScheduleMessageService``,
``EndTransactionProcessor``, ``TransactionalMessageCheckService`` of RocketMQ 4.9.x).

One ``rmq serve`` subprocess with short delay levels and a fast transaction check; requests are made
with rmq's own remoting client, which also plays the transactional producer that answers the
broker's CHECK_TRANSACTION_STATE.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from formats import commitlog as fmt
from formats import fastjson
from rmqcli.remoting import headers as hd
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.client import RemotingClient
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.store.configfiles import delay_offsets
from rmqcli.store.read.commitlog import Record
from tests.support import ROOT
from tests.support.cli import RMQ
from tests.support.records import body_records
from tests.support.serve import LEVELS, ServeProcess, invoke, run, write_conf


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    tmp = tmp_path_factory.mktemp("serve")
    conf = write_conf(
        tmp / "broker.conf",
        flushDiskType="SYNC_FLUSH",
        messageDelayLevel=LEVELS,
        transactionCheckInterval="300",
        transactionTimeOut="2000",
        transactionCheckMax="2",
        flushConsumerOffsetInterval="300",
    )
    with ServeProcess(tmp / "store", conf) as proc:
        yield proc


async def send(
    client: RemotingClient, addr: str, topic: str, body: bytes, props: dict[str, str], sys_flag: int = 0,
    queue_id: int = 0,
) -> RemotingCommand:  # fmt: skip
    header = hd.SendMessageRequestHeaderV2(
        a="PG", b=topic, c="TBW102", d=4, e=queue_id, f=sys_flag, g=int(time.time() * 1000), h=0,
        i=fmt.encode_properties(props).decode(),
    )  # fmt: skip
    response = await invoke(client, addr, RC.SEND_MESSAGE_V2, header.to_ext_fields(), body)
    assert response.code == RS.SUCCESS, response.remark
    return response


async def pull_all(
    client: RemotingClient, addr: str, topic: str, queue_id: int, want: int, timeout: float = 20.0
) -> list[Record]:
    """Pull ``topic``/``queue_id`` from offset 0 until ``want`` records are there (long polling)."""
    got: list[Record] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        header = hd.PullMessageRequestHeader(
            consumer_group="G_FEATURES",
            topic=topic,
            queue_id=queue_id,
            queue_offset=len(got),
            max_msg_nums=32,
            sys_flag=0x4 | 0x2,
            commit_offset=0,
            suspend_timeout_millis=1000,
            subscription="*",
            sub_version=0,
        ).to_ext_fields()
        response = await invoke(client, addr, RC.PULL_MESSAGE, header)
        if response.code == RS.SUCCESS:
            got.extend(body_records(response.body))
        elif response.code in (RS.TOPIC_NOT_EXIST, RS.PULL_NOT_FOUND, RS.PULL_OFFSET_MOVED):
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"pull {topic}: {response.code} {response.remark}")
    return got


def send_back_header(offset: int, group: str, delay_level: int = 0, max_times: int | None = None) -> dict:
    return hd.ConsumerSendMsgBackRequestHeader(
        offset=offset,
        group=group,
        delay_level=delay_level,
        origin_msg_id=None,
        origin_topic=None,
        max_reconsume_times=max_times,
    ).to_ext_fields()


def test_send_back_retries_with_growing_delay_then_goes_to_the_dlq(server: ServeProcess) -> None:
    async def go(client: RemotingClient) -> None:
        addr, group = server.broker, "G_SENDBACK"
        sent = await send(client, addr, "TopicSB", b"retry me", {"TAGS": "T1", "KEYS": "sb-1"})
        [original] = await pull_all(client, addr, "TopicSB", 0, 1)
        assert original.msg_id == sent.ext_fields["msgId"]

        # RECONSUME_LATER: level 0 asks for 3 + reconsumeTimes; the retry topic is created
        back = await invoke(
            client, addr, RC.CONSUMER_SEND_MSG_BACK, send_back_header(original.physical_offset, group, 0, 2)
        )  # noqa: E501
        assert back.code == RS.SUCCESS, back.remark
        [first] = await pull_all(client, addr, "%RETRY%" + group, 0, 1)
        assert first.reconsume_times == 1 and first.stored_body == b"retry me"
        props = first.properties
        assert props["RETRY_TOPIC"] == "TopicSB" and props["ORIGIN_MESSAGE_ID"] == original.msg_id
        assert props["DELAY"] == "3" and props["REAL_TOPIC"] == "%RETRY%" + group and props["WAIT"] == "false"
        assert props["TAGS"] == "T1" and props["KEYS"] == "sb-1"

        # the scheduled copy sits in SCHEDULE_TOPIC_XXXX queue 2 with its delivery time as tags code
        [scheduled] = await pull_all(client, addr, fmt.SCHEDULE_TOPIC, 2, 1)
        assert scheduled.properties_raw == first.properties_raw
        assert first.store_timestamp >= scheduled.store_timestamp + 1000  # level 3 is 1 s here

        # second failure: level 4, reconsumeTimes 2, origin id kept
        back = await invoke(
            client, addr, RC.CONSUMER_SEND_MSG_BACK, send_back_header(first.physical_offset, group, 0, 2)
        )  # noqa: E501
        assert back.code == RS.SUCCESS
        second = (await pull_all(client, addr, "%RETRY%" + group, 0, 2))[1]
        assert second.reconsume_times == 2 and second.properties["DELAY"] == "4"
        assert second.properties["ORIGIN_MESSAGE_ID"] == original.msg_id

        # reconsumeTimes reached maxReconsumeTimes: straight to the DLQ, not delayed
        back = await invoke(
            client, addr, RC.CONSUMER_SEND_MSG_BACK, send_back_header(second.physical_offset, group, 0, 2)
        )  # noqa: E501
        assert back.code == RS.SUCCESS
        [dead] = await pull_all(client, addr, "%DLQ%" + group, 0, 1)
        assert dead.reconsume_times == 3 and dead.properties["DELAY"] == "0"
        assert "REAL_TOPIC" in dead.properties  # inherited from the retry record, as in Java
        assert dead.stored_body == b"retry me"

        # a negative level also means the DLQ; an offset with no record is an error
        back = await invoke(
            client, addr, RC.CONSUMER_SEND_MSG_BACK, send_back_header(original.physical_offset, group, -1)
        )  # noqa: E501
        assert back.code == RS.SUCCESS
        assert len(await pull_all(client, addr, "%DLQ%" + group, 0, 2)) == 2
        bad = await invoke(client, addr, RC.CONSUMER_SEND_MSG_BACK, send_back_header(7, group))
        assert bad.code == RS.SYSTEM_ERROR and "look message by offset failed" in (bad.remark or "")

    run(go)
    deadline = time.monotonic() + 5  # persisted every flushConsumerOffsetInterval (300 ms here)
    offsets: dict[int, int] = {}
    while time.monotonic() < deadline and not (offsets.get(3, 0) >= 1 and offsets.get(4, 0) >= 1):
        time.sleep(0.1)
        offsets = delay_offsets(server.store / "config")
    assert offsets.get(3, 0) >= 1 and offsets.get(4, 0) >= 1


def test_delayed_message_is_delivered_to_its_real_queue(server: ServeProcess) -> None:
    async def go(client: RemotingClient) -> None:
        addr = server.broker
        response = await send(client, addr, "TopicDelay", b"later", {"DELAY": "2", "TAGS": "D"}, queue_id=1)
        assert response.ext_fields["queueId"] == "1"
        max_now = await invoke(client, addr, RC.GET_MAX_OFFSET, {"topic": "TopicDelay", "queueId": "1"})
        assert max_now.ext_fields["offset"] == "0"  # parked in SCHEDULE_TOPIC_XXXX, not in the topic
        [delivered] = await pull_all(client, addr, "TopicDelay", 1, 1)
        [scheduled] = await pull_all(client, addr, fmt.SCHEDULE_TOPIC, 1, 1)
        assert delivered.properties_raw == scheduled.properties_raw  # DELAY, REAL_* stay in the string
        assert delivered.properties["REAL_QID"] == "1" and delivered.stored_body == b"later"
        assert delivered.store_timestamp >= scheduled.store_timestamp + 2000  # level 2 is 2 s here

    run(go)


def test_offsets_of_an_unknown_queue_are_zero(server: ServeProcess) -> None:
    async def go(client: RemotingClient) -> None:
        for code in (RC.GET_MIN_OFFSET, RC.GET_MAX_OFFSET):
            r = await invoke(client, server.broker, code, {"topic": "NoSuchTopicAtAll", "queueId": "3"})
            assert r.code == RS.SUCCESS and r.ext_fields["offset"] == "0"

    run(go)


def test_system_topics_of_a_fresh_broker_are_registered(server: ServeProcess) -> None:
    """``TopicConfigManager``'s constructor: SCHEDULE_TOPIC_XXXX (18 queues), <cluster>_REPLY_TOPIC,
    BenchmarkTest (1024), and the cluster's and broker's own topics (inherit, read, write)."""

    async def go(client: RemotingClient) -> dict[str, tuple[int, int]]:
        nums = {}
        for topic in (
            fmt.SCHEDULE_TOPIC,
            "DefaultCluster_REPLY_TOPIC",
            "BenchmarkTest",
            "DefaultCluster",
            "broker-a",
        ):
            r = await invoke(client, server.namesrv, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
            assert r.code == RS.SUCCESS, topic
            queue = fastjson.loads(r.body)["queueDatas"][0]
            nums[topic] = (queue["readQueueNums"], queue["perm"])
        return nums

    assert run(go) == {
        fmt.SCHEDULE_TOPIC: (18, 6),
        "DefaultCluster_REPLY_TOPIC": (1, 6),
        "BenchmarkTest": (1024, 6),
        "DefaultCluster": (16, 7),
        "broker-a": (1, 7),
    }


TX_TOPIC = "TopicTx"
PG = "PG_TX_PROTO"


def end_header(r: RemotingCommand, kind: int, *, group: str = PG, from_check: bool = False) -> dict:
    offset = int(r.ext_fields["msgId"][-16:], 16)
    return hd.EndTransactionRequestHeader(
        producer_group=group,
        tran_state_table_offset=int(r.ext_fields["queueOffset"]),
        commit_log_offset=offset,
        commit_or_rollback=kind,
        from_transaction_check=from_check,
        msg_id=r.ext_fields["msgId"],
        transaction_id=None,
    ).to_ext_fields()


def test_transactions_commit_rollback_and_check_back(server: ServeProcess) -> None:
    checks: list[tuple[dict, Record]] = []

    async def go(client: RemotingClient) -> None:
        addr = server.broker

        async def on_check(req: RemotingCommand, _addr: str) -> None:
            body = body_records(req.body)[0]
            checks.append((dict(req.ext_fields), body))
            if body.properties.get("KEYS") == "tx-check-commit":  # the others stay UNKNOW
                h = req.header(hd.CheckTransactionStateRequestHeader)
                header = hd.EndTransactionRequestHeader(
                    producer_group=PG,
                    tran_state_table_offset=h.tran_state_table_offset,
                    commit_log_offset=h.commit_log_offset,
                    commit_or_rollback=8,
                    from_transaction_check=True,
                    msg_id=h.msg_id or "",
                    transaction_id=h.transaction_id,
                ).to_ext_fields()
                await client.invoke_oneway(addr, RemotingCommand.request(RC.END_TRANSACTION, header))

        client.register(RC.CHECK_TRANSACTION_STATE, on_check)
        beat = jb.HeartbeatData(client_id="127.0.0.1@tx", producer_data_set=[jb.ProducerData(group_name=PG)])
        assert (await invoke(client, addr, RC.HEART_BEAT, None, jb.encode(beat))).code == RS.SUCCESS

        def tx(key: str) -> dict[str, str]:
            return {"TRAN_MSG": "true", "PGROUP": PG, "KEYS": key, "TAGS": "TagTx", "UNIQ_KEY": "U" + key}

        prepared = 4  # MessageSysFlag.TRANSACTION_PREPARED_TYPE
        commit = await send(client, addr, TX_TOPIC, b"c", tx("tx-commit"), prepared, queue_id=1)
        rollback = await send(client, addr, TX_TOPIC, b"r", tx("tx-rollback"), prepared, queue_id=1)
        await send(client, addr, TX_TOPIC, b"k", tx("tx-check-commit"), prepared, queue_id=2)
        await send(client, addr, TX_TOPIC, b"u", tx("tx-unknown"), prepared, queue_id=2)
        for q in ("1", "2"):  # nothing is visible before the outcome
            r = await invoke(client, addr, RC.GET_MAX_OFFSET, {"topic": TX_TOPIC, "queueId": q})
            assert r.ext_fields["offset"] == "0"
        halves = await pull_all(client, addr, "RMQ_SYS_TRANS_HALF_TOPIC", 0, 4)
        assert [h.properties["KEYS"] for h in halves] == [
            "tx-commit",
            "tx-rollback",
            "tx-check-commit",
            "tx-unknown",
        ]
        assert all(
            h.sys_flag & fmt.TRANSACTION_MASK == 0 and h.properties["REAL_TOPIC"] == TX_TOPIC for h in halves
        )

        wrong = await invoke(client, addr, RC.END_TRANSACTION, end_header(commit, 8, group="OTHER"))
        assert wrong.code == RS.SYSTEM_ERROR and wrong.remark == "The producer group wrong"
        assert (await invoke(client, addr, RC.END_TRANSACTION, end_header(commit, 8))).code == RS.SUCCESS
        assert (await invoke(client, addr, RC.END_TRANSACTION, end_header(rollback, 12))).code == RS.SUCCESS

        [committed] = await pull_all(client, addr, TX_TOPIC, 1, 1)
        assert committed.properties["KEYS"] == "tx-commit" and committed.stored_body == b"c"
        assert committed.sys_flag & fmt.TRANSACTION_MASK == 8
        assert committed.prepared_transaction_offset == halves[0].physical_offset
        ops = await pull_all(client, addr, "RMQ_SYS_TRANS_OP_HALF_TOPIC", 0, 2)
        assert sorted(int(op.stored_body) for op in ops) == [0, 1]
        assert all(op.properties == {"WAIT": "true", "TAGS": "d"} for op in ops)

        # the check: tx-check-commit is committed by the producer's answer, tx-unknown is checked
        # transactionCheckMax (2) times and then moved to TRANS_CHECK_MAX_TIME_TOPIC
        [checked] = await pull_all(client, addr, TX_TOPIC, 2, 1, timeout=30)
        assert checked.properties["KEYS"] == "tx-check-commit" and checked.stored_body == b"k"
        [discarded] = await pull_all(client, addr, "TRANS_CHECK_MAX_TIME_TOPIC", 0, 1, timeout=30)
        assert discarded.properties["KEYS"] == "tx-unknown"
        assert discarded.properties["TRANSACTION_CHECK_TIMES"] == "2"
        # after the rollback nothing more arrives in queue 1
        r = await invoke(client, addr, RC.GET_MAX_OFFSET, {"topic": TX_TOPIC, "queueId": "1"})
        assert r.ext_fields["offset"] == "1"

    run(go)
    keys = [body.properties["KEYS"] for _, body in checks]
    assert "tx-commit" not in keys and "tx-rollback" not in keys
    assert keys.count("tx-unknown") == 2 and "tx-check-commit" in keys
    for fields, body in checks:  # the body is the message as the producer sent it, real topic and queue
        assert body.topic == TX_TOPIC and body.queue_id == 2
        assert fields["msgId"] == fields["transactionId"] == body.properties["UNIQ_KEY"]
        assert int(fields["commitLogOffset"]) == body.physical_offset
    deadline = time.monotonic() + 5
    path = server.store / "config" / "consumerOffset.json"
    while time.monotonic() < deadline and "CID_RMQ_SYS_TRANS" not in path.read_text():
        time.sleep(0.1)
    assert "RMQ_SYS_TRANS_HALF_TOPIC@CID_RMQ_SYS_TRANS" in path.read_text()


def test_transactional_sends_are_refused_when_configured(tmp_path: Path) -> None:
    conf = write_conf(tmp_path / "broker.conf", rejectTransactionMessage="true")
    with ServeProcess(tmp_path / "store", conf) as proc:

        async def go(client: RemotingClient) -> RemotingCommand:
            header = hd.SendMessageRequestHeaderV2(
                a="PG", b="T", c="TBW102", d=4, e=0, f=4, g=0, h=0, i="TRAN_MSG\x01true\x02PGROUP\x01PG"
            )
            return await invoke(client, proc.broker, RC.SEND_MESSAGE_V2, header.to_ext_fields(), b"x")

        r = run(go)
    assert r.code == RS.NO_PERMISSION and "transaction message is forbidden" in (r.remark or "")


def test_a_direct_send_to_the_retry_topic_past_max_reconsume_goes_to_the_dlq(server: ServeProcess) -> None:
    """``handleRetryAndDLQ``: a client's own send-back to ``%RETRY%<group>`` (when 36 failed)."""

    async def go(client: RemotingClient) -> None:
        addr, group = server.broker, "G_DIRECT"

        async def direct(times: int) -> RemotingCommand:
            header = hd.SendMessageRequestHeaderV2(
                a="PG", b="%RETRY%" + group, c="TBW102", d=4, e=0, f=0, g=0, h=0,
                i=f"KEYS\x01direct-{times}", j=times, l=3,
            )  # fmt: skip
            r = await invoke(client, addr, RC.SEND_MESSAGE_V2, header.to_ext_fields(), b"again")
            assert r.code == RS.SUCCESS, r.remark
            return r

        await direct(2)
        await direct(3)
        [retry] = await pull_all(client, addr, "%RETRY%" + group, 0, 1)
        assert retry.properties["KEYS"] == "direct-2" and retry.reconsume_times == 2
        [dead] = await pull_all(client, addr, "%DLQ%" + group, 0, 1)
        assert dead.properties["KEYS"] == "direct-3" and dead.reconsume_times == 3
        assert "DELAY" not in dead.properties  # the DLQ's DELAY=0 went to a map that was replaced

    run(go)


def past_end_pull(queue_id: int, offset: int) -> dict:
    return hd.PullMessageRequestHeader(
        consumer_group="G_PAST", topic="TopicPastEnd", queue_id=queue_id, queue_offset=offset,
        max_msg_nums=32, sys_flag=0x4, commit_offset=0, suspend_timeout_millis=0, subscription="*",
        sub_version=0,
    ).to_ext_fields()  # fmt: skip


def test_a_pull_past_the_end_is_moved_to_the_max_offset(server: ServeProcess) -> None:
    """``DefaultMessageStore.getMessage`` (4.9.x): OFFSET_OVERFLOW_BADLY corrects to the max offset."""

    async def go(client: RemotingClient) -> None:
        for body in (b"one", b"two"):
            await send(client, server.broker, "TopicPastEnd", body, {"TAGS": "P"})
        for offset, code, status, next_offset in (
            (9, RS.PULL_OFFSET_MOVED, "OFFSET_OVERFLOW_BADLY", "2"),
            (2, RS.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE", "2"),
            (0, RS.SUCCESS, "FOUND", "2"),
        ):
            r = await invoke(client, server.broker, RC.PULL_MESSAGE, past_end_pull(0, offset))
            assert (r.code, r.remark, r.ext_fields["nextBeginOffset"]) == (code, status, next_offset)
            assert (r.ext_fields["minOffset"], r.ext_fields["maxOffset"]) == ("0", "2")
        empty = await invoke(client, server.broker, RC.PULL_MESSAGE, past_end_pull(1, 5))
        assert (empty.code, empty.remark, empty.ext_fields["nextBeginOffset"]) == (
            RS.PULL_OFFSET_MOVED, "NO_MESSAGE_IN_QUEUE", "0"
        )  # fmt: skip

    run(go)


def test_delay_progress_survives_a_restart(tmp_path: Path) -> None:
    """delayOffset.json is written at shutdown and read at start: what was delivered before the stop is
    not delivered again, what was still waiting is delivered after the restart."""
    conf = write_conf(tmp_path / "broker.conf", messageDelayLevel="1s 4s" + " 1s" * 16)
    store = tmp_path / "store"

    async def send_two(client: RemotingClient, addr: str) -> None:
        await send(client, addr, "TopicDelayRestart", b"soon", {"DELAY": "1", "KEYS": "soon"})
        await send(client, addr, "TopicDelayRestart", b"later", {"DELAY": "2", "KEYS": "later"})
        [first] = await pull_all(client, addr, "TopicDelayRestart", 0, 1)
        assert first.properties["KEYS"] == "soon"

    with ServeProcess(store, conf) as proc:
        run(send_two, proc.broker)
        assert proc.stop() == 0  # before "later" is due
    assert delay_offsets(store / "config") == {1: 1}

    async def after(client: RemotingClient, addr: str) -> list[Record]:
        got = await pull_all(client, addr, "TopicDelayRestart", 0, 2)
        await asyncio.sleep(1.5)  # nothing else may come
        return got + await pull_all(client, addr, "TopicDelayRestart", 0, 3, timeout=0.5)

    with ServeProcess(store, conf) as proc:
        got = run(after, proc.broker)
        assert proc.stop() == 0
    assert [r.properties["KEYS"] for r in got[:2]] == ["soon", "later"]
    assert len(got) == 4  # the two pulls from offset 0 saw the same two messages, nothing more
    assert delay_offsets(store / "config") == {1: 1, 2: 1}


def test_zz_the_store_verifies_clean_after_a_clean_stop(server: ServeProcess) -> None:
    """Last in this module: everything the tests above made the broker write (retry, DLQ, schedule,
    half, op, check-max-time topics) is a store ``rmq verify`` finds nothing wrong with."""
    assert server.stop() == 0
    verify = subprocess.run(
        [*RMQ, "verify", str(server.store), "--config", str(server.conf)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert verify.returncode == 0, verify.stdout[-3000:] + verify.stderr[-3000:]
    topics = (server.store / "config" / "topics.json").read_text()
    for name in ("SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC",
                 "TRANS_CHECK_MAX_TIME_TOPIC", "%RETRY%G_SENDBACK", "%DLQ%G_SENDBACK"):  # fmt: skip
        assert f'"{name}"' in topics
