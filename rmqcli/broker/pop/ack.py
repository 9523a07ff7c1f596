"""ACK_MESSAGE (200051) and CHANGE_MESSAGE_INVISIBLETIME (200053): ``AckMessageProcessor`` and
``ChangeInvisibleTimeProcessor`` of RocketMQ 5.1.1 (research notes issue21 §2, §3).

Both check the topic (TOPIC_NOT_EXIST), the queue id (MESSAGE_ILLEGAL) and that the offset lies in
``[min, max]`` of the queue (NO_MESSAGE). ``topic`` is the real one: the pop-retry topic for a
retried message (its extra info says type 1).

* ack, non-orderly: an ``ack`` message (``AckMsg``: the ck's start offset and pop time from the
  extra info) in the extra info's revive queue; the revive service clears that message's bit.
* ack, orderly (reviveQid 999): ``commitAndNext`` in the order info; the consumer offset moves to
  the first un-acked offset of the batch; an offset below the committed one is already done.
* change invisible time, non-orderly: a new ck for that one message (``so`` = its offset, pop time
  now, the new invisible time, same revive queue), then an ack of the old ck; the answer carries
  the new pop time, so the caller builds the new handle.
* change invisible time, orderly: the message's next visible time in the order info.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rmqcli.broker.pop import constants as k
from rmqcli.broker.pop.checkpoint import AckMsg, PopCheckPoint
from rmqcli.broker.pop.pop import PopError, now_ms, refuse_names
from rmqcli.broker.pop.revivelog import RevivePutError, put_ack, put_ck
from rmqcli.broker.pop.service import PopService, pop_service
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.remoting.server.refusal import FAQ5

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext


@dataclass
class AckRequest:
    group: str
    topic: str  # the real topic: ``%RETRY%<group>_<topic>`` for a retried message
    queue_id: int
    extra_info: str
    offset: int  # the message's queue offset


@dataclass
class ChangeInvisibleRequest(AckRequest):
    invisible_time: int = 0  # ms from now


@dataclass
class ChangeInvisibleResult:
    pop_time: int
    invisible_time: int
    revive_qid: int


def _check(
    ctl: BrokerContext, svc: PopService, req: AckRequest, parsed: k.ExtraInfo | None = None
) -> k.ExtraInfo:
    refuse_names(req.group, k.normal_topic(req.topic, req.group))
    if ctl.config.is_slave:
        raise PopError(RS.SYSTEM_ERROR, f"the broker[{ctl.config.broker_ip1}] is a slave: ack on its master")
    config = ctl.topics.get(req.topic)
    if config is None:
        raise PopError(RS.TOPIC_NOT_EXIST, f"topic[{req.topic}] not exist, apply first please! {FAQ5}")
    if not 0 <= req.queue_id < config["readQueueNums"]:
        raise PopError(
            RS.MESSAGE_ILLEGAL,
            f"queueId[{req.queue_id}] is illegal, topic:[{req.topic}] topicConfig.readQueueNums:"
            f"[{config['readQueueNums']}] consumer:[{req.group}]",
        )
    low, high = ctl.store.min_offset(req.topic, req.queue_id), ctl.store.max_offset(req.topic, req.queue_id)
    if not low <= req.offset <= high:
        raise PopError(
            RS.NO_MESSAGE,
            f"offset is illegal, key:{req.topic}@{req.queue_id}, commit:{req.offset}, store:{low}~{high}",
        )
    try:
        extra = k.parse_extra_info(req.extra_info) if parsed is None else parsed
    except k.ExtraInfoError as exc:
        raise PopError(RS.MESSAGE_ILLEGAL, str(exc)) from None
    if not (extra.is_order or 0 <= extra.revive_qid < svc.config.revive_queue_num):  # rmq's own bound
        raise PopError(RS.MESSAGE_ILLEGAL, f"extraInfo: reviveQid {extra.revive_qid} is not a revive queue")
    if not 0 <= extra.invisible_time <= svc.config.max_invisible_ms:
        raise PopError(RS.MESSAGE_ILLEGAL, f"extraInfo: invisibleTime {extra.invisible_time} is out of range")
    return extra


def _ack_msg(req: AckRequest, extra: k.ExtraInfo) -> AckMsg:
    return AckMsg(
        ack_offset=req.offset,
        start_offset=extra.ck_queue_offset,
        group=req.group,
        topic=req.topic,
        queue_id=req.queue_id,
        pop_time=extra.pop_time,
        broker_name=extra.broker_name,
    )


def ack_message(ctl: BrokerContext, req: AckRequest, parsed: k.ExtraInfo | None = None) -> None:
    """ACK_MESSAGE: the in-process call; ``PopError`` for a refusal. ``parsed``: what
    ``parse_extra_info`` made of ``req.extra_info`` already (the gRPC endpoint's), not parsed again."""
    svc = pop_service(ctl)
    extra = _check(ctl, svc, req, parsed)
    if extra.is_order:
        _ack_order(ctl, svc, req, extra)
        return
    try:
        put_ack(ctl, _ack_msg(req, extra), extra.revive_qid, extra.invisible_time)
    except RevivePutError as exc:
        raise PopError(RS.SYSTEM_ERROR, str(exc)) from None


def _ack_order(ctl: BrokerContext, svc: PopService, req: AckRequest, extra: k.ExtraInfo) -> None:
    old = ctl.offsets.query(req.group, req.topic, req.queue_id)
    if req.offset < old:
        return
    next_offset = svc.order.commit_and_next(req.topic, req.group, req.queue_id, req.offset, extra.pop_time)
    if next_offset == -1:
        key = k.lock_key(req.topic, req.group, req.queue_id)
        raise PopError(
            RS.MESSAGE_ILLEGAL,
            f"offset is illegal, key:{key}, old:{old}, commit:{req.offset}, next:{next_offset}",
        )
    if next_offset >= 0:
        if not ctl.offsets.has_reset(req.topic, req.group, req.queue_id):  # the admin's reset wins
            ctl.offsets.commit(req.group, req.topic, req.queue_id, next_offset)
        if not svc.order.check_block(None, req.topic, req.group, req.queue_id, extra.invisible_time):
            svc.wake(k.normal_topic(req.topic, req.group), req.group, req.queue_id)


def change_invisible_time(ctl: BrokerContext, req: ChangeInvisibleRequest) -> ChangeInvisibleResult:
    """CHANGE_MESSAGE_INVISIBLETIME: the in-process call; ``PopError`` for a refusal."""
    svc = pop_service(ctl)
    if not 0 <= req.invisible_time <= svc.config.max_invisible_ms:  # rmq's own bound
        raise PopError(RS.SYSTEM_ERROR, f"invisibleTime {req.invisible_time} is out of range")
    extra = _check(ctl, svc, req)
    if extra.is_order:
        return _change_order(ctl, svc, req, extra)
    now = now_ms()
    ck = PopCheckPoint(
        start_offset=req.offset,
        pop_time=now,
        invisible_time=req.invisible_time,
        num=1,
        queue_id=req.queue_id,
        topic=req.topic,
        group=req.group,
        broker_name=extra.broker_name,
        diff=[0],
    )
    try:
        put_ck(ctl, ck, extra.revive_qid)
        put_ack(ctl, _ack_msg(req, extra), extra.revive_qid, extra.invisible_time)
    except RevivePutError as exc:
        raise PopError(RS.SYSTEM_ERROR, str(exc)) from None
    return ChangeInvisibleResult(now, req.invisible_time, extra.revive_qid)


def _change_order(
    ctl: BrokerContext, svc: PopService, req: ChangeInvisibleRequest, extra: k.ExtraInfo
) -> ChangeInvisibleResult:
    """``processChangeInvisibleTimeForOrder``; an offset below the committed one answers the
    zeros of an untouched response header, as 5.1.1 does."""
    if req.offset < ctl.offsets.query(req.group, req.topic, req.queue_id):
        return ChangeInvisibleResult(0, 0, 0)
    next_visible = now_ms() + req.invisible_time
    svc.order.update_next_visible(
        req.topic, req.group, req.queue_id, req.offset, extra.pop_time, next_visible
    )
    return ChangeInvisibleResult(extra.pop_time, next_visible - extra.pop_time, extra.revive_qid)
