"""CONSUMER_SEND_MSG_BACK (36): ``SendMessageProcessor.asyncConsumerSendMsgBack`` (RocketMQ 4.9.x).

A consumer that failed a message (RECONSUME_LATER) sends back its CommitLog offset. The broker
reads the stored message again and re-puts it to ``%RETRY%<group>`` (a random queue of the group's
``retryQueueNums``) with ``reconsumeTimes + 1`` and delay level ``3 + reconsumeTimes`` when the
consumer asked for level 0; the store then parks it in ``SCHEDULE_TOPIC_XXXX`` until the level's
delay has passed (``rmqcli.broker.services.schedule`` delivers it). Once ``reconsumeTimes`` reaches the
maximum (the header's ``maxReconsumeTimes`` for clients of V3_4_9 or later, else the group's
``retryMaxTimes``), or when the level is negative, it goes to ``%DLQ%<group>`` instead, undelayed.

The group must pass ``validate_group`` and its retry topic ``validate_topic`` (SYSTEM_ERROR with
the check's remark otherwise): 4.9.8 checks neither, and a group like ``x/../..`` would name consume
queue directories outside the store; a group past 120 characters makes a retry topic no CommitLog
record can hold, which a 4.9.8 broker refuses only at the store (SYSTEM_ERROR ``MESSAGE_ILLEGAL``).
"""

from __future__ import annotations

import random
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from formats import commitlog as fmt
from rmqcli.broker.services.msgext import PROPERTY_ORIGIN_MESSAGE_ID, PROPERTY_RETRY_TOPIC, inner_from_record
from rmqcli.broker.state import (
    DLQ_PREFIX,
    PERM_READ_WRITE,
    RETRY_PREFIX,
    is_writable,
    validate_group,
    validate_topic,
)
from rmqcli.remoting import headers as hd
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.remoting.server.connection import Connection, Reply
from rmqcli.remoting.server.refusal import FAQ
from rmqcli.store.read.commitlog import Record
from rmqcli.store.write.messages import InnerMessage

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext

DLQ_NUMS_PER_GROUP = 1  # MixAll.DLQ_NUMS_PER_GROUP
VERSION_V3_4_9 = 121  # MQVersion.Version.V3_4_9.ordinal()


def send_back_message(rec: Record, new_topic: str, queue_id: int, delay_level: int) -> InnerMessage:
    """The ``MessageExtBrokerInner`` built from the stored message ``rec``.

    The map gets ``RETRY_TOPIC`` (first time only), ``WAIT=false`` (``setWaitStoreMsgOK``),
    ``DELAY`` (``setDelayTimeLevel``: the level, or 0 for the DLQ) and ``ORIGIN_MESSAGE_ID`` (the
    first offset message id), in that order; the string is serialised from it again.
    """
    props = dict(rec.properties)
    if PROPERTY_RETRY_TOPIC not in props:
        props[PROPERTY_RETRY_TOPIC] = rec.topic
    props[fmt.PROPERTY_WAIT] = "false"
    props[fmt.PROPERTY_DELAY] = str(delay_level)
    if not props.get(PROPERTY_ORIGIN_MESSAGE_ID, "").strip():
        props[PROPERTY_ORIGIN_MESSAGE_ID] = rec.msg_id
    return inner_from_record(rec, new_topic, queue_id, props, None, reconsume_times=rec.reconsume_times + 1)


def consumer_send_msg_back(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    h = req.header(hd.ConsumerSendMsgBackRequestHeader)
    # 4.9.8 checks neither name; the group names a config and the retry and DLQ topics, whose
    # consume queues are directories: both are refused before anything is created
    problem = validate_group(h.group) or validate_topic(RETRY_PREFIX + h.group)
    if problem:
        return req.response(RS.SYSTEM_ERROR, problem)
    group = ctl.groups.find(h.group)
    if group is None:
        return req.response(RS.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {h.group} {FAQ}")
    if ctl.config.is_slave:  # its CommitLog is its master's
        return _from_slave(ctl, req, h, group)
    if not is_writable(ctl.config.broker_permission):
        return req.response(
            RS.NO_PERMISSION, f"the broker[{ctl.config.broker_ip1}] sending message is forbidden"
        )
    retry_queue_nums = int(group.get("retryQueueNums", 1))
    if retry_queue_nums <= 0:
        return req.response()
    new_topic = RETRY_PREFIX + h.group
    queue_id = random.randrange(99999999) % retry_queue_nums
    topic = ctl.topics.create_system(new_topic, retry_queue_nums, PERM_READ_WRITE)
    if topic is None:
        return req.response(RS.SYSTEM_ERROR, f"topic[{new_topic}] not exist")
    if not is_writable(topic["perm"]):
        return req.response(RS.NO_PERMISSION, f"the topic[{new_topic}] sending message is forbidden")
    rec = ctl.store.look_message(h.offset)
    if rec is None:
        return req.response(RS.SYSTEM_ERROR, f"look message by offset failed, {h.offset}")
    to_dlq, delay_level = _next_try(req, h, group, rec)
    if to_dlq:
        new_topic = DLQ_PREFIX + h.group
        queue_id = random.randrange(99999999) % DLQ_NUMS_PER_GROUP
        if ctl.topics.create_system(new_topic, DLQ_NUMS_PER_GROUP, PERM_READ_WRITE) is None:
            return req.response(RS.SYSTEM_ERROR, f"topic[{new_topic}] not exist")
    if ctl.store.disk_full:  # putMessage's SERVICE_NOT_AVAILABLE, as asyncConsumerSendMsgBack words it
        return req.response(RS.SYSTEM_ERROR, "SERVICE_NOT_AVAILABLE")
    ctl.store.put_inner(send_back_message(rec, new_topic, queue_id, delay_level))
    if to_dlq:
        ctl.metrics.dlq(h.group, h.origin_topic or rec.topic)
    return req.response()


def _next_try(
    req: RemotingCommand, h: hd.ConsumerSendMsgBackRequestHeader, group: dict, rec: Record
) -> tuple[bool, int]:
    """``(to the DLQ, delay level)``: the DLQ, undelayed, once ``reconsumeTimes`` reached the
    maximum (the header's for clients of V3_4_9 on, else the group's ``retryMaxTimes``) or for a
    negative level; else the level asked for, or ``3 + reconsumeTimes`` for level 0."""
    max_times = int(group.get("retryMaxTimes", 16))
    if req.version >= VERSION_V3_4_9 and h.max_reconsume_times is not None:
        max_times = h.max_reconsume_times
    if rec.reconsume_times >= max_times or h.delay_level < 0:
        return True, 0
    return False, h.delay_level or 3 + rec.reconsume_times


def _from_slave(
    ctl: BrokerContext, req: RemotingCommand, h: hd.ConsumerSendMsgBackRequestHeader, group: dict
) -> Reply | Awaitable[Reply]:
    """A send-back to a slave. It may not write (5.1.1: SYSTEM_ERROR "no master available"; the
    consumer then sends the message to the retry topic itself), unless it acts as master with
    ``enableRemoteEscape``: then the retry (or DLQ) message goes through the escape bridge to a
    writable master of another group, as the topic's messages would, delay level and all."""
    acting = ctl.config.acting
    refused = req.response(RS.SYSTEM_ERROR, f"no master available along with {ctl.config.broker_ip1}")
    if not (
        acting.enable_slave_acting_master and acting.enable_remote_escape and ctl.special_services_running
    ):
        return refused
    rec = ctl.store.look_message(h.offset)
    if rec is None:
        return req.response(RS.SYSTEM_ERROR, f"look message by offset failed, {h.offset}")
    to_dlq, delay_level = _next_try(req, h, group, rec)
    new_topic = (DLQ_PREFIX if to_dlq else RETRY_PREFIX) + h.group
    inner = send_back_message(rec, new_topic, 0, delay_level)
    return _escaped(req, ctl.escape.put(inner, route_topic=h.origin_topic or rec.topic), refused)


async def _escaped(req: RemotingCommand, put: Awaitable[bool], refused: RemotingCommand) -> Reply:
    return req.response() if await put else refused


HANDLERS = {RC.CONSUMER_SEND_MSG_BACK: consumer_send_msg_back}
