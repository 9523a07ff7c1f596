"""mqadmin message commands (PROTOCOL.md C.2, C.4.6, C.4.7): queryMsgById, queryMsgByKey,
queryMsgByUniqueKey, queryMsgByOffset, printMsg, printMsgByQueue, queryCq, sendMessage,
consumeMessage, checkMsgSendRT, sendMsgStatus."""

from typing import Annotated, Any

import typer

from rmqcli.cli.admin_common import JsonOpt, NamesrvOpt, TopicOpt, emit_json, java_bool, session, write
from rmqcli.errors import UsageError

TimeHelp = "timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]"


def _message(m: Any) -> dict[str, Any]:
    return {
        "msgId": m.msg_id,
        "offsetMsgId": m.offset_msg_id,
        "topic": m.topic,
        "brokerName": m.broker_name,
        "queueId": m.queue_id,
        "queueOffset": m.queue_offset,
        "commitLogOffset": m.commit_log_offset,
        "storeSize": m.store_size,
        "sysFlag": m.sys_flag,
        "flag": m.flag,
        "bodyCRC": m.body_crc,
        "bornTimestamp": m.born_timestamp,
        "bornHost": m.born_host,
        "storeTimestamp": m.store_timestamp,
        "storeHost": m.store_host,
        "reconsumeTimes": m.reconsume_times,
        "preparedTransactionOffset": m.prepared_transaction_offset,
        "tags": m.tags,
        "keys": m.keys,
        "properties": m.properties,
        "body": m.body.decode("utf-8", "replace"),
    }


def _view(v: Any) -> dict[str, Any]:
    return {
        "message": _message(v.message),
        "bodyPath": v.body_path,
        "tracks": None
        if v.tracks is None
        else [
            {"consumerGroup": t.consumer_group, "trackType": t.track_type, "exceptionDesc": t.exception_desc}
            for t in v.tracks
        ],
    }


def _time(text: str | None) -> int | None:
    from rmqcli.admin.group import parse_timestamp

    return None if text is None else parse_timestamp(text)


def query_msg_by_id(
    msg_id: Annotated[str, typer.Option("--msgId", "-i", help="Message Id")],
    consumer_group: Annotated[
        str | None, typer.Option("--consumerGroup", "-g", help="consumer group name")
    ] = None,
    client_id: Annotated[
        str | None, typer.Option("--clientId", "-d", help="The consumer's client id")
    ] = None,
    send_message: Annotated[str | None, typer.Option("--sendMessage", "-s", help="resend message")] = None,
    unit_name: Annotated[str | None, typer.Option("--unitName", "-u", help="unit name")] = None,
    topic: Annotated[
        str | None,
        typer.Option(
            "--topic",
            "-t",
            help="rmq's addition: the topic of a unique-key id (the client's msgId), whose brokers "
            "are asked; without it every topic the NameServer lists is searched on every master",
        ),
    ] = None,
    broker_addr: Annotated[
        str | None,
        typer.Option(
            "--brokerAddr",
            "-b",
            help="rmq's addition: a broker (host:port) to trust besides those the NameServer lists, "
            "and the only one asked for a unique-key id",
        ),
    ] = None,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Query Message by Id

    An id is an offset message id (store host, port and CommitLog offset: the broker's
    offsetMsgId) when the address it encodes is a broker the NameServer lists, or -b; it is then
    read from that broker. Any other id is a unique key (the msgId a client's send returns), looked
    up as queryMsgByUniqueKey does: in -t's brokers, else in every topic. rmq never connects to an
    address decoded from an id that neither the NameServer nor -b names (4.9.8's mqadmin does).
    """
    from rmqcli.admin import message as ops
    from rmqcli.cli import admin_format_messages as fmt
    from rmqcli.remoting.client import parse_address

    if consumer_group or client_id or send_message:
        raise UsageError("-g/-d (push to a client) and -s (resend) are not supported; query with -i only")
    if broker_addr is not None:
        parse_address(broker_addr)  # a malformed -b is a usage error before any connection
    with session(namesrv) as s:
        views = ops.query_msg_by_id(s, msg_id, topic, broker_addr)
    emit_json([_view(v) for v in views]) if json_out else write("".join(fmt.message_view(v) for v in views))


def query_msg_by_key(
    topic: TopicOpt,
    msg_key: Annotated[str, typer.Option("--msgKey", "-k", help="Message Key")],
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Query Message by Key"""
    from rmqcli.admin import message as ops
    from rmqcli.cli import admin_format_messages as fmt

    with session(namesrv) as s:
        messages = ops.query_msg_by_key(s, topic, msg_key)
    emit_json([_message(m) for m in messages]) if json_out else write(fmt.query_by_key(messages))


def query_msg_by_unique_key(
    msg_id: Annotated[str, typer.Option("--msgId", "-i", help="Message Id")],
    topic: TopicOpt,
    consumer_group: Annotated[
        str | None, typer.Option("--consumerGroup", "-g", help="consumer group name")
    ] = None,
    client_id: Annotated[
        str | None, typer.Option("--clientId", "-d", help="The consumer's client id")
    ] = None,
    show_all: Annotated[
        bool, typer.Option("--showAll", "-a", help="Print all message, the limit is 32")
    ] = False,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Query Message by Unique key"""
    from rmqcli.admin import message as ops
    from rmqcli.admin.beans import plain
    from rmqcli.cli import admin_format_messages as fmt

    with session(namesrv) as s:
        if consumer_group and client_id:
            result = ops.consume_message_directly(s, consumer_group, client_id, topic, msg_id)
            emit_json(plain(result)) if json_out else write(result.java_string())
            return
        views = ops.query_msg_by_unique_key(s, topic, msg_id, show_all)
    if json_out:
        emit_json([_view(v) for v in views])
    else:
        write("".join(fmt.message_view(v, with_offset_id=False) for v in views))


def query_msg_by_offset(
    topic: TopicOpt,
    broker_name: Annotated[str, typer.Option("--brokerName", "-b", help="Broker Name")],
    queue_id: Annotated[int, typer.Option("--queueId", "-i", help="Queue Id")],
    offset: Annotated[int, typer.Option("--offset", "-o", help="Queue Offset")],
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Query Message by offset"""
    from rmqcli.admin import message as ops
    from rmqcli.cli import admin_format_messages as fmt

    with session(namesrv) as s:
        view = ops.query_msg_by_offset(s, topic, broker_name, queue_id, offset)
    if json_out:
        emit_json(None if view is None else _view(view))
    elif view is not None:
        write(fmt.message_view(view))


CharsetOpt = Annotated[str, typer.Option("--charsetName", "-c", help="CharsetName(eg: UTF-8,GBK)")]
SubExprOpt = Annotated[
    str, typer.Option("--subExpression", "-s", help="Subscribe Expression(eg: TagA || TagB)")
]
BeginOpt = Annotated[str | None, typer.Option("--beginTimestamp", "-b", help="Begin " + TimeHelp)]
EndOpt = Annotated[str | None, typer.Option("--endTimestamp", "-e", help="End " + TimeHelp)]


def print_msg(
    topic: TopicOpt,
    charset_name: CharsetOpt = "UTF-8",
    sub_expression: SubExprOpt = "*",
    begin_timestamp: BeginOpt = None,
    end_timestamp: EndOpt = None,
    print_body: Annotated[str | None, typer.Option("--printBody", "-d", help="print body")] = None,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Print Message Detail"""
    from rmqcli.admin import message as ops
    from rmqcli.cli import admin_format_messages as fmt

    with session(namesrv) as s:
        events = ops.print_msg(s, topic, sub_expression.strip(), _time(begin_timestamp), _time(end_timestamp))
    body = print_body is None or java_bool(print_body)
    if json_out:
        emit_json(_events(events))
    else:
        write(fmt.print_msg(events, charset_name.strip(), body))


def _events(events: list[Any]) -> list[dict[str, Any]]:
    out = []
    for e in events:
        item: dict[str, Any] = {
            "kind": e.kind,
            "topic": e.mq.topic,
            "brokerName": e.mq.broker_name,
            "queueId": e.mq.queue_id,
        }
        if e.messages:
            item["messages"] = [_message(m) for m in e.messages]
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


def print_msg_by_queue(
    topic: TopicOpt,
    broker_name: Annotated[str, typer.Option("--brokerName", "-a", help="broker name")],
    queue_id: Annotated[int, typer.Option("--queueId", "-i", help="queue id")],
    charset_name: CharsetOpt = "UTF-8",
    sub_expression: SubExprOpt = "*",
    begin_timestamp: BeginOpt = None,
    end_timestamp: EndOpt = None,
    print_msgs: Annotated[
        str | None, typer.Option("--print-msg", "-p", help="print msg. eg: true | false(default)")
    ] = None,
    print_body: Annotated[
        str | None, typer.Option("--printBody", "-d", help="print body. eg: true | false(default)")
    ] = None,
    calculate: Annotated[
        str | None, typer.Option("--calculate", "-f", help="calculate by tag. eg: true | false(default)")
    ] = None,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Print Message Detail"""
    from rmqcli.admin import message as ops
    from rmqcli.cli import admin_format_messages as fmt

    with session(namesrv) as s:
        result = ops.print_msg_by_queue(
            s,
            topic,
            broker_name,
            queue_id,
            sub_expression.strip(),
            _time(begin_timestamp),
            _time(end_timestamp),
        )
    if json_out:
        emit_json(
            {
                "messages": [_message(m) for m in result.messages],
                "tagCounts": [{"tag": t, "count": c} for t, c in result.tag_counts],
            }
        )
    else:
        write(
            fmt.print_msg_by_queue(
                result,
                charset_name.strip(),
                java_bool(print_msgs),
                java_bool(print_body),
                java_bool(calculate),
            )
        )


def query_cq(
    topic: TopicOpt,
    queue: Annotated[int, typer.Option("--queue", "-q", help="queue num, ie. 1")],
    index: Annotated[int, typer.Option("--index", "-i", help="start queue index.")],
    count: Annotated[int, typer.Option("--count", "-c", help="how many.")] = 10,
    broker: Annotated[str | None, typer.Option("--broker", "-b", help="broker addr.")] = None,
    consumer: Annotated[str | None, typer.Option("--consumer", "-g", help="consumer group.")] = None,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Query cq command."""
    from rmqcli.admin import message as ops
    from rmqcli.cli import admin_format_messages as fmt

    with session(namesrv, need_namesrv=not broker) as s:
        body = ops.query_cq(s, topic, queue, index, count, broker, consumer)
    emit_json(body) if json_out else write(fmt.query_cq(body, index))


def send_message(
    topic: TopicOpt,
    body: Annotated[str, typer.Option("--body", "-p", help="UTF-8 string format of the message body")],
    key: Annotated[str | None, typer.Option("--key", "-k", help="Message keys")] = None,
    tags: Annotated[str | None, typer.Option("--tags", "-c", help="Message tags")] = None,
    broker: Annotated[
        str | None, typer.Option("--broker", "-b", help="Send message to target broker")
    ] = None,
    qid: Annotated[int | None, typer.Option("--qid", "-i", help="Send message to target queue")] = None,
    msg_trace_enable: Annotated[
        str | None, typer.Option("--msgTraceEnable", "-m", help="Message Trace Enable, Default: false")
    ] = None,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Send a message"""
    from rmqcli.admin import message as ops
    from rmqcli.cli import admin_format_messages as fmt

    if java_bool(msg_trace_enable):
        raise UsageError("-m true (message trace) is not supported")
    with session(namesrv) as s:
        result = ops.send_message(s, topic, body, keys=key, tags=tags, broker_name=broker, queue_id=qid)
    if json_out:
        emit_json(_send_result(result))
    else:
        write(fmt.send_message(result))


def _send_result(r: Any) -> dict[str, Any]:
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


def consume_message(
    topic: TopicOpt,
    broker_name: Annotated[str | None, typer.Option("--brokerName", "-b", help="Broker Name")] = None,
    queue_id: Annotated[int | None, typer.Option("--queueId", "-i", help="Queue Id")] = None,
    offset: Annotated[int | None, typer.Option("--offset", "-o", help="Queue Offset")] = None,
    consumer_group: Annotated[
        str | None, typer.Option("--consumerGroup", "-g", help="Consumer Group Name")
    ] = None,
    begin_timestamp: Annotated[
        str | None, typer.Option("--beginTimestamp", "-s", help="Begin " + TimeHelp)
    ] = None,
    end_timestamp: Annotated[str | None, typer.Option("--endTimestamp", "-e", help="End " + TimeHelp)] = None,
    message_number: Annotated[int, typer.Option("--MessageNumber", "-c", help="Number of Messages")] = 128,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Consume message"""
    import time

    from rmqcli.admin import message as ops
    from rmqcli.cli import admin_format_messages as fmt

    if message_number <= 0:
        raise UsageError("Please input a positive messageNumber!")
    if queue_id is not None and not broker_name:
        raise UsageError("Please set the brokerName before queueId!")
    if offset is not None and queue_id is None:
        raise UsageError("Please set queueId before offset!")
    now = int(time.time() * 1000)
    begin = _time(begin_timestamp) or 0
    end = _time(end_timestamp) or 0
    if begin > now:
        raise UsageError("Please set the beginTimestamp before now!")
    if end > now:
        raise UsageError("Please set the endTimestamp before now!")
    if end_timestamp is not None and begin > end:
        raise UsageError("Please make sure that the beginTimestamp is less than or equal to the endTimestamp")
    with session(namesrv) as s:
        events = ops.consume_message(
            s,
            topic,
            broker_name=broker_name,
            queue_id=queue_id,
            offset=offset,
            group=consumer_group,
            begin=begin,
            end=end,
            count=message_number,
        )
    emit_json(_events(events)) if json_out else write(fmt.consume_message(events))


def check_msg_send_rt(
    topic: TopicOpt,
    amount: Annotated[int, typer.Option("--amount", "-a", help="message amount | default 100")] = 100,
    size: Annotated[int, typer.Option("--size", "-s", help="message size | default 128 Byte")] = 128,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """check message send response time"""
    from rmqcli.admin import message as ops
    from rmqcli.cli import admin_format_messages as fmt

    with session(namesrv) as s:
        result = ops.check_msg_send_rt(s, topic, amount, size)
    emit_json(result) if json_out else write(fmt.check_msg_send_rt(result))
    if result.rows and not any(r.success for r in result.rows):
        from rmqcli.errors import BrokerError, NetworkError

        error = result.rows[-1].error or "every send failed"
        raise (NetworkError if "(" not in error else BrokerError)(error)


def send_msg_status(
    broker_name: Annotated[str, typer.Option("--brokerName", "-b", help="Broker Name")],
    message_size: Annotated[
        int, typer.Option("--messageSize", "-s", help="Message Size, Default: 128")
    ] = 128,
    count: Annotated[int, typer.Option("--count", "-c", help="send message count, Default: 50")] = 50,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """send msg to broker."""
    from rmqcli.admin import message as ops
    from rmqcli.cli import admin_format_messages as fmt

    with session(namesrv) as s:
        sends = ops.send_msg_status(s, broker_name, message_size, count)
    if json_out:
        emit_json([dict(_send_result(x.result), rt=x.rt) for x in sends])
    else:
        write(fmt.send_msg_status(sends))
