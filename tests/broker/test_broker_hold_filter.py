"""Long polling with a filter (``PullRequestHoldService.notifyMessageArriving``,
``rmqcli.broker.processor.pull.hold``).

A held pull whose subscription filters by tag or by SQL92 stays held when a message it does not
match arrives; a matching arrival answers it at once. The service's check round (every 5 s, from
its start) answers a held pull whose queue grew, whatever its filter: PULL_RETRY_IMMEDIATELY, past
the messages it did not match. The same scenario runs over the wire against ``rmq serve`` and
against the real 4.9.8 broker (skipped without Java 17 and the kit): it learns where a round falls
from the first answer, then plays the rest just after that round. In process: a held pull leaves
no waiter behind, however its wait ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rmqcli.broker.controller import BrokerController
from rmqcli.broker.processor import pull as pull_mod
from rmqcli.remoting import headers as hd
from rmqcli.remoting.client import RemotingClient
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.store.write.messages import Message
from tests.support.components import require
from tests.support.controller import broker_controller
from tests.support.oracle import real_cluster
from tests.support.records import body_records
from tests.support.serve import ServeProcess, write_conf

ROUND = 5.0  # checkHoldRequest's period with longPollingEnable
FILTERS = {  # subscription: (expression type, expression, a message's properties it misses, it matches)
    "tag": ("TAG", "TagA || TagC", {"TAGS": "TagB"}, {"TAGS": "TagA"}),
    "sql92": ("SQL92", "a > 5 AND TAGS IS NOT NULL", {"TAGS": "TagA", "a": "1"}, {"TAGS": "TagB", "a": "9"}),
}


@dataclass
class Broker:
    name: str
    addr: str


@pytest.fixture(scope="module", params=["rmq", pytest.param("real", marks=pytest.mark.java)])
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    tmp = tmp_path_factory.mktemp(request.param)
    if request.param == "rmq":
        with ServeProcess(
            tmp / "store", write_conf(tmp / "broker.conf", enablePropertyFilter="true")
        ) as proc:
            yield Broker("rmq", proc.broker)
        return
    require("java")
    with real_cluster(tmp, autoCreateTopicEnable="true", enablePropertyFilter="true") as real:
        time.sleep(1.5)  # the kit's README: give the broker a moment after "boot success"
        yield Broker("real", real.broker)


async def send(client: RemotingClient, addr: str, topic: str, key: str, props: dict[str, str]) -> None:
    properties = "".join(f"{k}\x01{v}\x02" for k, v in {**props, "KEYS": key}.items())
    header = hd.SendMessageRequestHeader(
        producer_group="PG_HOLD", topic=topic, default_topic="TBW102", default_topic_queue_nums=1,
        queue_id=0, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0, properties=properties,
    )  # fmt: skip
    answer = await client.invoke(addr, RemotingCommand.request(RC.SEND_MESSAGE, header, key.encode()), 10)
    assert answer.code == RS.SUCCESS, answer.remark


def held_pull(
    client: RemotingClient, addr: str, topic: str, offset: int, kind: str
) -> asyncio.Task[RemotingCommand]:
    """A pull of queue 0 from ``offset`` that may be held 15 s, carrying its subscription."""
    expression_type, expression, _, _ = FILTERS[kind]
    header = hd.PullMessageRequestHeader(
        consumer_group=f"G_HOLD_{kind}", topic=topic, queue_id=0, queue_offset=offset, max_msg_nums=32,
        sys_flag=hd.PULL_FLAG_SUSPEND | hd.PULL_FLAG_SUBSCRIPTION, commit_offset=0,
        suspend_timeout_millis=15000, subscription=expression, sub_version=0, expression_type=expression_type,
    )  # fmt: skip
    return asyncio.create_task(client.invoke(addr, RemotingCommand.request(RC.PULL_MESSAGE, header), 30))


@pytest.mark.parametrize("kind", list(FILTERS))
def test_a_held_pull_waits_for_a_message_its_filter_matches(broker: Broker, kind: str) -> None:
    topic = f"TopicHold_{kind}"
    _, _, miss, hit = FILTERS[kind]

    async def go() -> None:
        async with RemotingClient() as client:
            await send(client, broker.addr, topic, "m0", miss)  # creates the topic
            # a round answers a held pull after an arrival it does not match
            first = held_pull(client, broker.addr, topic, 1, kind)
            await asyncio.sleep(0.3)
            assert not first.done()
            sent = time.monotonic()
            await send(client, broker.addr, topic, "m1", miss)
            answer = await first
            assert time.monotonic() - sent < ROUND + 1
            assert (answer.code, answer.ext_fields["nextBeginOffset"]) == (RS.PULL_RETRY_IMMEDIATELY, "2")
            # just after that round: a miss keeps the pull held, a match answers it at once
            second = held_pull(client, broker.addr, topic, 2, kind)
            await asyncio.sleep(0.3)
            await send(client, broker.addr, topic, "m2", miss)
            await asyncio.sleep(0.6)
            assert not second.done(), f"{broker.name}: answered on an arrival its filter does not match"
            sent = time.monotonic()
            await send(client, broker.addr, topic, "m3", hit)
            answer = await second
            assert time.monotonic() - sent < 3.0  # at once (a loaded JVM can be slow), before a round
            assert answer.code == RS.SUCCESS, answer.remark
            assert [rec.properties["KEYS"] for rec in body_records(answer.body)] == ["m3"]
            assert answer.ext_fields["nextBeginOffset"] == "4"

    asyncio.run(go())


@pytest.fixture
def ctl(tmp_path: Path) -> Iterator[BrokerController]:
    with broker_controller(tmp_path / "store", [int(time.time() * 1000)], enable_property_filter=True) as c:
        c.topics.put("TopicIn", 1, 1, 6)
        c.store.put(Message("TopicIn", 0, b"m0", {"TAGS": "TagB"}))
        yield c


def in_process_pull(ctl: BrokerController, kind: str, suspend_ms: int) -> asyncio.Future[RemotingCommand]:
    expression_type, expression, _, _ = FILTERS[kind]
    header = hd.PullMessageRequestHeader(
        consumer_group="G_IN", topic="TopicIn", queue_id=0, queue_offset=1, max_msg_nums=32,
        sys_flag=hd.PULL_FLAG_SUSPEND | hd.PULL_FLAG_SUBSCRIPTION, commit_offset=0,
        suspend_timeout_millis=suspend_ms, subscription=expression, sub_version=0,
        expression_type=expression_type,
    )  # fmt: skip
    reply = pull_mod.pull_message(ctl, RemotingCommand.request(RC.PULL_MESSAGE, header), None)  # type: ignore[arg-type]
    return asyncio.ensure_future(reply)  # type: ignore[arg-type]


def test_held_pulls_leave_no_waiter_behind(ctl: BrokerController) -> None:
    async def go() -> None:
        # timed out, on an idle queue: 4.9.8 drops a request once answered
        for kind in ("tag", "sql92"):
            for _ in range(20):
                answer = await in_process_pull(ctl, kind, 20)
                assert answer.code == RS.PULL_NOT_FOUND
        assert ctl.holds.waiters == {}
        # cancelled (its connection closed)
        held = in_process_pull(ctl, "tag", 15000)
        await asyncio.sleep(0.05)
        assert len(ctl.holds.waiters[("TopicIn", 0)]) == 1
        held.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await held
        assert ctl.holds.waiters == {}
        # woken by an arrival it does not match: still one waiter, not two
        held = in_process_pull(ctl, "tag", 15000)
        await asyncio.sleep(0.05)
        ctl.store.put(Message("TopicIn", 0, b"m1", {"TAGS": "TagB"}))
        await asyncio.sleep(0.05)
        assert not held.done() and len(ctl.holds.waiters[("TopicIn", 0)]) == 1
        ctl.store.put(Message("TopicIn", 0, b"m2", {"TAGS": "TagC"}))
        answer = await asyncio.wait_for(held, 5)
        assert answer.code == RS.SUCCESS and answer.ext_fields["nextBeginOffset"] == "3"
        assert ctl.holds.waiters == {}

    asyncio.run(go())
