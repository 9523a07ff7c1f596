"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320): ``SendMessageProcessor``
(protocol.md B.3, B.6).

``parse`` turns a request into a ``Message`` or ``BatchMessage`` after the broker's checks
(``AbstractSendMessageProcessor.msgCheck``: broker and topic permission, the topic's name as
``rmqcli.broker.names`` checks it, auto-creation from ``TBW102``, queue id; the group of a
``%RETRY%`` topic is checked too); ``apply`` stores it and answers ``msgId, queueId, queueOffset``
plus the ``MSG_REGION``/``TRACE_ON`` ext fields, after the group commit under SYNC_FLUSH. A refusal
carries those two fields too (``preSend`` sets them before any check); a header that does not parse
is answered without them.

A batch is recognised by code 320 or by the header's ``batch``/``m`` flag. C++ clients (and so the
Python ``rocketmq`` 0.4.4 package) write that flag as ``"1"``; a Java broker reads it as false and
stores the encoded batch as one message (B.6). This broker reads ``"1"`` as true, so C++ batches
arrive as the separate messages their sender meant. A single message with ``TRAN_MSG=true`` is
stored as a transaction half message (``rmqcli.broker.processor.transaction``) unless
``rejectTransactionMessage`` is set. A single message with a 5.x timer property (``TIMER_DELIVER_MS``,
``TIMER_DELAY_SEC``, ``TIMER_DELAY_MS``) goes through the timer's put hook (``rmqcli.broker.timer``):
stored in ``rmq_sys_wheel_timer`` and answered with that queue's offset, or refused (code 13).

Design note: this module is the shape to copy for a request family. ``parse`` does every check and
either raises a ``SendError`` (a ``refusal.Refusal``: code and remark, stated where the check is) or
returns the value to store; ``apply`` does the one thing with a checked value and makes the answer;
the handler is the few lines that join them, and ``HANDLERS`` maps the request codes to it. So the
checks read as one list in Java's order, ``apply`` only ever sees valid input, and each step can be
read and tested alone: the send lane (``sendlane``) is held to the same bytes as ``parse`` and
``apply`` and leaves every refusal to ``parse``. A new family (a processor module) follows it:
parse, apply, a ``HANDLERS`` table, handlers typed with ``context.BrokerContext``.
"""

from __future__ import annotations

import ipaddress
import random
import zlib
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING

from formats import commitlog as fmt
from formats.javatext import parse_boolean
from formats.remoting import FLAG_RESPONSE, SerializeType
from rmqcli.broker.ha.config import SYNC_MASTER
from rmqcli.broker.ha.member import Replicated
from rmqcli.broker.processor.sendback import DLQ_NUMS_PER_GROUP, VERSION_V3_4_9
from rmqcli.broker.processor.transaction import is_transactional, prepare
from rmqcli.broker.state import (
    DLQ_PREFIX,
    NOT_ALLOWED_SEND_TOPICS,
    RETRY_PREFIX,
    is_writable,
    validate_group,
    validate_topic,
)
from rmqcli.broker.timer import api as timer
from rmqcli.dledger.ledger import LedgerError
from rmqcli.remoting import headers as hd
from rmqcli.remoting.codec import RemotingCommand, ext_value
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.remoting.server.connection import Connection, Reply
from rmqcli.remoting.server.refusal import FAQ, Refusal
from rmqcli.store.naming import CONSUMEQUEUE_DIR
from rmqcli.store.store import INDEX_DIR
from rmqcli.store.write.files import DiskFullError
from rmqcli.store.write.messages import BatchElement, BatchMessage, Host, Message

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext

MAX_PROPERTIES_LENGTH = 32767
_BATCH_HEAD = fmt.BATCH_ELEMENT_HEAD_STRUCT  # the declaration: formats.commitlog.BatchElement
_PROPS_LEN = fmt.PROPERTIES_LENGTH_STRUCT


class SendError(Refusal):
    """A send the broker refuses: the response code and remark."""


def born_host(conn: Connection) -> Host:
    """The producer's address as stored: IPv4 (an IPv4-mapped or loopback v6 peer becomes 4 bytes, E.8)."""
    host, port = conn.peer
    try:
        addr = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return Host(bytes(4), port)
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.ipv4_mapped is not None:
            addr = addr.ipv4_mapped
        elif addr.is_loopback:
            addr = ipaddress.IPv4Address("127.0.0.1")
    return Host(addr.packed, port)


def connection_born_host(conn: Connection) -> Host:
    """``born_host`` of the connection, worked out once per connection."""
    born = conn.attributes.get("born_host")
    if born is None:
        born = conn.attributes["born_host"] = born_host(conn)
    return born


def is_batch(req: RemotingCommand) -> bool:
    if req.code == RC.SEND_BATCH_MESSAGE:
        return True
    return is_batch_flag(req.ext_fields.get("m" if req.code in hd.SEND_CODES_V2 else "batch", ""))


def is_batch_flag(raw: str) -> bool:
    """The header's batch flag: ``"true"``, or C++'s ``"1"`` (see the module's docstring)."""
    return raw.strip().lower() in ("true", "1")


def decode_batch(body: bytes) -> list[BatchElement]:
    """``MessageDecoder.decodeMessages`` of a batch body (B.6; formats.md §1.11)."""
    elements = []
    pos, n = 0, len(body)
    while pos < n:
        if pos + _BATCH_HEAD.size > n:
            raise SendError(RS.MESSAGE_ILLEGAL, "the batch body is truncated")
        total, _magic, _crc, flag, body_len = _BATCH_HEAD.unpack_from(body, pos)
        start = pos + _BATCH_HEAD.size
        if total <= 0 or pos + total > n or body_len < 0 or start + body_len + _PROPS_LEN.size > pos + total:
            raise SendError(RS.MESSAGE_ILLEGAL, f"bad batch element at byte {pos}")
        payload = body[start : start + body_len]
        (props_len,) = _PROPS_LEN.unpack_from(body, start + body_len)
        p = start + body_len + _PROPS_LEN.size
        if props_len < 0 or p + props_len > pos + total:
            raise SendError(RS.MESSAGE_ILLEGAL, f"bad batch element properties at byte {pos}")
        props = fmt.decode_properties(body[p : p + props_len])
        elements.append(BatchElement(payload, props, flag))
        pos += total
    if not elements:
        raise SendError(RS.MESSAGE_ILLEGAL, "empty batch")
    return elements


def batch_body(body: bytes, sys_flag: int) -> bytes:
    """The encoded batch; inflated first when the sender compressed it as a whole (the C++ client
    compresses a batch body over 4 KiB and sets the compressed bit, B.6)."""
    if not sys_flag & fmt.COMPRESSED_FLAG:
        return body
    try:
        return zlib.decompress(body)
    except zlib.error as exc:
        raise SendError(RS.MESSAGE_ILLEGAL, f"cannot inflate the compressed batch body: {exc}") from None


def parse(
    ctl: BrokerContext,
    req: RemotingCommand,
    conn: Connection,
    header: hd.SendMessageRequestHeader | None = None,
) -> Message | BatchMessage:
    """The header checks of ``AbstractSendMessageProcessor.msgCheck`` and the message to store.
    ``header``: the request's header already made (an in-process caller), else read from ``req``."""
    h = hd.parse_send_header(req.code, req.ext_fields) if header is None else header
    if ctl.config.is_slave:  # before the topic would be auto-created: a slave's topics are its master's
        raise SendError(RS.SERVICE_NOT_AVAILABLE, service_not_available(ctl))
    if not is_writable(ctl.config.broker_permission):
        raise SendError(RS.NO_PERMISSION, f"the broker[{ctl.config.broker_ip1}] sending message is forbidden")
    problem = validate_topic(h.topic)
    if problem:
        raise SendError(RS.SYSTEM_ERROR, problem)
    if h.topic in NOT_ALLOWED_SEND_TOPICS:
        raise SendError(RS.NO_PERMISSION, f"Sending message to topic[{h.topic}] is forbidden.")
    if h.topic.startswith(RETRY_PREFIX):  # its group is looked up (and auto-created) below
        problem = validate_group(h.topic[len(RETRY_PREFIX) :])
        if problem:
            raise SendError(RS.SYSTEM_ERROR, problem)
    topic = ctl.topics.get(h.topic)
    if topic is None and h.topic.startswith((RETRY_PREFIX, DLQ_PREFIX)):
        topic = ctl.topics.create_system(h.topic, 1)
    if topic is None:
        topic = ctl.topics.create_in_send(h.topic, h.default_topic, h.default_topic_queue_nums)
    if topic is None:
        raise SendError(RS.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist, apply first please!{FAQ}")
    if not is_writable(topic["perm"]):
        raise SendError(RS.NO_PERMISSION, f"the topic[{h.topic}] sending message is forbidden")
    queue_id = h.queue_id
    if queue_id < 0:
        queue_id = random.randrange(max(1, topic["writeQueueNums"]))
    limit = max(topic["readQueueNums"], topic["writeQueueNums"])
    if queue_id >= limit:
        raise SendError(
            RS.SYSTEM_ERROR,
            f"request queueId[{queue_id}] is illegal, {topic} Producer: {conn.address}",
        )
    if len(req.body) > ctl.config.max_message_size:
        raise SendError(
            RS.MESSAGE_ILLEGAL, f"the message body size over max value, MAX: {ctl.config.max_message_size}"
        )
    props_text = h.properties or ""
    if len(props_text.encode("utf-8")) > MAX_PROPERTIES_LENGTH:
        raise SendError(RS.MESSAGE_ILLEGAL, "message properties length too long")
    props = fmt.decode_properties(props_text)
    sys_flag = h.sys_flag
    if topic.get("topicFilterType") == "MULTI_TAG":
        sys_flag |= fmt.MULTI_TAGS_FLAG
    batch = is_batch(req)
    if not batch and is_transactional(props) and ctl.config.reject_transaction_message:
        raise SendError(
            RS.NO_PERMISSION, f"the broker[{ctl.config.broker_ip1}] sending transaction message is forbidden"
        )
    born = connection_born_host(conn)
    if batch:
        if h.topic.startswith(RETRY_PREFIX):
            raise SendError(RS.MESSAGE_ILLEGAL, "batch request does not support retry group " + h.topic)
        return BatchMessage(
            h.topic,
            queue_id,
            decode_batch(batch_body(req.body, sys_flag)),
            props,
            sys_flag=sys_flag & ~fmt.COMPRESSED_FLAG,
            born_timestamp=h.born_timestamp,
            born_host=born,
            reconsume_times=h.reconsume_times or 0,
        )
    topic_name = h.topic
    if topic_name.startswith(RETRY_PREFIX):
        topic_name, queue_id = retry_or_dlq(ctl, req, h, queue_id)
    return Message(
        topic_name,
        queue_id,
        req.body,
        props,
        flag=h.flag,
        sys_flag=sys_flag,
        born_timestamp=h.born_timestamp,
        born_host=born,
        reconsume_times=h.reconsume_times or 0,
    )


def retry_or_dlq(
    ctl: BrokerContext, req: RemotingCommand, h: hd.SendMessageRequestHeader, queue_id: int
) -> tuple[str, int]:
    """``handleRetryAndDLQ``: a send to ``%RETRY%<group>`` (a client's own send-back) that has been
    reconsumed ``maxReconsumeTimes`` times goes to ``%DLQ%<group>``. The DLQ's ``DELAY=0`` is set on
    a map the client's properties replace right after, so a ``DELAY`` the client sent stays."""
    group = h.topic[len(RETRY_PREFIX) :]
    config = ctl.groups.find(group)
    if config is None:
        raise SendError(
            RS.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group} {FAQ.strip()}"
        )
    max_times = int(config.get("retryMaxTimes", 16))
    if req.version >= VERSION_V3_4_9 and h.max_reconsume_times is not None:
        max_times = h.max_reconsume_times
    if (h.reconsume_times or 0) < max_times:
        return h.topic, queue_id
    dlq = DLQ_PREFIX + group
    ctl.topics.create_system(dlq, DLQ_NUMS_PER_GROUP)
    return dlq, random.randrange(99999999) % DLQ_NUMS_PER_GROUP


IN_SYNC_REPLICAS_NOT_ENOUGH = "in-sync replicas not enough"  # 5.1.1's remark (SYSTEM_ERROR)
CREATE_MAPPED_FILE_FAILED = "create mapped file failed, server is busy or broken."  # 4.9.8's (SYSTEM_ERROR)


def apply(
    ctl: BrokerContext, req: RemotingCommand, message: Message | BatchMessage
) -> Reply | Awaitable[Reply]:
    if ctl.store.disk_full:  # DefaultMessageStore.checkStoreStatus: runningFlags not writeable
        return with_trace_fields(ctl, req.response(RS.SERVICE_NOT_AVAILABLE, service_not_available(ctl)))
    needed = None
    if ctl.ha.quorum_write and waits_for_slave(ctl, message.properties):  # refused before the store
        needed = ctl.ha.acks_needed()
        if needed is None:
            return with_trace_fields(ctl, req.response(RS.SYSTEM_ERROR, IN_SYNC_REPLICAS_NOT_ENOUGH))
    try:
        if isinstance(message, BatchMessage):
            result = ctl.store.put_batch(message)
            msg_id, queue_offset = result.msg_id, result.queue_offset
            last = result.records[-1]
        elif is_transactional(message.properties):
            last = prepare(ctl, message)  # a half message (TransactionalMessageBridge)
            msg_id, queue_offset = last.msg_id, last.queue_offset
        elif timer.has_trigger(message.properties):  # 5.x timer: the put hook (rmqcli.broker.timer)
            try:
                last = timer.put_message(ctl, message)
            except timer.TimerRefusal as exc:
                return with_trace_fields(ctl, exc.answer(req))
            msg_id, queue_offset = last.msg_id, last.queue_offset
        else:
            last = ctl.store.put(message, defer_dispatch=ctl.defer_dispatch)
            msg_id, queue_offset = last.msg_id, last.queue_offset
    except DiskFullError:  # the append found no room: the store is marked full already
        return with_trace_fields(ctl, req.response(RS.SERVICE_NOT_AVAILABLE, service_not_available(ctl)))
    except LedgerError:  # a DLedger member that stopped leading (DLedgerCommitLog: pos -1)
        remark = REPLICA_REMARKS[Replicated.OS_PAGECACHE_BUSY]
        return with_trace_fields(ctl, req.response(RS.SYSTEM_ERROR, remark))
    except OSError:  # the next CommitLog file could not be created or mapped (the writer logged why)
        return mapping_failed(ctl, req)
    if ctl.metrics.enabled and not message.topic.startswith((RETRY_PREFIX, DLQ_PREFIX)):
        # under the topic stored (a delayed, timed or half message under its system topic)
        stored = result.records if isinstance(message, BatchMessage) else [last]
        ctl.metrics.message_in(last.topic, message.properties, len(stored), sum(r.size for r in stored))
    response = stored_response(ctl, req.opaque, req.serialize_type, msg_id, message.queue_id, queue_offset)
    wait_slave = waits_for_slave(ctl, message.properties)
    wait_flush = waits_for_flush(ctl, message.properties)
    if ctl.config.sync_flush and (req.is_oneway or not wait_flush):
        ctl.store.wake_group_commit()
    if req.is_oneway or not (wait_flush or wait_slave):
        return response
    return _after_store(ctl, response, last.physical_offset + last.size, wait_slave, needed, wait_flush)


def stored_response(
    ctl: BrokerContext,
    opaque: int,
    serialize_type: SerializeType,
    msg_id: str,
    queue_id: int,
    queue_offset: int,
) -> RemotingCommand:
    """The answer to a stored send (``SendMessageResponseHeader`` plus ``MSG_REGION``/``TRACE_ON``),
    SUCCESS until a wait after the store says otherwise."""
    return RemotingCommand(  # req.response(header=...) with the strings made here
        code=RS.SUCCESS,
        opaque=opaque,
        flag=FLAG_RESPONSE,
        ext_fields={
            "msgId": msg_id,
            "queueId": str(queue_id),
            "queueOffset": str(queue_offset),
            "MSG_REGION": ctl.config.region_id,
            "TRACE_ON": ext_value(ctl.config.trace_on),
        },
        serialize_type=serialize_type,
    )


def wait_store_msg_ok(properties: Mapping[str, str]) -> bool:
    """``Message.isWaitStoreMsgOK``: true without ``WAIT``, else ``Boolean.parseBoolean`` of it."""
    wait = properties.get(fmt.PROPERTY_WAIT)
    return wait is None or parse_boolean(wait)


def waits_for_slave(ctl: BrokerContext, properties: Mapping[str, str]) -> bool:
    """A SYNC_MASTER answers a send once a slave has it, unless the message does not wait for its
    store (``CommitLog.submitReplicaRequest``); a DLedger leader always waits for the quorum."""
    return ctl.config.broker_role == SYNC_MASTER and (ctl.ha.waits_always or wait_store_msg_ok(properties))


def waits_for_flush(ctl: BrokerContext, properties: Mapping[str, str]) -> bool:
    """Under SYNC_FLUSH a send is answered after the group commit that covers it, unless the
    message does not wait for its store; then the group commit is only woken
    (``CommitLog.submitFlushRequest``)."""
    return ctl.config.sync_flush and wait_store_msg_ok(properties)


async def _after_store(
    ctl: BrokerContext,
    response: RemotingCommand,
    next_offset: int,
    wait_slave: bool,
    needed: int | None,
    wait_flush: bool,
) -> Reply:
    """``CommitLog.asyncPutMessage``'s two waits: the group commit under SYNC_FLUSH
    (``submitFlushRequest``) and, on a SYNC_MASTER, a slave's acknowledgement of ``next_offset``
    (``submitReplicaRequest``). They run side by side; the slave's failure is the one answered when
    both fail, as 4.9.8's ``thenCombine`` does. The message is stored either way."""
    import asyncio

    async def flushed() -> int:
        if not wait_flush:
            return RS.SUCCESS
        try:
            await asyncio.wait_for(asyncio.shield(ctl.store.flushed()), ctl.config.sync_flush_timeout / 1000)
        except (TimeoutError, OSError):
            return RS.FLUSH_DISK_TIMEOUT
        return RS.SUCCESS

    async def replicated() -> Replicated:
        if not wait_slave:
            return Replicated.PUT_OK
        return await ctl.ha.replicated(next_offset, needed)

    flush_code, outcome = await asyncio.gather(flushed(), replicated())
    if outcome is not Replicated.PUT_OK:
        response.code = REPLICA_CODES[outcome]
        response.remark = REPLICA_REMARKS.get(outcome, response.remark)
    elif flush_code != RS.SUCCESS:
        response.code = flush_code
        response.remark = "flush disk timeout"
    return response


REPLICA_CODES = {
    Replicated.PUT_OK: RS.SUCCESS,
    Replicated.SLAVE_NOT_AVAILABLE: RS.SLAVE_NOT_AVAILABLE,
    Replicated.FLUSH_SLAVE_TIMEOUT: RS.FLUSH_SLAVE_TIMEOUT,
    # a DLedger leader's (SendMessageProcessor.handlePutMessageResult): both SYSTEM_ERROR
    Replicated.OS_PAGECACHE_BUSY: RS.SYSTEM_ERROR,
    Replicated.UNKNOWN_ERROR: RS.SYSTEM_ERROR,
}
REPLICA_REMARKS = {
    Replicated.OS_PAGECACHE_BUSY: "[PC_SYNCHRONIZED]broker busy, start flow control for a while",
    Replicated.UNKNOWN_ERROR: "UNKNOWN_ERROR",
}


def service_not_available(ctl: BrokerContext) -> str:
    """``SendMessageProcessor``'s SERVICE_NOT_AVAILABLE remark (a send to a slave, or to a store marked
    full), with ``diskUtil``: the used share of the CommitLog's, consume queues' and index's disks."""
    root = ctl.writer.root
    paths = (ctl.writer.commitlog.directory, root / CONSUMEQUEUE_DIR, root / INDEX_DIR)
    ratios = [ctl.retention.usage(path) for path in paths]
    return (
        "service not available now. It may be caused by one of the following reasons: the broker's disk is "
        f"full [CL: {ratios[0]:5.2f} CQ: {ratios[1]:5.2f} INDEX: {ratios[2]:5.2f}], messages are put to "
        "the slave, message store has been shut down, etc."
    )


def mapping_failed(ctl: BrokerContext, req: RemotingCommand) -> RemotingCommand:
    """4.9.8's answer to ``PutMessageStatus.CREATE_MAPEDFILE_FAILED``: SYSTEM_ERROR (1), its remark."""
    return with_trace_fields(ctl, req.response(RS.SYSTEM_ERROR, CREATE_MAPPED_FILE_FAILED))


def with_trace_fields(ctl: BrokerContext, response: RemotingCommand) -> RemotingCommand:
    """``SendMessageProcessor.preSend``: every answer made after the header is read, refusals
    included, carries ``MSG_REGION`` (``regionId``) and ``TRACE_ON`` (``traceOn``)."""
    response.ext_fields["MSG_REGION"] = ctl.config.region_id
    response.ext_fields["TRACE_ON"] = ext_value(ctl.config.trace_on)
    return response


def send(
    ctl: BrokerContext,
    req: RemotingCommand,
    conn: Connection,
    header: hd.SendMessageRequestHeader | None = None,
) -> Reply | Awaitable[Reply]:
    """The handler; an in-process caller (the gRPC endpoint) may hand over the ``header`` it made
    instead of ext fields to read it from."""
    try:
        message = parse(ctl, req, conn, header)
    except SendError as exc:
        return with_trace_fields(ctl, exc.answer(req))
    return apply(ctl, req, message)


HANDLERS = {RC.SEND_MESSAGE: send, RC.SEND_MESSAGE_V2: send, RC.SEND_BATCH_MESSAGE: send}
