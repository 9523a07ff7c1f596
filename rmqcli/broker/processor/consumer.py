"""Clients and consumers: ``ClientManageProcessor`` and ``ConsumerManageProcessor`` (protocol.md B.3).

HEART_BEAT (34) registers producers and consumers (enum names or C++ ordinals, B.9), creates the
group's subscription config and its ``%RETRY%<group>`` topic; UNREGISTER_CLIENT (35);
GET_CONSUMER_LIST_BY_GROUP (38); QUERY_CONSUMER_OFFSET (14) / UPDATE_CONSUMER_OFFSET (15, often
oneway); LOCK_BATCH_MQ (41) / UNLOCK_BATCH_MQ (42) for orderly consumers.

Every group and topic name in these requests is checked as ``rmqcli.broker.names`` says, which
4.9.8 does not do here: a bad name answers SYSTEM_ERROR with the check's remark. A body these
requests need that is missing or ``null`` answers SYSTEM_ERROR too (``rmqcli.remoting.server.bodies``).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING

from rmqcli.broker.acting import locks
from rmqcli.broker.names import validate_subscription_topic
from rmqcli.broker.state import RETRY_PREFIX, validate_group, validate_topic
from rmqcli.filter.sql92 import SelectorError, compiled, is_tag_type
from rmqcli.remoting import headers as hd
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.remoting.server.bodies import required_body
from rmqcli.remoting.server.connection import Connection, Reply
from rmqcli.remoting.server.refusal import no_property_filter

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext


def heartbeat_problem(data: jb.HeartbeatData) -> str | None:
    """The first bad name of a heartbeat: consumer and producer groups (``validate_group``), the
    topics subscribed to (``validate_subscription_topic``: ``%RETRY%<group>`` may pass 127 characters)."""
    for consumer in data.consumer_data_set:
        problem = validate_group(consumer.group_name)
        for sub in consumer.subscription_data_set:
            problem = problem or validate_subscription_topic(sub.topic)
        if problem:
            return problem
    for producer in data.producer_data_set:
        problem = validate_group(producer.group_name)
        if problem:
            return problem
    return None


def heart_beat(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """``ClientManageProcessor.heartBeat``; a heartbeat with a bad name registers nothing (4.9.8
    checks no name here, and creates the group's config and retry topic)."""
    data = required_body(jb.HeartbeatData, req.body)
    problem = heartbeat_problem(data)
    if problem:
        return req.response(RS.SYSTEM_ERROR, problem)
    for consumer in data.consumer_data_set:
        group = ctl.groups.find(consumer.group_name)
        if group is not None and consumer.message_model == "CLUSTERING":
            retry = RETRY_PREFIX + consumer.group_name
            if ctl.topics.get(retry) is None:  # not created when too long for a topic
                ctl.topics.create_system(retry, int(group.get("retryQueueNums", 1)))
    ctl.clients.heartbeat(data, conn, req.language, req.version)
    return req.response()


def unregister_client(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """Empty group fields are no group (the C++ client sends ``""`` for the kind it is not)."""
    h = req.header(hd.UnregisterClientRequestHeader)
    for group in (h.producer_group, h.consumer_group):
        problem = validate_group(group) if group else None
        if problem:
            return req.response(RS.SYSTEM_ERROR, problem)
    ctl.clients.unregister(h.client_id, h.producer_group, h.consumer_group)
    return req.response()


def consumer_list(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    h = req.header(hd.GetConsumerListByGroupRequestHeader)
    problem = validate_group(h.consumer_group)
    if problem:
        return req.response(RS.SYSTEM_ERROR, problem)
    info = ctl.clients.consumers.get(h.consumer_group)
    if info is None or not info.channels:
        return req.response(RS.SYSTEM_ERROR, f"no consumer for this group, {h.consumer_group}")
    ids = jb.GetConsumerListByGroupResponseBody(consumer_id_list=list(info.channels))
    return req.response(body=jb.encode(ids))


def offset_problem(group: str, topic: str) -> str | None:
    """The names of a ``topic@group`` offset key (4.9.8 checks neither; a ``@`` would split it)."""
    return validate_group(group) or validate_topic(topic)


def query_offset(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """``queryConsumerOffset``: the committed offset; without one, 0 when the queue still starts at
    offset 0 (also when it is empty or unknown: ``checkInDiskByConsumeOffset`` finds no unit there,
    and the real 4.9.8 broker answers 0), else QUERY_NOT_FOUND (E.7)."""
    h = req.header(hd.QueryConsumerOffsetRequestHeader)
    problem = offset_problem(h.consumer_group, h.topic)
    if problem:
        return req.response(RS.SYSTEM_ERROR, problem)
    offset = ctl.offsets.query(h.consumer_group, h.topic, h.queue_id)
    if offset >= 0:
        return req.response(header=hd.QueryConsumerOffsetResponseHeader(offset=offset))
    low = ctl.store.min_offset(h.topic, h.queue_id)
    if low <= 0 and h.set_zero_if_not_found is not False:
        return req.response(header=hd.QueryConsumerOffsetResponseHeader(offset=0))
    return req.response(RS.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")


def update_offset(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    h = req.header(hd.UpdateConsumerOffsetRequestHeader)
    problem = offset_problem(h.consumer_group, h.topic)
    if problem:
        return req.response(RS.SYSTEM_ERROR, problem)
    if ctl.offsets.has_reset(h.topic, h.consumer_group, h.queue_id):  # useServerSideResetOffset
        return req.response(remark="Offset has been previously reset")  # 5.1.1: the commit is ignored
    ctl.offsets.commit(h.consumer_group, h.topic, h.queue_id, h.commit_offset)
    return req.response()


def queue_locks(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """LOCK_BATCH_MQ (41) answers the queues it locked for the client, UNLOCK_BATCH_MQ (42) frees
    them (``RebalanceLockManager``); both read a ``LockBatchRequestBody``. With
    ``lockInStrictMode`` a lock needs a majority of the group (``rmqcli.broker.acting.locks``)."""
    body = required_body(jb.LockBatchRequestBody, req.body)
    problem = validate_group(body.consumer_group)
    if problem:
        return req.response(RS.SYSTEM_ERROR, problem)
    if req.code == RC.UNLOCK_BATCH_MQ:
        if locks.strict(ctl, body):
            locks.unlock_everywhere(ctl, body)
        else:
            ctl.locks.unlock(body.consumer_group, body.mq_set, body.client_id)
        return req.response()
    locked = ctl.locks.lock(body.consumer_group, body.mq_set, body.client_id)
    if locks.strict(ctl, body):
        return _granted(req, locks.quorum_lock(ctl, body, locked))
    return req.response(body=jb.encode(jb.LockBatchResponseBody(lock_ok_mq_set=locked)))


async def _granted(req: RemotingCommand, granted: Awaitable[list]) -> Reply:
    return req.response(body=jb.encode(jb.LockBatchResponseBody(lock_ok_mq_set=await granted)))


def queue_lock_table(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """RMQ_GET_QUEUE_LOCKS (rmq's own): the live queue locks, for a returning master's pre-online."""
    table = jb.QueueLockTable(
        locks=[
            jb.QueueLock(age_millis=int(age * 1000), client_id=client, consumer_group=group, mq=mq)
            for group, mq, client, age in ctl.locks.live()
        ]
    )
    return req.response(body=jb.encode(table))


def check_client_config(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """``ClientManageProcessor.checkClientConfig``: a push consumer with a SQL92 subscription asks
    each broker before it starts; the broker must filter by properties and compile the expression."""
    body = jb.decode(jb.CheckClientRequestBody, req.body) if req.body else None
    sub = body.subscription_data if body is not None else None
    if sub is None or is_tag_type(sub.expression_type):
        return req.response(RS.SUCCESS)
    if not ctl.config.enable_property_filter:
        return req.response(RS.SYSTEM_ERROR, no_property_filter(sub.expression_type))
    try:
        compiled(sub.sub_string, sub.expression_type)
    except SelectorError as exc:
        return req.response(RS.SUBSCRIPTION_PARSE_FAILED, f"Invalid MessageSelector. {exc}")
    return req.response(RS.SUCCESS)


HANDLERS = {
    RC.CHECK_CLIENT_CONFIG: check_client_config,
    RC.RMQ_GET_QUEUE_LOCKS: queue_lock_table,
    RC.HEART_BEAT: heart_beat,
    RC.UNREGISTER_CLIENT: unregister_client,
    RC.GET_CONSUMER_LIST_BY_GROUP: consumer_list,
    RC.QUERY_CONSUMER_OFFSET: query_offset,
    RC.UPDATE_CONSUMER_OFFSET: update_offset,
    RC.LOCK_BATCH_MQ: queue_locks,
    RC.UNLOCK_BATCH_MQ: queue_locks,
}
