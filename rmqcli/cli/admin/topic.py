"""mqadmin's topic commands (``tools.command.topic``): updateTopic, updateTopicPerm, deleteTopic,
topicList, topicRoute, topicStatus, topicClusterList, updateOrderConf, allocateMQ (protocol.md
C.2, C.4). One ``AdminCommand`` each; ``registry.FAMILIES`` names this module."""

from __future__ import annotations

from rmqcli.cli.admin.registry import (
    TOPIC,
    Family,
    Lazy,
    broker_or_cluster,
    broker_or_cluster_options,
    broker_or_cluster_target,
    opt,
    parse_boolean,
    required,
)

topics = Lazy("rmqcli.admin.topic")
topic_text = Lazy("rmqcli.cli.admin.format")
TOPICS = Family(topics, topic_text, "topic")

CREATE_WHICH = broker_or_cluster_options("create topic to")

update_topic = TOPICS.command(
    "updateTopic",
    "Update or create topic",
    (
        TOPIC,
        *CREATE_WHICH,
        opt("attributes", "--attributes", "-a", "attribute(+a=b,+c=d,-e)"),
        opt("read_queue_nums", "--readQueueNums", "-r", "set read queue nums", int, 8),
        opt("write_queue_nums", "--writeQueueNums", "-w", "set write queue nums", int, 8),
        opt("perm", "--perm", "-p", "set topic's permission(2|4|6), intro[2:W 4:R; 6:RW]", int, 6),
        opt("order", "--order", "-o", "set topic's order(true|false)"),
        opt("unit", "--unit", "-u", "is unit topic (true|false)"),
        opt("has_unit_sub", "--hasUnitSub", "-s", "has unit sub (true|false)"),
    ),
    call=lambda s, a: topics.update_topic(
        s,
        a.topic,
        **broker_or_cluster_target(a),
        read_queue_nums=a.read_queue_nums,
        write_queue_nums=a.write_queue_nums,
        perm=a.perm,
        order=parse_boolean(a.order),
        unit=parse_boolean(a.unit),
        has_unit_sub=parse_boolean(a.has_unit_sub),
        attributes=a.attributes,
    ),
    warnings=lambda result: result.warnings,
    check=broker_or_cluster,
    namesrv=lambda a: bool(a.cluster_name) or parse_boolean(a.order),
)

update_topic_perm = TOPICS.command(
    "updateTopicPerm",
    "Update topic perm",
    (
        TOPIC,
        required("perm", "--perm", "-p", "set topic's permission(2|4|6), intro[2:W; 4:R; 6:RW]", int),
        *CREATE_WHICH,
    ),
    call=lambda s, a: topics.update_topic_perm(s, a.topic, a.perm, **broker_or_cluster_target(a)),
    text=lambda result, a: topic_text.update_topic_perm(result, by_broker=bool(a.broker_addr)),
    check=broker_or_cluster,
)

delete_topic = TOPICS.command(
    "deleteTopic",
    "Delete topic from broker and NameServer.",
    (TOPIC, required("cluster_name", "--clusterName", "-c", "delete topic from which cluster")),
)

topic_list = TOPICS.command(
    "topicList",
    "Fetch all topic list from name server",
    (opt("cluster_model", "--clusterModel", "-c", "clusterModel", bool, False),),
    call=lambda s, a: topics.topic_list(s, cluster_mode=a.cluster_model),
    data=lambda result, a: result.clusters if a.cluster_model else result.topics,
)

topic_route = TOPICS.command(
    "topicRoute",
    "Examine topic route info",
    (TOPIC, opt("list_form", "--list", "-l", "Use list format to print data", bool, False)),
    params=("topic",),
    text=lambda route, a: (
        topic_text.topic_route_list(topics.route_rows(route))
        if a.list_form
        else topic_text.topic_route(route)
    ),
    data=lambda route, a: topics.route_rows(route) if a.list_form else route,
)

topic_status = TOPICS.command("topicStatus", "Examine topic Status info", (TOPIC,))

topic_cluster_list = TOPICS.command(
    "topicClusterList", "get cluster info for topic", (TOPIC,), render="lines"
)

update_order_conf = TOPICS.command(
    "updateOrderConf",
    "Create or update or delete order conf",
    (
        TOPIC,
        required("method", "--method", "-m", "option type [eg. put|get|delete]"),
        opt("order_conf", "--orderConf", "-v", "set order conf [eg. brokerName1:num;brokerName2:num]"),
    ),
)

allocate_mq = TOPICS.command(
    "allocateMQ",
    "Allocate MQ",
    (TOPIC, required("ip_list", "--ipList", "-i", "ipList")),
    call=lambda s, a: topics.allocate_mq(s, a.topic, a.ip_list.strip().split(",")),
    data=lambda result, a: {"result": result},
)
