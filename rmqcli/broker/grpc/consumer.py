"""ReceiveMessage, AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue (the 5.1
proxy's ``ReceiveMessageActivity``, ``AckMessageActivity``, ``ChangeInvisibleDurationActivity``,
``ForwardMessageToDLQActivity`` and ``ConsumerProcessor`` over the broker's POP in-process API,
``rmqcli.broker.pop``: research notes issue21 §1, §2b).

ReceiveMessage: the polling time is the request's ``long_polling_timeout`` (else the call's
remaining time less half the request timeout) clamped to [5 s, 20 s] and to the call's remaining
time (less than 5 s left: ILLEGAL_POLLING_TIME; BAD_REQUEST for clients before 5.0.3), less the
proxy's 100 ms reserve. ``invisible_duration`` must lie in [10 s, 12 h] (ILLEGAL_INVISIBLE_TIME)
unless ``auto_renew``: then 60 s and the server renews (``renew``). The pop is orderly when the
client's settings say ``fifo`` (the group's ``consumeMessageOrderly``), from all queues of the
broker, init mode MAX. Each popped message gets the receipt handle ``ReceiptHandle.encode`` makes
(the extra info and the commit log offset), then ``PopMessageResultFilterImpl``: a tag the
subscription does not take is acked and skipped; ``reconsumeTimes >= max_attempts`` (the group's
``retryMaxTimes`` + 1) goes to ``%DLQ%<group>`` (CONSUMER_SEND_MSG_BACK, delay level -1) and is
acked. The stream: a status (OK; MESSAGE_NOT_FOUND "no new message" / "no match message";
TOO_MANY_REQUESTS "polling full"; or the error), the messages, then ``delivery_timestamp``; the
messages that could not be written (the call ended) are made visible again after 1 s.

The ack, change and forward calls open the handle (``seal``: a handle not sealed by this endpoint
for the call's group and topic is INVALID_RECEIPT_HANDLE "receipt handle is invalid" before any
work; a handle acked before is answered OK without another ack message), decode it and act on the
real topic (``%RETRY%<group>_<topic>`` for a retried message); a handle the server
renews is replaced by its latest form first. An ack or change with an expired handle (its retrieve
time plus its invisible time has passed: ``ReceiptHandle.isExpired``, checked by the proxy's
``AbstractProcessor.validateReceiptHandle`` before the broker sees the request) is
INVALID_RECEIPT_HANDLE "receipt handle is expired": a consumer cannot ack or change a message once
its time is up, whoever holds it since. A forward to the DLQ acks afterwards, and
that ack's failure is not the answer (``forwardMessageToDeadLetterQueue`` does not wait on it).
Where rmq differs on purpose: handles are sealed (the proxy takes any well-formed handle, another
group's included); a message's own ``POP_CK`` property is not taken for its handle; a handle that
does not decode is INVALID_RECEIPT_HANDLE (the proxy's
``ReceiptHandle.decode`` throws, answered INTERNAL_SERVER_ERROR); the handle a change answers starts
at the message's own offset (the new checkpoint's start), not the batch's, so that an ack with it
clears that checkpoint (5.1.1's proxy keeps the batch's start offset and the ack misses it).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

from formats.records import RecordError, decode_record
from rmqcli.broker.grpc import convert
from rmqcli.broker.grpc import status as st
from rmqcli.broker.grpc.context import CallContext
from rmqcli.broker.grpc.renew import Renewer
from rmqcli.broker.grpc.route import check_group
from rmqcli.broker.grpc.seal import Acked, Sealer
from rmqcli.broker.grpc.settings import SettingsStore
from rmqcli.broker.pop import ack as pop_ack
from rmqcli.broker.pop import constants as k
from rmqcli.broker.pop import pop as pop_mod
from rmqcli.broker.processor import sendback
from rmqcli.remoting import headers as hd
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext
    from rmqcli.remoting.server.connection import Connection

log = logging.getLogger(__name__)

# Code values beyond status.py's
MESSAGE_NOT_FOUND = 40401
ILLEGAL_FILTER_EXPRESSION = 40010
ILLEGAL_INVISIBLE_TIME = 40011
ILLEGAL_POLLING_TIME = 40018

# ProxyConfig defaults (5.1.1)
MIN_POLLING_MS = 5_000
MAX_POLLING_MS = 20_000
RESERVE_MS = 100  # longPollingReserveTimeInMillis
MIN_INVISIBLE_MS = 10_000  # minInvisibleTimeMillsForRecv
MAX_INVISIBLE_MS = 12 * 3600 * 1000
DEFAULT_INVISIBLE_MS = 60_000  # defaultInvisibleTimeMills (auto renew)
NACK_INVISIBLE_MS = 1_000  # a message that could not be written
MAX_BATCH = 32
POLLING_TIME_CLIENT_VERSION = "5.0.3"  # ILLEGAL_POLLING_TIME_INTRODUCED_CLIENT_VERSION
DEFAULT_REQUEST_TIMEOUT_MS = 3_000
FILTER_TAG, FILTER_SQL = 1, 2  # FilterType


class CallChannel:
    """The caller's address as the broker's processors read it (the proxy's ``SimpleChannel``)."""

    def __init__(self, ctx: CallContext):
        self.peer = (ctx.remote_host or "0.0.0.0", ctx.remote_port)
        self.attributes: dict[str, Any] = {}
        self.address = ctx.remote_address


def _millis(duration: Any) -> int:
    return int(duration.seconds) * 1000 + int(duration.nanos) // 1_000_000


def check_invisible(invisible: int, minimum: int) -> None:
    """``GrpcValidator.validateInvisibleTime``: ILLEGAL_INVISIBLE_TIME below ``minimum`` or above
    ``maxInvisibleTimeMills``."""
    if invisible < minimum:
        raise st.GrpcStatusError(ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too small. min is {minimum}")
    if invisible > MAX_INVISIBLE_MS:
        raise st.GrpcStatusError(
            ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too large. max is {MAX_INVISIBLE_MS}"
        )


def _version_before(version: str, than: str) -> bool:
    """Java's ``String.compareTo`` as the proxy compares client versions (null: before)."""
    return not version or version < than


def check_unexpired(extra: k.ExtraInfo, now: int | None = None) -> None:
    """``validateReceiptHandle``: INVALID_RECEIPT_HANDLE once ``pop_time + invisible_time <= now``."""
    if extra.pop_time + extra.invisible_time <= (now_ms() if now is None else now):
        raise st.GrpcStatusError(st.INVALID_RECEIPT_HANDLE, "receipt handle is expired", wrapped=True)


def handle_of(text: str) -> k.ExtraInfo:
    """``ReceiptHandle.decode``: at least 8 fields (INVALID_RECEIPT_HANDLE)."""
    try:
        extra = k.parse_extra_info(text)
    except k.ExtraInfoError:
        extra = None
    if extra is None or extra.msg_queue_offset is None:
        raise st.GrpcStatusError(st.INVALID_RECEIPT_HANDLE, "receipt handle is invalid")
    return extra


def _info_map(info: str) -> dict[str, list[str]]:
    """``ExtraInfoUtil.parse*Info``: ``type qid value`` entries keyed ``type@qid``."""
    out: dict[str, list[str]] = {}
    for part in info.split(";") if info else ():
        fields = part.split(" ")
        if len(fields) == 3:
            out.setdefault(f"{fields[0]}@{fields[1]}", []).append(fields[2])
    return out


def tags_of(expression: Any) -> set[str] | None:
    """The subscription's tag set (``FilterAPI.build``); None for every tag or SQL92."""
    if expression.type == FILTER_SQL:
        return None
    text = (expression.expression or "*").strip()
    tags = {t.strip() for t in text.split("||") if t.strip()}
    return None if not tags or "*" in tags else tags


def _target(ctx: CallContext, request: Any) -> tuple[str, str]:
    """The group and topic of an ack, change or forward call, checked after the client id."""
    ctx.require_client_id()
    group, topic = request.group.name, request.topic.name
    convert.check_topic(topic)
    check_group(group)
    return group, topic


class Consumer:
    """The consumer calls for one broker."""

    def __init__(self, stubs: Any, ctl: BrokerContext, settings: SettingsStore):
        self.s = stubs
        self.ctl = ctl
        self.settings = settings
        self.renewer = Renewer(ctl, self._change)
        self.sealer = Sealer()
        self.acked = Acked()

    # --- settings -----------------------------------------------------------------------------
    def subscription_settings(self, client_id: str, group: str) -> Any:
        """The client's merged settings; for a client without any, the group's defaults."""
        settings = self.settings.get(client_id)
        if settings is None or not settings.HasField("subscription"):
            d = self.s.definition
            raw = d.Settings(subscription=d.Subscription(group=d.Resource(name=group)))
            settings = self.settings.merged(raw)
        return settings

    # --- ReceiveMessage -----------------------------------------------------------------------
    async def receive(self, ctx: CallContext, request: Any, remaining_ms: float | None) -> AsyncIterator[Any]:
        """The response stream (status, messages), without the final ``delivery_timestamp``; a
        request refused before the pop, or a pop without messages, is a ``GrpcStatusError`` (the
        caller answers its status)."""
        d, svc = self.s.definition, self.s.service
        ctx.require_client_id()
        group = request.group.name
        topic = request.message_queue.topic.name
        settings = self.subscription_settings(ctx.client_id, group)
        req = self._pop_request(ctx, request, settings, remaining_ms)
        try:
            result = await pop_mod.pop_message(self.ctl, req)
        except pop_mod.PopError as exc:
            code = st.TOPIC_NOT_FOUND if exc.code == RS.TOPIC_NOT_EXIST else st.from_remoting(exc.code)
            raise st.GrpcStatusError(code, exc.remark) from None
        if result.code == RS.POLLING_FULL:
            raise st.GrpcStatusError(st.TOO_MANY_REQUESTS, "polling full")
        if result.code != RS.SUCCESS:
            raise st.GrpcStatusError(MESSAGE_NOT_FOUND, "no new message")
        max_attempts = settings.backoff_policy.max_attempts or 17
        tags = tags_of(request.filter_expression)
        messages = self.filtered(ctx, result, group, topic, tags, max_attempts)
        if not messages:
            raise st.GrpcStatusError(MESSAGE_NOT_FOUND, "no match message")
        written = 0
        try:
            yield svc.ReceiveMessageResponse(status=st.make(d, st.OK, "OK"))
            for response, handle in messages:
                yield response
                written += 1
                if request.auto_renew:
                    message_id = response.message.system_properties.message_id
                    self.renewer.track(ctx.client_id, group, topic, message_id, handle)
        finally:
            for _, handle in messages[written:]:  # not written: visible again soon (the proxy's NACK)
                self._quiet(self._change, group, topic, handle, NACK_INVISIBLE_MS)

    def _pop_request(
        self, ctx: CallContext, request: Any, settings: Any, remaining_ms: float | None
    ) -> pop_mod.PopRequest:
        """The POP of a ReceiveMessage: its polling time, invisible time and filter checked in the
        proxy's order (a ``GrpcStatusError`` for the first that fails)."""
        remaining = 3_600_000.0 if remaining_ms is None else remaining_ms
        if request.HasField("long_polling_timeout"):
            polling = _millis(request.long_polling_timeout)
        else:
            timeout = _millis(settings.request_timeout) or DEFAULT_REQUEST_TIMEOUT_MS
            polling = int(remaining - timeout / 2)
        polling = min(max(polling, MIN_POLLING_MS), MAX_POLLING_MS)
        if polling > remaining:
            if remaining < MIN_POLLING_MS:
                code = st.BAD_REQUEST
                if not _version_before(ctx.client_version, POLLING_TIME_CLIENT_VERSION):
                    code = ILLEGAL_POLLING_TIME
                text = "The deadline time remaining is not enough for polling, please check network condition"
                raise st.GrpcStatusError(code, text)
            polling = int(remaining)
        group, topic = request.group.name, request.message_queue.topic.name
        convert.check_topic(topic)
        check_group(group)
        if request.auto_renew:
            invisible = DEFAULT_INVISIBLE_MS
        else:
            invisible = _millis(request.invisible_duration)
            check_invisible(invisible, MIN_INVISIBLE_MS)
        expression = request.filter_expression
        exp_type = "SQL92" if expression.type == FILTER_SQL else "TAG"
        exp = expression.expression or "*"
        if exp_type == "TAG" and ("\n" in exp or len(exp) > 8192):
            raise st.GrpcStatusError(ILLEGAL_FILTER_EXPRESSION, "bad tag expression")
        return pop_mod.PopRequest(
            group=group,
            topic=topic,
            queue_id=-1,
            max_msg_nums=min(max(request.batch_size, 1), MAX_BATCH),
            invisible_time=invisible,
            poll_time=max(int(min(polling, remaining - RESERVE_MS)), 0),
            init_mode=k.INIT_MODE_MAX,
            exp_type=exp_type,
            exp=exp,
            order=settings.subscription.fifo,
        )

    def filtered(
        self,
        ctx: CallContext,
        result: pop_mod.PopResult,
        group: str,
        topic: str,
        tags: set[str] | None,
        max_attempts: int,
    ) -> list[tuple[Any, str]]:
        """``ConsumerProcessor.popMessage``'s handles and ``PopMessageResultFilterImpl``: a
        ReceiveMessageResponse for each message to answer, and its handle."""
        d, svc = self.s.definition, self.s.service
        broker_name = self.ctl.config.broker_name
        starts = _info_map(result.start_offset_info)
        counts = _info_map(result.order_count_info or "")
        out = []
        for data, (retry, queue_id, queue_offset) in zip(result.records, result.offsets, strict=True):
            try:
                record = decode_record(data, 0, len(data))
            except (RecordError, ValueError, IndexError) as exc:
                log.warning("gRPC receive: a popped record of %s does not decode: %s", topic, exc)
                continue
            props = record.properties
            key = f"{k.type_tag(retry)}@{queue_id}"  # POP_CK of the record is not trusted: built here
            start = int(starts[key][0]) if key in starts else queue_offset
            real = k.pop_retry_topic(topic, group) if retry else topic
            extra = k.build_extra_info(
                start,
                result.pop_time,
                result.invisible_time,
                result.revive_qid,
                real,
                broker_name,
                queue_id,
                queue_offset,
            )
            handle = self.sealer.seal(f"{extra} {record.physical_offset}", group, topic)
            reconsume = record.reconsume_times
            if result.order_count_info:  # processPopResponse: the count of an orderly pop
                key = f"{k.type_tag(retry)}@qo{queue_id}%{queue_offset}"
                legacy = f"{k.type_tag(retry)}@{queue_id}"
                found = counts.get(key) or counts.get(legacy)
                if found and found[0].lstrip("-").isdigit():
                    reconsume = int(found[0])
            message_id = props.get(convert.UNIQ_KEY) or record.msg_id
            if tags is not None and props.get(convert.TAGS, "") not in tags:
                self._quiet(self.ack_handle, group, topic, handle, message_id)  # NO_MATCH
                continue
            if reconsume >= max_attempts:  # TO_DLQ
                self._quiet(self.forward_handle, ctx, group, topic, handle, message_id)
                continue
            response = svc.ReceiveMessageResponse()
            message = convert.message_of_record(d, record, topic, into=response.message)
            message.system_properties.receipt_handle = handle
            message.system_properties.delivery_attempt = reconsume + 1
            out.append((response, handle))
        return out

    @staticmethod
    def _quiet(call: Any, *args: Any) -> None:
        try:
            call(*args)
        except (st.GrpcStatusError, pop_mod.PopError) as exc:
            log.info("gRPC: %s of a message failed: %s", call.__name__, exc)

    # --- ack / change / forward ---------------------------------------------------------------
    def opened(self, group: str, topic: str, handle: str) -> tuple[str, str, k.ExtraInfo]:
        """The plain handle, its MAC and its fields: INVALID_RECEIPT_HANDLE for a handle not sealed
        here for ``group`` and ``topic`` (``seal``) or whose time is up."""
        plain, mac = self.sealer.open(handle, group, topic)
        extra = handle_of(plain)
        check_unexpired(extra)
        return plain, mac, extra

    def ack_handle(self, group: str, topic: str, handle: str, message_id: str = "") -> None:
        plain, mac, extra = self.opened(group, topic, handle)
        assert extra.msg_queue_offset is not None
        if mac in self.acked:  # acked before: answered as the broker would, without another ack
            return
        pop_ack.ack_message(
            self.ctl,
            pop_ack.AckRequest(
                group, extra.real_topic(topic, group), extra.queue_id, plain, extra.msg_queue_offset
            ),
            extra,  # parsed from ``plain`` by ``opened``
        )
        self.acked.add(mac)

    def ack(self, ctx: CallContext, request: Any) -> Any:
        d, svc = self.s.definition, self.s.service
        group, topic = _target(ctx, request)
        if not request.entries:
            raise st.GrpcStatusError(st.BAD_REQUEST, "no ack entry")
        response = svc.AckMessageResponse()  # its entries made in place
        codes = set()
        for entry in request.entries[:1024]:
            message_id = entry.message_id
            handle = self.renewer.resolve(ctx.client_id, group, message_id, entry.receipt_handle)
            try:
                self.ack_handle(group, topic, handle, message_id)
                status = st.make(d, st.OK)
                self.renewer.forget(ctx.client_id, group, message_id)
            except st.GrpcStatusError as exc:
                status = st.make(d, exc.code, exc.status_text)
            except pop_mod.PopError as exc:
                status = st.make(d, st.INTERNAL_SERVER_ERROR, f"ack failed: {exc.remark}")
            response.entries.add(message_id=message_id, receipt_handle=entry.receipt_handle, status=status)
            codes.add(status.code)
        code = codes.pop() if len(codes) == 1 else st.MULTIPLE_RESULTS
        response.status.CopyFrom(st.make(d, code))
        return response

    def _change(self, group: str, topic: str, handle: str, invisible: int) -> str:
        """Change the invisible time of ``handle``; the new handle (``ReceiptHandle.encode``)."""
        plain, _, extra = self.opened(group, topic, handle)
        assert extra.msg_queue_offset is not None
        res = pop_ack.change_invisible_time(
            self.ctl,
            pop_ack.ChangeInvisibleRequest(
                group,
                extra.real_topic(topic, group),
                extra.queue_id,
                plain,
                extra.msg_queue_offset,
                invisible,
            ),
        )
        start = extra.ck_queue_offset if extra.is_order else extra.msg_queue_offset
        new = dataclasses.replace(
            extra,
            ck_queue_offset=start,
            pop_time=res.pop_time,
            invisible_time=res.invisible_time,
            revive_qid=res.revive_qid,
        )
        return self.sealer.seal(new.encode(), group, topic)

    def change_invisible(self, ctx: CallContext, request: Any) -> Any:
        d, svc = self.s.definition, self.s.service
        group, topic = _target(ctx, request)
        invisible = _millis(request.invisible_duration)
        check_invisible(invisible, 0)
        handle = self.renewer.resolve(ctx.client_id, group, request.message_id, request.receipt_handle)
        try:
            new = self._change(group, topic, handle, invisible)
        except pop_mod.PopError as exc:
            raise st.GrpcStatusError(st.INTERNAL_SERVER_ERROR, exc.remark) from None
        self.renewer.forget(ctx.client_id, group, request.message_id)
        return svc.ChangeInvisibleDurationResponse(status=st.make(d, st.OK), receipt_handle=new)

    def forward_handle(self, ctx: CallContext, group: str, topic: str, handle: str, message_id: str) -> int:
        """``ProducerProcessor.forwardMessageToDeadLetterQueue``: the broker's send-back to
        ``%DLQ%<group>`` (delay level -1), then the ack; the remoting code."""
        extra = handle_of(self.sealer.open(handle, group, topic)[0])
        if extra.commit_log_offset is None or extra.commit_log_offset < 0:
            raise st.GrpcStatusError(st.INVALID_RECEIPT_HANDLE, "commit log offset is empty", wrapped=True)
        header = hd.ConsumerSendMsgBackRequestHeader(
            offset=extra.commit_log_offset,
            group=group,
            delay_level=-1,
            origin_msg_id=message_id,
            origin_topic=extra.real_topic(topic, group),
            max_reconsume_times=0,
        )
        request = RemotingCommand.request(RC.CONSUMER_SEND_MSG_BACK, header)
        reply = sendback.consumer_send_msg_back(self.ctl, request, cast("Connection", CallChannel(ctx)))
        if not isinstance(reply, RemotingCommand):
            raise st.GrpcStatusError(st.INTERNAL_SERVER_ERROR, "the send-back did not answer at once")
        if self.ctl.defer_dispatch:
            self.ctl.store.catch_up()
        if reply.code == RS.SUCCESS:  # the proxy does not wait on this ack, nor answer its failure
            self._quiet(self.ack_handle, group, topic, handle, message_id)
        return reply.code

    def forward(self, ctx: CallContext, request: Any) -> Any:
        d, svc = self.s.definition, self.s.service
        group, topic = _target(ctx, request)
        handle = self.renewer.resolve(ctx.client_id, group, request.message_id, request.receipt_handle)
        try:
            code = self.forward_handle(ctx, group, topic, handle, request.message_id)
        except pop_mod.PopError as exc:
            raise st.GrpcStatusError(st.INTERNAL_SERVER_ERROR, exc.remark) from None
        self.renewer.forget(ctx.client_id, group, request.message_id)
        return svc.ForwardMessageToDeadLetterQueueResponse(status=st.make(d, st.from_remoting(code)))

    def client_gone(self, client_id: str) -> None:
        """A client's stream ended or it said goodbye: its renewed messages come back soon."""
        self.renewer.clear(client_id)


def now_ms() -> int:
    return int(time.time() * 1000)
