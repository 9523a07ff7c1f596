"""Writing a ck or an ack into the revive topic: the one place both are put.

RocketMQ 5.1.1 (``PopMessageProcessor.buildCkMsg``, ``AckMessageProcessor``,
``ChangeInvisibleTimeProcessor``) stores them as *timer messages*: tags ``ck`` / ``ack``, body the
checkpoint JSON, ``UNIQ_KEY`` from ``genCkUniqueId`` / ``genAckUniqueId``, ``TIMER_DELIVER_MS``
= reviveTime - 1000 for a ck, popTime + invisibleTime for an ack, born and store host the broker's;
the timer wheel holds them until that time and then puts them into the revive queue.

``put_revive`` does the same through rmq's timer (``rmqcli.broker.timer``): the message waits in
``rmq_sys_wheel_timer`` and reaches the revive queue at its time with ``REAL_TOPIC``/``REAL_QID``,
``TIMER_ENQUEUE_MS`` and ``TIMER_DEQUEUE_MS``, as 5.1.1's do. The revive service never revives a
ck before its revive time, however it arrives.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from formats import commitlog as fmt
from rmqcli.broker.pop import constants as k
from rmqcli.broker.pop.checkpoint import AckMsg, PopCheckPoint, ack_unique_id, ck_unique_id
from rmqcli.broker.timer import api as timer
from rmqcli.store.write.messages import AppendResult, InnerMessage

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext


class RevivePutError(Exception):
    """The store refused a ck or ack (disk full, a slave)."""


def put_revive(
    ctl: BrokerContext, queue_id: int, tag: str, body: str, deliver_ms: int, uniq: str
) -> AppendResult:
    """Store one revive-topic message (tag ``ck`` or ``ack``) in revive queue ``queue_id``.

    The single put of ck and ack messages: the timer slots in here (see the module docstring)."""
    if ctl.store.disk_full:
        raise RevivePutError("SERVICE_NOT_AVAILABLE: the disk is full")
    if ctl.config.is_slave:
        raise RevivePutError("a slave stores no ck or ack")
    host = ctl.writer.store_host
    props = {
        fmt.PROPERTY_TAGS: tag,
        k.PROPERTY_TIMER_DELIVER_MS: str(deliver_ms),
        fmt.PROPERTY_UNIQ_KEY: uniq,
    }
    inner = InnerMessage(
        k.revive_topic(ctl.config.broker_cluster_name),
        queue_id,
        body.encode("utf-8"),
        props,
        None,  # serialised in HashMap order, as messageProperties2String
        born_timestamp=int(time.time() * 1000),
        born_host=host,
        store_host=host,
    )
    try:
        return timer.put_inner(ctl, inner)
    except timer.TimerRefusal as exc:  # a time past timerMaxDelaySec: the pop's own check refuses first
        raise RevivePutError(f"{exc.code} {exc.remark}") from None


def put_ck(ctl: BrokerContext, ck: PopCheckPoint, revive_qid: int) -> AppendResult:
    """``buildCkMsg`` + put: delivered 1 s before the ck's revive time."""
    stored = put_revive(
        ctl, revive_qid, k.CK_TAG, ck.to_json(), ck.revive_time - k.ACK_TIME_INTERVAL, ck_unique_id(ck)
    )
    ctl.metrics.revive_in(ck.group, ck.topic, "CK", "PUT_OK")
    return stored


def put_ack(ctl: BrokerContext, ack: AckMsg, revive_qid: int, invisible_time: int) -> AppendResult:
    """The ack message of ``AckMessageProcessor``: delivered at popTime + invisibleTime."""
    stored = put_revive(
        ctl, revive_qid, k.ACK_TAG, ack.to_json(), ack.pop_time + invisible_time, ack_unique_id(ack)
    )
    ctl.metrics.revive_in(ack.group, ack.topic, "ACK", "PUT_OK")
    return stored
