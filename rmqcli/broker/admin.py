"""Admin requests of the Broker: ``AdminBrokerProcessor`` (PROTOCOL.md B.4), the broker's default
processor.

This module answers the topic requests, UPDATE_AND_CREATE_TOPIC (17, then re-register with the
name servers), DELETE_TOPIC_IN_BROKER (215), GET_ALL_TOPIC_CONFIG (21), and GET_BROKER_RUNTIME_INFO
(28, ``prepareRuntimeInfo``), and merges into ``HANDLERS`` the other admin families: configuration
(``admin_config``), subscription groups and offsets (``admin_groups``), online clients
(``admin_clients``), queues and clean-ups (``admin_store``), statistics (``admin_stats``). Any other
code answers REQUEST_CODE_NOT_SUPPORTED, as the 4.9.x broker's default processor does.
"""

from __future__ import annotations

import shutil
import time
from typing import TYPE_CHECKING

from rmqcli.broker import admin_clients, admin_config, admin_groups, admin_stats, admin_store
from rmqcli.broker.admin_store import clean_unused_topics
from rmqcli.broker.connection import Connection, Reply
from rmqcli.broker.names import broker_system_topics, is_system_topic, validate_topic
from rmqcli.remoting import headers as hd
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS

if TYPE_CHECKING:
    from rmqcli.broker.controller import BrokerController

BROKER_VERSION = 407  # MQVersion.Version.V4_9_7.ordinal(): what this broker says it is
BROKER_VERSION_DESC = "V4_9_7"


def topic_problem(ctl: BrokerController, topic: str) -> str | None:
    """``TopicValidator.validateTopic`` then ``isSystemTopic``, whose set holds the broker's cluster
    and broker names (``TopicConfigManager``): the remark of UPDATE_AND_CREATE_TOPIC and
    DELETE_TOPIC_IN_BROKER, both SYSTEM_ERROR."""
    problem = validate_topic(topic)
    if problem:
        return problem
    extra = broker_system_topics(ctl.config.broker_cluster_name, ctl.config.broker_name)
    if is_system_topic(topic, extra):
        return f"The topic[{topic}] is conflict with system topic."
    return None


def update_and_create_topic(ctl: BrokerController, req: RemotingCommand, conn: Connection) -> Reply:
    h = req.header(hd.CreateTopicRequestHeader)
    if ctl.config.broker_id != 0:
        return req.response(
            RS.SYSTEM_ERROR,
            "Can't modify topic or subscription group from slave broker, "
            "please execute it from master broker.",
        )
    problem = topic_problem(ctl, h.topic)
    if problem:
        return req.response(RS.SYSTEM_ERROR, problem)
    if h.read_queue_nums < 0 or h.write_queue_nums < 0:
        return req.response(RS.SYSTEM_ERROR, "the queue numbers must not be negative")
    ctl.topics.put(
        h.topic,
        h.read_queue_nums,
        h.write_queue_nums,
        h.perm,
        order=h.order,
        topic_sys_flag=h.topic_sys_flag or 0,
        topic_filter_type=h.topic_filter_type,
    )
    return req.response()


def delete_topic(ctl: BrokerController, req: RemotingCommand, conn: Connection) -> Reply:
    """``deleteTopic``: the config goes, then ``cleanUnusedTopic`` destroys the queues of every
    topic left without a config."""
    if ctl.config.broker_id != 0:
        return req.response(
            RS.SYSTEM_ERROR,
            "Can't modify topic or subscription group from slave broker, "
            "please execute it from master broker.",
        )
    h = req.header(hd.DeleteTopicRequestHeader)
    problem = topic_problem(ctl, h.topic)
    if problem:
        return req.response(RS.SYSTEM_ERROR, problem)
    if ctl.topics.table.pop(h.topic, None) is not None:
        ctl.writer.config.topics_version.bump(ctl.writer.clock())
        ctl.topics.on_change()
    clean_unused_topics(ctl)
    return req.response()


def all_topic_config(ctl: BrokerController, req: RemotingCommand, conn: Connection) -> Reply:
    if not ctl.topics.table:
        return req.response(RS.SYSTEM_ERROR, "No topic in this broker")
    return req.response(body=jb.encode(ctl.topics.wrapper()))


def runtime_info(ctl: BrokerController, req: RemotingCommand, conn: Connection) -> Reply:
    """``AdminBrokerProcessor.prepareRuntimeInfo`` (the keys mqadmin reads)."""
    store = ctl.store
    now = int(time.time() * 1000)
    usage = shutil.disk_usage(ctl.writer.root)
    earliest = store.earliest_message_time()
    tps = ctl.stats.tps()
    table = {
        "brokerVersionDesc": BROKER_VERSION_DESC,
        "brokerVersion": str(BROKER_VERSION),
        "msgPutTotalYesterdayMorning": "0",
        "msgPutTotalTodayMorning": "0",
        "msgPutTotalTodayNow": str(store.put_count),
        "msgGetTotalYesterdayMorning": "0",
        "msgGetTotalTodayMorning": "0",
        "msgGetTotalTodayNow": str(store.get_count),
        "sendThreadPoolQueueSize": "0",
        "sendThreadPoolQueueCapacity": "10000",
        "sendThreadPoolQueueHeadWaitTimeMills": "0",
        "pullThreadPoolQueueSize": "0",
        "pullThreadPoolQueueCapacity": "100000",
        "pullThreadPoolQueueHeadWaitTimeMills": "0",
        "queryThreadPoolQueueSize": "0",
        "queryThreadPoolQueueCapacity": "20000",
        "pageCacheLockTimeMills": "0",
        "earliestMessageTimeStamp": str(earliest if earliest >= 0 else now),
        "startAcceptSendRequestTimeStamp": "0",
        "putTps": tps[0],
        "getTransferedTps": tps[1],
        "commitLogDiskRatio": f"{(usage.total - usage.free) / usage.total if usage.total else 0.0}",
        "commitLogMinOffset": str(
            ctl.writer.commitlog.files[0].from_offset if ctl.writer.commitlog.files else 0
        ),
        "commitLogMaxOffset": str(ctl.writer.max_offset),
        "dispatchBehindBytes": "0",
        "bootTimestamp": str(store.boot_timestamp),
        "runtime": _runtime(now - store.boot_timestamp),
        "brokerActive": "true",
    }
    return req.response(body=jb.encode(jb.KVTable(table=table)))


def _runtime(millis: int) -> str:
    """``MessageStore.getRunningDataInfo`` style: ``[ 0 days, 0 hours, 1 minutes, 5 seconds ]``."""
    seconds = millis // 1000
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"[ {days} days, {hours} hours, {minutes} minutes, {secs} seconds ]"


HANDLERS = {
    RC.UPDATE_AND_CREATE_TOPIC: update_and_create_topic,
    RC.DELETE_TOPIC_IN_BROKER: delete_topic,
    RC.GET_ALL_TOPIC_CONFIG: all_topic_config,
    RC.GET_BROKER_RUNTIME_INFO: runtime_info,
}
for _family in (admin_config, admin_groups, admin_clients, admin_store, admin_stats):
    HANDLERS.update(_family.HANDLERS)
