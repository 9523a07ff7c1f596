"""mqadmin's export commands: exportConfigs, exportMetadata, exportMetrics (4.9.8
``tools.command.export``: ``ExportConfigsCommand``, ``ExportMetadataCommand``,
``ExportMetricsCommand``).

Each builds the document mqadmin builds, from the same requests, and writes it where mqadmin
writes it (``<filePath>/configs.json``, ``metadata.json``, ``topic.json``,
``subscriptionGroup.json``, ``metrics.json``) in fastjson's pretty form
(``JSON.toJSONString(obj, true)``): the keys of every map in the order the Java map iterates
(``HashMap``, ``ConcurrentHashMap``; a ``Properties`` is a ``ConcurrentHashMap`` on Java 9+), bean
properties sorted, nulls left out, a ``HashSet`` on one line, doubles as ``Double.toString``.
Unlike ``MixAll.string2FileNotSafe`` the file is written beside and renamed into place.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from formats.javahash import chm_order, hashmap_order
from formats.javatext import java_double
from formats.names import (
    CLIENT_INNER_PRODUCER,
    DLQ_PREFIX,
    RETRY_PREFIX,
    SYS_GROUP_PREFIX,
    TOOLS_CONSUMER,
    TRANS_CHECK_GROUP,
)
from rmqcli.admin.session import UNKNOWN_CLUSTER, AdminSession, master_addr
from rmqcli.durable import replace_file
from rmqcli.errors import BrokerError, NetworkError, NotFoundError, RmqError
from rmqcli.remoting.codes import RequestCode, version_desc

DEFAULT_PATH = "/tmp/rocketmq/export"
USER_TIMEOUT = 10.0  # getUserTopicConfig / getUserSubscriptionGroup: 10000 ms
UNKNOWN = f"[error] {UNKNOWN_CLUSTER}"  # CommandUtil's line, printed without a newline

# ExportConfigsCommand.needBrokerProprties: the keys kept, in the order they are put
CONFIG_KEYS = (
    "brokerClusterName brokerId brokerName brokerRole fileReservedTime filterServerNums flushDiskType "
    "maxMessageSize messageDelayLevel msgTraceTopicName slaveReadEnable traceOn traceTopicEnable useTLS "
    "autoCreateTopicEnable autoCreateSubscriptionGroup"
).split()
# The properties of the 4.9.8 beans (what its fastjson reads back and writes), and RocketMQ
# 5.1.1's: a bean that carries them (a 5.x broker's, a topic with attributes, a group given 5.x
# settings) is written as 5.1.1's mqadmin writes it; a 4.9.x broker never sends them
TOPIC_PROPS = (
    "attributes",
    "order",
    "perm",
    "readQueueNums",
    "topicFilterType",
    "topicName",
    "topicSysFlag",
    "writeQueueNums",
)
GROUP_PROPS = (
    "brokerId consumeBroadcastEnable consumeEnable consumeFromMinEnable consumeMessageOrderly "
    "consumeTimeoutMinute groupName groupRetryPolicy groupSysFlag notifyConsumerIdsChangedEnable "
    "retryMaxTimes retryQueueNums subscriptionDataSet whichBrokerWhenConsumeSlowly"
).split()
VERSION_PROPS = ("counter", "timestamp")
# DefaultMQAdminExtImpl.SYSTEM_GROUP_SET (MixAll's names); plus every CID_RMQ_SYS_ group
SYSTEM_GROUPS = frozenset(
    {
        "DEFAULT_CONSUMER",
        "DEFAULT_PRODUCER",
        TOOLS_CONSUMER,
        "FILTERSRV_CONSUMER",
        "__MONITOR_CONSUMER",
        CLIENT_INNER_PRODUCER,
        "SELF_TEST_P_GROUP",
        "SELF_TEST_C_GROUP",
        "CID_ONS-HTTP-PROXY",
        "CID_ONSAPI_PERMISSION",
        "CID_ONSAPI_OWNER",
        "CID_ONSAPI_PULL",
        TRANS_CHECK_GROUP,
    }
)


# --- Java's map orders and fastjson's text ---------------------------------------------------------
def hash_map(pairs: dict[str, Any]) -> dict[str, Any]:
    """``pairs`` (put in this order) in the order a ``java.util.HashMap`` iterates them."""
    return {k: pairs[k] for k in hashmap_order(list(pairs))}


def concurrent_map(pairs: dict[str, Any]) -> dict[str, Any]:
    """``pairs`` (put in this order) in the order a ``ConcurrentHashMap`` iterates them."""
    return {k: pairs[k] for k in chm_order(list(pairs))}


class JavaSet(list):
    """A ``HashSet`` of strings: fastjson writes it on one line even in its pretty form."""


def fastjson_text(document: dict[str, Any]) -> str:
    """``JSON.toJSONString(document, true)``: ``formats.fastjson``'s pretty form, with the doubles
    and the ``JavaSet``s written as fastjson writes them (through placeholders)."""
    from formats import fastjson

    raw: dict[str, str] = {}
    token = uuid.uuid4().hex

    def mark(text: str) -> str:
        key = f"{token}-{len(raw)}"
        raw[key] = text
        return key

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items() if v is not None}
        if isinstance(value, JavaSet):
            return mark("[" + ",".join(fastjson.dumps(v) for v in value) + "]")
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, float):
            return mark(java_double(value))
        return value

    text = fastjson.dumps(walk(document), pretty=True)
    for key, value in raw.items():
        text = text.replace(f'"{key}"', value, 1)
    return text


def json_value(document: Any) -> Any:
    """The document as ``--json`` prints it (NaN and the infinities as null)."""
    if isinstance(document, dict):
        return {k: json_value(v) for k, v in document.items() if v is not None}
    if isinstance(document, list):
        return [json_value(v) for v in document]
    if isinstance(document, float) and (math.isnan(document) or math.isinf(document)):
        return None
    return document


def write_file(path_text: str, text: str) -> Path:
    """Write ``text`` to ``path_text`` (its folders made as ``mkdirs`` makes them): a new file
    beside it, flushed to disk, renamed into place. A failure is one line naming the file."""
    path = Path(path_text)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(path, text.encode("utf-8"))
    except OSError as exc:
        raise RmqError(f"{path_text}: cannot write: {exc.strerror or exc}") from None
    return path


@dataclass
class Exported:
    """What an export command did: the file written (None: nothing to export), the document it
    holds, and what mqadmin prints (``lead``: CommandUtil's ``[error]`` line for an unknown
    cluster; ``newline``: whether ``export ... success`` ends with one)."""

    path: str | None
    document: dict[str, Any]
    lead: str = ""
    newline: bool = False


def _export(path: str, document: dict[str, Any], lead: str = "", newline: bool = False) -> Exported:
    write_file(path, fastjson_text(document))
    return Exported(path, document, lead, newline)


# --- the requests ----------------------------------------------------------------------------------
def broker_properties(session: AdminSession, addr: str) -> dict[str, str]:
    """GET_BROKER_CONFIG (26): the broker's properties."""
    from rmqcli.admin.broker import parse_properties

    return dict(parse_properties(session.call(addr, RequestCode.GET_BROKER_CONFIG).body))


def _bean(value: Any, props: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """A body bean as the 4.9.8 bean writes it: its properties, sorted, nulls left out."""
    from rmqcli.remoting.json_body import to_fastjson_value

    plain = to_fastjson_value(value)
    return {k: plain[k] for k in sorted(props) if plain.get(k) is not None}


def user_topic_config(
    session: AdminSession, addr: str, special: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``getUserTopicConfig``: GET_ALL_TOPIC_CONFIG (21), then GET_SYSTEM_TOPIC_LIST_FROM_BROKER
    (305); the broker's system topics dropped, and ``%RETRY%`` / ``%DLQ%`` unless ``special``.
    Returns the ``dataVersion`` and the table (in the client's ``ConcurrentHashMap`` order)."""
    from rmqcli.remoting import json_body as jb

    response = session.call(addr, RequestCode.GET_ALL_TOPIC_CONFIG, timeout=USER_TIMEOUT)
    wrapper = jb.decode_or_empty(jb.TopicConfigSerializeWrapper, response.body)
    response = session.call(addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER, timeout=USER_TIMEOUT)
    system = set(jb.decode_or_empty(jb.TopicList, response.body).topic_list)
    table = {}
    for name in chm_order(list(wrapper.topic_config_table)):
        if name in system or (not special and name.startswith((RETRY_PREFIX, DLQ_PREFIX))):
            continue
        table[name] = _bean(wrapper.topic_config_table[name], TOPIC_PROPS)
    return _bean(wrapper.data_version, VERSION_PROPS), table


def is_system_group(name: str) -> bool:
    return name.startswith(SYS_GROUP_PREFIX) or name in SYSTEM_GROUPS


def user_subscription_groups(session: AdminSession, addr: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``getUserSubscriptionGroup``: GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201), the system groups
    dropped. Returns the ``dataVersion`` and the table."""
    from rmqcli.remoting import json_body as jb

    response = session.call(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, timeout=USER_TIMEOUT)
    wrapper = jb.decode_or_empty(jb.SubscriptionGroupWrapper, response.body)
    table = {
        name: _bean(wrapper.subscription_group_table[name], GROUP_PROPS)
        for name in chm_order(list(wrapper.subscription_group_table))
        if not is_system_group(name)
    }
    return _bean(wrapper.data_version, VERSION_PROPS), table


def _path(file_path: str | None, name: str) -> str:
    """``filePath + "/" + name`` as mqadmin joins them (the default folder without ``-f``)."""
    return f"{(file_path or DEFAULT_PATH).strip()}/{name}"


def _masters(info: Any, cluster: str, names: Iterable[str]) -> Iterator[tuple[str, str, Any]]:
    """``(broker name, master address, BrokerData)`` of each broker of ``names`` the cluster table
    knows, in ``HashSet`` order; ``BrokerError`` for a group without a master (brokerId 0)."""
    for name in hashmap_order(list(names)):
        data = info.broker_addr_table.get(name)
        if data is None:
            continue
        addr = data.broker_addrs.get(0)
        if addr is None:
            raise BrokerError(f"broker {name} of cluster {cluster} has no master (brokerId 0)")
        yield name, addr, data


# --- exportConfigs ---------------------------------------------------------------------------------
def export_configs(session: AdminSession, cluster: str, file_path: str | None = None) -> Exported:
    """``exportConfigs``: 106, then GET_BROKER_CONFIG (26) to each master of ``cluster``; the 16
    keys of ``needBrokerProprties`` per broker name and the cluster's scale. An unknown cluster
    gives CommandUtil's ``[error]`` line and an empty export, as mqadmin does.

    A key the broker does not report is left out (mqadmin fails on it with an NPE)."""
    cluster = cluster.strip()
    info = session.cluster_info()
    names = info.cluster_addr_table.get(cluster)
    masters: dict[str, int] = {}  # master address -> number of slaves
    for _, addr, data in _masters(info, cluster, names or []):
        masters[addr] = sum(1 for bid, a in data.broker_addrs.items() if bid != 0 and a)
    configs: dict[str, Any] = {}
    for addr in hashmap_order(list(masters)):
        props = broker_properties(session, addr)
        kept = {k: props[k] for k in CONFIG_KEYS if k in props}
        configs[props.get("brokerName", "")] = concurrent_map(kept)
    scale = {
        "namesrvSize": len(session.namesrv),
        "masterBrokerSize": len(masters),
        "slaveBrokerSize": sum(masters.values()),
    }
    document = hash_map({"brokerConfigs": hash_map(configs), "clusterScale": hash_map(scale)})
    return _export(_path(file_path, "configs.json"), document, "" if names is not None else UNKNOWN)


def missing_config_keys(exported: Exported) -> dict[str, list[str]]:
    """The keys of ``needBrokerProprties`` each broker did not report (rmq warns about them)."""
    configs = exported.document.get("brokerConfigs", {})
    return {
        name: [k for k in CONFIG_KEYS if k not in kept] for name, kept in configs.items() if len(kept) < 16
    }


# --- exportMetadata --------------------------------------------------------------------------------
def export_metadata(
    session: AdminSession,
    broker_addr: str | None,
    cluster: str | None,
    file_path: str | None = None,
    topic: bool = False,
    group: bool = False,
    special: bool = False,
) -> Exported:
    """``exportMetadata``: with ``-b`` the broker's own wrapper (``-t``: 21 + 305 into topic.json;
    else ``-g``: 201 into subscriptionGroup.json; neither: nothing); with ``-c`` every master's user
    topics and groups (both always asked), merged by name with their queue numbers summed, into
    topic.json (``-t``), subscriptionGroup.json (``-g``) or metadata.json, with ``exportTime``."""
    if broker_addr:
        addr = broker_addr.strip()
        if topic:
            version, topics = user_topic_config(session, addr, special)
            document = {"dataVersion": version, "topicConfigTable": topics}
            return _export(_path(file_path, "topic.json"), document)
        if group:
            version, groups = user_subscription_groups(session, addr)
            document = {"dataVersion": version, "subscriptionGroupTable": groups}
            return _export(_path(file_path, "subscriptionGroup.json"), document)
        return Exported(None, {})
    if not cluster:
        from rmqcli.errors import UsageError

        raise UsageError("one of -b/--brokerAddr or -c/--clusterName is required")
    cluster = cluster.strip()
    info = session.cluster_info()
    names = info.cluster_addr_table.get(cluster)
    addrs = [
        data.broker_addrs[0]
        for name in (names or [])
        if (data := info.broker_addr_table.get(name)) is not None and 0 in data.broker_addrs
    ]
    topics: dict[str, dict[str, Any]] = {}
    groups: dict[str, dict[str, Any]] = {}
    for addr in hashmap_order(addrs):  # a HashSet of master addresses
        _, broker_topics = user_topic_config(session, addr, special)
        _, broker_groups = user_subscription_groups(session, addr)
        for name, config in broker_topics.items():
            seen = topics.get(name)
            if seen is not None:
                config["writeQueueNums"] = seen.get("writeQueueNums", 0) + config.get("writeQueueNums", 0)
                config["readQueueNums"] = seen.get("readQueueNums", 0) + config.get("readQueueNums", 0)
            topics[name] = config
        for name, config in broker_groups.items():
            seen = groups.get(name)
            if seen is not None:
                config["retryQueueNums"] = seen.get("retryQueueNums", 0) + config.get("retryQueueNums", 0)
            groups[name] = config
    result: dict[str, Any] = {}
    if topic:
        result["topicConfigTable"], name = hash_map(topics), "topic.json"
    elif group:
        result["subscriptionGroupTable"], name = hash_map(groups), "subscriptionGroup.json"
    else:
        result["topicConfigTable"] = hash_map(topics)
        result["subscriptionGroupTable"] = hash_map(groups)
        name = "metadata.json"
    result["exportTime"] = int(time.time() * 1000)
    lead = "" if names is not None else UNKNOWN
    return _export(_path(file_path, name), hash_map(result), lead, newline=True)


# --- exportMetrics ---------------------------------------------------------------------------------
def _runtime_info(session: AdminSession, addr: str) -> dict[str, str]:
    from rmqcli.remoting import json_body as jb

    response = session.call(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    return jb.decode_or_empty(jb.KVTable, response.body).table


def _stats(session: AdminSession, addr: str, key: str) -> Any | None:
    """VIEW_BROKER_STATS_DATA (315) of ``TOPIC_PUT_NUMS`` / ``key``; None when the broker has no
    such item (its SYSTEM_ERROR, which mqadmin catches) or the answer does not parse."""
    from rmqcli.remoting import headers as hd
    from rmqcli.remoting import json_body as jb

    header = hd.ViewBrokerStatsDataRequestHeader(stats_name="TOPIC_PUT_NUMS", stats_key=key)
    try:
        response = session.call(addr, RequestCode.VIEW_BROKER_STATS_DATA, header)
        return jb.decode_or_empty(jb.BrokerStatsData, response.body)
    except BrokerError:
        return None


def compute_24h_sum(stats: Any) -> int:
    """``StatsAllSubCommand.compute24HourSum``: the day's sum, else the hour's, else the minute's."""
    for item in (stats.stats_day, stats.stats_hour, stats.stats_minute):
        if item.sum:
            return int(item.sum)
    return 0


def _first_double(text: str | None) -> float:
    """``Double.parseDouble(text.split(" ")[0])``; 0.0 when absent or not a number."""
    try:
        return float((text or "").split(" ")[0])
    except ValueError:
        return 0.0


def _long(table: dict[str, str], key: str) -> int:
    try:
        return int(table.get(key, "0"))
    except ValueError:
        return 0


def _client_info(session: AdminSession, groups: list[str]) -> JavaSet:
    """``language%version`` of every connection of every group (``examineConsumerConnectionInfo``:
    105 for ``%RETRY%<group>``, then GET_CONSUMER_CONNECTION_LIST (203) to one of its brokers,
    picked at random as mqadmin does); groups that fail are skipped."""
    import random

    from rmqcli.remoting import headers as hd
    from rmqcli.remoting import json_body as jb

    found: list[str] = []
    for group in groups:
        try:
            route = session.route(RETRY_PREFIX + group)
            if not route.broker_datas:
                continue
            addr = master_addr(random.choice(route.broker_datas).broker_addrs)
            if not addr:
                continue
            header = hd.GetConsumerConnectionListRequestHeader(consumer_group=group)
            response = session.call(addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, header)
            connections = jb.decode_or_empty(jb.ConsumerConnection, response.body).connection_set
        except (BrokerError, NetworkError):
            continue
        found.extend(f"{c.language}%{version_desc(c.version)}" for c in connections)
    return JavaSet(hashmap_order(found))


def _broker_metrics(session: AdminSession, addr: str, totals: dict[str, dict[str, Any]]) -> dict[str, Any]:
    from rmqcli.remoting.codec import DEFAULT_VERSION

    kv = _runtime_info(session, addr)
    props = broker_properties(session, addr)
    _, groups = user_subscription_groups(session, addr)
    _, topics = user_topic_config(session, addr, False)
    trans = _stats(session, addr, "RMQ_SYS_TRANS_HALF_TOPIC")
    schedule = _stats(session, addr, "SCHEDULE_TOPIC_XXXX")
    tps = {
        "normalInTps": _first_double(kv.get("putTps")),
        "normalOutTps": _first_double(kv.get("getTransferedTps")),
        "transInTps": float(trans.stats_minute.tps) if trans is not None else 0.0,
        "scheduleInTps": float(schedule.stats_minute.tps) if schedule is not None else 0.0,
    }
    one_day = {
        "normalOneDayInNum": _long(kv, "msgPutTotalTodayMorning") - _long(kv, "msgPutTotalYesterdayMorning"),
        "normalOneDayOutNum": _long(kv, "msgGetTotalTodayMorning") - _long(kv, "msgGetTotalYesterdayMorning"),
        "transOneDayInNum": compute_24h_sum(trans) if trans is not None else 0,
        "scheduleOneDayInNum": compute_24h_sum(schedule) if schedule is not None else 0,
    }
    for key, value in tps.items():
        total = "total" + key[0].upper() + key[1:]
        totals["totalTps"][total] += value
    for key, value in one_day.items():
        totals["totalOneDayNum"][key] += value
    quota = {
        "diskRatio": hash_map(
            {
                "commitLogDiskRatio": kv.get("commitLogDiskRatio"),
                "consumeQueueDiskRatio": kv.get("consumeQueueDiskRatio"),
            }
        ),
        "tps": hash_map(tps),
        "oneDayNum": hash_map(one_day),
        "messageAverageSize": kv.get("putMessageAverageSize"),
        "topicSize": len(topics),
        "groupSize": len(groups),
    }
    version = {
        "rocketmqVersion": version_desc(DEFAULT_VERSION),  # the tool's own version
        "clientInfo": _client_info(session, [g.get("groupName", n) for n, g in groups.items()]),
    }
    env = {"cpuNum": props.get("clientCallbackExecutorThreads"), "totalMemKBytes": kv.get("totalMemKBytes")}
    return hash_map(
        {"runtimeEnv": hash_map(env), "runtimeQuota": hash_map(quota), "runtimeVersion": hash_map(version)}
    )


def export_metrics(session: AdminSession, cluster: str, file_path: str | None = None) -> Exported:
    """``exportMetrics``: 106, then per broker of ``cluster`` its master's runtime info (28), config
    (26), user groups (201), user topics (21 + 305), the put stats of the transaction half topic
    and of the delay topic (315), and its groups' consumer connections (105 + 203).

    An unknown cluster is ``NotFoundError`` (exit 3) with CommandUtil's wording; mqadmin fails with
    a NullPointerException there and writes nothing."""
    cluster = cluster.strip()
    info = session.cluster_info()
    names = info.cluster_addr_table.get(cluster)
    if names is None:
        raise NotFoundError(f"cluster [{cluster}] not exist: {UNKNOWN_CLUSTER}")
    totals: dict[str, dict[str, Any]] = {
        "totalTps": dict.fromkeys(
            ("totalNormalInTps", "totalNormalOutTps", "totalTransInTps", "totalScheduleInTps"), 0.0
        ),
        "totalOneDayNum": dict.fromkeys(
            ("normalOneDayInNum", "normalOneDayOutNum", "transOneDayInNum", "scheduleOneDayInNum"), 0
        ),
    }
    report: dict[str, Any] = {}
    for name, addr, _ in _masters(info, cluster, names):
        report[name] = _broker_metrics(session, addr, totals)
    total_data = hash_map(
        {"totalTps": hash_map(totals["totalTps"]), "totalOneDayNum": hash_map(totals["totalOneDayNum"])}
    )
    document = hash_map({"evaluateReport": hash_map(report), "totalData": total_data})
    return _export(_path(file_path, "metrics.json"), document)
