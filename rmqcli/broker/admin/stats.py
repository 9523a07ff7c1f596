"""VIEW_BROKER_STATS_DATA (315) and the consume TPS of GET_CONSUME_STATS: ``BrokerStatsManager`` items
``TOPIC_PUT_NUMS`` (key ``topic``) and ``GROUP_GET_NUMS`` (key ``topic@group``) (protocol.md B.4).

A real broker counts puts and gets in memory from its start and samples them every 10 s; its
``statsMinute``/``statsHour``/``statsDay`` are the sums over the last minute, hour and day, with
``tps`` the sum per second of the window. This broker derives the same sums from the store: the
puts of a window are the messages of the topic's queues stored in it (found by store time in the
consume queues), the gets of a group those of them below the group's committed offset. So messages
stored before this process started count too (a real broker would only count them after a restart
if they were put since), and a get counts once the group commits past it rather than when it is
pulled. A key with nothing in the last day answers SYSTEM_ERROR "The stats <name> <key> not exist",
as a broker that has not seen the key since it started.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rmqcli.remoting import headers as hd
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.remoting.server.connection import Connection, Reply

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
WINDOWS = (("stats_minute", 60_000), ("stats_hour", 3_600_000), ("stats_day", 86_400_000))


def message_store_time(ctl: BrokerContext, topic: str, queue_id: int, offset: int) -> int:
    """``getMessageStoreTimeStamp``: store time of the message at a queue offset, -1 when none."""
    units = ctl.store.units(topic, queue_id, offset, 1)
    if not units:
        return -1
    value = ctl.store.store_timestamp(units[0])
    return -1 if value is None else value


def _queue_ids(ctl: BrokerContext, topic: str) -> list[int]:
    return sorted(q for (t, q) in ctl.writer.dispatcher.cqs if t == topic)


def _first_since(ctl: BrokerContext, topic: str, queue_id: int, since: int) -> int:
    """The first queue offset whose message was stored at or after ``since`` (max offset if none)."""
    low, high = ctl.store.min_offset(topic, queue_id), ctl.store.max_offset(topic, queue_id)
    while low < high:
        mid = (low + high) // 2
        if message_store_time(ctl, topic, queue_id, mid) < since:
            low = mid + 1
        else:
            high = mid
    return low


def _sums(ctl: BrokerContext, topic: str, group: str | None, now: int) -> dict[str, int]:
    """Messages of ``topic`` stored in each window (consumed by ``group`` when given)."""
    sums = {name: 0 for name, _ in WINDOWS}
    for queue_id in _queue_ids(ctl, topic):
        end = ctl.store.max_offset(topic, queue_id)
        if group is not None:
            end = min(end, max(ctl.offsets.query(group, topic, queue_id), 0))
        for name, span in WINDOWS:
            sums[name] += max(end - _first_since(ctl, topic, queue_id, now - span), 0)
    return sums


def stats_data(ctl: BrokerContext, name: str, key: str) -> jb.BrokerStatsData | None:
    """The three windows of one stats item; None when the item does not exist."""
    now = int(time.time() * 1000)
    if name == TOPIC_PUT_NUMS:
        if ctl.topics.get(key) is None:
            return None
        sums = _sums(ctl, key, None, now)
    elif name == GROUP_GET_NUMS:
        topic, sep, group = key.partition("@")
        if not sep or ctl.topics.get(topic) is None:
            return None
        sums = _sums(ctl, topic, group, now)
    else:
        return None
    if not sums["stats_day"]:
        return None
    data = jb.BrokerStatsData()
    for attr, span in WINDOWS:
        total = sums[attr]
        setattr(data, attr, jb.BrokerStatsItem(sum=total, tps=total * 1000 / span, avgpt=0.0))
    return data


def group_get_tps(ctl: BrokerContext, group: str, topic: str) -> float:
    """``BrokerStatsManager.tpsGroupGetNums``: the per-minute TPS of ``GROUP_GET_NUMS``."""
    data = stats_data(ctl, GROUP_GET_NUMS, f"{topic}@{group}")
    return data.stats_minute.tps if data is not None else 0.0


def view_broker_stats(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    h = req.header(hd.ViewBrokerStatsDataRequestHeader)
    data = stats_data(ctl, h.stats_name, h.stats_key)
    if data is None:
        return req.response(RS.SYSTEM_ERROR, f"The stats <{h.stats_name}> <{h.stats_key}> not exist")
    return req.response(body=jb.encode(data))


HANDLERS = {RC.VIEW_BROKER_STATS_DATA: view_broker_stats}
