"""Subscription group, connection and offset commands of mqadmin: updateSubGroup, deleteSubGroup,
getConsumerConfig, consumerProgress, consumerConnection, producerConnection, consumerStatus,
resetOffsetByTime, skipAccumulatedMessage, cloneGroupOffset, statsAll, brokerConsumeStats
(PROTOCOL.md C.2, C.4.5, C.4.7, C.5; requests B.3, B.4; bodies B.9)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from formats.names import DLQ_PREFIX, RETRY_PREFIX
from rmqcli.admin import mqclient
from rmqcli.admin.beans import hash_order, mq_key
from rmqcli.admin.session import AdminSession, master_addr, target_addrs
from rmqcli.errors import BrokerError, NetworkError, UsageError
from rmqcli.remoting import headers as hd
from rmqcli.remoting.codes import ResponseCode, version_desc

if TYPE_CHECKING:
    from rmqcli.admin.beans import ConsumerRunningInfo
    from rmqcli.remoting.json_body import (
        ConsumerConnection,
        ProducerConnection,
        SubscriptionGroupConfig,
    )

_NOT_ONLINE = f"{ResponseCode.CONSUMER_NOT_ONLINE.name}({int(ResponseCode.CONSUMER_NOT_ONLINE)})"
NO_CONSUME_STATS = (
    f"{_NOT_ONLINE}: Not found the consumer group consume stats, because return offset table "
    "is empty, maybe the consumer not consume any message"
)
NO_CONNECTION = f"{_NOT_ONLINE}: Not found the consumer group connection"


class ConsumerNotOnline(BrokerError):
    """mqadmin's ``MQClientException(CONSUMER_NOT_ONLINE, …)``: exit 6 like a broker error."""


# --- subscription groups -----------------------------------------------------------------------
@dataclass
class SubGroupResult:
    config: SubscriptionGroupConfig
    brokers: list[str]


def sub_group_string(c: SubscriptionGroupConfig) -> str:
    """``SubscriptionGroupConfig.toString()`` (C.4.7)."""
    b = {True: "true", False: "false"}
    return (
        f"SubscriptionGroupConfig [groupName={c.group_name}, consumeEnable={b[c.consume_enable]}, "
        f"consumeFromMinEnable={b[c.consume_from_min_enable]}, "
        f"consumeBroadcastEnable={b[c.consume_broadcast_enable]}, retryQueueNums={c.retry_queue_nums}, "
        f"retryMaxTimes={c.retry_max_times}, brokerId={c.broker_id}, "
        f"whichBrokerWhenConsumeSlowly={c.which_broker_when_consume_slowly}, "
        f"notifyConsumerIdsChangedEnable={b[c.notify_consumer_ids_changed_enable]}]"
    )


def update_sub_group(
    session: AdminSession,
    group: str,
    *,
    broker_addr: str | None = None,
    cluster: str | None = None,
    consume_enable: bool = True,
    consume_from_min_enable: bool = False,
    consume_broadcast_enable: bool = False,
    retry_queue_nums: int = 1,
    retry_max_times: int = 16,
    broker_id: int = 0,
    which_broker_when_consume_slowly: int = 1,
    notify_consumer_ids_changed_enable: bool = True,
) -> SubGroupResult:
    """``updateSubGroup``: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200) with the config as body to ``-b``
    or every master of ``-c`` (106 first); mqadmin turns broadcast and from-min off unless given."""
    from rmqcli.remoting import json_body as jb
    from rmqcli.remoting.codes import RequestCode

    config = jb.SubscriptionGroupConfig(
        group_name=group.strip(),
        consume_enable=consume_enable,
        consume_from_min_enable=consume_from_min_enable,
        consume_broadcast_enable=consume_broadcast_enable,
        retry_queue_nums=retry_queue_nums,
        retry_max_times=retry_max_times,
        broker_id=broker_id,
        which_broker_when_consume_slowly=which_broker_when_consume_slowly,
        notify_consumer_ids_changed_enable=notify_consumer_ids_changed_enable,
    )
    body = jb.encode(config)
    result = SubGroupResult(config=config, brokers=[])
    for addr in target_addrs(session, broker_addr, cluster):
        session.call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
        result.brokers.append(addr)
    return result


@dataclass
class DeleteSubGroupResult:
    group: str
    brokers: list[str]
    cluster: str | None = None
    deleted_topics: list[str] = field(default_factory=list)


def delete_sub_group(
    session: AdminSession,
    group: str,
    *,
    broker_addr: str | None = None,
    cluster: str | None = None,
    remove_offset: bool = False,
) -> DeleteSubGroupResult:
    """``deleteSubGroup``: DELETE_SUBSCRIPTIONGROUP (207) to ``-b`` or every master of ``-c``; with
    ``-c`` also deleteTopic of ``%RETRY%G`` and ``%DLQ%G`` (215 to masters, 216 to name servers)."""
    from rmqcli.admin import topic as topic_ops
    from rmqcli.remoting.codes import RequestCode

    group = group.strip()
    header = hd.DeleteSubscriptionGroupRequestHeader(group_name=group, remove_offset=remove_offset)
    result = DeleteSubGroupResult(group=group, brokers=[], cluster=None if broker_addr else cluster)
    for addr in target_addrs(session, broker_addr, cluster):
        session.call(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, header)
        result.brokers.append(addr)
    if not broker_addr and cluster:
        for prefix in (RETRY_PREFIX, DLQ_PREFIX):
            topic_ops.delete_topic(session, prefix + group, cluster)
            result.deleted_topics.append(prefix + group)
    return result


@dataclass
class ConsumerConfigInfo:
    cluster: str | None
    broker_name: str
    config: SubscriptionGroupConfig


def get_consumer_config(session: AdminSession, group: str) -> list[ConsumerConfigInfo]:
    """``getConsumerConfig``: 106, then GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) to each broker; the
    brokers that know the group, in ``brokerAddrTable`` order."""
    from formats.javahash import hashmap_order
    from rmqcli.remoting import json_body as jb
    from rmqcli.remoting.codes import RequestCode

    group = group.strip()
    info = session.cluster_info()
    out = []
    for name in hashmap_order(list(info.broker_addr_table)):
        addr = master_addr(info.broker_addr_table[name].broker_addrs)
        if addr is None:
            continue
        response = session.call(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        wrapper = jb.decode(jb.SubscriptionGroupWrapper, response.body) if response.body else None
        config = wrapper.subscription_group_table.get(group) if wrapper else None
        if config is None:
            continue
        cluster = next((c for c, names in info.cluster_addr_table.items() if name in names), None)
        out.append(ConsumerConfigInfo(cluster, name, config))
    return out


# --- consume stats and connections -------------------------------------------------------------
@dataclass
class ProgressRow:
    """One queue of ``consumerProgress -g`` (C.4.5)."""

    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    last_timestamp: int
    client_ip: str | None = None

    @property
    def diff(self) -> int:
        return self.broker_offset - self.consumer_offset


@dataclass
class ConsumeProgress:
    group: str
    rows: list[ProgressRow]
    consume_tps: float

    @property
    def diff_total(self) -> int:
        return sum(r.diff for r in self.rows)


def consume_stats(session: AdminSession, group: str, topic: str | None = None) -> ConsumeProgress:
    """``examineConsumeStats``: 105 ``%RETRY%G``, GET_CONSUME_STATS (208) to each broker of that
    route, tables merged and TPS summed; nothing at all is CONSUMER_NOT_ONLINE (C.4.5)."""
    from rmqcli.remoting import json_body as jb
    from rmqcli.remoting.codes import RequestCode

    route = session.route(RETRY_PREFIX + group)
    table: dict[jb.MessageQueue, jb.OffsetWrapper] = {}
    tps = 0.0
    header = hd.GetConsumeStatsRequestHeader(consumer_group=group, topic=topic)
    for data in route.broker_datas:
        addr = master_addr(data.broker_addrs)
        if addr is None:
            continue
        response = session.call(addr, RequestCode.GET_CONSUME_STATS, header)
        stats = jb.decode(jb.ConsumeStats, response.body) if response.body else jb.ConsumeStats()
        table.update(stats.offset_table)
        tps += stats.consume_tps
    if not table:
        raise ConsumerNotOnline(NO_CONSUME_STATS)
    rows = [
        ProgressRow(
            mq.topic, mq.broker_name, mq.queue_id, w.broker_offset, w.consumer_offset, w.last_timestamp
        )
        for mq, w in sorted(table.items(), key=lambda kv: mq_key(kv[0]))
    ]
    return ConsumeProgress(group=group, rows=rows, consume_tps=tps)


def consumer_connection(
    session: AdminSession, group: str, broker_addr: str | None = None
) -> ConsumerConnection:
    """``examineConsumerConnectionInfo``: GET_CONSUMER_CONNECTION_LIST (203) to ``-b``, else to one
    broker of the ``%RETRY%G`` route (105); no connection is CONSUMER_NOT_ONLINE."""
    import random

    from rmqcli.remoting import json_body as jb
    from rmqcli.remoting.codes import RequestCode

    group = group.strip()
    if broker_addr:
        addr: str | None = broker_addr.strip()
    else:
        datas = session.route(RETRY_PREFIX + group).broker_datas
        addr = master_addr(random.choice(datas).broker_addrs) if datas else None
    result = jb.ConsumerConnection()
    if addr:
        header = hd.GetConsumerConnectionListRequestHeader(consumer_group=group)
        response = session.call(addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, header)
        if response.body:
            result = jb.decode(jb.ConsumerConnection, response.body)
    if not result.connection_set:
        raise ConsumerNotOnline(NO_CONNECTION)
    return result


def producer_connection(session: AdminSession, group: str, topic: str) -> ProducerConnection:
    """``producerConnection``: 105 for the topic, GET_PRODUCER_CONNECTION_LIST (204) to one broker."""
    import random

    from rmqcli.remoting import json_body as jb
    from rmqcli.remoting.codes import RequestCode

    datas = session.route(topic.strip()).broker_datas
    result = jb.ProducerConnection()
    addr = master_addr(random.choice(datas).broker_addrs) if datas else None
    if addr:
        header = hd.GetProducerConnectionListRequestHeader(producer_group=group.strip())
        response = session.call(addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, header)
        if response.body:
            result = jb.decode(jb.ProducerConnection, response.body)
    if not result.connection_set:
        raise BrokerError("Not found the producer group connection")
    return result


def running_info(
    session: AdminSession, group: str, client_id: str, jstack: bool = False
) -> ConsumerRunningInfo:
    """GET_CONSUMER_RUNNING_INFO (307) through a broker of ``%RETRY%G`` (the broker asks the client);
    three times the usual timeout, as ``DefaultMQAdminExtImpl`` waits for relayed requests."""
    from rmqcli.admin.beans import ConsumerRunningInfo
    from rmqcli.remoting import json_body as jb
    from rmqcli.remoting.codes import RequestCode

    datas = session.route(RETRY_PREFIX + group).broker_datas
    addr = next((a for a in (master_addr(d.broker_addrs) for d in datas) if a), None)
    if addr is None:
        raise BrokerError(f"no broker in the route of {RETRY_PREFIX}{group}")
    header = hd.GetConsumerRunningInfoRequestHeader(
        consumer_group=group, client_id=client_id, jstack_enable=jstack
    )
    response = session.call(addr, RequestCode.GET_CONSUMER_RUNNING_INFO, header, timeout=session.timeout * 3)
    return jb.decode(ConsumerRunningInfo, response.body) if response.body else ConsumerRunningInfo()


def consumer_progress(session: AdminSession, group: str, show_client_ip: bool = False) -> ConsumeProgress:
    """``consumerProgress -g``: consume stats sorted by queue; ``-s true`` adds the client owning
    each queue from every client's running info (203, 307)."""
    group = group.strip()
    progress = consume_stats(session, group)
    if show_client_ip:
        owners: dict[tuple[str, str, int], str] = {}
        try:
            connection = consumer_connection(session, group)
        except ConsumerNotOnline:
            connection = None
        for conn in connection.connection_set if connection else []:
            try:
                info = running_info(session, group, conn.client_id)
            except (BrokerError, NetworkError):
                continue
            ip = conn.client_id.split("@")[0] if "@" in conn.client_id else "N/A"
            for mq in info.mq_table:
                owners[mq_key(mq)] = ip
        for row in progress.rows:
            row.client_ip = owners.get((row.topic, row.broker_name, row.queue_id))
    return progress


@dataclass
class GroupSummary:
    """One row of ``consumerProgress`` without ``-g`` (C.4.5)."""

    group: str
    count: int = 0
    version: int = 0
    consume_type: str | None = None
    message_model: str | None = None
    consume_tps: int = 0
    diff_total: int = 0

    @property
    def version_desc(self) -> str:
        return version_desc(self.version) if self.count else "OFFLINE"

    @property
    def type_desc(self) -> str:
        if not self.count:
            return ""
        return "PULL" if self.consume_type == "CONSUME_ACTIVELY" else "PUSH"

    @property
    def model_desc(self) -> str:
        if self.count and self.consume_type == "CONSUME_PASSIVELY":
            return self.message_model or ""
        return ""


def consumer_progress_all(session: AdminSession) -> list[GroupSummary]:
    """``consumerProgress`` without ``-g``: one row per ``%RETRY%G`` topic of the name server's list
    (206), in list order; stats and connection failures leave the row's zeros (C.4.5, C.5)."""
    from rmqcli.remoting import json_body as jb
    from rmqcli.remoting.codes import RequestCode

    response = session.call_namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    topics = jb.decode(jb.TopicList, response.body).topic_list if response.body else []
    from formats.javahash import hashmap_order

    out = []
    for topic in hashmap_order(topics):
        if not topic.startswith(RETRY_PREFIX):
            continue
        summary = GroupSummary(group=topic[len(RETRY_PREFIX) :])
        try:
            stats = consume_stats(session, summary.group)
            summary.consume_tps = int(stats.consume_tps)
            summary.diff_total = stats.diff_total
        except (BrokerError, NetworkError):
            pass
        try:
            conn = consumer_connection(session, summary.group)
            summary.count = len(conn.connection_set)
            summary.message_model = conn.message_model
            summary.consume_type = conn.consume_type
            summary.version = min(c.version for c in conn.connection_set)
        except (BrokerError, NetworkError):
            pass
        out.append(summary)
    return out


@dataclass
class ConsumerStatusRow:
    index: int
    client_id: str
    version: int
    path: str


@dataclass
class ConsumerStatusResult:
    """``consumerStatus``: the table of clients (files written) and the analysis, or one client's info."""

    rows: list[ConsumerStatusRow] = field(default_factory=list)
    infos: dict[str, ConsumerRunningInfo] = field(default_factory=dict)
    same_subscription: bool | None = None
    rebalance_ok: bool | None = None
    client: ConsumerRunningInfo | None = None


def consumer_status(
    session: AdminSession,
    group: str,
    *,
    client_id: str | None = None,
    broker_addr: str | None = None,
    jstack: bool = False,
    directory: str = ".",
) -> ConsumerStatusResult:
    """``consumerStatus``: 203 (``-b`` or the retry route), then 307 per client; each client's
    ``formatString`` is written to ``<now>/<clientId>`` as mqadmin does. ``-i`` asks one client."""
    import os
    import time

    group = group.strip()
    connection = consumer_connection(session, group, broker_addr)
    result = ConsumerStatusResult()
    if client_id:
        result.client = running_info(session, group, client_id.strip(), jstack)
        return result
    now = int(time.time() * 1000)
    index = 1
    for conn in connection.connection_set:
        try:
            info = running_info(session, group, conn.client_id, jstack)
        except (BrokerError, NetworkError):
            continue
        from rmqcli.admin.beans import running_info_string

        path = f"{now}/{conn.client_id}"
        full = os.path.join(directory, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as fh:
            fh.write(running_info_string(info))
        result.infos[conn.client_id] = info
        result.rows.append(ConsumerStatusRow(index, conn.client_id, conn.version, path))
        index += 1
    if result.infos:
        subs = [
            sorted((s.topic, s.sub_string) for s in info.subscription_set) for info in result.infos.values()
        ]
        result.same_subscription = all(s == subs[0] for s in subs)
        result.rebalance_ok = result.same_subscription
    return result


# --- offsets -----------------------------------------------------------------------------------
def parse_timestamp(text: str, *, allow_now: bool = False) -> int:
    """``now`` (-1), epoch millis, or ``yyyy-MM-dd#HH:mm:ss:SSS`` in local time (C.2)."""
    value = text.strip()
    if allow_now and value == "now":
        return -1
    try:
        return int(value)
    except ValueError:
        pass
    try:
        moment = datetime.strptime(value, "%Y-%m-%d#%H:%M:%S:%f")
    except ValueError:
        raise UsageError(f"bad timestamp {text!r}: expected millis or yyyy-MM-dd#HH:mm:ss:SSS") from None
    return int(moment.timestamp()) * 1000 + moment.microsecond // 1000


@dataclass
class ResetRow:
    broker_name: str
    queue_id: int
    offset: int


@dataclass
class RollbackRow:
    """``RollbackStats`` of the offline method."""

    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    timestamp_offset: int
    rollback_offset: int


@dataclass
class ResetResult:
    group: str
    topic: str
    force: bool
    timestamp_text: str
    timestamp: int
    offline: bool = False
    rows: list[ResetRow] = field(default_factory=list)
    rollback: list[RollbackRow] = field(default_factory=list)


def reset_offset_old(
    session: AdminSession, group: str, topic: str, timestamp: int, force: bool
) -> list[RollbackRow]:
    """``resetOffsetByTimestampOld``: per broker of the route 208 (else 202 for the queues), then per
    queue 30 (timestamp -1) or 29, and UPDATE_CONSUMER_OFFSET (15) when forced or rewinding."""
    from rmqcli.remoting import json_body as jb
    from rmqcli.remoting.codes import RequestCode

    route = session.route(topic)
    read_nums = {q.broker_name: q.read_queue_nums for q in route.queue_datas}
    out = []
    for data in route.broker_datas:
        addr = master_addr(data.broker_addrs)
        if addr is None:
            continue
        stats_header = hd.GetConsumeStatsRequestHeader(consumer_group=group)
        response = session.call(addr, RequestCode.GET_CONSUME_STATS, stats_header)
        stats = jb.decode(jb.ConsumeStats, response.body) if response.body else jb.ConsumeStats()
        queues = [(mq, w) for mq, w in stats.offset_table.items() if mq.topic == topic]
        queues = [(mq, stats.offset_table[mq]) for mq in hash_order(mq for mq, _ in queues)]
        if not queues:
            topic_header = hd.GetTopicStatsInfoRequestHeader(topic=topic)
            reply = session.call(addr, RequestCode.GET_TOPIC_STATS_INFO, topic_header)
            table = jb.decode(jb.TopicStatsTable, reply.body) if reply.body else jb.TopicStatsTable()
            for i in range(read_nums.get(data.broker_name, 0)):
                mq = jb.MessageQueue(broker_name=data.broker_name, queue_id=i, topic=topic)
                stat = table.offset_table.get(mq, jb.TopicOffset())
                queues.append(
                    (mq, jb.OffsetWrapper(broker_offset=stat.max_offset, consumer_offset=stat.min_offset))
                )
        for mq, wrapper in queues:
            if timestamp == -1:
                target = mqclient.max_offset(session, addr, topic, mq.queue_id)
            else:
                target = mqclient.search_offset(session, addr, topic, mq.queue_id, timestamp)
            row = RollbackRow(
                mq.broker_name, mq.queue_id, wrapper.broker_offset, wrapper.consumer_offset, target,
                wrapper.consumer_offset,
            )  # fmt: skip
            if force or target <= wrapper.consumer_offset:
                row.rollback_offset = target
                update = hd.UpdateConsumerOffsetRequestHeader(
                    consumer_group=group,
                    topic=topic,
                    queue_id=mq.queue_id,
                    commit_offset=target,
                    bname=mq.broker_name,
                )
                session.call(addr, RequestCode.UPDATE_CONSUMER_OFFSET, update)
            out.append(row)
    return out


def reset_offset_by_time(
    session: AdminSession,
    group: str,
    topic: str,
    timestamp_text: str,
    *,
    force: bool = True,
    cplus: bool = False,
) -> ResetResult:
    """``resetOffsetByTime``: INVOKE_BROKER_TO_RESET_OFFSET (222) to each broker of the topic's route;
    a CONSUMER_NOT_ONLINE answer switches to the offline method (``reset_offset_old``, C.5)."""
    from rmqcli.remoting import json_body as jb
    from rmqcli.remoting.client import expect
    from rmqcli.remoting.codec import RemotingCommand
    from rmqcli.remoting.codes import RequestCode

    group, topic = group.strip(), topic.strip()
    timestamp = parse_timestamp(timestamp_text, allow_now=True)
    result = ResetResult(group, topic, force, timestamp_text.strip(), timestamp)
    route = session.route(topic)
    table: dict[jb.MessageQueue, int] = {}
    header = hd.ResetOffsetRequestHeader(topic=topic, group=group, timestamp=timestamp, is_force=force)
    for data in route.broker_datas:
        addr = master_addr(data.broker_addrs)
        if addr is None:
            continue
        request = RemotingCommand.request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header)
        if cplus:
            from formats.remoting import LanguageCode

            request.language = LanguageCode.CPP
        response = session.client.invoke(addr, request, session.timeout)
        if response.code == ResponseCode.CONSUMER_NOT_ONLINE:
            result.offline = True
            result.rollback = reset_offset_old(session, group, topic, timestamp, force)
            return result
        expect(response, addr)
        if response.body:
            table.update(jb.decode(jb.ResetOffsetBody, response.body).offset_table)
    result.rows = [ResetRow(mq.broker_name, mq.queue_id, table[mq]) for mq in hash_order(table)]
    return result


def clone_group_offset(
    session: AdminSession, src_group: str, dest_group: str, topic: str, offline: bool = False
) -> list[str]:
    """``cloneGroupOffset``: the source group's consume stats (105 + 208), then 105 for the topic and
    UPDATE_CONSUMER_OFFSET (15) of every queue with an offset >= 0 for the destination group.
    (``-o`` is parsed but, as in mqadmin 4.9.7, not used.)"""
    from rmqcli.remoting.codes import RequestCode

    src, dest, topic = src_group.strip(), dest_group.strip(), topic.strip()
    stats = consume_stats(session, src)
    route = session.route(topic)
    addrs = {d.broker_name: master_addr(d.broker_addrs) for d in route.broker_datas}
    done = []
    for row in stats.rows:
        addr = addrs.get(row.broker_name)
        if row.consumer_offset < 0 or addr is None:
            continue
        header = hd.UpdateConsumerOffsetRequestHeader(
            consumer_group=dest,
            topic=row.topic,
            queue_id=row.queue_id,
            commit_offset=row.consumer_offset,
            bname=row.broker_name,
        )
        session.call(addr, RequestCode.UPDATE_CONSUMER_OFFSET, header)
        done.append(f"{row.topic}/{row.broker_name}/{row.queue_id}")
    return done


# --- stats -------------------------------------------------------------------------------------
@dataclass
class StatsRow:
    """One row of ``statsAll``; ``group`` None means NO_CONSUMER."""

    topic: str
    group: str | None
    accumulation: int
    in_tps: float
    out_tps: float
    in_msg_24h: int
    out_msg_24h: int


def _sum_24h(stats: object) -> int:
    for item in (stats.stats_day, stats.stats_hour, stats.stats_minute):  # type: ignore[attr-defined]
        if item.sum:
            return item.sum
    return 0


def _broker_stats(session: AdminSession, addr: str, name: str, key: str) -> tuple[float, int]:
    from rmqcli.remoting import json_body as jb
    from rmqcli.remoting.codes import RequestCode

    try:
        header = hd.ViewBrokerStatsDataRequestHeader(stats_name=name, stats_key=key)
        response = session.call(addr, RequestCode.VIEW_BROKER_STATS_DATA, header)
    except (BrokerError, NetworkError):
        return 0.0, 0
    data = jb.decode(jb.BrokerStatsData, response.body) if response.body else jb.BrokerStatsData()
    return data.stats_minute.tps, _sum_24h(data)


def stats_all(session: AdminSession, topic: str | None = None, active_only: bool = False) -> list[StatsRow]:
    """``statsAll``: 206; per topic (not retry/DLQ) 105, 300, VIEW_BROKER_STATS_DATA (315) to each
    master and the consume stats of each group (105 + 208); failing topics are skipped (C.4.7)."""
    from formats.javahash import hashmap_order
    from rmqcli.remoting import json_body as jb
    from rmqcli.remoting.codes import RequestCode

    response = session.call_namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    topics = jb.decode(jb.TopicList, response.body).topic_list if response.body else []
    rows: list[StatsRow] = []
    for name in hashmap_order(topics):
        if name.startswith(RETRY_PREFIX) or name.startswith(DLQ_PREFIX):
            continue
        if topic and name != topic.strip():
            continue
        try:
            rows.extend(_topic_stats(session, name, active_only))
        except (BrokerError, NetworkError):
            continue
    return rows


def _topic_stats(session: AdminSession, topic: str, active_only: bool) -> list[StatsRow]:
    from rmqcli.remoting import json_body as jb
    from rmqcli.remoting.codes import RequestCode

    route = session.route(topic)
    masters = [d.broker_addrs[0] for d in route.broker_datas if 0 in d.broker_addrs]
    groups: list[str] = []
    if route.broker_datas:
        first = master_addr(route.broker_datas[0].broker_addrs)
        if first:
            header = hd.QueryTopicConsumeByWhoRequestHeader(topic=topic)
            reply = session.call(first, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, header)
            groups = jb.decode(jb.GroupList, reply.body).group_list if reply.body else []
            from formats.javahash import hashmap_order

            groups = hashmap_order(groups)
    in_tps, in_24h = 0.0, 0
    for addr in masters:
        tps, total = _broker_stats(session, addr, "TOPIC_PUT_NUMS", topic)
        in_tps, in_24h = in_tps + tps, in_24h + total
    rows = []
    for group in groups:
        out_tps, out_24h = 0.0, 0
        for addr in masters:
            tps, total = _broker_stats(session, addr, "GROUP_GET_NUMS", f"{topic}@{group}")
            out_tps, out_24h = out_tps + tps, out_24h + total
        accumulate = 0
        try:
            accumulate = max(consume_stats(session, group, topic).diff_total, 0)
        except (BrokerError, NetworkError):
            pass
        if not active_only or in_24h > 0 or out_24h > 0:
            rows.append(StatsRow(topic, group, accumulate, in_tps, out_tps, in_24h, out_24h))
    if not groups and (not active_only or in_24h > 0):
        rows.append(StatsRow(topic, None, 0, in_tps, 0.0, in_24h, 0))
    return rows


@dataclass
class BrokerConsumeRow:
    topic: str
    group: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    last_timestamp: int

    @property
    def diff(self) -> int:
        return self.broker_offset - self.consumer_offset


@dataclass
class BrokerConsumeStats:
    rows: list[BrokerConsumeRow]
    total_diff: int


def broker_consume_stats(
    session: AdminSession,
    broker_addr: str,
    *,
    is_order: bool = False,
    timeout_millis: int = 50000,
    level: int = 0,
) -> BrokerConsumeStats:
    """``brokerConsumeStats``: GET_BROKER_CONSUME_STATS (317); rows with ``diff >= level`` and a
    last timestamp, queues sorted within each group's stats (C.2)."""
    from rmqcli.remoting import json_body as jb
    from rmqcli.remoting.client import expect
    from rmqcli.remoting.codes import RequestCode

    addr = broker_addr.strip()
    header = hd.GetConsumeStatsInBrokerHeader(is_order=is_order)
    request = session.request(RequestCode.GET_BROKER_CONSUME_STATS, header)
    response = expect(session.client.invoke(addr, request, max(timeout_millis / 1000, 0.1)), addr)
    stats = jb.decode(jb.ConsumeStatsList, response.body) if response.body else jb.ConsumeStatsList()
    rows = []
    for mapping in stats.consume_stats_list:
        for group, items in mapping.items():
            for item in items:
                for mq in sorted(item.offset_table, key=mq_key):
                    w = item.offset_table[mq]
                    row = BrokerConsumeRow(
                        mq.topic, group, mq.broker_name, mq.queue_id, w.broker_offset, w.consumer_offset,
                        w.last_timestamp,
                    )  # fmt: skip
                    if row.diff >= level and w.last_timestamp > 0:
                        rows.append(row)
    return BrokerConsumeStats(rows=rows, total_diff=stats.total_diff)
