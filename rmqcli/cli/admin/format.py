"""mqadmin's text output, character for character: Java ``printf`` patterns of protocol.md C.4.

Pure functions from the dataclasses of ``rmqcli.admin`` to text; ``%n`` is ``\\n``, ``%-Ns``
left-aligns without truncating, as Java does.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from formats.javatext import java_fixed, java_round_half_up


def bool_text(value: bool) -> str:
    """``String.valueOf(boolean)``: ``true`` or ``false``."""
    return "true" if value else "false"


def time_millis_to_human_string2(millis: int) -> str:
    """``UtilAll.timeMillisToHumanString2``: ``yyyy-MM-dd HH:mm:ss,SSS`` in local time."""
    moment = datetime.fromtimestamp(millis / 1000)
    return moment.strftime("%Y-%m-%d %H:%M:%S,") + f"{millis % 1000:03d}"


def java_list(items: Iterable[Any]) -> str:
    """``AbstractCollection.toString``: ``[a, b]``."""
    return "[" + ", ".join(str(i) for i in items) + "]"


def java_map(mapping: Mapping[Any, Any]) -> str:
    """``AbstractMap.toString``: ``{0=host:port, 1=host:port}``, ``{KEYS=k1, TAGS=a}``."""
    return "{" + ", ".join(f"{k}={v}" for k, v in mapping.items()) + "}"


# --- topics ------------------------------------------------------------------------------------
def update_topic(result: Any) -> str:
    """``create topic to %s success.%n`` per broker, the order conf line, then ``TopicConfig [...]``
    without a newline (C.4.7; the captured 4.9.8 output has none)."""
    out = []
    order_line = (
        f"set {result.order_scope} orderConf. isOrder={bool_text(result.config.order)}, "
        f"orderConf=[{result.order_conf}]"
    )
    if result.order_scope == "broker":
        out.append(order_line)
    out.extend(f"create topic to {addr} success.\n" for addr in result.brokers)
    if result.order_scope == "cluster":
        out.append(order_line)
    out.append(result.config.java_string())
    return "".join(out)


def update_topic_perm(result: Any, by_broker: bool) -> str:
    if result.unchanged:
        return "new perm equals to the old one!\n"
    out = [
        f"update topic perm from {result.old_perm} to {result.new_perm} in {addr} success.\n"
        for addr in result.brokers
    ]
    if by_broker:
        out.append(result.config.java_string() + "\n")
    return "".join(out)


def delete_topic(result: Any) -> str:
    return (
        f"delete topic [{result.topic}] from cluster [{result.cluster}] success.\n"
        f"delete topic [{result.topic}] from NameServer success.\n"
    )


def topic_list(result: Any) -> str:
    """C.4.2: one topic per line, or the ``-c`` table (header widths 48, rows 64)."""
    if result.clusters is None:
        return "".join(f"{t}\n" for t in result.topics)
    out = [f"{'#Cluster Name':<20}  {'#Topic':<48}  {'#Consumer Group':<48}\n"]
    out.extend(f"{r.cluster:<20}  {r.topic:<64}  {r.group:<64}\n" for r in result.clusters)
    return "".join(out)


def topic_route(route: Any) -> str:
    """C.4.3: fastjson's pretty form of the decoded route (tabs, bare numeric keys)."""
    from rmqcli.remoting.json_body import encode

    return encode(route, pretty=True).decode("utf-8") + "\n"


ROUTE_LIST_FORMAT = "{:<45} {:<32} {:<50} {:<10} {:<11} {:<5}\n"


def topic_route_list(rows: list[Any]) -> str:
    """C.4.3 ``-l``: one row per broker, a 158-dash rule and a ``Total:`` row."""
    out = [
        ROUTE_LIST_FORMAT.format(
            "#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm"
        )
    ]
    for r in rows:
        out.append(
            ROUTE_LIST_FORMAT.format(
                r.cluster,
                r.broker_name,
                java_map(r.broker_addrs),
                r.read_queue_nums,
                r.write_queue_nums,
                r.perm,
            )
        )
    out.append("-" * 158 + "\n")
    total_read = sum(r.read_queue_nums for r in rows)
    total_write = sum(r.write_queue_nums for r in rows)
    out.append(ROUTE_LIST_FORMAT.format("Total:", len(rows), "", total_read, total_write, ""))
    return "".join(out)


def topic_status(rows: list[Any]) -> str:
    """C.4.4: ``%-32s  %-4d  %-20d  %-20d    %s%n``; empty time for a queue never written."""
    out = [f"{'#Broker Name':<32}  {'#QID':<4}  {'#Min Offset':<20}  {'#Max Offset':<20}    #Last Updated\n"]
    for r in rows:
        when = time_millis_to_human_string2(r.last_update_timestamp) if r.last_update_timestamp > 0 else ""
        out.append(
            f"{r.broker_name[:32]:<32}  {r.queue_id:<4}  {r.min_offset:<20}  {r.max_offset:<20}    {when}\n"
        )
    return "".join(out)


def lines(items: Iterable[str]) -> str:
    return "".join(f"{i}\n" for i in items)


def update_order_conf(result: Any) -> str:
    """C.4.7, no trailing newline (``get`` ends with a space, as mqadmin's)."""
    if result.method == "get":
        return f"get orderConf success. topic=[{result.topic}], orderConf=[{result.order_conf}] "
    if result.method == "put":
        return f"update orderConf success. topic=[{result.topic}], orderConf=[{result.order_conf}]"
    return f"delete orderConf success. topic=[{result.topic}]"


def allocate_mq(result: Mapping[str, Any]) -> str:
    """``RemotingSerializable.toJson(RebalanceResult, false)``."""
    from formats import fastjson

    return fastjson.dumps({"result": dict(result)}) + "\n"


# --- cluster and brokers -----------------------------------------------------------------------
CLUSTER_FORMAT = "{:<16}  {:<22}  {:<4}  {:<22} {:<16} {:>19} {:>19} {:>10} {:>5} {:>6}\n"
CLUSTER_MORE_HEADER = "{:<16}  {:<32} {:>14} {:>14} {:>14} {:>14}\n"


def _number(kv: Mapping[str, str], key: str) -> float:
    text = (kv.get(key) or "").strip().split(" ")[0]
    try:
        return float(text)
    except ValueError:
        return 0.0


def _long(kv: Mapping[str, str], key: str) -> int:
    try:
        return int((kv.get(key) or "0").strip())
    except ValueError:
        return 0


def cluster_list(rows: list[Any], now_millis: int | None = None) -> str:
    """C.4.1, 4.9.x base format. When a group has no master (broker id 0) listed, a last column
    ``#ACTIVATED`` (RocketMQ 5's: ``brokerActive`` of the runtime info) shows which of its slaves
    acts as master under SlaveActingMaster."""
    now = int(time.time() * 1000) if now_millis is None else now_millis
    groups: dict[tuple[str, str], set[int]] = {}
    for r in rows:
        groups.setdefault((r.cluster, r.broker_name), set()).add(r.broker_id)
    activated = any(0 not in ids for ids in groups.values())
    line = CLUSTER_FORMAT.replace("\n", "  {:<10}\n") if activated else CLUSTER_FORMAT
    out = [
        line.format(
            "#Cluster Name",
            "#Broker Name",
            "#BID",
            "#Addr",
            "#Version",
            "#InTPS(LOAD)",
            "#OutTPS(LOAD)",
            "#PCWait(ms)",
            "#Hour",
            "#SPACE",
            "#ACTIVATED",
        )
    ]
    for r in rows:
        kv = r.runtime
        in_tps = "{:9.2f}({},{}ms)".format(
            _number(kv, "putTps"),
            kv.get("sendThreadPoolQueueSize", ""),
            kv.get("sendThreadPoolQueueHeadWaitTimeMills", ""),
        )
        out_tps = "{:9.2f}({},{}ms)".format(
            _number(kv, "getTransferedTps"),
            kv.get("pullThreadPoolQueueSize", ""),
            kv.get("pullThreadPoolQueueHeadWaitTimeMills", ""),
        )
        hours = (now - _long(kv, "earliestMessageTimeStamp")) / 3600.0 / 1000 if kv else 0.0
        out.append(
            line.format(
                r.cluster,
                r.broker_name,
                r.broker_id,
                r.addr,
                kv.get("brokerVersionDesc", ""),
                in_tps,
                out_tps,
                kv.get("pageCacheLockTimeMills", ""),
                f"{hours:2.2f}",
                f"{_number(kv, 'commitLogDiskRatio'):.4f}",
                kv.get("brokerActive", ""),
            )
        )
    return "".join(out)


def cluster_list_more(rows: list[Any]) -> str:
    """C.4.1 ``-m``: yesterday's and today's put/get totals per broker."""
    out = [
        CLUSTER_MORE_HEADER.format(
            "#Cluster Name",
            "#Broker Name",
            "#InTotalYest",
            "#OutTotalYest",
            "#InTotalToday",
            "#OutTotalToday",
        )
    ]
    for r in rows:
        kv = r.runtime
        in_yest = _long(kv, "msgPutTotalTodayMorning") - _long(kv, "msgPutTotalYesterdayMorning")
        out_yest = _long(kv, "msgGetTotalTodayMorning") - _long(kv, "msgGetTotalYesterdayMorning")
        in_today = _long(kv, "msgPutTotalTodayNow") - _long(kv, "msgPutTotalTodayMorning")
        out_today = _long(kv, "msgGetTotalTodayNow") - _long(kv, "msgGetTotalTodayMorning")
        out.append(
            CLUSTER_MORE_HEADER.format(r.cluster, r.broker_name, in_yest, out_yest, in_today, out_today)
        )
    return "".join(out)


def broker_status(statuses: list[Any], by_cluster: bool) -> str:
    """C.4.7: ``%-32s: %s%n`` sorted by key; with ``-c`` prefixed by ``%-24s `` address."""
    out = []
    for status in statuses:
        for key, value in status.table.items():
            if by_cluster:
                out.append(f"{status.addr:<24} {key:<32}: {value}\n")
            else:
                out.append(f"{key:<32}: {value}\n")
    return "".join(out)


def get_broker_epoch(results: list[Any]) -> str:
    """``GetBrokerEpochSubCommand.printData``: per broker its names, address and id, then each
    ``EpochEntry.toString()``, the last one's end offset replaced by the broker's max offset."""
    out = []
    for r in results:
        c = r.cache
        out.append(
            f"\n#clusterName\t{c.cluster_name}\n#brokerName\t{c.broker_name}\n#brokerAddr\t{r.addr}"
            f"\n#brokerId\t{c.broker_id}"
        )
        for i, e in enumerate(c.epoch_list):
            end = c.max_offset if i == len(c.epoch_list) - 1 else e.end_offset
            entry = f"epoch={e.epoch}, startOffset={e.start_offset}, endOffset={end}"
            out.append(f"\n#Epoch: EpochEntry{{{entry}}}")
        out.append("\n")
    return "".join(out)


def ha_status(statuses: list[Any]) -> str:
    """RocketMQ 5's ``HAStatusSubCommand.printStatus``: a master's slaves, or a slave's link."""
    out = []
    for status in statuses:
        info = status.info
        if info.master:
            links = info.ha_connection_info
            out.append(
                f"\n#MasterAddr\t{status.addr}\n#MasterCommitLogMaxOffset\t{info.master_commit_log_max_offset}\n"
                f"#SlaveNum\t{len(links)}\n#InSyncSlaveNum\t{info.in_sync_slave_nums}\n"
            )
            out.append(
                f"{'#SlaveAddr':<32}  {'#SlaveAckOffset':<16} {'#Diff':>16} {'#TransferSpeed(KB/s)':>16} "
                f"{'#Status':>16} {'#TransferFromWhere':>16}\n"
            )
            for c in links:
                state = "OK" if c.in_sync else "Fall Behind"
                speed = c.transferred_byte_in_second / 1024.0
                out.append(
                    f"{c.addr:<32}  {c.slave_ack_offset:<16d} {c.diff:>16d} {speed:>16.2f} {state:>16} "
                    f"{c.transfer_from_where:>16d}\n"
                )
        else:
            client = info.ha_client_runtime_info
            out.append(f"\n#MasterAddr\t{client.master_addr}\n#CommitLogMaxOffset\t{client.max_offset}\n")
            out.append(f"#TransferSpeed(KB/s)\t{client.transferred_byte_in_second / 1024.0:.2f}\n")
            out.append(f"#LastReadTime\t{time_millis_to_human_string2(client.last_read_timestamp)}\n")
            out.append(f"#LastWriteTime\t{time_millis_to_human_string2(client.last_write_timestamp)}\n")
            out.append(f"#MasterFlushOffset\t{client.master_flush_offset}\n")
    return "".join(out)


def get_broker_config(configs: list[Any]) -> str:
    """C.4.7: a ``====`` banner per broker, ``%-50s=  %s`` per property, then an empty line."""
    out = []
    for c in configs:
        if c.broker_id is None:
            out.append(f"============{c.addr}============\n")
        elif c.broker_id == 0:
            out.append(f"============Master: {c.addr}============\n")
        else:
            out.append(f"============My Master: {c.master_addr}=====Slave: {c.addr}============\n")
        out.extend(f"{k:<50}=  {v}\n" for k, v in c.properties)
        out.append("\n")
    return "".join(out)


def update_broker_config(addrs: list[str]) -> str:
    return "".join(f"update broker config success, {a}\n" for a in addrs)


def write_perm(results: list[Any], broker_name: str, verb: str) -> str:
    out = []
    for r in results:
        head = f"{verb} write perm of broker[{broker_name}] in name server[{r.namesrv}]"
        out.append(f"{head} OK, {r.topic_count}\n" if r.ok else f"{head} Failed\n")
    return "".join(out)


def get_namesrv_config(configs: Mapping[str, list[tuple[str, str]]]) -> str:
    out = []
    for addr, pairs in configs.items():
        out.append(f"============{addr}============\n")
        out.extend(f"{k:<50}=  {v}\n" for k, v in pairs)
    return "".join(out)


def update_namesrv_config(servers: list[str] | None, key: str, value: str) -> str:
    listed = java_list(servers) if servers else ""
    return f"update name server config success!{listed}\n{key} : {value}\n"


# --- acl ---------------------------------------------------------------------------------------
ACL_VERSION_ROW = "%-16s  %-22s  %-22s  %-20s  %-22s  %-22s\n"


def acl_done(result: Any, line: str, tail: str = "") -> str:
    """``line % addr`` for each broker that applied the change (4.9.8 ``tools.command.acl``)."""
    return "".join(line % b.addr + "\n" for b in result.brokers if b.ok) + tail


def acl_versions(result: Any, by_broker: bool) -> str:
    """``clusterAclConfigVersion``: the table (its header only for ``-c``), then the success line
    when every broker answered."""
    out = []
    if not by_broker:
        out.append(
            ACL_VERSION_ROW
            % (
                "#Cluster Name",
                "#Broker Name",
                "#Broker Addr",
                "#AclFilePath",
                "#AclConfigVersionNum",
                "#AclLastUpdateTime",
            )  # fmt: skip
        )
    for v in result.versions:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(v.timestamp / 1000))
        row = (v.cluster_name, v.broker_name, v.broker_addr, v.acl_file_path, str(v.counter), stamp)
        out.append(ACL_VERSION_ROW % row)
    if not [b for b in result.brokers if not b.ok]:
        kind = "broker's" if by_broker else "cluster's"
        out.append(f"get {kind} plain access config version success.\n")
    return "".join(out)


def get_broker_member_group(members: list[Any]) -> str:
    """``getBrokerMemberGroup``: one line per live member, ids ascending; ``#ACTIVATED`` says which
    member runs the group's delayed delivery and transaction check (the acting master)."""
    line = "{:<16}  {:<22}  {:<4}  {:<22}  {:<10}\n"
    out = [line.format("#Cluster Name", "#Broker Name", "#BID", "#Addr", "#ACTIVATED")]
    for m in members:
        out.append(line.format(m.cluster, m.broker_name, m.broker_id, m.addr, m.active or "?"))
    return "".join(out)


# --- clusterRT ---------------------------------------------------------------------------------
CLUSTER_RT_HEADER = "{:<24}  {:<24}  {:<4}  {:<8}  {:<8}\n".format(
    "#Cluster Name",
    "#Broker Name",
    "#RT",
    "#successCount",
    "#failCount",
)  # the header's widths (4, 8) are not the rows' (8, 16), as in mqadmin
CLUSTER_RT_ROW = "{:<24}  {:<24}  {:<8}  {:<16}  {:<16}\n"


def gmt8_stamp(millis: int) -> str:
    """``CLusterSendMsgRTCommand.getCurTime``: ``yyyy-MM-dd HH:mm:ss`` in GMT+8."""
    from datetime import UTC, timedelta

    moment = datetime.fromtimestamp(millis / 1000, UTC) + timedelta(hours=8)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def cluster_rt(result: Any, print_log: bool, machine_room: str) -> str:
    """``clusterRT``: the header before the first round (not with ``-p``), one row per broker,
    ``cluster [X] not exist`` (no newline) for an unknown ``-c``. With ``-p true`` a tlog line:
    ``time|room|cluster|broker|rt`` with the time in GMT+8 and rt rounded half up."""
    out = [CLUSTER_RT_HEADER] if result.round == 1 and not print_log else []
    for row in result.rows:
        if print_log:
            stamp = gmt8_stamp(row.at_millis)
            rt = java_round_half_up(row.rt)
            out.append(f"{stamp}|{machine_room}|{row.cluster}|{row.broker_name}|{rt}\n")
        else:
            rt = java_fixed(row.rt, 2)
            out.append(
                CLUSTER_RT_ROW.format(
                    row.cluster, row.broker_name, rt, str(row.success_count), str(row.fail_count)
                )
            )
    if result.missing_cluster is not None:
        out.append(f"cluster [{result.missing_cluster}] not exist")
    return "".join(out)
