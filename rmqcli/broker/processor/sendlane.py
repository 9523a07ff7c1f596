"""The send lane: a plain SEND_MESSAGE (10) or SEND_MESSAGE_V2 (310) answered from its frame
(protocol.md B.3, B.6).

A producer's sync send is one round trip, so the time between a request's arrival and its answer
is what bounds its rate. ``SendLane.handle`` takes a whole frame and either stores the message and
returns the answer's frame, the same bytes and the same record the general path (``decode``,
``send.parse`` and ``send.apply``, ``encode``) makes, or returns ``None`` and leaves the frame to
that path. It takes only the regular case:

- a JSON header that orjson reads (then json reads it alike, but for numbers orjson rounds,
  which are floats here and declined), with every field the general path reads present as a
  string, and numbers that are integers or plain decimal strings of at most 19 digits, in range;
- a valid topic that exists, is writable and is not a retry, DLQ or forbidden topic, a queue id
  below its queue count, a body and properties within the limits, a SINGLE_TAG topic;
- no batch, no ``TRAN_MSG``, ``DELAY`` or 5.x timer property (``TIMER_DELIVER_MS``,
  ``TIMER_DELAY_SEC``, ``TIMER_DELAY_MS``), no transaction bits in ``sysFlag``;
- a writable broker whose disk is not marked full; on a SYNC_MASTER, fewer than ``MAX_INFLIGHT``
  answers of the connection pending and, under SlaveActingMaster's quorum write, enough replicas
  in sync; under SYNC_FLUSH, not a SYNC_MASTER and fewer than ``MAX_INFLIGHT`` answers pending.

On a SYNC_MASTER a send that waits for its slave (``send.waits_for_slave``) is answered when
``Replication.when_replicated`` calls back: the answer is written from that callback (PUT_OK), or
made by ``send.stored_response`` with the outcome's code, as the general path makes it. Under
SYNC_FLUSH a send that waits for its store (``send.waits_for_flush``) is answered when the group
commit that covers it is done (``flushed``), or with FLUSH_DISK_TIMEOUT after ``syncFlushTimeout``
or a failed flush, as ``send._after_store`` answers; one that does not (oneway, ``WAIT=false``) only
wakes the group commit.

Everything else, every refusal included, goes the general way, so each check, error and remark
keeps one source. The tests compare the two paths byte for byte.

Design note: a fast path is written this way. Its docstring lists exactly the cases it takes, as a
list a reader can check against the code, and it declines everything else to the general path
instead of repeating a refusal; so it can only be faster, never different, and the byte-for-byte
tests keep it so. Any other fast path (a pull lane, say) should state its cases as precisely.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson

from formats import commitlog as fmt
from formats import remoting as rfmt
from formats.remoting import FLAG_ONEWAY, FLAG_RESPONSE, HEADER_LENGTH_MASK, SerializeType
from rmqcli.broker.ha.config import SYNC_MASTER
from rmqcli.broker.ha.member import Replicated
from rmqcli.broker.processor.send import (
    MAX_PROPERTIES_LENGTH,
    REPLICA_CODES,
    REPLICA_REMARKS,
    connection_born_host,
    is_batch_flag,
    mapping_failed,
    stored_response,
    waits_for_flush,
    waits_for_slave,
)
from rmqcli.broker.state import DLQ_PREFIX, NOT_ALLOWED_SEND_TOPICS, RETRY_PREFIX, is_writable, validate_topic
from rmqcli.broker.timer.message import has_trigger
from rmqcli.errors import UsageError
from rmqcli.remoting import headers as hd
from rmqcli.remoting.codec import RemotingCommand, decode, encode, encode_json_header, ext_value
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.remoting.server.connection import MAX_INFLIGHT
from rmqcli.store.write.files import DiskFullError
from rmqcli.store.write.messages import stored_properties

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext
    from rmqcli.remoting.server.connection import Connection, LaterAnswer

_INT_MAX = hd.JAVA_RANGES["int"][1]
_LONG_MAX = hd.JAVA_RANGES["long"][1]
_FIELDS = (  # the V1 header fields the lane reads, in the order ``_send`` takes them
    "producer_group",
    "topic",
    "default_topic",
    "default_topic_queue_nums",
    "queue_id",
    "sys_flag",
    "born_timestamp",
    "flag",
    "properties",
    "reconsume_times",
    "batch",
)
_KEYS = {code: hd.send_header_keys(code, _FIELDS) for code in (RC.SEND_MESSAGE, RC.SEND_MESSAGE_V2)}
_NUMBER_FIELDS = {  # the numeric fields: highest value, and the default of a missing one (None: declined)
    "default_topic_queue_nums": (_INT_MAX, None),
    "queue_id": (_INT_MAX, None),
    "sys_flag": (_INT_MAX, None),
    "born_timestamp": (_LONG_MAX, None),
    "flag": (_INT_MAX, None),
    "reconsume_times": (_INT_MAX, 0),
}
_NUMBERS = {
    code: tuple((keys[_FIELDS.index(field)], *limits) for field, limits in _NUMBER_FIELDS.items())
    for code, keys in _KEYS.items()
}
_MAX_DIGITS = len(str(_LONG_MAX))  # longer digit strings (leading zeros, or past int()'s limit) are declined
_JSON_TYPE_BITS = rfmt.header_length_and_type(SerializeType.JSON, 0)  # the header-length word's type byte
_NAME_VERDICTS_MAX = 4096  # topic names remembered by ``SendLane._sendable_name``
_SENTINELS = ("@@msgId@@", "@@queueId@@", "@@queueOffset@@")
_OPAQUE_SENTINEL = 918273645
_ANSWER_FIELDS = (b"%(queue_id)d", b"%(queue_offset)d", b":%(opaque)d,")  # after msgId's, as _SENTINELS


def _numbers(ext: dict, fields: tuple[tuple[str, int, int | None], ...]) -> list[int] | None:
    """The numeric header fields both paths read alike: JSON integers or up to 19 ASCII digits, 0 to
    their highest value (a missing field takes its default, or declines when it has none)."""
    numbers = []
    for key, high, default in fields:
        value = ext.get(key, default)
        kind = type(value)
        if kind is str and len(value) <= _MAX_DIGITS and value.isascii() and value.isdigit():
            value = int(value)
        elif kind is not int or value < 0:
            return None
        if value > high:
            return None
        numbers.append(value)
    return numbers


def _cut_answer_format(region: str, trace_on: str, msg_id_prefix: str) -> bytes | None:
    """The SUCCESS answer's JSON header as a bytes ``%`` format of a mapping (``_ANSWER_FIELDS``):
    the physical offset (the end of ``msgId``, after ``msg_id_prefix``), ``queueId``,
    ``queueOffset`` and ``opaque``, cut from what ``encode_json_header`` writes for sentinel
    values, so both paths write the same bytes; ``None`` if a sentinel shows up more than once
    (then the lane declines)."""
    header = encode_json_header(
        RemotingCommand(
            code=RS.SUCCESS,
            opaque=_OPAQUE_SENTINEL,
            flag=FLAG_RESPONSE,
            ext_fields={
                "msgId": _SENTINELS[0],
                "queueId": _SENTINELS[1],
                "queueOffset": _SENTINELS[2],
                "MSG_REGION": region,
                "TRACE_ON": trace_on,
            },
        )
    )
    marks = [mark.encode() for mark in (*_SENTINELS, f":{_OPAQUE_SENTINEL},")]
    if any(header.count(mark) != 1 for mark in marks):
        return None
    fields = (msg_id_prefix.replace("%", "%%").encode() + b"%(physical)016X", *_ANSWER_FIELDS)
    header = header.replace(b"%", b"%%")
    for mark, field in zip(marks, fields, strict=True):
        header = header.replace(mark, field)
    return header


def _request(frame: bytes) -> tuple[tuple[int, int, int, dict], bytes] | None:
    """``(code, opaque, request flag, extFields)`` and the body of a JSON frame whose top-level
    fields both paths read alike, with the code of a single send; else ``None``."""
    length, word = rfmt.FRAME_PREFIX_STRUCT.unpack_from(frame, 0)
    header_length = word & HEADER_LENGTH_MASK
    if (
        word - header_length != _JSON_TYPE_BITS
        or length != len(frame) - rfmt.LENGTH_FIELD_SIZE
        or header_length > length - rfmt.HEADER_WORD_SIZE
    ):
        return None
    header_end = rfmt.FRAME_PREFIX_SIZE + header_length
    try:
        obj = orjson.loads(frame[rfmt.FRAME_PREFIX_SIZE : header_end])
    except orjson.JSONDecodeError:
        return None
    if type(obj) is not dict:
        return None
    code, opaque, request_flag, ext = (
        obj.get("code"),
        obj.get("opaque"),
        obj.get("flag"),
        obj.get("extFields"),
    )
    if (
        type(code) is not int
        or code not in _KEYS
        or type(opaque) is not int
        or type(request_flag) is not int
        or request_flag not in (0, FLAG_ONEWAY)
        or type(ext) is not dict
        or type(obj.get("language", "")) not in (str, int)
        or type(obj.get("version", 0)) is not int
        or type(obj.get("remark", "")) is not str
    ):
        return None
    return (code, opaque, request_flag, ext), frame[header_end:]


_Send = tuple[str, int, int, int, int, str, int]
"""topic, queueId, sysFlag, bornTimestamp, flag, properties, reconsumeTimes of a regular send."""


def _send(code: int, ext: dict) -> _Send | None:
    """The send header's fields when each is present and plain (see the module's docstring)."""
    get = ext.get
    keys = _KEYS[code]
    topic, properties, batch = get(keys[1]), get(keys[8], ""), get(keys[10], "")
    numbers = _numbers(ext, _NUMBERS[code])
    if (
        numbers is None
        or type(get(keys[0])) is not str  # producerGroup
        or type(topic) is not str
        or type(get(keys[2])) is not str  # defaultTopic
        or type(properties) is not str
        or type(batch) is not str
        or is_batch_flag(batch)
    ):
        return None
    _, queue_id, sys_flag, born_timestamp, flag, reconsume_times = numbers  # defaultTopicQueueNums: checked
    return topic, queue_id, sys_flag, born_timestamp, flag, properties, reconsume_times


class SendLane:
    """The lane of one broker (see the module's docstring)."""

    def __init__(self, ctl: BrokerContext):
        self.ctl = ctl
        host = ctl.writer.store_host
        self._msg_id_prefix = fmt.offset_msg_id(host.address, host.port, 0)[:-16]
        self._formats: dict[tuple[str, object], bytes | None] = {}
        self._name_verdicts: dict[str, bool] = {}

    def handle(self, frame: bytes, conn: Connection) -> bytes | None:
        """Store the message of a regular send and return its answer (``b""`` for a oneway send), or
        ``None`` for anything the general path must see."""
        ctl = self.ctl
        config = ctl.config
        if (
            (config.sync_flush and config.broker_role == SYNC_MASTER)
            or not ctl.defer_dispatch
            or not is_writable(config.broker_permission)
            or ctl.store.disk_full
        ):
            return None
        request = _request(frame)
        if request is None:
            return None
        (code, opaque, request_flag, ext), body = request
        send = _send(code, ext)
        if send is None:
            return None
        topic, queue_id, sys_flag, born_timestamp, flag, properties, reconsume_times = send
        props = self._plain_props(topic, queue_id, sys_flag, body, properties)
        if props is None:
            return None
        wait = request_flag != FLAG_ONEWAY and waits_for_slave(ctl, props)
        flush = request_flag != FLAG_ONEWAY and waits_for_flush(ctl, props)
        if (wait or flush) and (len(conn.tasks) >= MAX_INFLIGHT or ctl.metrics.enabled):
            return None  # (with metrics: the general path times the answer given later)
        needed = None
        if ctl.ha.quorum_write and waits_for_slave(ctl, props):
            needed = ctl.ha.acks_needed()
            if needed is None:  # IN_SYNC_REPLICAS_NOT_ENOUGH: the general path refuses it
                return None
        answer_format = self._answer_format(config.region_id, config.trace_on)
        if answer_format is None:
            return None
        stored_map, stored_text = stored_properties(props, ctl.writer.cluster)
        try:
            physical, queue_offset = ctl.store.put_serialized(
                topic,
                queue_id,
                body,
                stored_text,
                flag=flag,
                sys_flag=sys_flag,
                born_timestamp=born_timestamp,
                born_host=connection_born_host(conn),
                reconsume_times=reconsume_times,
                stored_map=stored_map,
            )
        except (UsageError, DiskFullError):  # refused before anything is written: the general path answers it
            return None
        except OSError:  # no next CommitLog file (logged by the writer): answered, not tried a second time
            return b"" if request_flag == FLAG_ONEWAY else encode(mapping_failed(ctl, decode(frame)))
        if ctl.metrics.enabled:  # the record ends the log: nothing was written since
            ctl.metrics.message_in(topic, props, 1, ctl.writer.commitlog.max_offset - physical)
            result = "oneway" if request_flag == FLAG_ONEWAY else "success"
            ctl.metrics.rpc(code, RS.SUCCESS, 0.0, False, result)
        if config.sync_flush and not flush:  # oneway, or WAIT=false: the group commit is only woken
            ctl.store.wake_group_commit()
        if request_flag == FLAG_ONEWAY:
            return b""
        physical &= 0xFFFFFFFFFFFFFFFF
        header = answer_format % {
            b"physical": physical,
            b"queue_id": queue_id,
            b"queue_offset": queue_offset,
            b"opaque": opaque,
        }
        n = len(header)
        answer = rfmt.FRAME_PREFIX_STRUCT.pack(rfmt.HEADER_WORD_SIZE + n, _JSON_TYPE_BITS | n) + header
        if not (flush or wait):
            return answer
        stored = (opaque, f"{self._msg_id_prefix}{physical:016X}", queue_id, queue_offset)
        if flush:
            self._after_flush(conn, answer, stored)
        else:
            self._after_replication(conn, answer, stored, needed)
        return b""  # answered once flushed, or once replicated

    def _plain_props(
        self, topic: str, queue_id: int, sys_flag: int, body: bytes, properties: str
    ) -> dict[str, str] | None:
        """The properties of a send that passes the topic, queue, body and properties checks of
        ``send.parse`` and is neither a transaction's nor a delayed or timed message; else ``None``."""
        topic_config = self.ctl.topics.table.get(topic)
        if (
            topic_config is None
            or not self._sendable_name(topic)
            or not is_writable(topic_config["perm"])
            or topic_config.get("topicFilterType") == "MULTI_TAG"
            or queue_id >= max(topic_config["readQueueNums"], topic_config["writeQueueNums"])
            or len(body) > self.ctl.config.max_message_size
            or not properties.isascii()
            or len(properties) > MAX_PROPERTIES_LENGTH
            or sys_flag & fmt.TRANSACTION_MASK
        ):
            return None
        props = fmt.decode_properties(properties)
        if "TRAN_MSG" in props or fmt.PROPERTY_DELAY in props or has_trigger(props):
            return None
        return props

    def _after_replication(
        self, conn: Connection, answer: bytes, stored: tuple[int, str, int, int], needed: int | None
    ) -> None:
        """SYNC_MASTER: write ``answer`` once the slaves have the send (``_replicated``)."""
        later = conn.answer_later()
        assert later is not None  # checked before the store
        self.ctl.ha.when_replicated(
            self.ctl.writer.commitlog.max_offset,  # the record's end: nothing was written since
            lambda outcome: self._replicated(later, outcome, answer, stored),
            needed,
        )

    def _after_flush(self, conn: Connection, answer: bytes, stored: tuple[int, str, int, int]) -> None:
        """SYNC_FLUSH: write ``answer`` once the CommitLog is flushed past the send, or the general
        path's FLUSH_DISK_TIMEOUT after ``syncFlushTimeout`` or a failed flush."""
        later = conn.answer_later()
        assert later is not None  # checked before the store
        flushed = self.ctl.store.flushed()
        loop = flushed.get_loop()

        def timed_out() -> None:
            response = stored_response(self.ctl, stored[0], SerializeType.JSON, *stored[1:])
            response.code = RS.FLUSH_DISK_TIMEOUT
            response.remark = "flush disk timeout"
            later.write(encode(response))

        timer = loop.call_later(self.ctl.config.sync_flush_timeout / 1000, timed_out)

        def done(future) -> None:  # type: ignore[no-untyped-def]
            timer.cancel()
            if future.cancelled() or future.exception() is not None:
                timed_out()
            else:
                later.write(answer)

        flushed.add_done_callback(done)

    def _replicated(
        self, later: LaterAnswer, outcome: Replicated, answer: bytes, stored: tuple[int, str, int, int]
    ) -> None:
        """A SYNC_MASTER's wait ended: the SUCCESS answer, or the general path's answer for the outcome."""
        if outcome is not Replicated.PUT_OK:
            response = stored_response(self.ctl, stored[0], SerializeType.JSON, *stored[1:])
            response.code = REPLICA_CODES[outcome]
            response.remark = REPLICA_REMARKS.get(outcome, response.remark)
            answer = encode(response)
        later.write(answer)

    def _sendable_name(self, topic: str) -> bool:
        """A valid topic name that is neither forbidden nor a retry or DLQ topic (a verdict on the
        name alone, so remembered; at most ``_NAME_VERDICTS_MAX`` of them)."""
        verdict = self._name_verdicts.get(topic)
        if verdict is None:
            if len(self._name_verdicts) >= _NAME_VERDICTS_MAX:
                self._name_verdicts.clear()
            verdict = self._name_verdicts[topic] = (
                validate_topic(topic) is None
                and topic not in NOT_ALLOWED_SEND_TOPICS
                and not topic.startswith((RETRY_PREFIX, DLQ_PREFIX))
            )
        return verdict

    def _answer_format(self, region: str, trace_on: object) -> bytes | None:
        key = (region, trace_on)
        answer_format = self._formats.get(key, False)
        if answer_format is False:  # one per broker config (region and traceOn can be updated)
            answer_format = self._formats[key] = _cut_answer_format(
                region, ext_value(trace_on), self._msg_id_prefix
            )
        return answer_format  # type: ignore[return-value]
