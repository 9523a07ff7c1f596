"""mqadmin topic commands: updateTopic, updateTopicPerm, deleteTopic, topicList, topicRoute,
topicStatus, topicClusterList, updateOrderConf, allocateMQ (PROTOCOL.md C.2, C.4)."""

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
from rmqcli.errors import UsageError


def update_topic(
    topic: TopicOpt,
    broker_addr: Annotated[
        str | None, typer.Option("--brokerAddr", "-b", help="create topic to which broker")
    ] = None,
    cluster_name: Annotated[
        str | None, typer.Option("--clusterName", "-c", help="create topic to which cluster")
    ] = None,
    read_queue_nums: Annotated[int, typer.Option("--readQueueNums", "-r", help="set read queue nums")] = 8,
    write_queue_nums: Annotated[int, typer.Option("--writeQueueNums", "-w", help="set write queue nums")] = 8,
    perm: Annotated[
        int, typer.Option("--perm", "-p", help="set topic's permission(2|4|6), intro[2:W 4:R; 6:RW]")
    ] = 6,
    order: Annotated[str | None, typer.Option("--order", "-o", help="set topic's order(true|false)")] = None,
    unit: Annotated[str | None, typer.Option("--unit", "-u", help="is unit topic (true|false)")] = None,
    has_unit_sub: Annotated[
        str | None, typer.Option("--hasUnitSub", "-s", help="has unit sub (true|false)")
    ] = None,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Update or create topic"""
    from rmqcli.admin import topic as ops
    from rmqcli.cli import admin_format as fmt

    if not broker_addr and not cluster_name:
        raise UsageError("one of -b/--brokerAddr or -c/--clusterName is required")
    with session(namesrv, need_namesrv=bool(cluster_name) or java_bool(order)) as s:
        result = ops.update_topic(
            s,
            topic,
            broker_addr=broker_addr,
            cluster=None if broker_addr else cluster_name,
            read_queue_nums=read_queue_nums,
            write_queue_nums=write_queue_nums,
            perm=perm,
            order=java_bool(order),
            unit=java_bool(unit),
            has_unit_sub=java_bool(has_unit_sub),
        )
    emit_json(result) if json_out else write(fmt.update_topic(result))


def update_topic_perm(
    topic: TopicOpt,
    perm: Annotated[
        int, typer.Option("--perm", "-p", help="set topic's permission(2|4|6), intro[2:W; 4:R; 6:RW]")
    ],
    broker_addr: Annotated[
        str | None, typer.Option("--brokerAddr", "-b", help="create topic to which broker")
    ] = None,
    cluster_name: Annotated[
        str | None, typer.Option("--clusterName", "-c", help="create topic to which cluster")
    ] = None,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Update topic perm"""
    from rmqcli.admin import topic as ops
    from rmqcli.cli import admin_format as fmt

    if not broker_addr and not cluster_name:
        raise UsageError("one of -b/--brokerAddr or -c/--clusterName is required")
    with session(namesrv) as s:
        result = ops.update_topic_perm(
            s, topic, perm, broker_addr=broker_addr, cluster=None if broker_addr else cluster_name
        )
    emit_json(result) if json_out else write(fmt.update_topic_perm(result, by_broker=bool(broker_addr)))


def delete_topic(
    topic: TopicOpt,
    cluster_name: Annotated[str, typer.Option("--clusterName", "-c", help="delete topic from which cluster")],
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Delete topic from broker and NameServer."""
    from rmqcli.admin import topic as ops
    from rmqcli.cli import admin_format as fmt

    with session(namesrv) as s:
        result = ops.delete_topic(s, topic, cluster_name)
    emit_json(result) if json_out else write(fmt.delete_topic(result))


def topic_list(
    cluster_model: Annotated[bool, typer.Option("--clusterModel", "-c", help="clusterModel")] = False,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Fetch all topic list from name server"""
    from rmqcli.admin import topic as ops
    from rmqcli.cli import admin_format as fmt

    with session(namesrv) as s:
        result = ops.topic_list(s, cluster_mode=cluster_model)
    if json_out:
        emit_json(result.clusters if cluster_model else result.topics)
    else:
        write(fmt.topic_list(result))


def topic_route(
    topic: TopicOpt,
    list_form: Annotated[bool, typer.Option("--list", "-l", help="Use list format to print data")] = False,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Examine topic route info"""
    from rmqcli.admin import topic as ops
    from rmqcli.cli import admin_format as fmt

    with session(namesrv) as s:
        route = ops.topic_route(s, topic)
    if json_out:
        emit_json(ops.route_rows(route) if list_form else route)
    elif list_form:
        write(fmt.topic_route_list(ops.route_rows(route)))
    else:
        write(fmt.topic_route(route))


def topic_status(topic: TopicOpt, namesrv: NamesrvOpt = None, json_out: JsonOpt = False) -> None:
    """Examine topic Status info"""
    from rmqcli.admin import topic as ops
    from rmqcli.cli import admin_format as fmt

    with session(namesrv) as s:
        rows = ops.topic_status(s, topic)
    emit_json(rows) if json_out else write(fmt.topic_status(rows))


def topic_cluster_list(topic: TopicOpt, namesrv: NamesrvOpt = None, json_out: JsonOpt = False) -> None:
    """get cluster info for topic"""
    from rmqcli.admin import topic as ops
    from rmqcli.cli import admin_format as fmt

    with session(namesrv) as s:
        clusters = ops.topic_cluster_list(s, topic)
    emit_json(clusters) if json_out else write(fmt.lines(clusters))


def update_order_conf(
    topic: TopicOpt,
    method: Annotated[str, typer.Option("--method", "-m", help="option type [eg. put|get|delete]")],
    order_conf: Annotated[
        str | None,
        typer.Option("--orderConf", "-v", help="set order conf [eg. brokerName1:num;brokerName2:num]"),
    ] = None,
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Create or update or delete order conf"""
    from rmqcli.admin import topic as ops
    from rmqcli.cli import admin_format as fmt

    with session(namesrv) as s:
        result = ops.update_order_conf(s, topic, method, order_conf)
    emit_json(result) if json_out else write(fmt.update_order_conf(result))


def allocate_mq(
    topic: TopicOpt,
    ip_list: Annotated[str, typer.Option("--ipList", "-i", help="ipList")],
    namesrv: NamesrvOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Allocate MQ"""
    from rmqcli.admin import topic as ops
    from rmqcli.cli import admin_format as fmt

    with session(namesrv) as s:
        result = ops.allocate_mq(s, topic, ip_list.strip().split(","))
    emit_json({"result": result}) if json_out else write(fmt.allocate_mq(result))
