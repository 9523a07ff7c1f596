"""Topic commands of mqadmin: updateTopic, updateTopicPerm, deleteTopic, topicList, topicRoute,
topicStatus, topicClusterList, updateOrderConf, allocateMQ (protocol.md C.2, C.4, C.5; B.2, B.4)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from formats.names import (
    DEFAULT_TOPIC,
    DLQ_PREFIX,
    ORDER_TOPIC_CONFIG,
    PERM_INHERIT,
    PERM_READ,
    PERM_READ_WRITE,
    PERM_WRITE,
    RETRY_PREFIX,
)
from rmqcli.admin.session import AdminSession, masters, target_addrs
from rmqcli.errors import NotFoundError, RmqError, UsageError
from rmqcli.remoting import headers as hd
from rmqcli.remoting.codes import RequestCode, ResponseCode

if TYPE_CHECKING:
    from rmqcli.remoting.json_body import TopicRouteData

SYSFLAG_UNIT, SYSFLAG_UNIT_SUB = 1, 2


def perm_to_string(perm: int) -> str:
    """``PermName.perm2String``: ``RW-`` style flags."""
    return (
        ("R" if perm & PERM_READ else "-")
        + ("W" if perm & PERM_WRITE else "-")
        + ("X" if perm & PERM_INHERIT else "-")
    )


@dataclass
class TopicSettings:
    """The ``TopicConfig`` mqadmin sends with UPDATE_AND_CREATE_TOPIC (17)."""

    topic_name: str
    read_queue_nums: int = 8
    write_queue_nums: int = 8
    perm: int = PERM_READ_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] | None = None  # RocketMQ 5's ``-a``: {"+key": value, "-key": ""}

    def java_string(self) -> str:
        """``TopicConfig.toString()`` (C.4.7); with ``attributes``, 5.1.1's (``, attributes={..}``)."""
        from rmqcli.admin.attributes import map_string

        extra = "" if self.attributes is None else f", attributes={map_string(self.attributes)}"
        return (
            f"TopicConfig [topicName={self.topic_name}, readQueueNums={self.read_queue_nums}, "
            f"writeQueueNums={self.write_queue_nums}, perm={perm_to_string(self.perm)}, "
            f"topicFilterType={self.topic_filter_type}, topicSysFlag={self.topic_sys_flag}, "
            f"order={'true' if self.order else 'false'}{extra}]"
        )


@dataclass
class UpdateTopicResult:
    config: TopicSettings
    brokers: list[str]
    order_conf: str | None = None
    order_scope: str | None = None  # "broker" (-b) or "cluster" (-c)
    warnings: list[str] = field(default_factory=list)  # what a broker did not apply (``-a`` on 4.x)


def _create_topic(session: AdminSession, addr: str, config: TopicSettings) -> None:
    """UPDATE_AND_CREATE_TOPIC; the ``attributes`` field (``AttributeParser.parseToString``) only
    when ``-a`` was given, so a 4.9.x broker sees 4.9.8 mqadmin's header."""
    from rmqcli.admin.attributes import parse_to_string

    header = hd.CreateTopicRequestHeader(
        topic=config.topic_name,
        default_topic=DEFAULT_TOPIC,
        read_queue_nums=config.read_queue_nums,
        write_queue_nums=config.write_queue_nums,
        perm=config.perm,
        topic_filter_type=config.topic_filter_type,
        topic_sys_flag=config.topic_sys_flag,
        order=config.order,
        attributes=None if config.attributes is None else parse_to_string(config.attributes),
    )
    session.call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header)


def _keeps_attributes(session: AdminSession, addr: str, topic: str) -> bool:
    """Whether the broker knows topic attributes: a 4.x broker accepts ``-a`` in
    UPDATE_AND_CREATE_TOPIC and ignores it, and does not support GET_TOPIC_CONFIG (351, 5.x)."""

    response = session.call(
        addr,
        RequestCode.GET_TOPIC_CONFIG,
        hd.GetTopicConfigRequestHeader(topic=topic),
        ok=(ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST, ResponseCode.REQUEST_CODE_NOT_SUPPORTED),
    )
    return response.code != ResponseCode.REQUEST_CODE_NOT_SUPPORTED


def get_order_conf(session: AdminSession, topic: str) -> str | None:
    """GET_KV_CONFIG (101) ``ORDER_TOPIC_CONFIG/<topic>``; None when absent (QUERY_NOT_FOUND)."""

    response = session.call_namesrv(
        RequestCode.GET_KV_CONFIG,
        hd.GetKVConfigRequestHeader(namespace=ORDER_TOPIC_CONFIG, key=topic),
        ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND),
    )
    if response.code != ResponseCode.SUCCESS:
        return None
    return response.ext_fields.get("value")


def put_order_conf(session: AdminSession, topic: str, conf: str) -> None:
    """PUT_KV_CONFIG (100) ``ORDER_TOPIC_CONFIG/<topic>`` on every name server."""

    header = hd.PutKVConfigRequestHeader(namespace=ORDER_TOPIC_CONFIG, key=topic, value=conf)
    for addr in session.namesrv:
        session.call(addr, RequestCode.PUT_KV_CONFIG, header)


def update_topic(
    session: AdminSession,
    topic: str,
    *,
    broker_addr: str | None = None,
    cluster: str | None = None,
    read_queue_nums: int = 8,
    write_queue_nums: int = 8,
    perm: int = PERM_READ_WRITE,
    order: bool = False,
    unit: bool = False,
    has_unit_sub: bool = False,
    attributes: str | None = None,
) -> UpdateTopicResult:
    """``updateTopic``: 17 to ``-b`` or every master of ``-c``; ``-o true`` also writes the order
    conf to the name servers (KV 100; ``-b`` merges this broker's entry into the existing conf).
    ``attributes`` is RocketMQ 5's ``-a`` text (``+message.type=FIFO,-key``), parsed first as
    5.1.1's mqadmin does (a malformed one is refused before anything is sent)."""
    from rmqcli.admin.attributes import ParseError, parse_to_map, parse_to_string

    parsed = None
    if attributes is not None:
        try:
            parsed = parse_to_map(attributes.strip())
        except ParseError as exc:
            raise UsageError(f"-a {attributes!r}: {exc.message}") from None
    flag = (SYSFLAG_UNIT if unit else 0) | (SYSFLAG_UNIT_SUB if has_unit_sub else 0)
    config = TopicSettings(
        topic_name=topic.strip(),
        read_queue_nums=read_queue_nums,
        write_queue_nums=write_queue_nums,
        perm=perm,
        topic_sys_flag=flag,
        order=order,
        attributes=parsed,
    )
    addrs = target_addrs(session, broker_addr, cluster)
    result = UpdateTopicResult(config=config, brokers=[])
    if broker_addr and order:
        name = session.broker_name_of_addr(addrs[0])
        entries = {}
        old = get_order_conf(session, config.topic_name)
        for part in (old or "").split(";"):
            if ":" in part:
                key, _, value = part.partition(":")
                entries[key] = value
        entries[name] = str(write_queue_nums)
        result.order_conf = ";".join(f"{k}:{v}" for k, v in entries.items())
        result.order_scope = "broker"
        put_order_conf(session, config.topic_name, result.order_conf)
    for addr in addrs:
        _create_topic(session, addr, config)
        result.brokers.append(addr)
        if parsed and not _keeps_attributes(session, addr, config.topic_name):
            result.warnings.append(
                f"{addr} does not support topic attributes (a RocketMQ 4.x broker): "
                f"-a {parse_to_string(parsed)} was not applied there"
            )
    if cluster and not broker_addr and order:
        names = session.broker_names_of_cluster(cluster.strip())
        result.order_conf = ";".join(f"{name}:{write_queue_nums}" for name in names)
        result.order_scope = "cluster"
        put_order_conf(session, config.topic_name, result.order_conf)
    return result


@dataclass
class UpdateTopicPermResult:
    config: TopicSettings
    old_perm: int
    new_perm: int
    brokers: list[str]
    unchanged: bool = False


def update_topic_perm(
    session: AdminSession,
    topic: str,
    perm: int,
    *,
    broker_addr: str | None = None,
    cluster: str | None = None,
) -> UpdateTopicPermResult:
    """``updateTopicPerm``: read the route (105), then 17 with the new perm to ``-b`` / ``-c`` masters."""
    topic = topic.strip()
    route = session.route(topic)
    if not route.queue_datas:
        raise NotFoundError(f"topic {topic} has no queue data in its route")
    queue = route.queue_datas[0]
    config = TopicSettings(
        topic_name=topic,
        read_queue_nums=queue.read_queue_nums,
        write_queue_nums=queue.write_queue_nums,
        perm=queue.perm,
        topic_sys_flag=queue.topic_sys_flag,
    )
    old = queue.perm
    result = UpdateTopicPermResult(config=config, old_perm=old, new_perm=perm, brokers=[])
    if perm == old:
        result.unchanged = True
        return result
    addrs = target_addrs(session, broker_addr, cluster)
    config.perm = perm
    for addr in addrs:
        _create_topic(session, addr, config)
        result.brokers.append(addr)
    return result


@dataclass
class DeleteTopicResult:
    topic: str
    cluster: str
    brokers: list[str]
    namesrv: list[str]


def delete_topic(session: AdminSession, topic: str, cluster: str) -> DeleteTopicResult:
    """``deleteTopic``: 106, 215 to every master of the cluster, 216 to every name server."""

    topic, cluster = topic.strip(), cluster.strip()
    result = DeleteTopicResult(topic=topic, cluster=cluster, brokers=[], namesrv=[])
    for addr in session.master_addrs_of_cluster(cluster):
        session.call(addr, RequestCode.DELETE_TOPIC_IN_BROKER, hd.DeleteTopicRequestHeader(topic=topic))
        result.brokers.append(addr)
    header = hd.DeleteTopicFromNamesrvRequestHeader(topic=topic, cluster_name=cluster)
    for addr in session.namesrv:
        session.call(addr, RequestCode.DELETE_TOPIC_IN_NAMESRV, header)
        result.namesrv.append(addr)
    return result


@dataclass
class TopicClusterRow:
    cluster: str
    topic: str
    group: str


@dataclass
class TopicListResult:
    topics: list[str]
    clusters: list[TopicClusterRow] | None = None


def _hashset_order(items: list[str]) -> list[str]:
    """The iteration order of the ``HashSet<String>`` mqadmin decodes the list into (C.4.2)."""
    from formats.javahash import hashmap_order

    return hashmap_order(items)


def topic_list(session: AdminSession, *, cluster_mode: bool = False) -> TopicListResult:
    """``topicList``: 206; with ``-c`` also 106, then per topic 105 + 300 (C.4.2)."""
    from rmqcli.remoting import json_body as jb

    response = session.call_namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    topics = _hashset_order(jb.decode_or_empty(jb.TopicList, response.body).topic_list)
    result = TopicListResult(topics=topics)
    if not cluster_mode:
        return result
    info = session.cluster_info()
    owner = {name: cluster for cluster, names in info.cluster_addr_table.items() for name in names}
    rows: list[TopicClusterRow] = []
    for topic in topics:
        if topic.startswith(RETRY_PREFIX) or topic.startswith(DLQ_PREFIX):
            continue
        cluster, groups = "", []
        route = session.route(topic)
        if route.broker_datas:
            first = route.broker_datas[0]
            cluster = owner.get(first.broker_name, first.cluster)
            addr = next((addr for _, addr in masters(route.broker_datas)), None)
            if addr:
                reply = session.call(
                    addr,
                    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
                    hd.QueryTopicConsumeByWhoRequestHeader(topic=topic),
                )
                groups = _hashset_order(jb.decode_or_empty(jb.GroupList, reply.body).group_list)
        for group in groups or [""]:
            rows.append(TopicClusterRow(cluster=cluster, topic=topic, group=group))
    result.clusters = rows
    return result


def topic_route(session: AdminSession, topic: str) -> TopicRouteData:
    """``topicRoute``: GET_ROUTEINFO_BY_TOPIC (105)."""
    return session.route(topic.strip())


@dataclass
class RouteBrokerRow:
    """One row of ``topicRoute -l`` (C.4.3)."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str]
    read_queue_nums: int
    write_queue_nums: int
    perm: int


def route_rows(route: TopicRouteData) -> list[RouteBrokerRow]:
    """The brokers of a route sorted by name, with their queue data."""
    queues = {q.broker_name: q for q in route.queue_datas}
    rows = []
    for data in sorted(route.broker_datas, key=lambda b: b.broker_name):
        queue = queues.get(data.broker_name)
        rows.append(
            RouteBrokerRow(
                cluster=data.cluster,
                broker_name=data.broker_name,
                broker_addrs=dict(sorted(data.broker_addrs.items())),
                read_queue_nums=queue.read_queue_nums if queue else 0,
                write_queue_nums=queue.write_queue_nums if queue else 0,
                perm=queue.perm if queue else 0,
            )
        )
    return rows


@dataclass
class QueueStatus:
    """One queue of ``topicStatus`` (C.4.4)."""

    broker_name: str
    queue_id: int
    min_offset: int
    max_offset: int
    last_update_timestamp: int


def topic_status(session: AdminSession, topic: str) -> list[QueueStatus]:
    """``topicStatus``: 105, then GET_TOPIC_STATS_INFO (202) to each broker's master, sorted by queue."""
    from rmqcli.remoting import json_body as jb

    topic = topic.strip()
    route = session.route(topic)
    addrs = [addr for _, addr in masters(route.broker_datas)]
    header = hd.GetTopicStatsInfoRequestHeader(topic=topic)
    rows = []
    for response in session.call_each(addrs, RequestCode.GET_TOPIC_STATS_INFO, header):
        if isinstance(response, RmqError):
            raise response
        table = jb.decode_or_empty(jb.TopicStatsTable, response.body)
        for mq, offset in table.offset_table.items():
            rows.append(
                QueueStatus(
                    broker_name=mq.broker_name,
                    queue_id=mq.queue_id,
                    min_offset=offset.min_offset,
                    max_offset=offset.max_offset,
                    last_update_timestamp=offset.last_update_timestamp,
                )
            )
    rows.sort(key=lambda r: (r.broker_name, r.queue_id))
    return rows


def topic_cluster_list(session: AdminSession, topic: str) -> list[str]:
    """``topicClusterList``: the clusters owning a broker of the topic's route (106, 105)."""
    info = session.cluster_info()
    route = session.route(topic.strip())
    names = {b.broker_name for b in route.broker_datas}
    clusters = [c for c, brokers in info.cluster_addr_table.items() if names.intersection(brokers)]
    return _hashset_order(clusters)


@dataclass
class OrderConfResult:
    topic: str
    method: str
    order_conf: str | None


def update_order_conf(
    session: AdminSession, topic: str, method: str, order_conf: str | None
) -> OrderConfResult:
    """``updateOrderConf -m get|put|delete``: KV 101 / 100 / 102 in namespace ORDER_TOPIC_CONFIG."""

    topic, method = topic.strip(), method.strip()
    if method == "get":
        return OrderConfResult(topic, method, get_order_conf(session, topic))
    if method == "put":
        if not order_conf:
            raise UsageError("updateOrderConf -m put needs -v/--orderConf")
        put_order_conf(session, topic, order_conf.strip())
        return OrderConfResult(topic, method, order_conf.strip())
    if method == "delete":
        header = hd.DeleteKVConfigRequestHeader(namespace=ORDER_TOPIC_CONFIG, key=topic)
        for addr in session.namesrv:
            session.call(addr, RequestCode.DELETE_KV_CONFIG, header)
        return OrderConfResult(topic, method, None)
    raise UsageError(f"-m/--method must be get, put or delete, not {method!r}")


def allocate_mq(session: AdminSession, topic: str, ips: list[str]) -> dict[str, list[dict[str, object]]]:
    """``allocateMQ``: the readable queues of the route shared out with ``AllocateMessageQueueAveragely``
    among ``ips``; queues in ``HashSet<MessageQueue>`` order, ips in ``HashMap`` order (C.2)."""
    from formats.javahash import hashmap_order
    from rmqcli.admin.beans import mq_hash

    topic = topic.strip()
    route = session.route(topic)
    mqs = [
        (q.broker_name, i) for q in route.queue_datas if q.perm & PERM_READ for i in range(q.read_queue_nums)
    ]
    all_mqs = hashmap_order(mqs, lambda mq: mq_hash(mq[0], mq[1], topic))
    result: dict[str, list[dict[str, object]]] = {}
    n = len(ips)
    size = len(all_mqs)
    for ip in _hashset_order(list(ips)):
        index = ips.index(ip)
        mod = size % n
        if size <= n:
            average = 1
        else:
            average = size // n + 1 if mod > 0 and index < mod else size // n
        start = index * average if mod > 0 and index < mod else index * average + mod
        count = min(average, size - start)
        result[ip] = [
            {
                "brokerName": all_mqs[(start + k) % size][0],
                "queueId": all_mqs[(start + k) % size][1],
                "topic": topic,
            }
            for k in range(max(count, 0))
        ]
    return result
