"""SendMessage (the 5.1 proxy's ``SendMessageActivity`` + ``ProducerProcessor`` over
``LocalMessageService``): a gRPC message goes through the broker's own send processor in-process.

As the proxy in local mode does, each message becomes a SEND_MESSAGE (10) request (producer group =
the topic, default topic TBW102 with 4 queues, the properties of ``convert``) handed to
``rmqcli.broker.processor.send`` with a stand-in for the connection (the caller's address), so every check,
the transaction half-message path, SYNC_FLUSH and SYNC_MASTER waits are the remoting send's. The
queue is chosen here, not by the client: a message group hashes to a write queue (Guava's
``consistentHash`` of Java's ``String.hashCode``), other messages take the write queues in turn. A
topic with a ``message.type`` attribute takes only messages of that type.

A half message (TRANSACTION) also gets ``__transactionId__`` = its ``UNIQ_KEY``, as the 5.1.1
broker's ``TransactionalMessageBridge.parseHalfMessageInner`` puts it (4.9.8's does not, and rmq's
remoting path follows 4.9.8; a 5.x client only ever meets a 5.x broker): the check-back and the
committed message carry it as a user property.

Answer per message: SUCCESS -> OK with the queue offset, ``message_id`` = the client's id
(``UNIQ_KEY``) and ``transaction_id`` = that id too, for every message (5.1's
``SendMessageProcessor`` answers every message's ``UNIQ_KEY``); FLUSH_DISK_TIMEOUT ->
MASTER_PERSISTENCE_TIMEOUT, FLUSH_SLAVE_TIMEOUT -> SLAVE_PERSISTENCE_TIMEOUT, SLAVE_NOT_AVAILABLE ->
HA_NOT_AVAILABLE; any other broker refusal -> INTERNAL_SERVER_ERROR with the broker's remark
(``LocalMessageService``: a ProxyException, so the text starts with its class name).

rmq stores the messages of a request with more than one message one by one (an entry each; the
proxy sends them as one batch with one entry): the 5.x clients send one message per request.
"""

from __future__ import annotations

import inspect
import itertools
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from formats import commitlog as fmt
from rmqcli.broker.grpc import convert
from rmqcli.broker.grpc import status as st
from rmqcli.broker.grpc.context import CallContext
from rmqcli.broker.processor import send
from rmqcli.broker.state import is_writable
from rmqcli.remoting import headers as hd
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext
    from rmqcli.remoting.server.connection import Connection

DEFAULT_TOPIC = "TBW102"  # TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC
MAX_CHANNELS = 4096  # callers' addresses with a stand-in connection kept
MAX_TRANSACTIONS = 100_000  # transaction data kept for EndTransaction (oldest forgotten first)
ENTRY_CODES = {
    RS.FLUSH_DISK_TIMEOUT: st.MASTER_PERSISTENCE_TIMEOUT,
    RS.FLUSH_SLAVE_TIMEOUT: st.SLAVE_PERSISTENCE_TIMEOUT,
    RS.SLAVE_NOT_AVAILABLE: st.HA_NOT_AVAILABLE,
}
SEND_STATUS = {
    RS.FLUSH_DISK_TIMEOUT: "FLUSH_DISK_TIMEOUT",
    RS.FLUSH_SLAVE_TIMEOUT: "FLUSH_SLAVE_TIMEOUT",
    RS.SLAVE_NOT_AVAILABLE: "SLAVE_NOT_AVAILABLE",
}


class CallChannel:
    """What the send processor reads of its connection, for a gRPC call (the proxy's
    ``SimpleChannel``): the caller's address."""

    def __init__(self, ctx: CallContext):
        self.peer = (ctx.remote_host or "0.0.0.0", ctx.remote_port)
        self.attributes: dict[str, Any] = {}
        self.address = ctx.remote_address


def java_string_hash(text: str) -> int:
    """``String.hashCode`` (over UTF-16 code units), a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def consistent_hash(value: int, buckets: int) -> int:
    """Guava's ``Hashing.consistentHash(long, int)`` (its linear congruential generator)."""
    state = value & 0xFFFFFFFFFFFFFFFF
    candidate = 0
    while True:
        state = (2862933555777941757 * state + 1) & 0xFFFFFFFFFFFFFFFF
        shifted = state >> 33
        shifted = shifted - (1 << 31) if shifted & 0x80000000 else shifted  # (int) cast
        nxt = int((candidate + 1) / ((shifted + 1) / 2.0**31))
        if 0 <= nxt < buckets:
            candidate = nxt
        else:
            return candidate


@dataclass(frozen=True)
class TransactionData:
    """What EndTransaction needs of a half message (the proxy's ``TransactionData``)."""

    commit_log_offset: int
    queue_offset: int


class Producer:
    """SendMessage for one broker."""

    def __init__(self, stubs: Any, ctl: BrokerContext):
        self.s = stubs
        self.ctl = ctl
        self._turns: dict[str, itertools.count[int]] = {}
        self._channels: dict[tuple[str, int], CallChannel] = {}
        self.transactions: OrderedDict[tuple[str, str], TransactionData] = OrderedDict()

    def select_queue(self, topic: str, config: dict, group: str) -> int:
        writes = config["writeQueueNums"] if is_writable(config["perm"]) else 0
        if writes <= 0:
            raise st.GrpcStatusError(st.FORBIDDEN, "no writable queue", wrapped=True)
        if group:
            return consistent_hash(java_string_hash(group), writes)
        turn = self._turns.get(topic)
        if turn is None:
            if len(self._turns) >= 100_000:
                self._turns.clear()
            turn = self._turns[topic] = itertools.count()
        return next(turn) % writes

    def header(self, out: convert.Outgoing, queue_id: int) -> hd.SendMessageRequestHeader:
        """The SEND_MESSAGE header the proxy builds (``buildSendMessageRequestHeader``)."""
        return hd.SendMessageRequestHeader(
            producer_group=out.topic,
            topic=out.topic,
            default_topic=DEFAULT_TOPIC,
            default_topic_queue_nums=4,
            queue_id=queue_id,
            sys_flag=out.sys_flag,
            born_timestamp=out.born_timestamp,
            flag=0,
            properties=fmt.encode_properties_as_broker(out.properties).decode("utf-8"),
            reconsume_times=0,
        )

    async def send_message(self, ctx: CallContext, request: Any) -> Any:
        d, s = self.s.definition, self.s.service
        if not request.messages:
            raise st.GrpcStatusError(st.MESSAGE_CORRUPTED, "no message to send")
        topic = request.messages[0].topic
        convert.check_topic(topic.name)
        outs = []
        for message in request.messages:
            if message.topic != topic:
                raise st.GrpcStatusError(st.MESSAGE_CORRUPTED, "topic in message is not same")
            outs.append(convert.outgoing(message, ctx))
        config = self.ctl.topics.get(topic.name)
        convert.check_type(topic.name, config, outs[0].properties)
        if config is None:
            raise st.GrpcStatusError(st.TOPIC_NOT_FOUND, f"topic[{topic.name}] not exist")
        entries = []
        for out, message in zip(outs, request.messages, strict=True):
            queue_id = self.select_queue(topic.name, config, message.system_properties.message_group)
            entries.append(await self.store(ctx, out, queue_id))
        codes = {entry.status.code for entry in entries}
        code = codes.pop() if len(codes) == 1 else st.MULTIPLE_RESULTS
        return s.SendMessageResponse(status=st.make(d, code), entries=entries)

    async def store(self, ctx: CallContext, out: convert.Outgoing, queue_id: int) -> Any:
        d, s = self.s.definition, self.s.service
        if out.properties.get(convert.TRAN_MSG) == "true":  # 5.1.1's parseHalfMessageInner
            out.properties[convert.TRANSACTION_ID] = out.properties[convert.UNIQ_KEY]
        # the header goes to the processor as made: not written into ext fields to be read back
        request = RemotingCommand(RC.SEND_MESSAGE, body=out.body)
        header = self.header(out, queue_id)
        reply = send.send(self.ctl, request, cast("Connection", self.channel(ctx)), header)
        if self.ctl.defer_dispatch:
            self.ctl.store.catch_up()  # the reput the connection runs after each read
        if type(reply) is not RemotingCommand and inspect.isawaitable(reply):  # a wait after the store
            reply = await reply
        if reply is None:
            raise st.GrpcStatusError(st.INTERNAL_SERVER_ERROR, "the broker gave no answer")
        if reply.code in ENTRY_CODES:
            text = f"send message failed, sendStatus={SEND_STATUS[reply.code]}"
            return s.SendResultEntry(status=st.make(d, ENTRY_CODES[reply.code], text))
        if reply.code != RS.SUCCESS:  # LocalMessageService: a ProxyException with the broker's remark
            raise st.GrpcStatusError(st.INTERNAL_SERVER_ERROR, reply.remark or str(reply.code), wrapped=True)
        fields = reply.ext_fields  # send.stored_response's: msgId and queueOffset always there
        queue_offset = int(fields["queueOffset"])
        message_id = out.properties[convert.UNIQ_KEY]
        if out.properties.get(convert.TRAN_MSG) == "true":
            self.remember(out.topic, message_id, fields["msgId"], queue_offset)
        return s.SendResultEntry(
            status=st.make(d, st.OK),
            offset=queue_offset,
            message_id=message_id,
            transaction_id=message_id,  # the broker's answer carries every message's UNIQ_KEY
        )

    def channel(self, ctx: CallContext) -> CallChannel:
        """The stand-in connection of the caller's address, kept (at most ``MAX_CHANNELS``) as a
        remoting connection is, so that what the send processor works out once per connection (the
        born host) is worked out once per client connection here too."""
        key = (ctx.remote_host, ctx.remote_port)
        found = self._channels.get(key)
        if found is None:
            if len(self._channels) >= MAX_CHANNELS:
                self._channels.clear()
            found = self._channels[key] = CallChannel(ctx)
        return found

    def remember(self, topic: str, transaction_id: str, offset_msg_id: str, queue_offset: int) -> None:
        """``fillTransactionData``: the half message's commit log offset (the last 16 hex digits of
        the offset message id) and queue offset, for EndTransaction."""
        try:
            commit_log_offset = int(offset_msg_id[-16:], 16)
        except ValueError:
            return
        self.remember_check(topic, transaction_id, commit_log_offset, queue_offset)

    def remember_check(
        self, topic: str, transaction_id: str, commit_log_offset: int, queue_offset: int
    ) -> None:
        """The offsets of a half message (at send, or renewed by a transaction check)."""
        self.transactions[(topic, transaction_id)] = TransactionData(commit_log_offset, queue_offset)
        while len(self.transactions) > MAX_TRANSACTIONS:
            self.transactions.popitem(last=False)
