"""Consumer offsets: resetOffsetByTime (online, else the offline method), skipAccumulatedMessage,
cloneGroupOffset, and mqadmin's timestamps (protocol.md C.2, C.5; requests B.3, B.4)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from rmqcli.admin import mqclient
from rmqcli.admin.beans import hash_order
from rmqcli.admin.group.progress import consume_stats
from rmqcli.admin.session import AdminSession, masters
from rmqcli.errors import UsageError
from rmqcli.remoting import headers as hd
from rmqcli.remoting.codes import RequestCode, ResponseCode


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

    route = session.route(topic)
    read_nums = {q.broker_name: q.read_queue_nums for q in route.queue_datas}
    out = []
    for data, addr in masters(route.broker_datas):
        stats_header = hd.GetConsumeStatsRequestHeader(consumer_group=group)
        response = session.call(addr, RequestCode.GET_CONSUME_STATS, stats_header)
        stats = jb.decode_or_empty(jb.ConsumeStats, response.body)
        queues = [(mq, w) for mq, w in stats.offset_table.items() if mq.topic == topic]
        queues = [(mq, stats.offset_table[mq]) for mq in hash_order(mq for mq, _ in queues)]
        if not queues:
            topic_header = hd.GetTopicStatsInfoRequestHeader(topic=topic)
            reply = session.call(addr, RequestCode.GET_TOPIC_STATS_INFO, topic_header)
            table = jb.decode_or_empty(jb.TopicStatsTable, reply.body)
            for i in range(read_nums.get(data.broker_name, 0)):
                mq = jb.MessageQueue(broker_name=data.broker_name, queue_id=i, topic=topic)
                stat = table.offset_table.get(mq, jb.TopicOffset())
                queues.append(
                    (mq, jb.OffsetWrapper(broker_offset=stat.max_offset, consumer_offset=stat.min_offset))
                )
        for mq, wrapper in queues:
            if timestamp == -1:
                target = mqclient.max_offset(session, addr, topic, mq.queue_id, mq.broker_name)
            else:
                target = mqclient.search_offset(session, addr, topic, mq.queue_id, timestamp, mq.broker_name)
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

    group, topic = group.strip(), topic.strip()
    timestamp = parse_timestamp(timestamp_text, allow_now=True)
    result = ResetResult(group, topic, force, timestamp_text.strip(), timestamp)
    route = session.route(topic)
    table: dict[jb.MessageQueue, int] = {}
    header = hd.ResetOffsetRequestHeader(topic=topic, group=group, timestamp=timestamp, is_force=force)
    for _, addr in masters(route.broker_datas):
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
        table.update(jb.decode_or_empty(jb.ResetOffsetBody, response.body).offset_table)
    result.rows = [ResetRow(mq.broker_name, mq.queue_id, table[mq]) for mq in hash_order(table)]
    return result


@dataclass
class QueueResetResult:
    """5.1.1's ``resetOffsetByTime -b -q``: one queue of one broker."""

    group: str
    topic: str
    queue_id: int
    broker_addr: str
    timestamp_text: str
    timestamp: int
    offset: int
    applied: bool  # mqadmin resets only to an offset above 0


def reset_offset_by_queue(
    session: AdminSession,
    broker_addr: str,
    group: str,
    topic: str,
    queue_id: int,
    timestamp_text: str,
    offset: int | None = None,
) -> QueueResetResult:
    """5.1.1's ``resetOffsetByTime`` with ``-b`` and ``-q``: the offset (``-o``, else the queue's
    offset of the timestamp, SEARCH_OFFSET_BY_TIMESTAMP; "now" is the current time here), then,
    when above 0 (``resetOffsetByQueueId``), UPDATE_CONSUMER_OFFSET (15) and
    INVOKE_BROKER_TO_RESET_OFFSET (222) with ``queueId`` and ``offset``: a broker with
    ``useServerSideResetOffset`` keeps it for the queue's next pull or POP."""
    import time

    group, topic, text = group.strip(), topic.strip(), timestamp_text.strip()
    timestamp = int(time.time() * 1000) if text == "now" else parse_timestamp(text)
    target = offset
    if target is None:
        target = mqclient.search_offset(session, broker_addr, topic, queue_id, timestamp)
    result = QueueResetResult(group, topic, queue_id, broker_addr, text, timestamp, target, target > 0)
    if result.applied:
        update = hd.UpdateConsumerOffsetRequestHeader(
            consumer_group=group, topic=topic, queue_id=queue_id, commit_offset=target
        )
        session.call(broker_addr, RequestCode.UPDATE_CONSUMER_OFFSET, update)
        header = hd.ResetOffsetRequestHeader(
            topic=topic, group=group, timestamp=0, is_force=False, queue_id=queue_id, offset=target
        )
        session.call(broker_addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header)
    return result


def clone_group_offset(
    session: AdminSession, src_group: str, dest_group: str, topic: str, offline: bool = False
) -> list[str]:
    """``cloneGroupOffset``: the source group's consume stats (105 + 208), then 105 for the topic and
    UPDATE_CONSUMER_OFFSET (15) of every queue with an offset >= 0 for the destination group.
    (``-o`` is parsed but, as in mqadmin 4.9.7, not used.)"""

    src, dest, topic = src_group.strip(), dest_group.strip(), topic.strip()
    stats = consume_stats(session, src)
    route = session.route(topic)
    addrs = {data.broker_name: addr for data, addr in masters(route.broker_datas)}
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
