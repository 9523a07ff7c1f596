"""Consume progress: the consume stats of a group (``examineConsumeStats``) and consumerProgress,
with and without ``-g`` (protocol.md C.4.5, C.5; requests B.4; bodies B.9)."""

from __future__ import annotations

from dataclasses import dataclass

from formats.names import RETRY_PREFIX
from rmqcli.admin.beans import mq_key
from rmqcli.admin.group.clients import (
    NOT_ONLINE,
    ConsumerNotOnline,
    consumer_connection,
    running_info,
)
from rmqcli.admin.session import AdminSession, masters
from rmqcli.errors import BrokerError, NetworkError
from rmqcli.remoting import headers as hd
from rmqcli.remoting.codes import RequestCode, version_desc

NO_CONSUME_STATS = (
    f"{NOT_ONLINE}: Not found the consumer group consume stats, because return offset table "
    "is empty, maybe the consumer not consume any message"
)


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

    route = session.route(RETRY_PREFIX + group)
    table: dict[jb.MessageQueue, jb.OffsetWrapper] = {}
    tps = 0.0
    header = hd.GetConsumeStatsRequestHeader(consumer_group=group, topic=topic)
    for _, addr in masters(route.broker_datas):
        response = session.call(addr, RequestCode.GET_CONSUME_STATS, header)
        stats = jb.decode_or_empty(jb.ConsumeStats, response.body)
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

    response = session.call_namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    topics = jb.decode_or_empty(jb.TopicList, response.body).topic_list
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
