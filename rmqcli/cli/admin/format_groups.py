"""mqadmin's text for the group, connection, offset and stats commands, character for character
(Java ``printf`` patterns of protocol.md C.4.5 and C.4.7; 4.9.7 tools sources where C.4 is silent),
and their ``--json`` documents where a result is not shown as it is.
``UtilAll.frontStringAtLeast(s, n)`` truncates to ``n`` characters."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rmqcli.cli.admin.format import bool_text
from rmqcli.remoting.codes import version_desc


def format_date(millis: int) -> str:
    """``UtilAll.formatDate(date, "yyyy-MM-dd HH:mm:ss")`` in local time."""
    return datetime.fromtimestamp(millis / 1000).strftime("%Y-%m-%d %H:%M:%S")


def update_sub_group(result: Any) -> str:
    """``create subscription group to %s success.%n`` per broker, then the config, no newline."""
    from rmqcli.admin.group import sub_group_string

    out = [f"create subscription group to {addr} success.\n" for addr in result.brokers]
    out.append(sub_group_string(result.config))
    return "".join(out)


def delete_sub_group(result: Any) -> str:
    out = []
    for addr in result.brokers:
        if result.cluster:
            out.append(
                f"delete subscription group [{result.group}] from broker [{addr}] in cluster "
                f"[{result.cluster}] success.\n"
            )
        else:
            out.append(f"delete subscription group [{result.group}] from broker [{addr}] success.\n")
    for topic in result.deleted_topics:
        out.append(f"delete topic [{topic}] from cluster [{result.cluster}] success.\n")
        out.append(f"delete topic [{topic}] from NameServer success.\n")
    return "".join(out)


CONSUMER_CONFIG_FIELDS = (
    ("groupName", "group_name"),
    ("consumeEnable", "consume_enable"),
    ("consumeFromMinEnable", "consume_from_min_enable"),
    ("consumeBroadcastEnable", "consume_broadcast_enable"),
    ("retryQueueNums", "retry_queue_nums"),
    ("retryMaxTimes", "retry_max_times"),
    ("brokerId", "broker_id"),
    ("whichBrokerWhenConsumeSlowly", "which_broker_when_consume_slowly"),
    ("notifyConsumerIdsChangedEnable", "notify_consumer_ids_changed_enable"),
)


CONSUMER_CONFIG_FIELDS_5 = (
    *CONSUMER_CONFIG_FIELDS[:4],
    ("consumeMessageOrderly", "consume_message_orderly"),
    *CONSUMER_CONFIG_FIELDS[4:6],
    ("groupRetryPolicy", "group_retry_policy"),
    *CONSUMER_CONFIG_FIELDS[6:],
    ("groupSysFlag", "group_sys_flag"),
    ("consumeTimeoutMinute", "consume_timeout_minute"),
    ("subscriptionDataSet", "subscription_data_set"),
)
"""RocketMQ 5.1.1's declared fields, for a config that has its keys (a 5.x broker's, or a group
given 5.x settings)."""


def get_consumer_config(infos: list[Any]) -> str:
    """A ``====cluster:broker====`` banner, then ``%-40s=  %s`` per declared field (4.9.7 order;
    5.1.1's for a config with 5.1.1's keys)."""
    from rmqcli.admin.retrypolicy import policy_string

    out = []
    for info in infos:
        out.append(
            f"============================={info.cluster}:{info.broker_name}=============================\n"
        )
        v5 = info.config.consume_message_orderly is not None
        for java, name in CONSUMER_CONFIG_FIELDS_5 if v5 else CONSUMER_CONFIG_FIELDS:
            value = getattr(info.config, name)
            if name == "group_retry_policy" and value is not None:
                text = policy_string(value)
            elif isinstance(value, bool):
                text = bool_text(value)
            else:
                text = "" if value is None else str(value)
            out.append(f"{java:<40}=  {text}\n")
    return "".join(out)


def consumer_progress(progress: Any, show_client_ip: bool = False) -> str:
    """C.4.5 with ``-g``; ``-s true`` adds ``#Client IP`` before ``#Diff``."""
    if show_client_ip:
        out = [
            f"{'#Topic':<64}  {'#Broker Name':<32}  {'#QID':<4}  {'#Broker Offset':<20}  "
            f"{'#Consumer Offset':<20}  {'#Client IP':<20} {'#Diff':<20}  #LastTime\n"
        ]
    else:
        out = [
            f"{'#Topic':<64}  {'#Broker Name':<32}  {'#QID':<4}  {'#Broker Offset':<20}  "
            f"{'#Consumer Offset':<20}  {'#Diff':<20}  #LastTime\n"
        ]
    for r in progress.rows:
        last = "N/A" if r.last_timestamp == 0 else format_date(r.last_timestamp)
        head = (
            f"{r.topic[:64]:<64}  {r.broker_name[:32]:<32}  {r.queue_id:<4}  {r.broker_offset:<20}  "
            f"{r.consumer_offset:<20}  "
        )
        if show_client_ip:
            out.append(f"{head}{r.client_ip or 'N/A':<20} {r.diff:<20}  {last}\n")
        else:
            out.append(f"{head}{r.diff:<20}  {last}\n")
    out.append("\n")
    out.append(f"Consume TPS: {progress.consume_tps:.2f}\n")
    out.append(f"Diff Total: {progress.diff_total}\n")
    return "".join(out)


def consumer_progress_all(rows: list[Any]) -> str:
    """C.4.5 without ``-g``."""
    out = [
        f"{'#Group':<64}  {'#Count':<6}  {'#Version':<24} {'#Type':<5}  {'#Model':<14}  {'#TPS':<7}  "
        "#Diff Total\n"
    ]
    for r in rows:
        out.append(
            f"{r.group[:64]:<64}  {r.count:<6}  {r.version_desc:<24} {r.type_desc:<5}  {r.model_desc:<14}  "
            f"{r.consume_tps:<7}  {r.diff_total}\n"
        )
    return "".join(out)


def consumer_connection(cc: Any) -> str:
    """C.4.7: connections, subscriptions, consume type, model and where to start."""
    out = [f"{'#ClientId':<36} {'#ClientAddr':<22} {'#Language':<10} #Version\n"]
    for c in cc.connection_set:
        out.append(f"{c.client_id:<36} {c.client_addr:<22} {c.language:<10} {version_desc(c.version)}\n")
    out.append("\nBelow is subscription:\n")
    out.append(f"{'#Topic':<20} #SubExpression\n")
    for sub in cc.subscription_table.values():
        out.append(f"{sub.topic:<20} {sub.sub_string}\n")
    out.append("\n")
    for label, value in (
        ("ConsumeType", cc.consume_type),
        ("MessageModel", cc.message_model),
        ("ConsumeFromWhere", cc.consume_from_where),
    ):
        out.append(f"{label}: {'null' if value is None else value}\n")
    return "".join(out)


def producer_connection(pc: Any) -> str:
    """C.4.7: ``%04d  %-32s %-22s %-8s %s%n``, no header."""
    return "".join(
        f"{i:04d}  {c.client_id:<32} {c.client_addr:<22} {c.language:<8} {version_desc(c.version)}\n"
        for i, c in enumerate(pc.connection_set, 1)
    )


def producer(table: Any) -> str:
    """``ProducerSubCommand``: ``producer group (%s) instance : %s`` per instance, ``producer group
    (%s) instances are empty`` for a group without one; nothing for an empty table."""
    from rmqcli.admin.group import producer_info_string

    out = []
    for group, instances in table.data.items():
        if not instances:
            out.append(f"producer group ({group}) instances are empty\n")
        out.extend(f"producer group ({group}) instance : {producer_info_string(p)}\n" for p in instances)
    return "".join(out)


def report_line(report: Any, json_out: bool = False) -> str:
    """One report of ``startMonitoring``: ``DefaultMonitorListener``'s text after the local time
    as its client log writes it (``yyyy-MM-dd HH:mm:ss,SSS``), or one JSON object."""
    if json_out:
        import json

        doc = {"time": report.timestamp, "kind": report.kind, **report.detail, "text": report.text}
        return json.dumps(doc, ensure_ascii=False) + "\n"
    moment = datetime.fromtimestamp(report.timestamp / 1000).strftime("%Y-%m-%d %H:%M:%S")
    return f"{moment},{report.timestamp % 1000:03d} {report.text.rstrip(chr(10))}\n"


def write_report(report: Any, json_out: bool = False) -> None:
    import sys

    sys.stdout.write(report_line(report, json_out))
    sys.stdout.flush()


def consumer_status(result: Any) -> str:
    """``consumerStatus``: the client table and the subscription/rebalance verdict, or with ``-i``
    one client's ``formatString`` (4.9.7 ``ConsumerStatusSubCommand``)."""
    from rmqcli.admin.beans import running_info_string

    if result.client is not None:
        return running_info_string(result.client)
    out = [f"{'#Index':<10} {'#ClientId':<40} {'#Version':<20} #ConsumerRunningInfoFile\n"]
    for r in result.rows:
        out.append(f"{r.index:<10} {r.client_id:<40} {version_desc(r.version):<20} {r.path}\n")
    if result.infos:
        if result.same_subscription:
            out.append("\n\nSame subscription in the same group of consumer")
            out.append(f"\n\nRebalance {'OK' if result.rebalance_ok else 'Failed'}\n")
        else:
            out.append("\n\nWARN: Different subscription in the same group of consumer!!!")
    return "".join(out)


def _offset_table(rows: list[Any]) -> str:
    out = [f"{'#brokerName':<40}  {'#queueId':<40}  {'#offset':<40}\n"]
    out.extend(f"{r.broker_name[:32]:<40}  {r.queue_id:<40}  {r.offset:<40}\n" for r in rows)
    return "".join(out)


def _rollback_table(rows: list[Any]) -> str:
    out = [
        f"{'#brokerName':<20}  {'#queueId':<20}  {'#brokerOffset':<20}  {'#consumerOffset':<20}  "
        f"{'#timestampOffset':<20}  {'#rollbackOffset':<20}\n"
    ]
    out.extend(
        f"{r.broker_name[:32]:<20}  {r.queue_id:<20}  {r.broker_offset:<20}  {r.consumer_offset:<20}  "
        f"{r.timestamp_offset:<20}  {r.rollback_offset:<20}\n"
        for r in rows
    )
    return "".join(out)


def reset_offset(result: Any) -> str:
    """C.4.7 ``resetOffsetByTime``: the rollback line (``consumerGroup[`` in the offline method),
    then the 3-column table or the offline 6-column one."""
    word = "consumerGroup" if result.offline else "group"
    line = (
        f"rollback consumer offset by specified {word}[{result.group}], topic[{result.topic}], "
        f"force[{bool_text(result.force)}], timestamp(string)[{result.timestamp_text}], "
        f"timestamp(long)[{result.timestamp}]\n"
    )
    return line + (_rollback_table(result.rollback) if result.offline else _offset_table(result.rows))


def reset_queue_offset(result: Any) -> str:
    """5.1.1's ``resetOffsetByTime -b -q``: its two lines."""
    return (
        f"start reset consumer offset by specified, group[{result.group}], topic[{result.topic}], "
        f"queueId[{result.queue_id}], broker[{result.broker_addr}], "
        f"timestamp(string)[{result.timestamp_text}], timestamp(long)[{result.timestamp}]\n"
        f"reset consumer offset to {result.offset}\n"
    )


def skip_accumulated_message(result: Any) -> str:
    """C.4.7 ``skipAccumulatedMessage``: the online table, or the offline one, no rollback line."""
    return _rollback_table(result.rollback) if result.offline else _offset_table(result.rows)


def clone_group_offset(src: str, dest: str, topic: str) -> str:
    return f"clone group offset success. srcGroup[{src}], destGroup=[{dest}], topic[{topic}]"


def stats_all(rows: list[Any]) -> str:
    """C.4.7 ``statsAll``."""
    out = [
        f"{'#Topic':<64}  {'#Consumer Group':<64} {'#Accumulation':>12} {'#InTPS':>11} {'#OutTPS':>11} "
        f"{'#InMsg24Hour':>14} {'#OutMsg24Hour':>14}\n"
    ]
    for r in rows:
        if r.group is None:
            out.append(
                f"{r.topic[:64]:<64}  {'':<64} {0:>12d} {r.in_tps:>11.2f} {'':>11} {r.in_msg_24h:>14d} "
                f"{'NO_CONSUMER':>14}\n"
            )
        else:
            out.append(
                f"{r.topic[:64]:<64}  {r.group[:64]:<64} {r.accumulation:>12d} {r.in_tps:>11.2f} "
                f"{r.out_tps:>11.2f} {r.in_msg_24h:>14d} {r.out_msg_24h:>14d}\n"
            )
    return "".join(out)


def broker_consume_stats(stats: Any) -> str:
    """4.9.7 ``BrokerConsumeStatsSubCommad``: one row per queue, then ``Diff Total``."""
    out = [
        f"{'#Topic':<64}  {'#Group':<64}  {'#Broker Name':<32}  {'#QID':<4}  {'#Broker Offset':<20}  "
        f"{'#Consumer Offset':<20}  {'#Diff':<20}  #LastTime\n"
    ]
    for r in stats.rows:
        out.append(
            f"{r.topic[:64]:<64}  {r.group:<64}  {r.broker_name[:32]:<32}  {r.queue_id:<4}  "
            f"{r.broker_offset:<20}  {r.consumer_offset:<20}  {r.diff:<20}  {format_date(r.last_timestamp)}\n"
        )
    out.append(f"\nDiff Total: {stats.total_diff}\n")
    return "".join(out)


# --- --json documents ----------------------------------------------------------------------------
def consumer_progress_all_data(rows: list[Any]) -> list[dict[str, Any]]:
    return [
        {
            "group": r.group,
            "count": r.count,
            "version": r.version_desc,
            "type": r.type_desc,
            "model": r.model_desc,
            "tps": r.consume_tps,
            "diffTotal": r.diff_total,
        }
        for r in rows
    ]


def consumer_progress_data(progress: Any) -> dict[str, Any]:
    from rmqcli.cli.render import camel_dict

    return {
        "group": progress.group,
        "consumeTps": progress.consume_tps,
        "diffTotal": progress.diff_total,
        "queues": [dict(camel_dict(r), diff=r.diff) for r in progress.rows],
    }


def consumer_status_data(result: Any) -> dict[str, Any]:
    from rmqcli.admin.beans import plain
    from rmqcli.cli.render import camel_dict

    return {
        "clients": [camel_dict(r) for r in result.rows],
        "sameSubscription": result.same_subscription,
        "rebalanceOk": result.rebalance_ok,
        "runningInfo": plain(result.client)
        if result.client
        else {k: plain(v) for k, v in result.infos.items()},
    }


def broker_consume_stats_data(stats: Any) -> dict[str, Any]:
    from rmqcli.cli.render import camel_dict

    return {"rows": [dict(camel_dict(r), diff=r.diff) for r in stats.rows], "totalDiff": stats.total_diff}
