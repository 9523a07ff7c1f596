"""mqadmin's group, connection, offset and stats commands (``tools.command.consumer``,
``.connection``, ``.producer``, ``.offset``, ``.stats``, ``.broker``): updateSubGroup,
deleteSubGroup, getConsumerConfig, consumerProgress, consumerConnection, producerConnection,
consumerStatus, producer, resetOffsetByTime, skipAccumulatedMessage, cloneGroupOffset,
startMonitoring, statsAll, brokerConsumeStats (protocol.md C.2, C.4.5, C.4.7)."""

from __future__ import annotations

from typing import Any

from rmqcli.cli.admin.registry import (
    TOPIC,
    Args,
    Family,
    Lazy,
    broker_addr,
    broker_or_cluster,
    broker_or_cluster_options,
    broker_or_cluster_target,
    opt,
    parse_boolean,
    required,
    without_broker,
)
from rmqcli.errors import UsageError

groups = Lazy("rmqcli.admin.group")
group_text = Lazy("rmqcli.cli.admin.format_groups")
GROUPS = Family(groups, group_text, "consumer")

RETRY_POLICY_HELP = (
    "the json string of retry policy ( exp: "
    '{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":5000,"max":7200000,"multiplier":2}} '
    '{"type":"CUSTOMIZED","customizedRetryPolicy":{"next":[1000,5000,10000]}} )'
)
GROUP_NAME = required("group_name", "--groupName", "-g", "consumer group name")
CONSUMER_GROUP = required("consumer_group", "--consumerGroup", "-g", "consumer group name")
BROKER_ADDRESS = broker_addr("broker address")


def _int(text: str | None, default: int, flag: str) -> int:
    if text is None:
        return default
    try:
        return int(text.strip())
    except ValueError:
        raise UsageError(f"{flag} must be a number, not {text!r}") from None


def _true_unless_false(text: str | None) -> bool:
    """A switch that is on unless given as anything but ``true`` (mqadmin's default true)."""
    return True if text is None else parse_boolean(text)


def _update_sub_group(s: Any, a: Args) -> Any:
    return groups.update_sub_group(
        s,
        a.group_name,
        **broker_or_cluster_target(a),
        consume_enable=_true_unless_false(a.consume_enable),
        consume_from_min_enable=parse_boolean(a.consume_from_min_enable),
        consume_broadcast_enable=parse_boolean(a.consume_broadcast_enable),
        retry_queue_nums=_int(a.retry_queue_nums, 1, "-q"),
        retry_max_times=_int(a.retry_max_times, 16, "-r"),
        broker_id=_int(a.broker_id, 0, "-i"),
        which_broker_when_consume_slowly=_int(a.which_broker, 1, "-w"),
        notify_consumer_ids_changed_enable=_true_unless_false(a.notify),
        consume_message_orderly=None if a.orderly is None else parse_boolean(a.orderly),
        group_retry_policy=a.retry_policy,
    )


update_sub_group = GROUPS.command(
    "updateSubGroup",
    "Update or create subscription group",
    (
        GROUP_NAME,
        *broker_or_cluster_options("create subscription group to"),
        opt("consume_enable", "--consumeEnable", "-s", "consume enable"),
        opt("consume_from_min_enable", "--consumeFromMinEnable", "-m", "from min offset"),
        opt("consume_broadcast_enable", "--consumeBroadcastEnable", "-d", "broadcast"),
        opt("orderly", "--consumeMessageOrderly", "-o", "consume message orderly"),
        opt("retry_queue_nums", "--retryQueueNums", "-q", "retry queue nums"),
        opt("retry_max_times", "--retryMaxTimes", "-r", "retry max times"),
        opt("retry_policy", "--groupRetryPolicy", "-p", RETRY_POLICY_HELP),
        opt("broker_id", "--brokerId", "-i", "consumer from which broker id"),
        opt("which_broker", "--whichBrokerWhenConsumeSlowly", "-w", "which broker id when consume slowly"),
        opt("notify", "--notifyConsumerIdsChanged", "-a", "notify consumerId changed"),
    ),
    call=_update_sub_group,
    check=broker_or_cluster,
    namesrv=without_broker,
)

delete_sub_group = GROUPS.command(
    "deleteSubGroup",
    "Delete subscription group from broker.",
    (
        GROUP_NAME,
        *broker_or_cluster_options("delete subscription group from"),
        opt("remove_offset", "--removeOffset", "-r", "remove offset"),
    ),
    call=lambda s, a: groups.delete_sub_group(
        s,
        a.group_name,
        **broker_or_cluster_target(a),
        remove_offset=parse_boolean(a.remove_offset),
    ),
    check=broker_or_cluster,
    namesrv=without_broker,
)

get_consumer_config = GROUPS.command(
    "getConsumerConfig",
    "Get consumer config by subscription group name!",
    (GROUP_NAME,),
)

consumer_progress = GROUPS.command(
    "consumerProgress",
    "Query consumers's progress, speed",
    (
        opt("group_name", "--groupName", "-g", "consumer group name"),
        opt("show_client_ip", "--showClientIP", "-s", "Show Client IP per Queue"),
    ),
    call=lambda s, a: (
        groups.consumer_progress_all(s)
        if a.group_name is None
        else groups.consumer_progress(s, a.group_name, parse_boolean(a.show_client_ip))
    ),
    text=lambda result, a: (
        group_text.consumer_progress_all(result)
        if a.group_name is None
        else group_text.consumer_progress(result, parse_boolean(a.show_client_ip))
    ),
    data=lambda result, a: (
        group_text.consumer_progress_all_data(result)
        if a.group_name is None
        else group_text.consumer_progress_data(result)
    ),
)

consumer_connection = GROUPS.command(
    "consumerConnection",
    "Query consumer's socket connection, client version and subscription",
    (CONSUMER_GROUP, BROKER_ADDRESS),
    group="connection",
    namesrv=without_broker,
)

producer_connection = GROUPS.command(
    "producerConnection",
    "Query producer's socket connection and client version",
    (required("producer_group", "--producerGroup", "-g", "producer group name"), TOPIC),
    group="connection",
)

producer = GROUPS.command(
    "producer",
    "Query producer's instances, connection, status, etc.",
    (required("broker", "--broker", "-b", "broker address"),),
    group="producer",
    operation="all_producer_info",
    data=lambda table, a: table.data,
    namesrv=lambda a: False,
)

consumer_status = GROUPS.command(
    "consumerStatus",
    "Query consumer's internal data structure",
    (
        CONSUMER_GROUP,
        opt("client_id", "--clientId", "-i", "The consumer's client id"),
        BROKER_ADDRESS,
        opt("jstack", "--jstack", "-s", "Run jstack command in the consumer progress", bool, False),
    ),
    call=lambda s, a: groups.consumer_status(
        s, a.consumer_group, client_id=a.client_id, broker_addr=a.broker_addr, jstack=a.jstack
    ),
    data=lambda result, a: group_text.consumer_status_data(result),
)

OFFSET_GROUP = required("group", "--group", "-g", "set the consumer group")
FORCE = opt("force", "--force", "-f", "set the force rollback by timestamp switch[true|false]")

reset_offset_by_time = GROUPS.command(
    "resetOffsetByTime",
    "Reset consumer offset by timestamp(without client restart).",
    (
        OFFSET_GROUP,
        TOPIC,
        required(
            "timestamp",
            "--timestamp",
            "-s",
            "set the timestamp[now|currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]",
        ),
        FORCE,
        opt("cplus", "--cplus", "-c", "reset c++ client offset", bool, False),
        opt("broker", "--broker", "-b", "broker addr"),
        opt("queue", "--queue", "-q", "queue id"),
        opt("offset", "--offset", "-o", "Expect queue offset, not support old version broker"),
    ),
    group="offset",
    call=lambda s, a: _reset_offset_by_time(s, a),
    text=lambda result, a: (
        group_text.reset_queue_offset(result) if _one_queue(a) else group_text.reset_offset(result)
    ),
)


def _one_queue(a: Args) -> bool:
    """5.1.1's mqadmin resets one queue of one broker with ``-b`` and ``-q`` (0 or more)."""
    return a.broker is not None and _int(a.queue, -1, "-q") >= 0


def _reset_offset_by_time(session: Any, a: Args) -> Any:
    """One queue (``_one_queue``), else every queue of the topic."""
    if _one_queue(a):
        offset = None if a.offset is None else _int(a.offset, 0, "-o")
        queue_id = _int(a.queue, -1, "-q")
        return groups.reset_offset_by_queue(
            session, a.broker, a.group, a.topic, queue_id, a.timestamp, offset
        )
    return groups.reset_offset_by_time(
        session, a.group, a.topic, a.timestamp, force=_true_unless_false(a.force), cplus=a.cplus
    )


skip_accumulated_message = GROUPS.command(
    "skipAccumulatedMessage",
    "Skip all messages that are accumulated (not consumed) currently",
    (OFFSET_GROUP, TOPIC, FORCE),
    group="offset",
    call=lambda s, a: groups.reset_offset_by_time(
        s, a.group, a.topic, "now", force=_true_unless_false(a.force)
    ),
)

clone_group_offset = GROUPS.command(
    "cloneGroupOffset",
    "clone offset from other group.",
    (
        required("src_group", "--srcGroup", "-s", "set source consumer group"),
        required("dest_group", "--destGroup", "-d", "set destination consumer group"),
        TOPIC,
        opt("offline", "--offline", "-o", "the group or the topic is offline"),
    ),
    group="offset",
    call=lambda s, a: groups.clone_group_offset(
        s, a.src_group, a.dest_group, a.topic, parse_boolean(a.offline)
    ),
    text=lambda queues, a: group_text.clone_group_offset(
        a.src_group.strip(), a.dest_group.strip(), a.topic.strip()
    ),
    data=lambda queues, a: {
        "srcGroup": a.src_group.strip(),
        "destGroup": a.dest_group.strip(),
        "topic": a.topic.strip(),
        "queues": queues,
    },
)


def _start_monitoring(s: Any, a: Args) -> None:
    """MonitorService's rounds, each report printed as it comes (a line, or one JSON object a
    line); the command ends itself, so nothing is added after the reports."""
    import typer

    from rmqcli.admin.monitor import MonitorService

    if a.rounds < 0 or a.interval <= 0 or a.delay < 0:
        raise UsageError("--rounds must be >= 0, --interval > 0 and --delay >= 0")
    service = MonitorService(s, lambda report: group_text.write_report(report, a.json_out))
    service.run(rounds=a.rounds, interval=a.interval, delay=a.delay)
    if service.failure is not None:
        raise service.failure
    raise typer.Exit(0)


start_monitoring = GROUPS.command(
    "startMonitoring",
    "Start Monitoring",
    (
        opt("rounds", "--rounds", None, "Stop after N rounds (0: run until interrupted, as mqadmin)", int, 0),
        opt("interval", "--interval", None, "Seconds between rounds (MonitorConfig.roundInterval)", int, 60),
        opt("delay", "--delay", None, "Seconds before the first round (MonitorService: 20)", int, 20),
    ),
    call=_start_monitoring,
    text=lambda result, a: "",
)

stats_all = GROUPS.command(
    "statsAll",
    "Topic and Consumer tps stats",
    (
        opt("active_topic", "--activeTopic", "-a", "print active topic only", bool, False),
        opt("topic", "--topic", "-t", "print select topic only"),
    ),
    group="stats",
    params=("topic", "active_topic"),
)

broker_consume_stats = GROUPS.command(
    "brokerConsumeStats",
    "Fetch broker consume stats data",
    (
        required("broker_addr", "--brokerAddr", "-b", "Broker address"),
        opt("timeout_millis", "--timeoutMillis", "-t", "request timeout Millis", int, 50000),
        opt("level", "--level", "-l", "threshold of print diff", int, 0),
        opt("order", "--order", "-o", "order topic"),
    ),
    group="broker",
    call=lambda s, a: groups.broker_consume_stats(
        s, a.broker_addr, is_order=parse_boolean(a.order), timeout_millis=a.timeout_millis, level=a.level
    ),
    data=lambda stats, a: group_text.broker_consume_stats_data(stats),
    namesrv=lambda a: False,
)
