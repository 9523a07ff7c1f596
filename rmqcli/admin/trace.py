"""Message traces as 4.9.8 stores them and ``queryMsgTraceById`` reads them.

A traced client (``AsyncTraceDispatcher``) sends its trace records as ordinary messages to the trace
topic (``RMQ_SYS_TRACE_TOPIC`` unless named), keyed by the traced message's msgId and keys. A body
is text, records concatenated (``TraceDataEncoder``): fields separated by ``\\x01``
(``CONTENT_SPLITOR``), each record ended by ``\\x02`` (``FIELD_SPLITOR``). ``decode_records`` reads
the four record types ``TraceDataEncoder.decoderFromTraceDataString`` accepts, with the field
counts it accepts (Pub 12/13/14/15+, SubBefore 8+, SubAfter 6/7/9+, EndTransaction 13+), and
splits as ``String.split`` does (trailing empty fields dropped). Where Java would throw (a number
that does not parse, a missing field, an unknown message type or transaction state) the record
is skipped. ``views`` is ``TraceView.decodeFromTraceTransData``: the records of one stored trace
message about one msgId, its client host the trace message's born host.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from formats.javatext import INT_RANGE, LONG_RANGE, parse_boolean, parse_integer

CONTENT_SPLITOR = "\x01"  # TraceConstants.CONTENT_SPLITOR
FIELD_SPLITOR = "\x02"  # TraceConstants.FIELD_SPLITOR
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"  # TopicValidator.RMQ_SYS_TRACE_TOPIC
PUB, SUB_BEFORE, SUB_AFTER, END_TRANSACTION = "Pub", "SubBefore", "SubAfter", "EndTransaction"
MESSAGE_TYPES = ("Normal_Msg", "Trans_Msg_Half", "Trans_msg_Commit", "Delay_Msg")  # MessageType
TRANSACTION_STATES = frozenset({"COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW"})  # LocalTransactionState
MAX_BODY_CHARS = 4 * 1024 * 1024  # a trace body is at most 128000 bytes; more is not read


class _Malformed(Exception):
    """A record ``decoderFromTraceDataString`` would throw on."""


@dataclass
class TraceRecord:
    """One decoded ``TraceContext`` with its only ``TraceBean`` (the decoder makes one per record).

    Fields a record type does not carry keep ``TraceContext``'s and ``TraceBean``'s defaults;
    a SubAfter of fewer than 9 fields takes the decoding time as its ``time_stamp``, as Java's
    ``TraceContext`` does.
    """

    trace_type: str
    time_stamp: int
    region_id: str = ""
    group_name: str = ""
    cost_time: int = 0
    success: bool = True
    request_id: str | None = None
    context_code: int = 0
    topic: str | None = None
    msg_id: str | None = None
    tags: str | None = None
    keys: str | None = None
    store_host: str | None = None
    body_length: int = 0
    msg_type: str | None = None
    offset_msg_id: str | None = None
    client_host: str | None = None
    retry_times: int = 0
    transaction_id: str | None = None
    transaction_state: str | None = None
    from_transaction_check: bool = False


def java_split(text: str, sep: str) -> list[str]:
    """``String.split`` with a one-character separator: trailing empty strings removed (a text
    without the separator is itself, even when empty)."""
    parts = text.split(sep)
    if len(parts) == 1:
        return parts
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _number(text: str, bounds: tuple[int, int]) -> int:
    """``Integer.parseInt`` / ``Long.parseLong``, ``_Malformed`` where Java throws."""
    try:
        return parse_integer(text, bounds)
    except ValueError:
        raise _Malformed(text) from None


def _msg_type(text: str) -> str:
    index = _number(text, INT_RANGE)
    if not 0 <= index < len(MESSAGE_TYPES):
        raise _Malformed(text)
    return MESSAGE_TYPES[index]


def _pub(line: list[str], now: int) -> TraceRecord:
    record = TraceRecord(PUB, _number(line[1], LONG_RANGE), region_id=line[2], group_name=line[3])
    record.topic, record.msg_id, record.tags, record.keys, record.store_host = line[4:9]
    record.body_length = _number(line[9], INT_RANGE)
    record.cost_time = _number(line[10], INT_RANGE)
    record.msg_type = _msg_type(line[11])
    if len(line) == 13:
        record.success = parse_boolean(line[12])
    elif len(line) >= 14:
        record.offset_msg_id = line[12]
        record.success = parse_boolean(line[13])
        if len(line) >= 15:  # "compatible with the old version"
            record.client_host = line[14]
    return record


def _sub_before(line: list[str], now: int) -> TraceRecord:
    record = TraceRecord(SUB_BEFORE, _number(line[1], LONG_RANGE), region_id=line[2], group_name=line[3])
    record.request_id, record.msg_id = line[4], line[5]
    record.retry_times = _number(line[6], INT_RANGE)
    record.keys = line[7]
    return record


def _sub_after(line: list[str], now: int) -> TraceRecord:
    record = TraceRecord(SUB_AFTER, now, request_id=line[1])
    record.msg_id, record.keys = line[2], line[5]
    record.cost_time = _number(line[3], INT_RANGE)
    record.success = parse_boolean(line[4])
    if len(line) >= 7:
        record.context_code = _number(line[6], INT_RANGE)
    if len(line) >= 9:
        record.time_stamp = _number(line[7], LONG_RANGE)
        record.group_name = line[8]
    return record


def _end_transaction(line: list[str], now: int) -> TraceRecord:
    record = TraceRecord(END_TRANSACTION, _number(line[1], LONG_RANGE), region_id=line[2], group_name=line[3])
    record.topic, record.msg_id, record.tags, record.keys, record.store_host = line[4:9]
    record.msg_type = _msg_type(line[9])
    record.transaction_id, record.transaction_state = line[10], line[11]
    if record.transaction_state not in TRANSACTION_STATES:
        raise _Malformed(record.transaction_state)
    record.from_transaction_check = parse_boolean(line[12])
    return record


# record type -> (decoder, the fields it reads at least)
_DECODERS = {
    PUB: (_pub, 12),
    SUB_BEFORE: (_sub_before, 8),
    SUB_AFTER: (_sub_after, 6),
    END_TRANSACTION: (_end_transaction, 13),
}


def decode_records(text: str, now: int | None = None) -> list[TraceRecord]:
    """``decoderFromTraceDataString``: every well-formed record of a trace body, in order; records
    of another type are ignored as in Java, malformed ones skipped where Java would throw."""
    if now is None:
        now = int(time.time() * 1000)
    out: list[TraceRecord] = []
    if not text:
        return out
    for context in java_split(text[:MAX_BODY_CHARS], FIELD_SPLITOR):
        line = java_split(context, CONTENT_SPLITOR)
        decoder, least = _DECODERS.get(line[0], (None, 0)) if line else (None, 0)
        if decoder is None or len(line) < least:  # Java: ArrayIndexOutOfBoundsException
            continue
        try:
            out.append(decoder(line, now))
        except _Malformed:
            continue
    return out


def decode_body(body: bytes, now: int | None = None) -> list[TraceRecord]:
    """A stored trace message's body (``new String(body, UTF_8)``) decoded."""
    return decode_records(body[:MAX_BODY_CHARS].decode("utf-8", "replace"), now)


@dataclass
class TraceView:
    """``TraceView``: what ``queryMsgTraceById`` shows of one record (``msg_type`` is the record
    type, ``status`` success/failed, ``client_host`` the trace message's born host), with the
    record's other fields for ``--json``."""

    msg_type: str
    msg_id: str | None
    group_name: str
    client_host: str
    time_stamp: int
    cost_time: int
    status: str
    topic: str | None
    tags: str | None
    keys: str | None
    store_host: str | None
    offset_msg_id: str | None
    region_id: str
    message_type: str | None
    body_length: int
    request_id: str | None
    retry_times: int
    context_code: int
    transaction_id: str | None
    transaction_state: str | None
    from_transaction_check: bool


def born_host_ip(born_host: str) -> str:
    """``MessageExt.getBornHostString``: the born host's address without its port
    (``InetAddress.getHostAddress``: IPv6 without brackets)."""
    host = born_host.rsplit(":", 1)[0] if ":" in born_host else born_host
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def views(msg_id: str, body: bytes, born_host: str, now: int | None = None) -> list[TraceView]:
    """``TraceView.decodeFromTraceTransData(msgId, message)``: the records about ``msg_id``."""
    client_host = born_host_ip(born_host)
    out = []
    for r in decode_body(body, now):
        if r.msg_id != msg_id:
            continue
        out.append(
            TraceView(
                msg_type=r.trace_type,
                msg_id=r.msg_id,
                group_name=r.group_name,
                client_host=client_host,
                time_stamp=r.time_stamp,
                cost_time=r.cost_time,
                status="success" if r.success else "failed",
                topic=r.topic,
                tags=r.tags,
                keys=r.keys,
                store_host=r.store_host,
                offset_msg_id=r.offset_msg_id,
                region_id=r.region_id,
                message_type=r.msg_type,
                body_length=r.body_length,
                request_id=r.request_id,
                retry_times=r.retry_times,
                context_code=r.context_code,
                transaction_id=r.transaction_id,
                transaction_state=r.transaction_state,
                from_transaction_check=r.from_transaction_check,
            )
        )
    return out
