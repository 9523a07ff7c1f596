"""Statistics: statsAll (put and get rates, accumulation per topic and group) and
brokerConsumeStats (protocol.md C.2, C.4.7; requests B.4; bodies B.9)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from formats.names import DLQ_PREFIX, RETRY_PREFIX
from rmqcli.admin.beans import mq_key
from rmqcli.admin.group.progress import consume_stats
from rmqcli.admin.group.subscription import consuming_groups
from rmqcli.admin.session import AdminSession
from rmqcli.errors import BrokerError, NetworkError
from rmqcli.remoting import headers as hd
from rmqcli.remoting.codes import RequestCode

if TYPE_CHECKING:
    from rmqcli.remoting.json_body import BrokerStatsData


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


def broker_stats(session: AdminSession, addr: str, name: str, key: str) -> BrokerStatsData:
    """VIEW_BROKER_STATS_DATA (315, B.4): the broker's ``name`` statistics of ``key``. A broker
    that has none yet answers SYSTEM_ERROR ``The stats <...> not exist``: a ``BrokerError``."""
    from rmqcli.remoting import json_body as jb

    header = hd.ViewBrokerStatsDataRequestHeader(stats_name=name, stats_key=key)
    response = session.call(addr, RequestCode.VIEW_BROKER_STATS_DATA, header)
    return jb.decode_or_empty(jb.BrokerStatsData, response.body)


def _broker_stats(session: AdminSession, addr: str, name: str, key: str) -> tuple[float, int]:
    """The minute's TPS and the 24 hours' sum; zeros when the broker has none or did not answer."""
    try:
        data = broker_stats(session, addr, name, key)
    except (BrokerError, NetworkError):
        return 0.0, 0
    return data.stats_minute.tps, _sum_24h(data)


def stats_all(session: AdminSession, topic: str | None = None, active_only: bool = False) -> list[StatsRow]:
    """``statsAll``: 206; per topic (not retry/DLQ) 105, 300, VIEW_BROKER_STATS_DATA (315) to each
    master and the consume stats of each group (105 + 208); failing topics are skipped (C.4.7)."""
    from formats.javahash import hashmap_order
    from rmqcli.remoting import json_body as jb

    response = session.call_namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    topics = jb.decode_or_empty(jb.TopicList, response.body).topic_list
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
    route = session.route(topic)
    masters = [d.broker_addrs[0] for d in route.broker_datas if 0 in d.broker_addrs]
    groups = consuming_groups(session, topic, route)
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

    addr = broker_addr.strip()
    header = hd.GetConsumeStatsInBrokerHeader(is_order=is_order)
    request = session.request(RequestCode.GET_BROKER_CONSUME_STATS, header)
    response = expect(session.client.invoke(addr, request, max(timeout_millis / 1000, 0.1)), addr)
    stats = jb.decode_or_empty(jb.ConsumeStatsList, response.body)
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
