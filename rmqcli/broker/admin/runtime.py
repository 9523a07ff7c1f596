"""GET_BROKER_RUNTIME_INFO (28): ``AdminBrokerProcessor.prepareRuntimeInfo``, the keys mqadmin reads
(protocol.md B.4); 4.9.8 reports nothing of HA there but ``commitLogMaxOffset``. GET_BROKER_HA_STATUS
(907, RocketMQ 5): the HA side, for ``haStatus``."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from formats.javatext import java_double
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.server.connection import Connection, Reply
from rmqcli.store.naming import CONSUMEQUEUE_DIR

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext

BROKER_VERSION = 407  # MQVersion.Version.V4_9_7.ordinal(): what this broker says it is
BROKER_VERSION_DESC = "V4_9_7"


def runtime_info(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """``AdminBrokerProcessor.prepareRuntimeInfo`` (the keys mqadmin reads)."""
    store = ctl.store
    now = int(time.time() * 1000)
    commitlog_dir = ctl.writer.commitlog.directory
    commitlog_ratio = str(ctl.retention.usage(commitlog_dir))
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
        "putMessageTimesTotal": str(store.put_count),
        "putMessageSizeTotal": str(store.put_bytes),
        "putMessageAverageSize": java_double(store.put_bytes / max(store.put_count, 1)),
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
        "commitLogDiskRatio": commitlog_ratio,  # the clean-up's measure (getDiskPartitionSpaceUsedPercent)
        f"commitLogDiskRatio_{commitlog_dir}": commitlog_ratio,
        "consumeQueueDiskRatio": str(ctl.retention.usage(ctl.writer.root / CONSUMEQUEUE_DIR)),
        "commitLogMinOffset": str(
            ctl.writer.commitlog.files[0].from_offset if ctl.writer.commitlog.files else 0
        ),
        "commitLogMaxOffset": str(ctl.writer.max_offset),
        "dispatchBehindBytes": str(ctl.ha.dispatch_behind()),
        "bootTimestamp": str(store.boot_timestamp),
        "runtime": _runtime(now - store.boot_timestamp),
        "brokerActive": "true" if ctl.special_services_running else "false",  # 5.x: isSpecialServiceRunning
        **ctl.ha.raft_keys(),  # rmq's own, a DLedger member's (rmqcli.dledger.runtime_keys)
    }
    return req.response(body=jb.encode(jb.KVTable(table=table)))


def _runtime(millis: int) -> str:
    """``MessageStore.getRunningDataInfo`` style: ``[ 0 days, 0 hours, 1 minutes, 5 seconds ]``."""
    seconds = millis // 1000
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"[ {days} days, {hours} hours, {minutes} minutes, {secs} seconds ]"


def ha_status(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """GET_BROKER_HA_STATUS (907, RocketMQ 5's ``getBrokerHAStatus``): ``HARuntimeInfo``."""
    return req.response(body=jb.encode(ctl.ha.runtime_info()))


HANDLERS = {RC.GET_BROKER_RUNTIME_INFO: runtime_info, RC.GET_BROKER_HA_STATUS: ha_status}
