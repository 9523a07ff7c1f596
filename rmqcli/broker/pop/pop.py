"""POP_MESSAGE (200050): ``PopMessageProcessor`` of RocketMQ 5.1.1 (research notes issue21 §2, §3, §7).

``check`` refuses a request as 5.1.1 does, in its order; ``pop_once`` reads the queues (the
pop-retry topic ``%RETRY%<group>_<topic>`` first one time in five, else after the topic's queues
when the batch is not full; never for an orderly pop), and for each queue that gave messages:

* non-orderly: one ck (``so`` the queue's pop offset, ``d`` the diffs of the messages' offsets) in
  revive queue ``reviveQid`` (round robin), then the consumer offset moves past what was read (the
  ck is stored first: redelivery is the revive service's job);
* orderly (``order=true``, reviveQid 999): no ck; the queue is skipped while the order info of its
  last batch blocks it, else the batch is recorded and the consumer offset stays at its start.

The consumer offsets are those of PULL (one table); with none yet, ``initMode`` MIN starts at the
queue's min offset, MAX at ``max - 1`` (committed at once). A queue whose messages the filter
skipped still moves its offset (5.1.1's ``addCkMock``). Messages of the retry topic come back
relabelled with the original topic and ``POP_CK`` (the extra info); the others as stored.
``pop_message`` adds long polling: with nothing found the request waits (``polling``) until woken
or ``pollTime`` after ``bornTime``, then answers POLLING_TIMEOUT (210), or POLLING_FULL (209).

rmq runs every step on the event loop without awaiting in between, so 5.1.1's per-queue lock
(``QueueLockManager``) has nothing to exclude and is left out.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from formats import commitlog as fmt
from formats.records import RecordError, decode_record
from rmqcli.broker.pop import constants as k
from rmqcli.broker.pop.checkpoint import PopCheckPoint
from rmqcli.broker.pop.polling import Polling
from rmqcli.broker.pop.read import read_queue
from rmqcli.broker.pop.revivelog import RevivePutError, put_ck
from rmqcli.broker.pop.service import PopService, pop_service
from rmqcli.broker.state import is_readable, tag_codes, validate_group, validate_topic
from rmqcli.filter.sql92 import Selector, SelectorError, compiled, is_tag_type
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.remoting.server.refusal import FAQ5, Refusal
from rmqcli.store.write.records import encode_again

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext

TOO_MUCH_MS = 500  # PopMessageRequestHeader.isTimeoutTooMuch
ORDER_RECHECK_SECONDS = 1.0
_random = random.Random()


class PopError(Refusal):
    """A POP-family request the broker refuses: its code and remark."""


@dataclass
class PopRequest:
    """What POP_MESSAGE asks (``PopMessageRequestHeader``)."""

    group: str
    topic: str
    queue_id: int  # < 0: every read queue
    max_msg_nums: int
    invisible_time: int  # ms
    poll_time: int = 0  # ms
    born_time: int = 0  # ms; 0: now
    init_mode: int = k.INIT_MODE_MIN
    exp_type: str | None = None
    exp: str | None = None
    order: bool = False
    attempt_id: str | None = None


@dataclass
class PopResult:
    """The answer: ``code`` SUCCESS (remark FOUND) with ``records`` (stored records, as PULL
    returns them), or POLLING_TIMEOUT / POLLING_FULL with none; the response-header fields."""

    code: int
    remark: str
    pop_time: int
    invisible_time: int
    revive_qid: int
    rest_num: int
    start_offset_info: str = ""
    msg_offset_info: str = ""
    order_count_info: str | None = None
    records: list[bytes] = field(default_factory=list)
    offsets: list[tuple[bool, int, int]] = field(default_factory=list)  # (retry, queue id, offset)
    starts: dict[tuple[bool, int], int] = field(default_factory=dict)  # (retry, queue id) -> ck start

    @property
    def body(self) -> bytes:
        return b"".join(self.records)

    def handle(self, index: int, broker_name: str) -> str:
        """The receipt handle of the ``index``-th message as the 5.1 proxy encodes it
        (``ReceiptHandle.encode``: the 8 fields of the extra info, then the CommitLog offset)."""
        retry, queue_id, offset = self.offsets[index]
        physical = fmt.stored_physical_offset(self.records[index])
        extra = k.ExtraInfo(
            self.starts[(retry, queue_id)], self.pop_time, self.invisible_time, self.revive_qid, retry,
            broker_name, queue_id, offset, physical,
        )  # fmt: skip
        return extra.encode()


def now_ms() -> int:
    return int(time.time() * 1000)


def refuse_names(group: str, topic: str) -> None:
    """4.9.8 and 5.1.1 check neither name; both name offsets, configs and the retry topic's
    directories, so a bad one is refused (SYSTEM_ERROR with the check's remark)."""
    problem = (
        validate_group(group) or validate_topic(topic) or validate_topic(k.pop_retry_topic(topic, group))
    )
    if problem:
        raise PopError(RS.SYSTEM_ERROR, problem)


def check_read(ctl: BrokerContext, group: str, topic: str, queue_id: int, what: str = "pop") -> dict:
    """The checks POP, PEEK, NOTIFICATION and POLLING_INFO share (5.1.1's order): the broker
    readable, the topic there and readable, the queue id, the group (created when
    ``autoCreateSubscriptionGroup``) and its ``consumeEnable``; the topic's config."""
    refuse_names(group, topic)
    ip = ctl.config.broker_ip1
    if not is_readable(ctl.config.broker_permission):
        raise PopError(RS.NO_PERMISSION, f"the broker[{ip}] {what} message is forbidden")
    config = ctl.topics.get(topic)
    if config is None:
        raise PopError(RS.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please! {FAQ5}")
    if not is_readable(config["perm"]):
        raise PopError(RS.NO_PERMISSION, f"the topic[{topic}] peeking message is forbidden")
    if queue_id >= config["readQueueNums"]:
        raise PopError(
            RS.SYSTEM_ERROR,
            f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
            f"[{config['readQueueNums']}] consumer:[{group}]",
        )
    sub = ctl.groups.find(group)
    if sub is None:
        raise PopError(
            RS.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{group}] does not exist, {FAQ5}"
        )
    if not sub.get("consumeEnable", True):
        raise PopError(RS.NO_PERMISSION, f"subscription group no permission, {group}")
    return config


def check(
    ctl: BrokerContext, svc: PopService, req: PopRequest
) -> tuple[dict, set[int] | None, Selector | None]:
    """``processRequest``'s refusals; the topic's config, and the tags codes or the SQL92 selector
    to match (5.1.1 takes SQL92 here whatever ``enablePropertyFilter`` says)."""
    ip = ctl.config.broker_ip1
    born = req.born_time if req.born_time > 0 else now_ms()
    if now_ms() - born - req.poll_time > TOO_MUCH_MS:
        raise PopError(RS.POLLING_TIMEOUT, f"the broker[{ip}] pop message is timeout too much")
    if not is_readable(ctl.config.broker_permission):
        raise PopError(RS.NO_PERMISSION, f"the broker[{ip}] pop message is forbidden")
    if req.max_msg_nums > k.MAX_POP_NUMS:
        raise PopError(RS.SYSTEM_ERROR, f"the broker[{ip}] pop message's num is greater than 32")
    if req.max_msg_nums <= 0:  # rmq's own: 5.1.1 reads nothing and long-polls
        raise PopError(RS.SYSTEM_ERROR, f"the broker[{ip}] pop message's num is not positive")
    if not 0 <= req.invisible_time <= svc.config.max_invisible_ms:  # rmq's own: the ck's time must fit
        raise PopError(
            RS.SYSTEM_ERROR,
            f"invisibleTime {req.invisible_time} is out of [0, {svc.config.max_invisible_ms}] ms",
        )
    if ctl.config.is_slave:  # rmq's own: a slave writes no ck (5.1.1 escapes them to a master)
        raise PopError(RS.SYSTEM_ERROR, f"the broker[{ip}] is a slave: pop from its master")
    config = check_read(ctl, req.group, req.topic, req.queue_id)
    if not req.exp:
        return config, None, None
    if is_tag_type(req.exp_type):
        return config, tag_codes(req.exp), None
    try:
        return config, None, compiled(req.exp, req.exp_type)
    except SelectorError:
        raise PopError(RS.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed") from None


def pop_offset(ctl: BrokerContext, topic: str, group: str, queue_id: int, init_mode: int, init: bool) -> int:
    """``getPopOffset``: the committed offset, else MIN: the min offset, MAX: ``max - 1``."""
    offset = ctl.offsets.query(group, topic, queue_id)
    if offset >= 0:
        return offset
    if init_mode == k.INIT_MODE_MIN:
        return ctl.store.min_offset(topic, queue_id)
    offset = max(ctl.store.max_offset(topic, queue_id) - 1, 0)
    if init:
        ctl.offsets.commit(group, topic, queue_id, offset)
    return offset


def take_reset(ctl: BrokerContext, svc: PopService, topic: str, group: str, queue_id: int) -> int | None:
    """``resetPopOffset``: an admin's reset waiting for the queue (``useServerSideResetOffset``) is
    taken and committed, and ends an orderly queue's block; None without one."""
    reset = ctl.offsets.take_reset(topic, group, queue_id)
    if reset is not None:
        svc.order.clear_block(topic, group, queue_id)
        ctl.offsets.commit(group, topic, queue_id, reset)
    return reset


@dataclass
class _Batch:
    req: PopRequest
    pop_time: int
    revive_qid: int
    codes: set[int] | None
    selector: Selector | None
    rest: int = 0
    start_info: list[str] = field(default_factory=list)
    msg_info: list[str] = field(default_factory=list)
    count_info: list[str] | None = None
    records: list[bytes] = field(default_factory=list)
    offsets: list[tuple[bool, int, int]] = field(default_factory=list)
    starts: dict[tuple[bool, int], int] = field(default_factory=dict)


def _pop_queue(ctl: BrokerContext, svc: PopService, b: _Batch, retry: bool, queue_id: int) -> None:
    """``popMsgFromQueue``."""
    req = b.req
    topic = k.pop_retry_topic(req.topic, req.group) if retry else req.topic
    offset = pop_offset(ctl, topic, req.group, queue_id, req.init_mode, True)
    reset = take_reset(ctl, svc, topic, req.group, queue_id)
    if reset is not None:
        offset = reset
    if req.order and svc.order.check_block(req.attempt_id, topic, req.group, queue_id, req.invisible_time):
        b.rest += ctl.store.max_offset(topic, queue_id) - offset
        return
    if len(b.records) >= req.max_msg_nums:
        b.rest += ctl.store.max_offset(topic, queue_id) - offset
        return
    want = req.max_msg_nums - len(b.records)
    codes = None if retry else b.codes
    got = read_queue(ctl, topic, queue_id, offset, want, codes, b.selector)
    if got.status in ("OFFSET_TOO_SMALL", "OFFSET_OVERFLOW_BADLY", "OFFSET_FOUND_NULL"):
        ctl.offsets.commit(req.group, topic, queue_id, got.next_begin_offset)  # the stored offset was wrong
        offset = got.next_begin_offset
        got = read_queue(ctl, topic, queue_id, offset, want, codes, b.selector)
    if got.records:
        if req.order:
            assert b.count_info is not None
            svc.order.update(
                req.attempt_id,
                retry,
                topic,
                req.group,
                queue_id,
                b.pop_time,
                req.invisible_time,
                got.offsets,
                b.count_info,
            )
            ctl.offsets.commit(req.group, topic, queue_id, offset)
        else:
            ck = PopCheckPoint(
                start_offset=offset,
                pop_time=b.pop_time,
                invisible_time=req.invisible_time,
                num=len(got.records),
                queue_id=queue_id,
                topic=topic,
                group=req.group,
                broker_name=ctl.config.broker_name,
                diff=[o - offset for o in got.offsets],
            )
            try:
                put_ck(ctl, ck, b.revive_qid)
            except RevivePutError as exc:
                raise PopError(RS.SYSTEM_ERROR, str(exc)) from None
            ctl.offsets.commit(req.group, topic, queue_id, got.next_begin_offset)
        k.start_offset_info(b.start_info, retry, queue_id, offset)
        b.starts[(retry, queue_id)] = offset
        size = sum(len(data) for data in got.records)  # counted under the topic asked for (5.1.1)
        ctl.metrics.message_out(req.topic, req.group, len(got.records), size, retry=retry)
        k.msg_offset_info(b.msg_info, retry, queue_id, got.offsets)
    elif (
        got.status in ("NO_MATCHED_MESSAGE", "OFFSET_FOUND_NULL", "MESSAGE_WAS_REMOVING")
        and got.next_begin_offset > offset
    ):
        ctl.offsets.commit(req.group, topic, queue_id, got.next_begin_offset)  # addCkMock: the offset moves
    b.rest += got.max_offset - got.next_begin_offset
    for data, queue_offset in zip(got.records, got.offsets, strict=True):
        if retry:
            extra = k.build_extra_info(
                offset,
                b.pop_time,
                req.invisible_time,
                b.revive_qid,
                topic,
                ctl.config.broker_name,
                queue_id,
                queue_offset,
            )
            data = relabel(data, req.topic, extra)
        b.records.append(data)
        b.offsets.append((retry, queue_id, queue_offset))


def relabel(data: bytes, topic: str, pop_ck: str) -> bytes:
    """A retry topic's record as 5.1.1 returns it: the original topic, ``POP_CK`` added (unless
    there), encoded again (``MessageDecoder.encode``); the record as stored if it does not decode."""
    try:
        rec = decode_record(data, 0, len(data))
    except RecordError:
        return data
    props = dict(rec.properties)
    props.setdefault(k.PROPERTY_POP_CK, pop_ck)
    return encode_again(rec, topic.encode("utf-8"), fmt.encode_properties_as_broker(props))


def pop_once(ctl: BrokerContext, req: PopRequest) -> PopResult:
    """One pass over the queues (no waiting); raises ``PopError`` for a refused request. A result
    without records has code POLLING_TIMEOUT (what 5.1.1 answers when it does not hold it)."""
    svc = pop_service(ctl)
    config, codes, selector = check(ctl, svc, req)
    revive_qid = k.ORDER_REVIVE_QUEUE if req.order else svc.next_revive_qid()
    b = _Batch(req, now_ms(), revive_qid, codes, selector, count_info=[] if req.order else None)
    random_q = _random.randrange(100)
    retry_config = None if req.order else ctl.topics.get(k.pop_retry_topic(req.topic, req.group))
    need_retry = random_q % 5 == 0

    def retry_queues() -> None:
        if retry_config is not None:
            n = retry_config["readQueueNums"]
            for i in range(n):
                _pop_queue(ctl, svc, b, True, (random_q + i) % n)

    if need_retry:
        retry_queues()
    if req.queue_id < 0:
        n = config["readQueueNums"]
        for i in range(n):
            _pop_queue(ctl, svc, b, False, (random_q + i) % n)
    else:
        _pop_queue(ctl, svc, b, False, req.queue_id)
    if not need_retry and len(b.records) < req.max_msg_nums:
        retry_queues()
    found = bool(b.records)
    if found and b.rest > 0:  # other requests of the group may find the rest
        svc.polling.notify(req.topic, req.group, req.queue_id)
    return PopResult(
        code=RS.SUCCESS if found else RS.POLLING_TIMEOUT,
        remark="FOUND" if found else "NO_MESSAGE_IN_QUEUE",
        pop_time=b.pop_time,
        invisible_time=req.invisible_time,
        revive_qid=revive_qid,
        rest_num=b.rest,
        start_offset_info=";".join(b.start_info),
        msg_offset_info=";".join(b.msg_info),
        order_count_info=";".join(b.count_info) if b.count_info is not None else None,
        records=b.records,
        offsets=b.offsets,
        starts=b.starts,
    )


async def pop_message(ctl: BrokerContext, req: PopRequest) -> PopResult:
    """POP with long polling: the in-process call (``PopError`` for a refusal)."""
    if req.born_time <= 0:
        req.born_time = now_ms()
    svc = pop_service(ctl)
    deadline = min(req.born_time + req.poll_time, now_ms() + svc.config.max_poll_ms)
    while True:
        res = pop_once(ctl, req)
        if res.code == RS.SUCCESS:
            return res
        remaining = deadline - now_ms()
        decision = svc.polling.check(req.topic, req.group, req.queue_id, req.poll_time, remaining)
        if decision == Polling.FULL:
            res.code = RS.POLLING_FULL
            return res
        if decision != Polling.SUSPENDED:
            return res
        wait = remaining / 1000
        if req.order:  # a block that ends wakes nobody here: look again every second
            wait = min(wait, ORDER_RECHECK_SECONDS)
        await svc.polling.wait(req.topic, req.group, req.queue_id, wait)
