"""mqadmin's message commands (``tools.command.message``, ``.queue``, ``.broker``): queryMsgById,
queryMsgByKey, queryMsgByUniqueKey, queryMsgByOffset, queryMsgTraceById, printMsg, printMsgByQueue, queryCq,
sendMessage, consumeMessage, checkMsgSendRT, sendMsgStatus (protocol.md C.2, C.4.6, C.4.7)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rmqcli.cli.admin.registry import (
    AMOUNT,
    SIZE,
    TOPIC,
    Args,
    Family,
    Lazy,
    Opt,
    broker_addr,
    opt,
    parse_boolean,
    required,
)
from rmqcli.errors import BrokerError, NetworkError, UsageError

messages = Lazy("rmqcli.admin.message")
message_text = Lazy("rmqcli.cli.admin.format_messages")
MESSAGES = Family(messages, message_text, "message")

TIME_HELP = "timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]"
MSG_ID = required("msg_id", "--msgId", "-i", "Message Id")
CONSUMER_GROUP = opt("consumer_group", "--consumerGroup", "-g", "consumer group name")
CLIENT_ID = opt("client_id", "--clientId", "-d", "The consumer's client id")
CHARSET = opt("charset_name", "--charsetName", "-c", "CharsetName(eg: UTF-8,GBK)", str, "UTF-8")
SUB_EXPRESSION = opt(
    "sub_expression", "--subExpression", "-s", "Subscribe Expression(eg: TagA || TagB)", str, "*"
)
BEGIN = opt("begin_timestamp", "--beginTimestamp", "-b", "Begin " + TIME_HELP)
END = opt("end_timestamp", "--endTimestamp", "-e", "End " + TIME_HELP)


def _queue_position(option: Callable[..., Opt]) -> tuple[Opt, ...]:
    """``-b`` broker name, ``-i`` queue id, ``-o`` queue offset, each declared by ``option``
    (``required`` for queryMsgByOffset, ``opt`` for consumeMessage)."""
    return (
        option("broker_name", "--brokerName", "-b", "Broker Name"),
        option("queue_id", "--queueId", "-i", "Queue Id", int),
        option("offset", "--offset", "-o", "Queue Offset", int),
    )


def _time(text: str | None) -> int | None:
    from rmqcli.admin.group import parse_timestamp

    return None if text is None else parse_timestamp(text)


def _check_query_by_id(a: Args) -> None:
    from rmqcli.remoting.client import parse_address

    if a.consumer_group or a.client_id or a.send_message:
        raise UsageError("-g/-d (push to a client) and -s (resend) are not supported; query with -i only")
    if a.broker_addr is not None:
        parse_address(a.broker_addr)  # a malformed -b is a usage error before any connection


ID_TOPIC_HELP = (
    "rmq's addition: the topic of a unique-key id (the client's msgId), whose brokers are asked; "
    "without it every topic the NameServer lists is searched on every master"
)
ID_BROKER_HELP = (
    "rmq's addition: a broker (host:port) to trust besides those the NameServer lists, and the "
    "only one asked for a unique-key id"
)


# An id is an offset message id (store host, port and CommitLog offset: the broker's offsetMsgId)
# when the address it encodes is a broker the NameServer lists, or -b; it is then read from that
# broker. Any other id is a unique key (the msgId a client's send returns), looked up as
# queryMsgByUniqueKey does: in -t's brokers, else in every topic. rmq never connects to an address
# decoded from an id that neither the NameServer nor -b names (4.9.8's mqadmin does).
query_msg_by_id = MESSAGES.command(
    "queryMsgById",
    "Query Message by Id",
    (
        MSG_ID,
        CONSUMER_GROUP,
        CLIENT_ID,
        opt("send_message", "--sendMessage", "-s", "resend message"),
        opt("unit_name", "--unitName", "-u", "unit name"),
        opt("topic", "--topic", "-t", ID_TOPIC_HELP),
        broker_addr(ID_BROKER_HELP),
    ),
    params=("msg_id", "topic", "broker_addr"),
    text=lambda views, a: "".join(message_text.message_view(v) for v in views),
    data=lambda views, a: [message_text.view_data(v) for v in views],
    check=_check_query_by_id,
)

query_msg_by_key = MESSAGES.command(
    "queryMsgByKey",
    "Query Message by Key",
    (TOPIC, required("msg_key", "--msgKey", "-k", "Message Key")),
    data=lambda found, a: [message_text.message_data(m) for m in found],
)


query_msg_trace_by_id = MESSAGES.command(
    "queryMsgTraceById",
    "query a message trace",
    (MSG_ID, opt("trace_topic", "--traceTopic", "-t", "The name value of message trace topic")),
    render="query_msg_trace",
)


def _direct(a: Args) -> bool:
    """``-g`` and ``-d``: the message is pushed to that client (CONSUME_MESSAGE_DIRECTLY)."""
    return bool(a.consumer_group and a.client_id)


query_msg_by_unique_key = MESSAGES.command(
    "queryMsgByUniqueKey",
    "Query Message by Unique key",
    (
        MSG_ID,
        TOPIC,
        CONSUMER_GROUP,
        CLIENT_ID,
        opt("show_all", "--showAll", "-a", "Print all message, the limit is 32", bool, False),
    ),
    call=lambda s, a: (
        messages.consume_message_directly(s, a.consumer_group, a.client_id, a.topic, a.msg_id)
        if _direct(a)
        else messages.query_msg_by_unique_key(s, a.topic, a.msg_id, a.show_all)
    ),
    text=lambda result, a: (
        result.java_string()
        if _direct(a)
        else "".join(message_text.message_view(v, with_offset_id=False) for v in result)
    ),
    data=lambda result, a: message_text.unique_key_data(result, _direct(a)),
)

query_msg_by_offset = MESSAGES.command(
    "queryMsgByOffset",
    "Query Message by offset",
    (TOPIC, *_queue_position(required)),
    text=lambda view, a: "" if view is None else message_text.message_view(view),
    data=lambda view, a: None if view is None else message_text.view_data(view),
)

print_msg = MESSAGES.command(
    "printMsg",
    "Print Message Detail",
    (TOPIC, CHARSET, SUB_EXPRESSION, BEGIN, END, opt("print_body", "--printBody", "-d", "print body")),
    call=lambda s, a: messages.print_msg(
        s, a.topic, a.sub_expression.strip(), _time(a.begin_timestamp), _time(a.end_timestamp)
    ),
    text=lambda events, a: message_text.print_msg(
        events, a.charset_name.strip(), a.print_body is None or parse_boolean(a.print_body)
    ),
    data=lambda events, a: message_text.events_data(events),
)

print_msg_by_queue = MESSAGES.command(
    "printMsgByQueue",
    "Print Message Detail",
    (
        TOPIC,
        required("broker_name", "--brokerName", "-a", "broker name"),
        required("queue_id", "--queueId", "-i", "queue id", int),
        CHARSET,
        SUB_EXPRESSION,
        BEGIN,
        END,
        opt("print_msgs", "--print-msg", "-p", "print msg. eg: true | false(default)"),
        opt("print_body", "--printBody", "-d", "print body. eg: true | false(default)"),
        opt("calculate", "--calculate", "-f", "calculate by tag. eg: true | false(default)"),
    ),
    call=lambda s, a: messages.print_msg_by_queue(
        s,
        a.topic,
        a.broker_name,
        a.queue_id,
        a.sub_expression.strip(),
        _time(a.begin_timestamp),
        _time(a.end_timestamp),
    ),
    text=lambda result, a: message_text.print_msg_by_queue(
        result,
        a.charset_name.strip(),
        parse_boolean(a.print_msgs),
        parse_boolean(a.print_body),
        parse_boolean(a.calculate),
    ),
    data=lambda result, a: {
        "messages": [message_text.message_data(m) for m in result.messages],
        "tagCounts": [{"tag": t, "count": c} for t, c in result.tag_counts],
    },
)

query_cq = MESSAGES.command(
    "queryCq",
    "Query cq command.",
    (
        TOPIC,
        required("queue", "--queue", "-q", "queue num, ie. 1", int),
        required("index", "--index", "-i", "start queue index.", int),
        opt("count", "--count", "-c", "how many.", int, 10),
        opt("broker", "--broker", "-b", "broker addr."),
        opt("consumer", "--consumer", "-g", "consumer group."),
    ),
    group="queue",
    text=lambda body, a: message_text.query_cq(body, a.index),
    namesrv=lambda a: not a.broker,
)


def _check_send(a: Args) -> None:
    if parse_boolean(a.msg_trace_enable):
        raise UsageError("-m true (message trace) is not supported")


send_message = MESSAGES.command(
    "sendMessage",
    "Send a message",
    (
        TOPIC,
        required("body", "--body", "-p", "UTF-8 string format of the message body"),
        opt("key", "--key", "-k", "Message keys"),
        opt("tags", "--tags", "-c", "Message tags"),
        opt("broker", "--broker", "-b", "Send message to target broker"),
        opt("qid", "--qid", "-i", "Send message to target queue", int),
        opt("msg_trace_enable", "--msgTraceEnable", "-m", "Message Trace Enable, Default: false"),
    ),
    call=lambda s, a: messages.send_message(
        s, a.topic, a.body, keys=a.key, tags=a.tags, broker_name=a.broker, queue_id=a.qid
    ),
    data=lambda result, a: message_text.send_result_data(result),
    check=_check_send,
)


def _check_consume(a: Args) -> None:
    """ConsumeMessageCommand's checks, in its order, before anything is sent."""
    import time

    if a.message_number <= 0:
        raise UsageError("Please input a positive messageNumber!")
    if a.queue_id is not None and not a.broker_name:
        raise UsageError("Please set the brokerName before queueId!")
    if a.offset is not None and a.queue_id is None:
        raise UsageError("Please set queueId before offset!")
    now = int(time.time() * 1000)
    begin = _time(a.begin_timestamp) or 0
    end = _time(a.end_timestamp) or 0
    if begin > now:
        raise UsageError("Please set the beginTimestamp before now!")
    if end > now:
        raise UsageError("Please set the endTimestamp before now!")
    if a.end_timestamp is not None and begin > end:
        raise UsageError("Please make sure that the beginTimestamp is less than or equal to the endTimestamp")


consume_message = MESSAGES.command(
    "consumeMessage",
    "Consume message",
    (
        TOPIC,
        *_queue_position(opt),
        opt("consumer_group", "--consumerGroup", "-g", "Consumer Group Name"),
        opt("begin_timestamp", "--beginTimestamp", "-s", "Begin " + TIME_HELP),
        END,
        opt("message_number", "--MessageNumber", "-c", "Number of Messages", int, 128),
    ),
    call=lambda s, a: messages.consume_message(
        s,
        a.topic,
        broker_name=a.broker_name,
        queue_id=a.queue_id,
        offset=a.offset,
        group=a.consumer_group,
        begin=_time(a.begin_timestamp) or 0,
        end=_time(a.end_timestamp) or 0,
        count=a.message_number,
    ),
    data=lambda events, a: message_text.events_data(events),
    check=_check_consume,
)


def _every_send_failed(result: Any) -> None:
    """Exit 5 when no send got an answer, 6 when the broker refused them (its code in the text)."""
    if result.rows and not any(r.success for r in result.rows):
        error = result.rows[-1].error or "every send failed"
        raise (NetworkError if "(" not in error else BrokerError)(error)


check_msg_send_rt = MESSAGES.command(
    "checkMsgSendRT",
    "check message send response time",
    (TOPIC, AMOUNT, SIZE),
    fail=_every_send_failed,
)

send_msg_status = MESSAGES.command(
    "sendMsgStatus",
    "send msg to broker.",
    (
        required("broker_name", "--brokerName", "-b", "Broker Name"),
        opt("message_size", "--messageSize", "-s", "Message Size, Default: 128", int, 128),
        opt("count", "--count", "-c", "send message count, Default: 50", int, 50),
    ),
    group="broker",
    data=lambda sends, a: [dict(message_text.send_result_data(x.result), rt=x.rt) for x in sends],
)
