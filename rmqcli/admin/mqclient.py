"""The clients mqadmin's message commands run inside one command: ``DefaultMQPullConsumer`` and
``DefaultMQProducer`` over an ``AdminSession`` (protocol.md B.6-B.8, C.5).

Pulls are what mqadmin's pull consumer sends (B.7: group ``TOOLS_CONSUMER``, SUBSCRIPTION flag, no
suspend); answers are stored records (B.8) decoded with ``formats.records.decode_record`` into
``Message``; sends are what the Java producer sends (B.6: SEND_MESSAGE_V2, ``UNIQ_KEY``, zlib over
4 KiB). Every request header is a typed class of ``rmqcli.remoting.headers``.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from formats.javatext import parse_boolean
from formats.names import CLIENT_INNER_PRODUCER, DEFAULT_TOPIC, PERM_READ, PERM_WRITE, TOOLS_CONSUMER
from rmqcli.admin.beans import hash_order
from rmqcli.admin.session import AdminSession, master_addr
from rmqcli.errors import BrokerError, NetworkError, NotFoundError, UsageError
from rmqcli.remoting import headers as hd
from rmqcli.remoting.codes import RequestCode, ResponseCode

if TYPE_CHECKING:
    from rmqcli.remoting.json_body import MessageQueue, TopicRouteData

COMPRESS_OVER = 4096  # DefaultMQProducer.compressMsgBodyOverHowmuch
COMPRESS_LEVEL = 5
BROKER_SUSPEND_MAX_MILLIS = 20000  # DefaultMQPullConsumer.brokerSuspendMaxTimeMillis
DEFAULT_TOPIC_QUEUE_NUMS = 4  # DefaultMQProducer.defaultTopicQueueNums
RETRY_CODES = frozenset(  # DefaultMQProducer retryResponseCodes (B.6)
    {
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.NO_PERMISSION,
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.NO_BUYER_ID,
        ResponseCode.NOT_IN_CURRENT_UNIT,
    }
)
SEND_STATUS = {  # SendStatus of each answer MQClientAPIImpl.processSendResponse accepts
    ResponseCode.SUCCESS: "SEND_OK",
    ResponseCode.FLUSH_DISK_TIMEOUT: "FLUSH_DISK_TIMEOUT",
    ResponseCode.SLAVE_NOT_AVAILABLE: "SLAVE_NOT_AVAILABLE",
    ResponseCode.FLUSH_SLAVE_TIMEOUT: "FLUSH_SLAVE_TIMEOUT",
}


# --- decoded messages --------------------------------------------------------------------------
@dataclass
class Message:
    """A ``MessageClientExt`` as the Java client decodes a stored record (B.8)."""

    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    store_size: int
    sys_flag: int
    flag: int
    body_crc: int
    born_timestamp: int
    born_host: str
    store_timestamp: int
    store_host: str
    reconsume_times: int
    prepared_transaction_offset: int
    offset_msg_id: str
    body: bytes
    properties: dict[str, str]
    broker_name: str | None = None
    transaction_id: str | None = None

    @property
    def msg_id(self) -> str:
        """``MessageClientExt.getMsgId``: ``UNIQ_KEY``, else the offset id."""
        return self.properties.get("UNIQ_KEY") or self.offset_msg_id

    @property
    def tags(self) -> str | None:
        return self.properties.get("TAGS")

    @property
    def keys(self) -> str | None:
        return self.properties.get("KEYS")


def decode_messages(body: bytes) -> list[Message]:
    """``MessageDecoder.decodes``: every stored record of a pull/query/view body, bodies inflated,
    properties in a ``HashMap``'s order."""
    from formats.commitlog import hashmap_order, property_pairs
    from formats.records import RecordError, decode_record

    out = []
    pos, view = 0, memoryview(body)
    while pos < len(body):
        try:
            record = decode_record(view, pos, len(body))
        except RecordError as exc:
            raise BrokerError(f"undecodable message in the response at byte {pos}: {exc}") from None
        pairs = dict(property_pairs(record.properties_raw))
        props = {k: pairs[k] for k in hashmap_order(list(pairs))}
        out.append(
            Message(
                topic=record.topic,
                queue_id=record.queue_id,
                queue_offset=record.queue_offset,
                commit_log_offset=record.physical_offset,
                store_size=record.total_size,
                sys_flag=record.sys_flag,
                flag=record.flag,
                body_crc=record.body_crc,
                born_timestamp=record.born_timestamp,
                born_host=record.born_host,
                store_timestamp=record.store_timestamp,
                store_host=record.store_host,
                reconsume_times=record.reconsume_times,
                prepared_transaction_offset=record.prepared_transaction_offset,
                offset_msg_id=record.msg_id,
                body=record.body(),
                properties=props,
            )
        )
        pos += record.total_size
    return out


def put_property(msg: Message, key: str, value: str) -> None:
    """``MessageAccessor.putProperty`` on a ``HashMap``: a new key takes its bucket's place."""
    from formats.javahash import hashmap_order

    props = dict(msg.properties)
    props[key] = value
    msg.properties = {k: props[k] for k in hashmap_order(list(props))}


# --- the pull consumer mqadmin uses ------------------------------------------------------------
@dataclass
class PullResult:
    status: str  # FOUND, NO_NEW_MSG, NO_MATCHED_MSG, OFFSET_ILLEGAL
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[Message] = field(default_factory=list)


PULL_STATUS = {  # PullStatus of each answer MQClientAPIImpl.processPullResponse accepts
    ResponseCode.SUCCESS: "FOUND",
    ResponseCode.PULL_NOT_FOUND: "NO_NEW_MSG",
    ResponseCode.PULL_RETRY_IMMEDIATELY: "NO_MATCHED_MSG",
    ResponseCode.PULL_OFFSET_MOVED: "OFFSET_ILLEGAL",
}


def tags_of(expression: str) -> set[str]:
    """``FilterAPI.buildSubscriptionData``: ``*`` or blank is every tag, else ``a || b``."""
    text = expression.strip()
    if not text or text == "*":
        return set()
    return {t.strip() for t in text.split("||") if t.strip()}


REQ_T, STREAM = "ReqT", "0"  # MixAll.REQ_T, RequestType.STREAM's code


class PullConsumer:
    """``DefaultMQPullConsumer`` of group ``TOOLS_CONSUMER``: queue bounds (31, 30, 29) and
    synchronous pulls (11) to the master of each queue's broker (C.5)."""

    def __init__(self, session: AdminSession, group: str = TOOLS_CONSUMER):
        self.session = session
        self.group = group
        self.routes: dict[str, TopicRouteData] = {}

    def __enter__(self) -> PullConsumer:
        """As the command's only client, 4.9.8's way: every request says it is a stream request
        (``enableStreamRequestType``: ``ReqT=0``, StreamTypeRPCHook), and ``shutdown`` unregisters
        the client from every broker its routes named (UNREGISTER_CLIENT, 35)."""
        self.session.extra_fields[REQ_T] = STREAM
        return self

    def __exit__(self, *exc: object) -> None:
        addrs = {
            a for route in self.routes.values() for b in route.broker_datas for a in b.broker_addrs.values()
        }
        header = hd.UnregisterClientRequestHeader(
            client_id=f"{local_ip()}@{os.getpid()}@STREAM", consumer_group=self.group
        )
        for addr in sorted(addrs):
            try:
                self.session.call(addr, RequestCode.UNREGISTER_CLIENT, header)
            except (BrokerError, NetworkError):
                pass
        self.session.extra_fields.pop(REQ_T, None)

    def route(self, topic: str) -> TopicRouteData:
        if topic not in self.routes:
            self.routes[topic] = self.session.route(topic)
        return self.routes[topic]

    def addr(self, mq: MessageQueue) -> str:
        for data in self.route(mq.topic).broker_datas:
            if data.broker_name == mq.broker_name:
                addr = master_addr(data.broker_addrs)
                if addr:
                    return addr
        raise BrokerError(f"The broker[{mq.broker_name}] not exist")

    def queues(self, topic: str) -> list[MessageQueue]:
        """``fetchSubscribeMessageQueues``: readable queues, in ``HashSet`` order."""
        from rmqcli.remoting import json_body as jb

        mqs = [
            jb.MessageQueue(broker_name=q.broker_name, queue_id=i, topic=topic)
            for q in self.route(topic).queue_datas
            if q.perm & PERM_READ
            for i in range(q.read_queue_nums)
        ]
        if not mqs:
            raise NotFoundError(f"Can not find Message Queue for this topic, {topic}")
        return hash_order(mqs)

    def min_offset(self, mq: MessageQueue) -> int:
        return min_offset(self.session, self.addr(mq), mq.topic, mq.queue_id, mq.broker_name)

    def max_offset(self, mq: MessageQueue) -> int:
        return max_offset(self.session, self.addr(mq), mq.topic, mq.queue_id, mq.broker_name)

    def search_offset(self, mq: MessageQueue, timestamp: int) -> int:
        return search_offset(self.session, self.addr(mq), mq.topic, mq.queue_id, timestamp, mq.broker_name)

    def bounds(self, mq: MessageQueue, begin: int | None, end: int | None) -> tuple[int, int]:
        """The queue's min and max offsets (asked for first, as mqadmin does), replaced by the offsets
        of the ``begin`` / ``end`` times when given."""
        low, high = self.min_offset(mq), self.max_offset(mq)
        if begin is not None:
            low = self.search_offset(mq, begin)
        if end is not None:
            high = self.search_offset(mq, end)
        return low, high

    def pull(self, mq: MessageQueue, expression: str, offset: int, max_nums: int) -> PullResult:
        """PULL_MESSAGE (11): sysFlag SUBSCRIPTION only, ``subVersion`` 0, then the client-side tag
        filter and ``MIN_OFFSET``/``MAX_OFFSET`` properties (B.7)."""
        from rmqcli.remoting.client import expect

        if offset < 0:
            raise UsageError("offset < 0")
        addr = self.addr(mq)
        header = hd.PullMessageRequestHeader(
            consumer_group=self.group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=hd.PULL_FLAG_SUBSCRIPTION,
            commit_offset=0,
            suspend_timeout_millis=BROKER_SUSPEND_MAX_MILLIS,
            subscription=expression,
            sub_version=0,
            expression_type="TAG",
            bname=mq.broker_name,
        )
        request = self.session.request(RequestCode.PULL_MESSAGE, header)
        response = expect(
            self.session.client.invoke(addr, request, self.session.timeout + 10), addr, *PULL_STATUS
        )
        ext = response.ext_fields
        result = PullResult(
            status=PULL_STATUS[response.code],
            next_begin_offset=int(ext.get("nextBeginOffset", "0")),
            min_offset=int(ext.get("minOffset", "0")),
            max_offset=int(ext.get("maxOffset", "0")),
        )
        if result.status == "FOUND":
            wanted = tags_of(expression)
            for msg in decode_messages(response.body):
                if wanted and msg.tags not in wanted:
                    continue
                if parse_boolean(msg.properties.get("TRAN_MSG")):
                    msg.transaction_id = msg.properties.get("UNIQ_KEY")
                put_property(msg, "MIN_OFFSET", str(result.min_offset))
                put_property(msg, "MAX_OFFSET", str(result.max_offset))
                msg.broker_name = mq.broker_name
                result.messages.append(msg)
        return result


# --- the producer mqadmin uses -----------------------------------------------------------------
def local_ip() -> str:
    """The client's IPv4 address as Java's ``RemotingUtil.getLocalAddress`` finds one."""
    import socket

    try:
        ip = socket.gethostbyname(socket.gethostname())
    except OSError:
        ip = "127.0.0.1"
    return ip


class UniqIdGenerator:
    """``MessageClientIDSetter.createUniqID``: ip, pid, a per-process int, millis since the start
    of the month and a counter, as 32 upper-case hex characters (B.6)."""

    def __init__(self, ip: str | None = None):
        import ipaddress

        try:
            address = ipaddress.IPv4Address(ip or local_ip()).packed
        except ValueError:
            address = b"\x7f\x00\x00\x01"
        fixed = (
            address + (os.getpid() & 0xFFFF).to_bytes(2, "big") + random.getrandbits(32).to_bytes(4, "big")
        )
        self.prefix = fixed.hex().upper()
        self.counter = 0

    def next(self, now_millis: int | None = None) -> str:
        from datetime import datetime

        now = int(time.time() * 1000) if now_millis is None else now_millis
        moment = datetime.fromtimestamp(now / 1000)
        start = datetime(moment.year, moment.month, 1)
        diff = (now - int(start.timestamp() * 1000)) & 0xFFFFFFFF
        text = (
            self.prefix
            + diff.to_bytes(4, "big").hex().upper()
            + (self.counter & 0xFFFF).to_bytes(2, "big").hex().upper()
        )
        self.counter += 1
        return text


@dataclass
class SendResult:
    send_status: str
    msg_id: str
    offset_msg_id: str
    mq: MessageQueue
    queue_offset: int
    region_id: str | None = None
    trace_on: bool = True

    def java_string(self) -> str:
        from rmqcli.admin.beans import mq_string

        return (
            f"SendResult [sendStatus={self.send_status}, msgId={self.msg_id}, "
            f"offsetMsgId={self.offset_msg_id}, "
            f"messageQueue={mq_string(self.mq)}, queueOffset={self.queue_offset}]"
        )


@dataclass
class OutMessage:
    """What ``new Message(topic, tags, keys, body)`` holds before sending."""

    topic: str
    body: bytes
    tags: str | None = None
    keys: str | None = None
    flag: int = 0

    def properties(self) -> dict[str, str]:
        props: dict[str, str] = {}
        if self.tags:
            props["TAGS"] = self.tags
        if self.keys:
            props["KEYS"] = self.keys
        props["WAIT"] = "true"
        return props


class Producer:
    """``DefaultMQProducer`` for one command: route (105, ``TBW102`` fallback), heartbeat (34) to
    the masters it sends to, SEND_MESSAGE_V2 (310) with up to two retries, UNREGISTER_CLIENT (35)."""

    def __init__(self, session: AdminSession, group: str, instance: str | None = None):
        self.session = session
        self.group = group
        self.client_id = f"{local_ip()}@{instance or os.getpid()}"
        self.ids = UniqIdGenerator()
        self.queues: dict[str, list[MessageQueue]] = {}
        self.addrs: dict[str, str] = {}
        self.heartbeats: set[str] = set()
        self.index = random.randrange(1 << 16)

    def publish_queues(self, topic: str) -> list[MessageQueue]:
        """``topicRouteData2TopicPublishInfo``: writable queues of brokers with a master, brokers
        sorted by name; an unknown topic borrows ``TBW102``'s layout (at most 4 queues)."""
        from rmqcli.remoting import json_body as jb

        if topic in self.queues:
            return self.queues[topic]
        try:
            route = self.session.route(topic)
            default = False
        except BrokerError as exc:
            if f"({ResponseCode.TOPIC_NOT_EXIST})" not in str(exc):
                raise
            route = self.session.route(DEFAULT_TOPIC)
            default = True
        masters = {d.broker_name: d.broker_addrs.get(0) for d in route.broker_datas}
        mqs = []
        for q in sorted(route.queue_datas, key=lambda q: q.broker_name):
            addr = masters.get(q.broker_name)
            if not q.perm & PERM_WRITE or not addr:
                continue
            self.addrs[q.broker_name] = addr
            nums = min(DEFAULT_TOPIC_QUEUE_NUMS, q.read_queue_nums) if default else q.write_queue_nums
            mqs.extend(
                jb.MessageQueue(broker_name=q.broker_name, queue_id=i, topic=topic) for i in range(nums)
            )
        if not mqs:
            raise BrokerError(f"No route info of this topic: {topic}")
        self.queues[topic] = mqs
        return mqs

    def _heartbeat(self, addr: str) -> None:
        from rmqcli.remoting import json_body as jb

        if addr in self.heartbeats:
            return
        data = jb.HeartbeatData(
            client_id=self.client_id,
            producer_data_set=[
                jb.ProducerData(group_name=self.group),
                jb.ProducerData(group_name=CLIENT_INNER_PRODUCER),
            ],
        )
        self.session.call(addr, RequestCode.HEART_BEAT, body=jb.encode(data))
        self.heartbeats.add(addr)

    def send(
        self,
        message: OutMessage,
        mq: MessageQueue | None = None,
        selector: Any = None,
    ) -> SendResult:
        """``send(msg)``, ``send(msg, mq)`` or ``send(msg, selector)`` (``selector(mqs)`` picks one)."""
        mqs = self.publish_queues(message.topic)
        if mq is not None or selector is not None:
            chosen = mq if mq is not None else selector(mqs)
            return self._send_once(message, chosen)
        last: Exception | None = None
        avoid: str | None = None
        for _ in range(3):
            candidates = [m for m in mqs if m.broker_name != avoid] or mqs
            self.index += 1
            chosen = candidates[self.index % len(candidates)]
            try:
                return self._send_once(message, chosen)
            except NetworkError as exc:
                last, avoid = exc, chosen.broker_name
            except BrokerError as exc:
                codes = [c for c in RETRY_CODES if f"({c})" in str(exc)]
                if not codes or ResponseCode.SUCCESS in codes:
                    raise
                last, avoid = exc, chosen.broker_name
        assert last is not None
        raise last

    def _send_once(self, message: OutMessage, mq: MessageQueue) -> SendResult:
        import zlib

        from formats.commitlog import (
            COMPRESSED_FLAG,
            COMPRESSION_TYPE_SHIFT,
            CompressionType,
            encode_properties_as_broker,
        )
        from rmqcli.remoting.client import expect

        addr = self.addrs.get(mq.broker_name)
        if addr is None:
            self.publish_queues(mq.topic)
            addr = self.addrs.get(mq.broker_name)
        if addr is None:
            raise BrokerError(f"The broker[{mq.broker_name}] not exist")
        self._heartbeat(addr)
        props = message.properties()
        msg_id = self.ids.next()
        props["UNIQ_KEY"] = msg_id
        body, sys_flag = message.body, 0
        if len(body) >= COMPRESS_OVER:
            body = zlib.compress(body, COMPRESS_LEVEL)
            sys_flag |= COMPRESSED_FLAG | CompressionType.ZLIB << COMPRESSION_TYPE_SHIFT  # (B.6)
        header = hd.SendMessageRequestHeaderV2.from_v1(
            hd.SendMessageRequestHeader(
                producer_group=self.group,
                topic=mq.topic,
                default_topic=DEFAULT_TOPIC,
                default_topic_queue_nums=DEFAULT_TOPIC_QUEUE_NUMS,
                queue_id=mq.queue_id,
                sys_flag=sys_flag,
                born_timestamp=int(time.time() * 1000),
                flag=message.flag,
                properties=encode_properties_as_broker(props).decode("utf-8"),
                reconsume_times=0,
                unit_mode=False,
                batch=False,
                bname=mq.broker_name,
            )
        )
        request = self.session.request(RequestCode.SEND_MESSAGE_V2, header, body)
        response = expect(self.session.client.invoke(addr, request, self.session.timeout), addr, *SEND_STATUS)
        ext = response.ext_fields
        from rmqcli.remoting import json_body as jb

        return SendResult(
            send_status=SEND_STATUS[response.code],
            msg_id=msg_id,
            offset_msg_id=ext.get("msgId", ""),
            mq=jb.MessageQueue(
                broker_name=mq.broker_name, queue_id=int(ext.get("queueId", mq.queue_id)), topic=mq.topic
            ),
            queue_offset=int(ext.get("queueOffset", "0")),
            region_id=ext.get("MSG_REGION"),
            trace_on=ext.get("TRACE_ON", "true").lower() != "false",
        )

    def close(self) -> None:
        """UNREGISTER_CLIENT (35) to every broker the producer sent a heartbeat to."""
        for addr in sorted(self.heartbeats):
            try:
                self.session.call(
                    addr,
                    RequestCode.UNREGISTER_CLIENT,
                    hd.UnregisterClientRequestHeader(client_id=self.client_id, producer_group=self.group),
                )
            except (BrokerError, NetworkError):
                pass
        self.heartbeats.clear()


# --- queue offsets (MQAdminImpl.minOffset / maxOffset / searchOffset) --------------------------
# ``broker_name``: the queue's broker, sent as ``bname`` as 4.9.8's MQClientAPIImpl does for a
# MessageQueue (None where the caller has only an address, as 5.1.1's by-queue reset)
def min_offset(
    session: AdminSession, addr: str, topic: str, queue_id: int, broker_name: str | None = None
) -> int:
    """GET_MIN_OFFSET (31) of a queue on the broker at ``addr``."""
    header = hd.GetMinOffsetRequestHeader(topic=topic, queue_id=queue_id, bname=broker_name)
    return _offset(session.call(addr, RequestCode.GET_MIN_OFFSET, header))


def max_offset(
    session: AdminSession, addr: str, topic: str, queue_id: int, broker_name: str | None = None
) -> int:
    """GET_MAX_OFFSET (30) of a queue on the broker at ``addr``."""
    header = hd.GetMaxOffsetRequestHeader(topic=topic, queue_id=queue_id, bname=broker_name)
    return _offset(session.call(addr, RequestCode.GET_MAX_OFFSET, header))


def search_offset(
    session: AdminSession,
    addr: str,
    topic: str,
    queue_id: int,
    timestamp: int,
    broker_name: str | None = None,
) -> int:
    """SEARCH_OFFSET_BY_TIMESTAMP (29): the queue's offset of the first message stored at ``timestamp``."""
    header = hd.SearchOffsetRequestHeader(
        topic=topic, queue_id=queue_id, timestamp=timestamp, bname=broker_name
    )
    return _offset(session.call(addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header))


def _offset(response: Any) -> int:
    return int(response.ext_fields.get("offset", "0"))
