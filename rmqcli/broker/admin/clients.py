"""Admin requests about online clients: ``AdminBrokerProcessor`` + ``Broker2Client`` (protocol.md B.4, B.5).

GET_CONSUMER_CONNECTION_LIST (203), GET_PRODUCER_CONNECTION_LIST (204), GET_ALL_PRODUCER_INFO (328),
INVOKE_BROKER_TO_RESET_OFFSET
(222, which sends RESET_CONSUMER_CLIENT_OFFSET (220, oneway) to every online member of the group),
and the two requests the broker relays to one client and answers with the client's answer:
GET_CONSUMER_RUNNING_INFO (307) and CONSUME_MESSAGE_DIRECTLY (309, the stored record as body).

A relayed request waits ``CALL_CLIENT_SECONDS`` (``Broker2Client.callClient``: 10 s) for the client;
no answer is CONSUME_MSG_TIMEOUT, as in 4.9.x. The C++ client (and so the PyPI ``rocketmq`` 0.4.4
client) answers 307 but never answers 309 (``ClientRemotingProcessor`` leaves it unimplemented), so a
real broker, and this one, answers 309 for such a client with CONSUME_MSG_TIMEOUT after 10 s.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from formats.commitlog import decode_offset_msg_id
from formats.remoting import LanguageCode
from rmqcli.remoting import headers as hd
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.remoting.codes import version_desc
from rmqcli.remoting.server.connection import Connection, Reply, Server, next_opaque

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext
    from rmqcli.broker.state import ClientChannel

CALL_CLIENT_SECONDS = 10.0
V3_0_7_SNAPSHOT = 28  # MQVersion ordinals: clients older than these cannot take the request
V3_1_8_SNAPSHOT = 62

_pending: dict[int, asyncio.Future[RemotingCommand]] = {}


def _on_response(command: RemotingCommand, conn: Connection) -> None:
    future = _pending.pop(command.opaque, None)
    if future is not None and not future.done():
        future.set_result(command)


def _listen(server: Server) -> None:
    if _on_response not in server.response_callbacks:
        server.response_callbacks.append(_on_response)


async def call_client(
    conn: Connection, request: RemotingCommand, timeout: float = CALL_CLIENT_SECONDS
) -> RemotingCommand:
    """``NettyRemotingServer.invokeSync`` to a client: the request with a fresh opaque, then its
    answer; ``TimeoutError`` when none comes, ``ConnectionError`` when the channel is gone."""
    _listen(conn.server)
    loop = asyncio.get_running_loop()
    request.opaque = next_opaque()
    future: asyncio.Future[RemotingCommand] = loop.create_future()
    _pending[request.opaque] = future
    try:
        if not conn.write(request):
            raise ConnectionError(f"channel to {conn.address} is closed")
        return await asyncio.wait_for(future, timeout)
    finally:
        _pending.pop(request.opaque, None)


# --- connections -------------------------------------------------------------------------------
def _connection(channel: ClientChannel) -> jb.Connection:
    return jb.Connection(
        client_addr=channel.connection.address,
        client_id=channel.client_id,
        language=channel.language,
        version=channel.version,
    )


def consumer_connection_list(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """``getConsumerConnectionList``: the group's members, its consume settings and subscriptions."""
    h = req.header(hd.GetConsumerConnectionListRequestHeader)
    info = ctl.clients.consumers.get(h.consumer_group)
    if info is None:
        return req.response(RS.CONSUMER_NOT_ONLINE, f"the consumer group[{h.consumer_group}] not online")
    body = jb.ConsumerConnection(
        connection_set=[_connection(ch) for ch in info.channels.values()],
        consume_from_where=info.consume_from_where,
        consume_type=info.consume_type,
        message_model=info.message_model,
        subscription_table=dict(info.subscriptions),
    )
    return req.response(body=jb.encode(body))


def producer_connection_list(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """``getProducerConnectionList``: SYSTEM_ERROR when no producer of the group is connected."""
    h = req.header(hd.GetProducerConnectionListRequestHeader)
    channels = ctl.clients.producers.get(h.producer_group)
    if channels is None:
        return req.response(RS.SYSTEM_ERROR, f"the producer group[{h.producer_group}] not exist")
    body = jb.ProducerConnection(connection_set=[_connection(ch) for ch in channels.values()])
    return req.response(body=jb.encode(body))


def _wall_millis(channel: ClientChannel) -> int:
    """``ClientChannelInfo.lastUpdateTimestamp``: the channel's last heartbeat as epoch millis
    (``ClientChannel`` keeps it on the monotonic clock)."""
    return int((time.time() - (time.monotonic() - channel.last_update)) * 1000)


def all_producer_info(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """``getAllProducerInfo``: ``ProducerManager.getProducerTable()`` as ``ProducerTableInfo``,
    ``{"data":{group:[ProducerInfo…]}}`` (properties in fastjson's order), groups in ``HashMap``
    order; a group is there only with a member, so no producer at all is ``{"data":{}}``, SUCCESS.
    ``remoteIP`` is Netty's ``remoteAddress().toString()``: ``/ip:port``. Bounded by the table."""
    from formats.javahash import hashmap_order

    table = {group: channels for group, channels in ctl.clients.producers.items() if channels}
    data = {
        group: [
            {
                "clientId": ch.client_id,
                "language": ch.language,
                "lastUpdateTimestamp": _wall_millis(ch),
                "remoteIP": "/" + ch.connection.address,
                "version": ch.version,
            }
            for ch in table[group].values()
        ]
        for group in hashmap_order(list(table))
    }
    return req.response(body=jb.encode({"data": data}))


# --- relayed to one client ---------------------------------------------------------------------
async def _call_consumer(
    ctl: BrokerContext, req: RemotingCommand, code: int, group: str, client_id: str | None
) -> RemotingCommand:
    """``AdminBrokerProcessor.callConsumer``: the same ext fields and body to the client's channel."""
    info = ctl.clients.consumers.get(group)
    channel = info.channels.get(client_id or "") if info is not None else None
    if channel is None:
        return req.response(RS.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
    if channel.version < V3_1_8_SNAPSHOT:
        return req.response(
            RS.SYSTEM_ERROR,
            f"The Consumer <{client_id}> Version <{version_desc(channel.version)}> too low to finish, "
            "please upgrade it to V3_1_8_SNAPSHOT",
        )
    forwarded = RemotingCommand.request(code, dict(req.ext_fields), req.body)
    try:
        answer = await call_client(channel.connection, forwarded)
    except TimeoutError:
        return req.response(
            RS.CONSUME_MSG_TIMEOUT,
            f"consumer <{group}> <{client_id}> Timeout: RemotingTimeoutException: wait response on the "
            f"channel <{channel.connection.address}> timeout, {int(CALL_CLIENT_SECONDS * 1000)}(ms)",
        )
    except ConnectionError as exc:
        remark = f"invoke consumer <{group}> <{client_id}> Exception: RemotingSendRequestException: {exc}"
        return req.response(RS.SYSTEM_ERROR, remark)
    return req.response(answer.code, answer.remark, header=dict(answer.ext_fields), body=answer.body)


def consumer_running_info(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    h = req.header(hd.GetConsumerRunningInfoRequestHeader)
    return _call_consumer(ctl, req, RC.GET_CONSUMER_RUNNING_INFO, h.consumer_group, h.client_id)


def consume_message_directly(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """``consumeMessageDirectly``: ``brokerName`` added to the ext fields, the record at the offset
    of ``msgId`` as the body, then relayed to the client."""
    h = req.header(hd.ConsumeMessageDirectlyResultRequestHeader)
    req.ext_fields["brokerName"] = ctl.config.broker_name
    try:
        _, _, offset = decode_offset_msg_id(h.msg_id or "")
    except ValueError:
        offset = -1
    found = ctl.store.record_at(offset) if offset >= 0 else None
    if found is not None:
        req.body = found[1]
    return _call_consumer(ctl, req, RC.CONSUME_MESSAGE_DIRECTLY, h.consumer_group, h.client_id)


# --- reset offset ------------------------------------------------------------------------------
def reset_offset(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """``Broker2Client.resetOffset``: per write queue the offset of ``timestamp`` (-1: the max
    offset), kept when not forced and not a rewind; a group without an offset on a queue is
    SYSTEM_ERROR, no online member CONSUMER_NOT_ONLINE (mqadmin then resets offline). The members
    get RESET_CONSUMER_CLIENT_OFFSET with ``ResetOffsetBodyForC`` when the admin request came from
    a C++ client (mqadmin's -c), else ``ResetOffsetBody``, which a C++ client cannot parse and
    ignores; the answer is the table either way. The broker's own offsets do not change here: the
    clients commit their new positions."""
    h = req.header(hd.ResetOffsetRequestHeader)
    if ctl.config.use_server_side_reset_offset:
        return reset_offset_in_broker(ctl, req, h)
    config = ctl.topics.get(h.topic)
    if config is None:
        return req.response(
            RS.SYSTEM_ERROR, f"[reset-offset] reset offset failed, no topic in this broker. topic={h.topic}"
        )
    table: dict[jb.MessageQueue, int] = {}
    for queue_id in range(int(config["writeQueueNums"])):
        mq = jb.MessageQueue(broker_name=ctl.config.broker_name, queue_id=queue_id, topic=h.topic)
        consumer_offset = ctl.offsets.query(h.group, h.topic, queue_id)
        if consumer_offset == -1:
            return req.response(RS.SYSTEM_ERROR, f"THe consumer group <{h.group}> not exist")
        if h.timestamp == -1:
            target = ctl.store.max_offset(h.topic, queue_id)
        else:
            target = ctl.store.search_offset(h.topic, queue_id, h.timestamp)
        target = max(target, 0)
        table[mq] = target if h.is_force or target < consumer_offset else consumer_offset
    notice = hd.ResetOffsetRequestHeader(topic=h.topic, group=h.group, timestamp=h.timestamp, is_force=False)
    if req.language == LanguageCode.CPP:
        entries = [
            jb.MessageQueueForC(broker_name=mq.broker_name, offset=o, queue_id=mq.queue_id, topic=mq.topic)
            for mq, o in table.items()
        ]
        body = jb.encode(jb.ResetOffsetBodyForC(offset_table=entries))
    else:
        body = jb.encode(jb.ResetOffsetBody(offset_table=table))
    info = ctl.clients.consumers.get(h.group)
    if info is None or not info.channels:
        return req.response(
            RS.CONSUMER_NOT_ONLINE,
            f"Consumer not online, so can not reset offset, Group: {h.group} Topic: {h.topic} "
            f"Timestamp: {h.timestamp}",
        )
    for channel in info.channels.values():
        if channel.version < V3_0_7_SNAPSHOT:
            return req.response(
                RS.SYSTEM_ERROR,
                f"the client does not support this feature. version={version_desc(channel.version)}",
            )
        channel.connection.send_oneway(RC.RESET_CONSUMER_CLIENT_OFFSET, notice.to_ext_fields(), body)
    return req.response(body=jb.encode(jb.ResetOffsetBody(offset_table=table)))


def reset_offset_in_broker(ctl: BrokerContext, req: RemotingCommand, h: hd.ResetOffsetRequestHeader) -> Reply:
    """5.1.1's ``resetOffsetInner`` (``useServerSideResetOffset``): the broker keeps the new offset
    of one queue (``queueId`` with ``offset``, else the offset of ``timestamp``) or of every read
    queue (by ``timestamp``; -1: the max offset) until the queue's next pull, which answers
    PULL_OFFSET_MOVED to it, or its next POP, which also ends an orderly queue's block
    (``ConsumerOffsetManager.assignResetOffset``). No client is told; the answer is the table."""
    if ctl.config.is_slave:
        return req.response(RS.SYSTEM_ERROR, "Can not reset offset in slave broker")
    config = ctl.topics.get(h.topic)
    if config is None:
        return req.response(RS.TOPIC_NOT_EXIST, f"Topic {h.topic} does not exist")
    if h.group not in ctl.writer.config.groups:
        return req.response(RS.SUBSCRIPTION_GROUP_NOT_EXIST, f"Group {h.group} does not exist")

    def by_time(queue_id: int) -> int:
        if h.timestamp < 0:
            return ctl.store.max_offset(h.topic, queue_id)
        return ctl.store.search_offset(h.topic, queue_id, h.timestamp)

    queue_id = -1 if h.queue_id is None else h.queue_id
    offsets: dict[int, int] = {}
    if queue_id >= 0:
        if h.offset is not None and h.offset != -1:
            low, high = ctl.store.min_offset(h.topic, queue_id), ctl.store.max_offset(h.topic, queue_id)
            if (low >= 0 and h.offset < low) or h.offset > high + 1:
                return req.response(
                    RS.SYSTEM_ERROR, f"Target offset {h.offset} not in consume queue range [{low}-{high}]"
                )
            offsets[queue_id] = h.offset
        else:
            offsets[queue_id] = by_time(queue_id)
    else:
        offsets = {q: by_time(q) for q in range(int(config["readQueueNums"]))}
    if not offsets:
        return req.response(RS.SYSTEM_ERROR, "No queues to reset.")
    for q, offset in offsets.items():
        ctl.offsets.assign_reset(h.topic, h.group, q, offset)
    broker = ctl.config.broker_name
    table = {jb.MessageQueue(broker_name=broker, queue_id=q, topic=h.topic): o for q, o in offsets.items()}
    return req.response(body=jb.encode(jb.ResetOffsetBody(offset_table=table)))


HANDLERS = {
    RC.GET_CONSUMER_CONNECTION_LIST: consumer_connection_list,
    RC.GET_PRODUCER_CONNECTION_LIST: producer_connection_list,
    RC.GET_ALL_PRODUCER_INFO: all_producer_info,
    RC.GET_CONSUMER_RUNNING_INFO: consumer_running_info,
    RC.CONSUME_MESSAGE_DIRECTLY: consume_message_directly,
    RC.INVOKE_BROKER_TO_RESET_OFFSET: reset_offset,
}
