"""mqadmin group, connection, offset and stats commands (PROTOCOL.md C.2, C.4.5, C.4.7):
updateSubGroup, deleteSubGroup, getConsumerConfig, consumerProgress, consumerConnection,
producerConnection, consumerStatus, resetOffsetByTime, skipAccumulatedMessage, cloneGroupOffset,
statsAll, brokerConsumeStats."""

from typing import Annotated

import typer

from rmqcli.cli.admin_common import (
    JsonOpt,
    NamesrvOpt,
    TopicOpt,
    emit_json,
    java_bool,
    session,
    write,
)
from rmqcli.cli.render import camel_dict
from rmqcli.errors import UsageError

GroupNameOpt = Annotated[str, typer.Option("--groupName", "-g", help="consumer group name")]
ConsumerGroupOpt = Annotated[str, typer.Option("--consumerGroup", "-g", help="consumer group name")]


def _int(text: str | None, default: int, flag: str) -> int:
    if text is None:
        return default
    try:
        return int(text.strip())
    except ValueError:
        raise UsageError(f"{flag} must be a number, not {text!r}") from None


def update_sub_group(
    group_name: GroupNameOpt,
    broker_addr: Annotated[
        str | None, typer.Option("--brokerAddr", "-b", help="create subscription group to which broker")
    ] = None,
    cluster_name: Annotated[
        str | None, typer.Option("--clusterName", "-c", help="create subscription group to which cluster")
    ] = None,
    consume_enable: Annotated[
        str | None, typer.Option("--consumeEnable", "-s", help="consume enable")
    ] = None,
    consume_from_min_enable: Annotated[
        str | None, typer.Option("--consumeFromMinEnable", "-m", help="from min offset")
    ] = None,
    consume_broadcast_enable: Annotated[
        str | None, typer.Option("--consumeBroadcastEnable", "-d", help="broadcast")
    ] = None,
    retry_queue_nums: Annotated[
        str | None, typer.Option("--retryQueueNums", "-q", help="retry queue nums")
    ] = None,
    retry_max_times: Annotated[
        str | None, typer.Option("--retryMaxTimes", "-r", help="retry max times")
    ] = None,
    broker_id: Annotated[
        str | None, typer.Option("--brokerId", "-i", help="consumer from which broker id")
    ] = None,
    which_broker: Annotated[
        str | None,
        typer.Option("--whichBrokerWhenConsumeSlowly", "-w", help="which broker id when consume slowly"),
    ] = None,
    notify: Annotated[
        str | None,
        typer.Option("--notifyConsumerIdsChanged", "-a", help="notify consumerId changed"),
    ] = None,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Update or create subscription group"""
    from rmqcli.admin import group as ops
    from rmqcli.cli import admin_format_groups as fmt

    if not broker_addr and not cluster_name:
        raise UsageError("one of -b/--brokerAddr or -c/--clusterName is required")
    with session(namesrv, need_namesrv=not broker_addr) as s:
        result = ops.update_sub_group(
            s,
            group_name,
            broker_addr=broker_addr,
            cluster=None if broker_addr else cluster_name,
            consume_enable=True if consume_enable is None else java_bool(consume_enable),
            consume_from_min_enable=java_bool(consume_from_min_enable),
            consume_broadcast_enable=java_bool(consume_broadcast_enable),
            retry_queue_nums=_int(retry_queue_nums, 1, "-q"),
            retry_max_times=_int(retry_max_times, 16, "-r"),
            broker_id=_int(broker_id, 0, "-i"),
            which_broker_when_consume_slowly=_int(which_broker, 1, "-w"),
            notify_consumer_ids_changed_enable=True if notify is None else java_bool(notify),
        )
    emit_json(result) if json_out else write(fmt.update_sub_group(result))


def delete_sub_group(
    group_name: GroupNameOpt,
    broker_addr: Annotated[
        str | None, typer.Option("--brokerAddr", "-b", help="delete subscription group from which broker")
    ] = None,
    cluster_name: Annotated[
        str | None, typer.Option("--clusterName", "-c", help="delete subscription group from which cluster")
    ] = None,
    remove_offset: Annotated[str | None, typer.Option("--removeOffset", "-r", help="remove offset")] = None,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Delete subscription group from broker."""
    from rmqcli.admin import group as ops
    from rmqcli.cli import admin_format_groups as fmt

    if not broker_addr and not cluster_name:
        raise UsageError("one of -b/--brokerAddr or -c/--clusterName is required")
    with session(namesrv, need_namesrv=not broker_addr) as s:
        result = ops.delete_sub_group(
            s,
            group_name,
            broker_addr=broker_addr,
            cluster=None if broker_addr else cluster_name,
            remove_offset=java_bool(remove_offset),
        )
    emit_json(result) if json_out else write(fmt.delete_sub_group(result))


def get_consumer_config(
    group_name: GroupNameOpt, namesrv: NamesrvOpt = None, json_out: JsonOpt = False
) -> None:
    """Get consumer config by subscription group name!"""
    from rmqcli.admin import group as ops
    from rmqcli.cli import admin_format_groups as fmt

    with session(namesrv) as s:
        infos = ops.get_consumer_config(s, group_name)
    emit_json(infos) if json_out else write(fmt.consumer_config(infos))


def consumer_progress(
    group_name: Annotated[str | None, typer.Option("--groupName", "-g", help="consumer group name")] = None,
    show_client_ip: Annotated[
        str | None, typer.Option("--showClientIP", "-s", help="Show Client IP per Queue")
    ] = None,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Query consumers's progress, speed"""
    from rmqcli.admin import group as ops
    from rmqcli.cli import admin_format_groups as fmt

    show = bool(show_client_ip) and show_client_ip.strip().lower() == "true"
    with session(namesrv) as s:
        if group_name is None:
            rows = ops.consumer_progress_all(s)
            if json_out:
                emit_json(
                    [
                        {
                            "group": r.group,
                            "count": r.count,
                            "version": r.version_desc,
                            "type": r.type_desc,
                            "model": r.model_desc,
                            "tps": r.consume_tps,
                            "diffTotal": r.diff_total,
                        }
                        for r in rows
                    ]
                )
            else:
                write(fmt.consumer_progress_all(rows))
            return
        progress = ops.consumer_progress(s, group_name, show)
    if json_out:
        emit_json(
            {
                "group": progress.group,
                "consumeTps": progress.consume_tps,
                "diffTotal": progress.diff_total,
                "queues": [dict(camel_dict(r), diff=r.diff) for r in progress.rows],
            }
        )
    else:
        write(fmt.consumer_progress(progress, show))


def consumer_connection(
    consumer_group: ConsumerGroupOpt,
    broker_addr: Annotated[str | None, typer.Option("--brokerAddr", "-b", help="broker address")] = None,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Query consumer's socket connection, client version and subscription"""
    from rmqcli.admin import group as ops
    from rmqcli.cli import admin_format_groups as fmt

    with session(namesrv, need_namesrv=not broker_addr) as s:
        cc = ops.consumer_connection(s, consumer_group, broker_addr)
    emit_json(cc) if json_out else write(fmt.consumer_connection(cc))


def producer_connection(
    producer_group: Annotated[str, typer.Option("--producerGroup", "-g", help="producer group name")],
    topic: TopicOpt,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Query producer's socket connection and client version"""
    from rmqcli.admin import group as ops
    from rmqcli.cli import admin_format_groups as fmt

    with session(namesrv) as s:
        pc = ops.producer_connection(s, producer_group, topic)
    emit_json(pc) if json_out else write(fmt.producer_connection(pc))


def consumer_status(
    consumer_group: ConsumerGroupOpt,
    client_id: Annotated[
        str | None, typer.Option("--clientId", "-i", help="The consumer's client id")
    ] = None,
    broker_addr: Annotated[str | None, typer.Option("--brokerAddr", "-b", help="broker address")] = None,
    jstack: Annotated[
        bool, typer.Option("--jstack", "-s", help="Run jstack command in the consumer progress")
    ] = False,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Query consumer's internal data structure"""
    from rmqcli.admin import group as ops
    from rmqcli.admin.beans import plain
    from rmqcli.cli import admin_format_groups as fmt

    with session(namesrv) as s:
        result = ops.consumer_status(
            s, consumer_group, client_id=client_id, broker_addr=broker_addr, jstack=jstack
        )
    if json_out:
        emit_json(
            {
                "clients": [camel_dict(r) for r in result.rows],
                "sameSubscription": result.same_subscription,
                "rebalanceOk": result.rebalance_ok,
                "runningInfo": plain(result.client)
                if result.client
                else {k: plain(v) for k, v in result.infos.items()},
            }
        )
    else:
        write(fmt.consumer_status(result))


def _reset(result: object, json_out: bool, text: str) -> None:
    if json_out:
        emit_json(result)
    else:
        write(text)


def reset_offset_by_time(
    group: Annotated[str, typer.Option("--group", "-g", help="set the consumer group")],
    topic: TopicOpt,
    timestamp: Annotated[
        str,
        typer.Option(
            "--timestamp", "-s", help="set the timestamp[now|currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]"
        ),
    ],
    force: Annotated[
        str | None,
        typer.Option("--force", "-f", help="set the force rollback by timestamp switch[true|false]"),
    ] = None,
    cplus: Annotated[bool, typer.Option("--cplus", "-c", help="reset c++ client offset")] = False,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Reset consumer offset by timestamp(without client restart)."""
    from rmqcli.admin import group as ops
    from rmqcli.cli import admin_format_groups as fmt

    with session(namesrv) as s:
        result = ops.reset_offset_by_time(
            s, group, topic, timestamp, force=True if force is None else java_bool(force), cplus=cplus
        )
    _reset(result, json_out, fmt.reset_offset(result))


def skip_accumulated_message(
    group: Annotated[str, typer.Option("--group", "-g", help="set the consumer group")],
    topic: TopicOpt,
    force: Annotated[
        str | None,
        typer.Option("--force", "-f", help="set the force rollback by timestamp switch[true|false]"),
    ] = None,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Skip all messages that are accumulated (not consumed) currently"""
    from rmqcli.admin import group as ops
    from rmqcli.cli import admin_format_groups as fmt

    with session(namesrv) as s:
        result = ops.reset_offset_by_time(
            s, group, topic, "now", force=True if force is None else java_bool(force)
        )
    _reset(result, json_out, fmt.skip_accumulated(result))


def clone_group_offset(
    src_group: Annotated[str, typer.Option("--srcGroup", "-s", help="set source consumer group")],
    dest_group: Annotated[str, typer.Option("--destGroup", "-d", help="set destination consumer group")],
    topic: TopicOpt,
    offline: Annotated[
        str | None, typer.Option("--offline", "-o", help="the group or the topic is offline")
    ] = None,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """clone offset from other group."""
    from rmqcli.admin import group as ops
    from rmqcli.cli import admin_format_groups as fmt

    with session(namesrv) as s:
        queues = ops.clone_group_offset(s, src_group, dest_group, topic, java_bool(offline))
    if json_out:
        emit_json(
            {
                "srcGroup": src_group.strip(),
                "destGroup": dest_group.strip(),
                "topic": topic.strip(),
                "queues": queues,
            }
        )
    else:
        write(fmt.clone_group_offset(src_group.strip(), dest_group.strip(), topic.strip()))


def stats_all(
    active_topic: Annotated[
        bool, typer.Option("--activeTopic", "-a", help="print active topic only")
    ] = False,
    topic: Annotated[str | None, typer.Option("--topic", "-t", help="print select topic only")] = None,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Topic and Consumer tps stats"""
    from rmqcli.admin import group as ops
    from rmqcli.cli import admin_format_groups as fmt

    with session(namesrv) as s:
        rows = ops.stats_all(s, topic, active_topic)
    emit_json(rows) if json_out else write(fmt.stats_all(rows))


def broker_consume_stats(
    broker_addr: Annotated[str, typer.Option("--brokerAddr", "-b", help="Broker address")],
    timeout_millis: Annotated[
        int, typer.Option("--timeoutMillis", "-t", help="request timeout Millis")
    ] = 50000,
    level: Annotated[int, typer.Option("--level", "-l", help="threshold of print diff")] = 0,
    order: Annotated[str | None, typer.Option("--order", "-o", help="order topic")] = None,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Fetch broker consume stats data"""
    from rmqcli.admin import group as ops
    from rmqcli.cli import admin_format_groups as fmt

    with session(namesrv, need_namesrv=False) as s:
        stats = ops.broker_consume_stats(
            s, broker_addr, is_order=java_bool(order), timeout_millis=timeout_millis, level=level
        )
    if json_out:
        rows = [dict(camel_dict(r), diff=r.diff) for r in stats.rows]
        emit_json({"rows": rows, "totalDiff": stats.total_diff})
    else:
        write(fmt.broker_consume_stats(stats))
