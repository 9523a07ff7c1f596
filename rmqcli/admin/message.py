"""Message commands of mqadmin: queryMsgById, queryMsgByKey, queryMsgByUniqueKey, queryMsgByOffset,
queryMsgTraceById, printMsg, printMsgByQueue, queryCq, sendMessage, consumeMessage, checkMsgSendRT,
sendMsgStatus (protocol.md C.2, C.4.6, C.4.7, C.5).

The pull consumer and the producer these commands run are ``rmqcli.admin.mqclient``'s.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from formats.names import DLQ_PREFIX, RETRY_PREFIX, RMQ_SYS_PREFIX, SCHEDULE_TOPIC, TOOLS_CONSUMER
from rmqcli.admin.mqclient import (  # noqa: F401 - Message and decode_messages also importable from here
    Message,
    OutMessage,
    Producer,
    PullConsumer,
    SendResult,
    decode_messages,
)
from rmqcli.admin.msgview import MessageView, view
from rmqcli.admin.session import AdminSession, masters
from rmqcli.errors import BrokerError, BrokerNotFoundError, NetworkError, NotFoundError, UsageError
from rmqcli.remoting import headers as hd
from rmqcli.remoting.codes import RequestCode, ResponseCode

if TYPE_CHECKING:
    from rmqcli.admin.trace import TraceView
    from rmqcli.remoting.json_body import MessageQueue, QueryConsumeQueueResponseBody

PULL_BATCH = 32  # printMsg's maxNums


# --- queryMsgById: an offset message id, or a unique key ----------------------------------------
QUERY_CHUNK = 256  # QUERY_MESSAGE requests in flight at once when every topic is searched
COPY_TOPIC_PREFIXES = (RETRY_PREFIX, DLQ_PREFIX, RMQ_SYS_PREFIX)  # topics that hold copies of messages


def decode_offset_id(msg_id: str) -> tuple[str, int] | None:
    """``MessageDecoder.decodeMessageId``: (``host:port``, CommitLog offset), or None when the id
    cannot be an offset message id (not 32 or 56 hex digits, or a port outside 1-65535)."""
    from formats.commitlog import decode_offset_msg_id
    from formats.records import format_host

    try:
        address, port, offset = decode_offset_msg_id(msg_id)
    except ValueError:
        return None
    if not 0 < port < 65536 or offset < 0:
        return None
    return format_host(address, port), offset


def _addr_key(addr: str) -> tuple[str, int] | None:
    """An address compared by value: ``127.0.0.1:10911``, ``[::1]:10911`` and ``0:0:…:1:10911``."""
    import ipaddress

    from rmqcli.remoting.client import parse_address

    try:
        host, port = parse_address(addr)
    except UsageError:
        return None
    try:
        host = str(ipaddress.ip_address(host))
    except ValueError:
        host = host.lower()
    return host, port


def listed_broker_addr(session: AdminSession, addr: str, broker_addr: str | None = None) -> str | None:
    """``addr`` as the NameServer lists it (any broker of any cluster, masters and slaves), or
    ``broker_addr`` (``-b``) when it names the same address; None when neither does."""
    key = _addr_key(addr)
    if broker_addr is not None and _addr_key(broker_addr) == key:
        return broker_addr.strip()
    for data in session.cluster_info().broker_addr_table.values():
        for listed in data.broker_addrs.values():
            if _addr_key(listed) == key:
                return listed
    return None


def view_message(session: AdminSession, addr: str, offset: int) -> Message:
    """VIEW_MESSAGE_BY_ID (33): the record at CommitLog ``offset`` of the broker at ``addr`` (C.4.6)."""

    response = session.call(addr, RequestCode.VIEW_MESSAGE_BY_ID, hd.ViewMessageRequestHeader(offset=offset))
    messages = decode_messages(response.body)
    if not messages:
        raise BrokerError(f"{addr}: empty VIEW_MESSAGE_BY_ID answer for offset {offset}")
    return messages[0]


def find_by_id(
    session: AdminSession, msg_id: str, topic: str | None = None, broker_addr: str | None = None
) -> Message:
    """The message of ``msg_id``, either form (``DefaultMQAdminExtImpl.viewMessage(topic, msgId)``).

    An offset message id is read with VIEW_MESSAGE_BY_ID, but only from an address the NameServer
    lists, or ``broker_addr``: the two forms have the same length, and a unique key decoded as an
    offset id names an address that was never a broker's (its producer's IP and pid). Anything
    else is a unique key (the client's msgId, ``UNIQ_KEY``), looked up with QUERY_MESSAGE as
    ``queryMsgByUniqueKey`` does: on the masters of ``topic``'s route, or without a topic for every
    topic the NameServer lists on every master of its clusters; ``broker_addr`` narrows either to
    that broker. The earliest stored match wins, one in the message's own topic before a copy in
    a retry, dead-letter, delay or system topic.
    """
    msg_id = msg_id.strip()
    decoded = decode_offset_id(msg_id)
    if decoded is not None:
        addr = listed_broker_addr(session, decoded[0], broker_addr)
        if addr is not None:
            return view_message(session, addr, decoded[1])
    found = find_by_unique_key(session, msg_id, topic, broker_addr)
    if found:
        return found[0]
    where = f"no message of topic {topic}" if topic else "no message of any topic the NameServer lists"
    if broker_addr:
        where += f" on {broker_addr.strip()}"
    points = ""
    if decoded is not None:
        points = (
            f" (as an offset message id it would name {decoded[0]}, which the NameServer does not list;"
            " -b names a broker to trust)"
        )
    raise NotFoundError(f"message {msg_id} not found: {where} has it as its unique key{points}")


def find_by_unique_key(
    session: AdminSession, key: str, topic: str | None = None, broker_addr: str | None = None
) -> list[Message]:
    """Messages whose ``UNIQ_KEY`` is ``key``, earliest first (those of copy topics last): QUERY_MESSAGE
    with ``_UNIQUE_KEY_QUERY`` for ``topic`` (every topic when None) on its brokers (``broker_addr``
    only, when given). A broker that fails without any match found raises its error."""

    if topic:
        topics = [topic.strip()]
        if broker_addr:
            addrs = [broker_addr.strip()]
        else:
            route = session.route(topics[0])
            addrs = [addr for _, addr in masters(route.broker_datas)]
    else:
        from rmqcli.admin.topic import topic_list

        topics = topic_list(session).topics
        if broker_addr:
            addrs = [broker_addr.strip()]
        else:
            table = session.cluster_info().broker_addr_table
            addrs = sorted({addr for _, addr in masters(table.values())})
    calls = [
        (addr, RequestCode.QUERY_MESSAGE, _query_header(t, key, 32, 0, (1 << 63) - 1, True), b"")
        for t in topics
        for addr in addrs
    ]
    found: list[Message] = []
    error: Exception | None = None
    for i in range(0, len(calls), QUERY_CHUNK):
        chunk = calls[i : i + QUERY_CHUNK]
        for (addr, *_), response in zip(chunk, session.call_many(chunk), strict=True):
            if isinstance(response, NetworkError):
                error = error or response
            elif response.code == ResponseCode.SUCCESS:
                found.extend(m for m in decode_messages(response.body) if m.msg_id == key)
            elif response.code != ResponseCode.QUERY_NOT_FOUND:
                from rmqcli.remoting.client import expect

                try:
                    expect(response, addr)
                except BrokerError as exc:
                    error = error or exc
    if not found and error is not None:
        raise error
    found.sort(
        key=lambda m: (
            m.topic.startswith(COPY_TOPIC_PREFIXES) or m.topic == SCHEDULE_TOPIC,
            m.store_timestamp,
        )
    )
    return found


def query_msg_by_id(
    session: AdminSession, msg_ids: str, topic: str | None = None, broker_addr: str | None = None
) -> list[MessageView]:
    """``queryMsgById -i id[,id…]``: each message with its body file and consumer tracks."""
    return [
        view(session, find_by_id(session, m, topic, broker_addr)) for m in msg_ids.split(",") if m.strip()
    ]


def _query_header(topic: str, key: str, max_num: int, begin: int, end: int, unique: bool) -> dict[str, str]:
    """QueryMessageRequestHeader's ext fields and ``_UNIQUE_KEY_QUERY`` ("true" for a unique key; never
    signed, ``rmqcli.remoting.acl``) (B.3)."""
    header = hd.QueryMessageRequestHeader(
        topic=topic, key=key, max_num=max_num, begin_timestamp=begin, end_timestamp=end
    ).to_ext_fields()
    header[hd.UNIQUE_KEY_QUERY] = "true" if unique else "false"  # MQClientAPIImpl.queryMessage: always
    return header


def query_message(
    session: AdminSession,
    topic: str,
    key: str,
    max_num: int,
    begin: int,
    end: int,
    unique: bool,
) -> list[Message]:
    """``MQAdminImpl.queryMessage``: QUERY_MESSAGE (12) to every broker of the route (its master,
    else a slave: ``selectBrokerAddr``), merged and re-filtered by ``UNIQ_KEY``, or by key and topic
    (B.3). A topic without a route is ``TOPIC_NOT_EXIST``, nothing found ``NO_MESSAGE``, both with
    MQAdminImpl's texts. A broker's QUERY_NOT_FOUND is an empty answer, as MQAdminImpl takes it
    (mqadmin then shows CODE 208); a broker's other error, or one it could not be reached for, is
    reported when no broker found anything (MQAdminImpl only logs those)."""
    from rmqcli.remoting.client import expect

    not_routed = BrokerNotFoundError(
        f"{ResponseCode.TOPIC_NOT_EXIST.name}({int(ResponseCode.TOPIC_NOT_EXIST)}): "
        f"The topic[{topic}] not matched route info"
    )
    try:
        route = session.route(topic)
    except BrokerError as exc:
        if f"{ResponseCode.TOPIC_NOT_EXIST.name}(" in str(exc):
            raise not_routed from None
        raise
    addrs = [addr for _, addr in masters(route.broker_datas)]
    if not addrs:
        raise not_routed
    header = _query_header(topic, key, max_num, begin, end, unique)
    results = session.call_many([(a, RequestCode.QUERY_MESSAGE, header, b"") for a in addrs])
    found: list[Message] = []
    last_error: Exception | None = None
    for addr, response in zip(addrs, results, strict=True):
        if isinstance(response, NetworkError):
            last_error = response
            continue
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            continue
        try:
            expect(response, addr, ResponseCode.SUCCESS)
        except BrokerError as exc:
            last_error = exc
            continue
        for msg in decode_messages(response.body):
            if unique:
                if msg.msg_id == key:
                    found.append(msg)
            elif msg.keys and key in msg.keys.split(" ") and msg.topic == topic:
                found.append(msg)
    if not found:
        if last_error is not None:
            raise last_error
        code = ResponseCode.NO_MESSAGE
        raise BrokerNotFoundError(f"{code.name}({int(code)}): query message by key finished, but no message.")
    return found


def query_msg_by_key(session: AdminSession, topic: str, key: str) -> list[Message]:
    """``queryMsgByKey``: up to 64 messages, time range 0..Long.MAX_VALUE (C.4.7)."""
    return query_message(session, topic.strip(), key.strip(), 64, 0, (1 << 63) - 1, False)


def query_msg_trace_by_id(
    session: AdminSession, msg_id: str, trace_topic: str | None = None
) -> list[TraceView]:
    """``queryMsgTraceById``: the trace messages keyed by ``msg_id`` in the trace topic (up to 64,
    stored from 0 to now), each decoded into the views about ``msg_id`` (``rmqcli.admin.trace``)."""
    from rmqcli.admin.trace import TRACE_TOPIC, views

    msg_id = msg_id.strip()
    topic = trace_topic.strip() if trace_topic is not None else TRACE_TOPIC
    now = int(time.time() * 1000)
    found = query_message(session, topic, msg_id, 64, 0, now, False)
    return [v for m in found for v in views(msg_id, m.body, m.born_host)]


def query_msg_by_unique_key(
    session: AdminSession, topic: str, msg_id: str, show_all: bool = False
) -> list[MessageView]:
    """``queryMsgByUniqueKey``: up to 32 matches sorted by store time; the first, or all with ``-a``."""
    messages = query_message(session, topic.strip(), msg_id.strip(), 32, 0, (1 << 63) - 1, True)
    messages.sort(key=lambda m: m.store_timestamp)
    chosen = messages if show_all else messages[:1]
    return [view(session, m, i) for i, m in enumerate(chosen)]


def consume_message_directly(
    session: AdminSession, group: str, client_id: str, topic: str, msg_id: str
) -> Any:
    """``queryMsgByUniqueKey -g -d``: find the message, then CONSUME_MESSAGE_DIRECTLY (309) through
    its broker, which hands it to the client (waiting three times the usual timeout, as mqadmin)."""
    from rmqcli.admin.beans import ConsumeMessageDirectlyResult
    from rmqcli.remoting import json_body as jb

    msg = query_message(session, topic.strip(), msg_id.strip(), 32, 0, (1 << 63) - 1, True)[0]
    header = hd.ConsumeMessageDirectlyResultRequestHeader(
        consumer_group=group.strip(), client_id=client_id.strip(), msg_id=msg.offset_msg_id
    )
    response = session.call(
        msg.store_host, RequestCode.CONSUME_MESSAGE_DIRECTLY, header, timeout=session.timeout * 3
    )
    return jb.decode_or_empty(ConsumeMessageDirectlyResult, response.body)


def query_msg_by_offset(
    session: AdminSession, topic: str, broker_name: str, queue_id: int, offset: int
) -> MessageView | None:
    """``queryMsgByOffset``: pull one message (``*``) at the offset; None unless FOUND."""
    from rmqcli.remoting import json_body as jb

    consumer = PullConsumer(session)
    mq = jb.MessageQueue(broker_name=broker_name.strip(), queue_id=queue_id, topic=topic.strip())
    result = consumer.pull(mq, "*", offset, 1)
    if result.status != "FOUND" or not result.messages:
        return None
    return view(session, result.messages[0])


# --- printing queues ---------------------------------------------------------------------------
@dataclass
class QueueEvent:
    """One thing ``printMsg``/``consumeMessage`` report for a queue, in order: ``bounds``,
    ``messages`` (``consumed``), ``no_matched``, ``finished``, ``truncated``, ``error``."""

    kind: str
    mq: MessageQueue
    messages: list[Message] = field(default_factory=list)
    status: str | None = None
    offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    count: int = 0
    error: str | None = None


def print_msg(
    session: AdminSession,
    topic: str,
    expression: str = "*",
    begin: int | None = None,
    end: int | None = None,
) -> list[QueueEvent]:
    """``printMsg``: every readable queue from min (or ``-b`` time) to max (or ``-e`` time), 32 at a
    time; NO_MATCHED continues, NO_NEW/OFFSET_ILLEGAL end the queue (C.4.7)."""
    events: list[QueueEvent] = []
    with PullConsumer(session) as consumer:
        for mq in consumer.queues(topic.strip()):
            low, high = consumer.bounds(mq, begin, end)
            events.append(QueueEvent("bounds", mq, min_offset=low, max_offset=high))
            _pull_events(consumer, mq, low, high, events, expression, PULL_BATCH, "messages")
            events.append(QueueEvent("end", mq))
    return events


@dataclass
class QueuePrint:
    """``printMsgByQueue``: the messages read and, with ``-f``, the count per tag."""

    mq: MessageQueue
    messages: list[Message]
    tag_counts: list[tuple[str, int]]


def print_msg_by_queue(
    session: AdminSession,
    topic: str,
    broker_name: str,
    queue_id: int,
    expression: str = "*",
    begin: int | None = None,
    end: int | None = None,
) -> QueuePrint:
    """``printMsgByQueue``: one queue, stopping at anything but FOUND; tags counted, most first."""
    from formats.javahash import hashmap_order
    from rmqcli.remoting import json_body as jb

    mq = jb.MessageQueue(broker_name=broker_name.strip(), queue_id=queue_id, topic=topic.strip())
    messages: list[Message] = []
    with PullConsumer(session) as consumer:
        low, high = consumer.bounds(mq, begin, end)
        offset = low
        while offset < high:
            result = consumer.pull(mq, expression, offset, PULL_BATCH)
            offset = result.next_begin_offset
            if result.status != "FOUND":
                break
            messages.extend(result.messages)
    counts: dict[str, int] = {}
    for msg in messages:
        if msg.tags and msg.tags.strip():
            counts[msg.tags] = counts.get(msg.tags, 0) + 1
    ordered = [(t, counts[t]) for t in hashmap_order(list(counts))]
    ordered.sort(key=lambda tc: -tc[1])  # stable, like Collections.sort
    return QueuePrint(mq=mq, messages=messages, tag_counts=ordered)


def consume_message(
    session: AdminSession,
    topic: str,
    *,
    broker_name: str | None = None,
    queue_id: int | None = None,
    offset: int | None = None,
    group: str | None = None,
    begin: int = 0,
    end: int = 0,
    count: int = 128,
) -> list[QueueEvent]:
    """``consumeMessage``: every queue (``DEFAULT``), one queue (``-b -i``) or from an offset
    (``-o``), at most ``-c`` messages, pulled with ``*`` (C.4.7)."""
    from rmqcli.remoting import json_body as jb

    consumer = PullConsumer(session, group.strip() if group else TOOLS_CONSUMER)
    topic = topic.strip()
    events: list[QueueEvent] = []
    times = (begin if begin > 0 else None, end if end > 0 else None)
    if queue_id is None:
        left = count
        for mq in consumer.queues(topic):
            if left == 0:
                break
            low, high = consumer.bounds(mq, *times)
            if high - low > left:
                events.append(QueueEvent("truncated", mq, count=left))
                high = low + left - 1
                left = 0
            else:
                left = left - (high - low) - 1
            _pull_events(consumer, mq, low, high + 1, events)
        return events
    mq = jb.MessageQueue(broker_name=(broker_name or "").strip(), queue_id=queue_id, topic=topic)
    low, high = consumer.bounds(mq, *times)
    start = offset or 0
    if start > high:
        events.append(QueueEvent("no_matched_offset", mq, offset=start))
        return events
    low = max(low, start)
    if high - low > count:
        events.append(QueueEvent("truncated_queue", mq, count=count))
        high = low + count - 1
    _pull_events(consumer, mq, low, high + 1, events)
    return events


def _pull_events(
    consumer: PullConsumer,
    mq: MessageQueue,
    start: int,
    stop: int,
    events: list[QueueEvent],
    expression: str = "*",
    batch: int | None = None,
    found: str = "consumed",
) -> None:
    """Pull ``mq`` from ``start`` while the next offset is below ``stop``, ``batch`` at a time (else
    the rest of the range), as events: ``found`` with the messages of a FOUND, ``no_matched`` (and
    on), ``finished`` with any other status, or ``error`` (both end the queue)."""
    offset = start
    while offset < stop:
        try:
            result = consumer.pull(mq, expression, offset, batch or max(stop - offset, 1))
        except (BrokerError, NetworkError) as exc:
            events.append(QueueEvent("error", mq, error=str(exc)))
            return
        offset = result.next_begin_offset
        if result.status == "FOUND":
            events.append(QueueEvent(found, mq, messages=result.messages))
        elif result.status == "NO_MATCHED_MSG":
            events.append(QueueEvent("no_matched", mq, status=result.status, offset=offset))
        else:
            events.append(QueueEvent("finished", mq, status=result.status, offset=offset))
            return


def query_cq(
    session: AdminSession,
    topic: str,
    queue_id: int,
    index: int,
    count: int = 10,
    broker_addr: str | None = None,
    group: str | None = None,
) -> QueryConsumeQueueResponseBody:
    """``queryCq``: QUERY_CONSUME_QUEUE (321) to ``-b`` or the first broker's id-0 address."""
    from rmqcli.remoting import json_body as jb

    topic = topic.strip()
    addr = broker_addr.strip() if broker_addr else None
    if not addr:
        route = session.route(topic)
        if not route.broker_datas:
            raise NotFoundError("No topic route data!")
        addr = route.broker_datas[0].broker_addrs.get(0)
        if not addr:
            raise NotFoundError(f"no master address for {route.broker_datas[0].broker_name}")
    header = hd.QueryConsumeQueueRequestHeader(
        topic=topic,
        queue_id=queue_id,
        index=index,
        count=count,
        consumer_group=group.strip() if group else None,
    )
    response = session.call(addr, RequestCode.QUERY_CONSUME_QUEUE, header)
    return jb.decode_or_empty(jb.QueryConsumeQueueResponseBody, response.body)


def send_message(
    session: AdminSession,
    topic: str,
    body: str,
    *,
    keys: str | None = None,
    tags: str | None = None,
    broker_name: str | None = None,
    queue_id: int | None = None,
) -> SendResult:
    """``sendMessage``: producer group = current millis; ``-b`` with ``-i`` picks the queue."""
    from rmqcli.remoting import json_body as jb

    if queue_id is not None and not broker_name:
        raise UsageError("Broker name must be set if the queue is chosen!")
    message = OutMessage(
        topic=topic.strip(),
        body=body.strip().encode("utf-8"),
        tags=tags.strip() if tags else None,
        keys=keys.strip() if keys else None,
    )
    producer = Producer(session, str(int(time.time() * 1000)))
    try:
        if broker_name and queue_id is not None and queue_id > -1:
            mq = jb.MessageQueue(broker_name=broker_name.strip(), queue_id=queue_id, topic=message.topic)
            producer.publish_queues(message.topic)
            return producer.send(message, mq=mq)
        return producer.send(message)
    finally:
        producer.close()


@dataclass
class RtRow:
    broker_name: str | None
    queue_id: int | None
    success: bool
    rt: int
    error: str | None = None


@dataclass
class RtResult:
    rows: list[RtRow]
    avg_rt: float | None  # None: mqadmin's NaN (one message)


def check_msg_send_rt(session: AdminSession, topic: str, amount: int = 100, size: int = 128) -> RtResult:
    """``checkMsgSendRT``: ``amount`` messages of ``size`` ``a``s, message i to queue ``i % n``; the
    average leaves the first send out (C.4.7)."""
    producer = Producer(session, str(int(time.time() * 1000)))
    message = OutMessage(topic=topic.strip(), body=b"a" * size)
    rows: list[RtRow] = []
    elapsed = 0
    last: list[Any] = [None, None]
    try:
        for i in range(amount):

            def select(mqs: list[MessageQueue], i: int = i) -> MessageQueue:
                chosen = mqs[i % len(mqs)]
                last[0], last[1] = chosen.broker_name, chosen.queue_id
                return chosen

            start = time.monotonic()
            error = None
            try:
                producer.send(message, selector=select)
                ok = True
            except (BrokerError, NetworkError) as exc:
                ok, error = False, str(exc)
            rt = int((time.monotonic() - start) * 1000)
            if i:
                elapsed += rt
            rows.append(RtRow(last[0], last[1], ok, rt, error))
    finally:
        producer.close()
    return RtResult(rows=rows, avg_rt=elapsed / (amount - 1) if amount > 1 else None)


@dataclass
class StatusSend:
    rt: int
    result: SendResult


def send_msg_status(
    session: AdminSession, broker_name: str, size: int = 128, count: int = 50
) -> list[StatusSend]:
    """``sendMsgStatus``: group ``PID_SMSC``, topic = the broker name, one warm-up message of 16
    bytes, then ``count`` messages of ``hello jodie`` repeated to ``size``."""
    name = broker_name.strip()
    producer = Producer(session, "PID_SMSC", f"PID_SMSC_{int(time.time() * 1000)}")

    def build(n: int) -> OutMessage:
        return OutMessage(topic=name, body=b"hello jodie" * ((n + 10) // 11))

    out = []
    try:
        producer.send(build(16))
        for _ in range(count):
            start = time.monotonic()
            result = producer.send(build(size))
            out.append(StatusSend(int((time.monotonic() - start) * 1000), result))
    finally:
        producer.close()
    return out
