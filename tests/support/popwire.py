"""POP-family requests with rmq's own remoting client, for the POP tests (research notes issue21
§3): one connection per call, the answers' headers and stored records decoded."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from formats.records import Record
from rmqcli.remoting import headers as hd
from rmqcli.remoting.client import RemotingClient
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from tests.support.records import body_records as records


def call(
    addr: str, code: int, header: Any = None, body: bytes = b"", timeout: float = 20.0
) -> RemotingCommand:
    async def go() -> RemotingCommand:
        async with RemotingClient() as client:
            return await client.invoke(
                addr, RemotingCommand.request(code, header, body, version=453), timeout
            )

    return asyncio.run(go())


def calls(addr: str, requests: list[tuple[int, Any]], timeout: float = 20.0) -> list[RemotingCommand]:
    """Several requests at once on one client (held POPs)."""

    async def go() -> list[RemotingCommand]:
        async with RemotingClient() as client:
            return list(
                await asyncio.gather(
                    *(
                        client.invoke(addr, RemotingCommand.request(c, h, version=453), timeout)
                        for c, h in requests
                    )
                )
            )

    return asyncio.run(go())


def send(
    addr: str, topic: str, body: bytes, tags: str = "T", queue_id: int = 0, key: str = ""
) -> RemotingCommand:
    props = f"TAGS\x01{tags}\x02" if tags else ""
    if key:
        props += f"KEYS\x01{key}\x02"
    props += f"UNIQ_KEY\x01U{time.time_ns()}\x02"
    header = hd.SendMessageRequestHeaderV2(
        a="PG", b=topic, c="TBW102", d=4, e=queue_id, f=0, g=int(time.time() * 1000), h=0, i=props
    )
    return call(addr, RC.SEND_MESSAGE_V2, header, body)


def create_topic(addr: str, topic: str, queues: int) -> RemotingCommand:
    header = hd.CreateTopicRequestHeader(
        topic=topic, default_topic="TBW102", read_queue_nums=queues, write_queue_nums=queues, perm=6,
        topic_filter_type="SINGLE_TAG",
    )  # fmt: skip
    return call(addr, RC.UPDATE_AND_CREATE_TOPIC, header)


def pop_header(group: str, topic: str, *, queue_id: int = -1, num: int = 32, invisible: int = 3000,
               poll: int = 0, init_mode: int = 0, order: bool = False, exp: str | None = None,
               attempt: str | None = None) -> hd.PopMessageRequestHeader:  # fmt: skip
    return hd.PopMessageRequestHeader(
        consumer_group=group, topic=topic, queue_id=queue_id, max_msg_nums=num, invisible_time=invisible,
        poll_time=poll, born_time=int(time.time() * 1000), init_mode=init_mode,
        exp_type="TAG" if exp else None, exp=exp, order=order, attempt_id=attempt,
    )  # fmt: skip


def pop(addr: str, group: str, topic: str, **kw: Any) -> RemotingCommand:
    return call(addr, RC.POP_MESSAGE, pop_header(group, topic, **kw))


@dataclass
class Popped:
    """One popped message and its handle (``MQClientAPIImpl.processPopResponse``)."""

    rec: Record
    extra: str
    real_topic: str

    @property
    def body(self) -> bytes:
        return self.rec.body()


def popped(resp: RemotingCommand, topic: str, group: str, broker: str = "broker-a") -> list[Popped]:
    """The messages of a POP answer with the extra info a 5.1.1 client builds for each."""
    ext = resp.ext_fields
    starts = {}
    for part in filter(None, ext.get("startOffsetInfo", "").split(";")):
        kind, qid, start = part.split(" ")
        starts[f"{kind}@{qid}"] = int(start)
    out = []
    for rec in records(resp.body):
        if "POP_CK" in rec.properties:
            extra = rec.properties["POP_CK"]
            real = f"%RETRY%{group}_{topic}"
        else:
            start = starts[f"0@{rec.queue_id}"]
            fields = (ext["popTime"], ext["invisibleTime"], ext["reviveQid"], 0, broker, rec.queue_id)
            extra = " ".join(str(x) for x in (start, *fields, rec.queue_offset))
            real = topic
        out.append(Popped(rec, extra, real))
    return out


def ack(addr: str, group: str, p: Popped) -> RemotingCommand:
    header = hd.AckMessageRequestHeader(
        consumer_group=group, topic=p.real_topic, queue_id=p.rec.queue_id, extra_info=p.extra,
        offset=p.rec.queue_offset,
    )  # fmt: skip
    return call(addr, RC.ACK_MESSAGE, header)


def change(addr: str, group: str, p: Popped, invisible: int) -> RemotingCommand:
    header = hd.ChangeInvisibleTimeRequestHeader(
        consumer_group=group, topic=p.real_topic, queue_id=p.rec.queue_id, extra_info=p.extra,
        offset=p.rec.queue_offset, invisible_time=invisible,
    )  # fmt: skip
    return call(addr, RC.CHANGE_MESSAGE_INVISIBLETIME, header)


def pop_until(addr: str, group: str, topic: str, want: int, timeout: float = 15.0, **kw: Any) -> list[Popped]:
    """POP (long polling 1 s) until ``want`` messages came, or ``timeout``."""
    got: list[Popped] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        resp = pop(addr, group, topic, poll=1000, **kw)
        if resp.code == 0:
            got += popped(resp, topic, group)
    return got


def pull_all(addr: str, topic: str, queue_id: int, group: str = "G_PEEK_REVIVE") -> list[Record]:
    """Every stored record of one queue (PULL with a subscription, no offset committed)."""
    out: list[Record] = []
    offset = 0
    while True:
        header = hd.PullMessageRequestHeader(
            consumer_group=group, topic=topic, queue_id=queue_id, queue_offset=offset, max_msg_nums=32,
            sys_flag=hd.PULL_FLAG_SUBSCRIPTION, commit_offset=0, suspend_timeout_millis=0, subscription="*",
            sub_version=0, expression_type="TAG",
        )  # fmt: skip
        resp = call(addr, RC.PULL_MESSAGE, header)
        if resp.code != 0:
            return out
        out += records(resp.body)
        offset = int(resp.ext_fields["nextBeginOffset"])


def topic_config(addr: str, topic: str) -> dict | None:
    import json

    resp = call(addr, RC.GET_ALL_TOPIC_CONFIG)
    return json.loads(resp.body)["topicConfigTable"].get(topic)


def query_offset(addr: str, group: str, topic: str, queue_id: int) -> int:
    header = hd.QueryConsumerOffsetRequestHeader(
        consumer_group=group, topic=topic, queue_id=queue_id, set_zero_if_not_found=False
    )
    resp = call(addr, RC.QUERY_CONSUMER_OFFSET, header)
    return int(resp.ext_fields["offset"]) if resp.code == 0 else -1


def dispatched(addr: str, topic: str, count: int) -> None:
    """Wait until queue 0 of ``topic`` holds ``count`` messages: a broker answers a send before its
    reput has put it in the consume queue (the real broker's ReputMessageService runs behind)."""
    from tests.support.serve import wait_until

    header = hd.GetMaxOffsetRequestHeader(topic=topic, queue_id=0)
    wait_until(
        lambda: int(call(addr, RC.GET_MAX_OFFSET, header).ext_fields.get("offset", "0")) >= count,
        10,
        f"{count} messages of {topic} dispatched",
        step=0.02,
    )


def filled(addr: str, topic: str, bodies: list[bytes]) -> None:
    """``topic`` created with one queue, ``bodies`` sent to it and in its consume queue."""
    from rmqcli.remoting.codes import ResponseCode as RS

    assert create_topic(addr, topic, 1).code == RS.SUCCESS
    for body in bodies:
        assert send(addr, topic, body).code == RS.SUCCESS
    dispatched(addr, topic, len(bodies))
