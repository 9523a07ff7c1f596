"""mqadmin's text for the message commands, character for character (protocol.md C.4.6, C.4.7;
4.9.7 tools sources where C.4 is silent): ``printMsg`` of QueryMsgByIdSubCommand, ``MessageExt``
and ``Message`` ``toString``, the send and pull tables; and their ``--json`` documents."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rmqcli.cli.admin.format import bool_text, java_map, time_millis_to_human_string2
from rmqcli.remoting.javanames import camel_fields


def js(value: Any) -> str:
    """Java's string concatenation of a possibly null value."""
    return "null" if value is None else str(value)


def java_bytes(data: bytes) -> str:
    """``Arrays.toString(byte[])``: signed bytes."""
    return "[" + ", ".join(str(b - 256 if b > 127 else b) for b in data) + "]"


def message_ext(msg: Any) -> str:
    """``MessageExt.toString()`` with ``Message.toString()`` inside (C.4.7 ``printMsg``)."""
    tx = msg.transaction_id if msg.transaction_id is not None else "null"
    inner = (
        f"Message{{topic='{msg.topic}', flag={msg.flag}, properties={java_map(msg.properties)}, "
        f"body={java_bytes(msg.body)}, transactionId='{tx}'}}"
    )
    return (
        f"MessageExt [brokerName={js(msg.broker_name)}, queueId={msg.queue_id}, storeSize={msg.store_size}, "
        f"queueOffset={msg.queue_offset}, sysFlag={msg.sys_flag}, bornTimestamp={msg.born_timestamp}, "
        f"bornHost=/{msg.born_host}, storeTimestamp={msg.store_timestamp}, storeHost=/{msg.store_host}, "
        f"msgId={msg.offset_msg_id}, commitLogOffset={msg.commit_log_offset}, bodyCRC={msg.body_crc}, "
        f"reconsumeTimes={msg.reconsume_times}, preparedTransactionOffset={msg.prepared_transaction_offset}, "
        f"toString()={inner}]"
    )


def body_text(msg: Any, charset: str = "UTF-8") -> str:
    """``new String(body, charset)``: undecodable bytes become U+FFFD."""
    try:
        return msg.body.decode(charset, "replace")
    except LookupError:
        return msg.body.decode("utf-8", "replace")


def msg_lines(messages: list[Any], charset: str = "UTF-8", print_body: bool = True) -> str:
    """``MSGID: %s %s BODY: %s%n`` per message."""
    return "".join(
        f"MSGID: {m.msg_id} {message_ext(m)} "
        f"BODY: {body_text(m, charset) if print_body else 'NOT PRINT BODY'}\n"
        for m in messages
    )


def message_view(view: Any, with_offset_id: bool = True) -> str:
    """C.4.6: ``%-20s %s%n`` lines, then the consumer tracks (``%s`` each, no newline)."""
    m = view.message
    out = []
    if with_offset_id:
        out.append(f"{'OffsetID:':<20} {m.offset_msg_id}\n")
    out += [
        f"{'Topic:':<20} {m.topic}\n",
        f"{'Tags:':<20} [{js(m.tags)}]\n",
        f"{'Keys:':<20} [{js(m.keys)}]\n",
        f"{'Queue ID:':<20} {m.queue_id}\n",
        f"{'Queue Offset:':<20} {m.queue_offset}\n",
        f"{'CommitLog Offset:':<20} {m.commit_log_offset}\n",
        f"{'Reconsume Times:':<20} {m.reconsume_times}\n",
        f"{'Born Timestamp:':<20} {time_millis_to_human_string2(m.born_timestamp)}\n",
        f"{'Store Timestamp:':<20} {time_millis_to_human_string2(m.store_timestamp)}\n",
        f"{'Born Host:':<20} {m.born_host}\n",
        f"{'Store Host:':<20} {m.store_host}\n",
        f"{'System Flag:':<20} {m.sys_flag}\n",
        f"{'Properties:':<20} {java_map(m.properties)}\n",
        f"{'Message Body Path:':<20} {view.body_path}\n",
    ]
    if view.tracks is not None:
        if not view.tracks:
            out.append("\n\nWARN: No Consumer")
        else:
            out.append("\n\n")
            out.extend(t.java_string() for t in view.tracks)
    return "".join(out)


def query_msg_by_key(messages: list[Any]) -> str:
    """C.4.7: ``%-50s %4s %40s%n``."""
    out = [f"{'#Message ID':<50} {'#QID':>4} {'#Offset':>40}\n"]
    out.extend(f"{m.msg_id:<50} {m.queue_id:>4d} {m.queue_offset:>40d}\n" for m in messages)
    return "".join(out)


# The lines a pulled queue ends with, the same in printMsg and consumeMessage.
PULL_END_LINES: dict[str, Callable[[Any, str], str]] = {
    "no_matched": lambda e, mq: f"{mq} no matched msg. status={e.status}, offset={e.offset}\n",
    "finished": lambda e, mq: f"{mq} print msg finished. status={e.status}, offset={e.offset}\n",
}


def events_text(events: list[Any], lines: dict[str, Callable[[Any, str], str]]) -> str:
    """One text per queue event (``rmqcli.admin.message.QueueEvent``) whose kind ``lines`` has:
    ``lines[kind](event, mq)``, ``mq`` the queue as ``MessageQueue.toString()``."""
    from rmqcli.admin.beans import mq_string

    return "".join(lines[e.kind](e, mq_string(e.mq)) for e in events if e.kind in lines)


def print_msg(events: list[Any], charset: str = "UTF-8", print_body: bool = True) -> str:
    """C.4.7 ``printMsg``: per queue the bounds line, messages, end markers and a dashed rule."""
    return events_text(
        events,
        {
            "bounds": lambda e, mq: f"minOffset={e.min_offset}, maxOffset={e.max_offset}, {mq}\n",
            "messages": lambda e, mq: msg_lines(e.messages, charset, print_body),
            **PULL_END_LINES,
            "end": lambda e, mq: "--------------------------------------------------------\n",
        },
    )


def print_msg_by_queue(result: Any, charset: str, print_msgs: bool, print_body: bool, calculate: bool) -> str:
    out = []
    if print_msgs:
        out.append(msg_lines(result.messages, charset, print_body))
    if calculate:
        out.extend(f"Tag: {tag:<30} Count: {count}\n" for tag, count in result.tag_counts)
    return "".join(out)


def consume_message(events: list[Any]) -> str:
    """C.4.7 ``consumeMessage``: ``Consume ok`` and the messages per pull, end markers."""
    return events_text(
        events,
        {
            "truncated": lambda e, mq: (
                f"The older {e.count} message of the {e.mq.queue_id} queue will be provided\n"
            ),
            "truncated_queue": lambda e, mq: f"The oldler {e.count} message will be provided\n",
            "no_matched_offset": lambda e, mq: f"{mq} no matched msg, offset={e.offset}\n",
            "consumed": lambda e, mq: "Consume ok\n" + msg_lines(e.messages),
            **PULL_END_LINES,
        },
    )


SEND_FORMAT = "{:<32} {:<4} {:<20} {}\n"


def send_message(result: Any) -> str:
    """``sendMessage`` (4.9.7 source: single spaces, where C.4.7 shows two)."""
    out = [SEND_FORMAT.format("#Broker Name", "#QID", "#Send Result", "#MsgId")]
    if result is None:
        out.append(SEND_FORMAT.format("Unknown", "Unknown", "Failed", "None"))
    else:
        out.append(
            SEND_FORMAT.format(result.mq.broker_name, result.mq.queue_id, result.send_status, result.msg_id)
        )
    return "".join(out)


def check_msg_send_rt(result: Any) -> str:
    """``checkMsgSendRT``: one row per message, then ``Avg RT`` (``NaN`` for a single message)."""
    out = [SEND_FORMAT.format("#Broker Name", "#QID", "#Send Result", "#RT")]
    for r in result.rows:
        out.append(SEND_FORMAT.format(str(r.broker_name), str(r.queue_id), bool_text(r.success), r.rt))
    avg = "NaN" if result.avg_rt is None else f"{result.avg_rt:.2f}"
    out.append(f"Avg RT: {avg}\n")
    return "".join(out)


def send_msg_status(sends: list[Any]) -> str:
    return "".join(f"rt={s.rt}ms, SendResult={s.result.java_string()}\n" for s in sends)


def consume_queue_data(d: Any) -> str:
    """``ConsumeQueueData.toString()``."""
    return (
        f"ConsumeQueueData{{physicOffset={d.physic_offset}, physicSize={d.physic_size}, "
        f"tagsCode={d.tags_code}, "
        f"extendDataJson='{js(d.extend_data_json)}', bitMap='{js(d.bit_map)}', "
        f"eval={bool_text(d.eval)}, "
        f"msg='{js(d.msg)}'}}"
    )


def query_cq(body: Any, index: int) -> str:
    """``queryCq``: subscription (pretty JSON), filter data, bounds, then one block per entry."""
    from rmqcli.remoting.json_body import encode

    rule = "======================================\n"
    out = []
    if body.subscription_data is not None:
        out.append(f"Subscription data: \n{encode(body.subscription_data, pretty=True).decode('utf-8')}\n")
        out.append(rule)
    if body.filter_data is not None:
        out.append(f"Filter data: \n{body.filter_data}\n")
        out.append(rule)
    out.append(f"Queue data: \nmax: {body.max_queue_index}, min: {body.min_queue_index}\n")
    out.append(rule)
    for i, d in enumerate(body.queue_data, index):
        out.append(f"idx: {i}\n{consume_queue_data(d)}\n{rule}")
    return "".join(out)


# --- --json documents ----------------------------------------------------------------------------
def message_data(m: Any) -> dict[str, Any]:
    """A message's fields under their Java names (``bodyCRC`` as Java spells it), the body as text."""
    return camel_fields(
        m, "msg_id", "offset_msg_id", "topic", "broker_name", "queue_id", "queue_offset",
        "commit_log_offset", "store_size", "sys_flag", "flag", "bodyCRC=body_crc", "born_timestamp",
        "born_host", "store_timestamp", "store_host", "reconsume_times", "prepared_transaction_offset",
        "tags", "keys", "properties",
    ) | {"body": m.body.decode("utf-8", "replace")}  # fmt: skip


def view_data(v: Any) -> dict[str, Any]:
    return {
        "message": message_data(v.message),
        "bodyPath": v.body_path,
        "tracks": None
        if v.tracks is None
        else [
            {"consumerGroup": t.consumer_group, "trackType": t.track_type, "exceptionDesc": t.exception_desc}
            for t in v.tracks
        ],
    }


def unique_key_data(result: Any, direct: bool) -> Any:
    """queryMsgByUniqueKey's document: the client's answer when ``-g`` and ``-d`` pushed the message
    to it (``direct``), else the messages found."""
    if direct:
        from rmqcli.admin.beans import plain

        return plain(result)
    return [view_data(v) for v in result]


def events_data(events: list[Any]) -> list[dict[str, Any]]:
    out = []
    for e in events:
        item: dict[str, Any] = {
            "kind": e.kind,
            "topic": e.mq.topic,
            "brokerName": e.mq.broker_name,
            "queueId": e.mq.queue_id,
        }
        if e.messages:
            item["messages"] = [message_data(m) for m in e.messages]
        if e.kind == "bounds":
            item.update(minOffset=e.min_offset, maxOffset=e.max_offset)
        if e.status:
            item.update(status=e.status, offset=e.offset)
        if e.error:
            item["error"] = e.error
        if e.count:
            item["count"] = e.count
        out.append(item)
    return out


def send_result_data(r: Any) -> dict[str, Any]:
    return {
        "sendStatus": r.send_status,
        "msgId": r.msg_id,
        "offsetMsgId": r.offset_msg_id,
        "topic": r.mq.topic,
        "brokerName": r.mq.broker_name,
        "queueId": r.mq.queue_id,
        "queueOffset": r.queue_offset,
        "regionId": r.region_id,
    }


# --- queryMsgTraceById (QueryMsgTraceByIdSubCommand.printMessageTrace) ------------------------------
TRACE_ROW = "{:<10} {:<20} {:<20} {:<20} {:<10} {:<10}\n"  # "%-10s %-20s %-20s %-20s %-10s %-10s%n"


def trace_time(millis: int) -> str:
    """``DateFormatUtils.format(millis, "yyyy-MM-dd HH:mm:ss")`` in the local time zone; a time no
    calendar holds (a garbled record) as its number."""
    import time

    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(millis / 1000))
    except (OverflowError, OSError, ValueError):
        return str(millis)


def _trace_row(kind: str, v: Any) -> str:
    return TRACE_ROW.format(
        kind, v.group_name, v.client_host, trace_time(v.time_stamp), f"{v.cost_time}ms", v.status
    )


def query_msg_trace(views: list[Any]) -> str:
    """Each Pub view (header, row, blank line) in order; then the SubAfter views grouped by consumer
    group in a ``HashMap``'s order, one header per group and a blank line after it. SubBefore and
    EndTransaction views are not printed."""
    from formats.javahash import hashmap_order

    out: list[str] = []
    groups: dict[str, list[Any]] = {}
    for v in views:
        if v.msg_type == "Pub":
            out.append(
                TRACE_ROW.format(
                    "#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status"
                )
            )
            out.append(_trace_row("Pub", v))
            out.append("\n")
        elif v.msg_type == "SubAfter":
            groups.setdefault(v.group_name, []).append(v)
    for group in hashmap_order(list(groups)):
        out.append(
            TRACE_ROW.format(
                "#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status"
            )
        )
        out.extend(_trace_row("Sub", v) for v in groups[group])
        out.append("\n")
    return "".join(out)
