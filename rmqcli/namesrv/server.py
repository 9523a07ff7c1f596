"""The NameServer: route tables and KV config (protocol.md B.2; ``RouteInfoManager``, ``KVConfigManager``,
``DefaultRequestProcessor``/``ClientRequestProcessor`` of RocketMQ).

State is in memory, as in the real name server: brokers register every 30 s and are forgotten when
their connection closes or after 120 s of silence (A.7), or after the ``heartbeatTimeoutMillis``
their registration gives (RocketMQ 5). Queue data of a topic comes from master registrations
(broker id 0). Route bodies are fastjson's bare-key form for clients older than V4_9_4 (version <
401) and standard JSON otherwise or when ``acceptStandardJsonOnly`` (A.9 #4).

SlaveActingMaster (RocketMQ 5.1's ``RouteInfoManager``): a registration says whether its group
takes part (``enableActingMaster``; the last registrant decides); BROKER_HEARTBEAT (904) keeps a
broker alive between registrations; GET_BROKER_MEMBER_GROUP (901) answers a group's live members.
In a group that takes part and has no master, the slave with the smallest id sets the group's
queue data with the write bit cleared, and a master's leaving clears that bit too; with
``supportActingMaster=true`` a route answer then names that slave as broker id 0, so 4.x consumers
pull, commit offsets and lock queues on it while producers send elsewhere. The
``rmq_sys_SYNC_BROKER_MEMBER_`` topics, cluster info and member groups keep the real ids.
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from formats.javatext import parse_boolean
from formats.names import ORDER_TOPIC_CONFIG, PERM_WRITE
from rmqcli.conf.keys import NAMESRV, owned
from rmqcli.conf.parse import conf_of, text
from rmqcli.remoting import headers as hd
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.remoting.server.bodies import properties_body, properties_text, required_body
from rmqcli.remoting.server.connection import Connection, Reply, not_supported
from rmqcli.remoting.server.refusal import FAQ

log = logging.getLogger(__name__)

BROKER_EXPIRED_SECONDS = 120.0  # RouteInfoManager.DEFAULT_BROKER_CHANNEL_EXPIRED_TIME
SYNC_MEMBER_TOPIC_PREFIX = "rmq_sys_SYNC_BROKER_MEMBER_"  # TopicValidator.SYNC_BROKER_MEMBER_GROUP_PREFIX
# NamesrvConfig keys rmq serve takes from its --config file, with 5.1.1's defaults (rows of
# rmqcli.conf.keys, owner namesrv; notifyMinBrokerIdChanged only "false": the pushes, 905, are not
# implemented)
SETTINGS = {key.name: text(key.default) for key in owned(NAMESRV)}
STANDARD_JSON_VERSION = 401  # MQVersion.Version.V4_9_4.ordinal()
PATH_KEYS = ("kvConfigPath", "configStorePath")  # UPDATE_NAMESRV_CONFIG refuses these (4.9.7)


def default_config() -> dict[str, str]:
    """``NamesrvConfig`` + ``NettyServerConfig`` properties with their 4.9.7 defaults (``listenPort``
    is added from the listening socket). The KV table lives in memory only, so no ``kvConfigPath``."""
    return {
        "productEnvName": "center",
        "clusterTest": "false",
        "orderMessageEnable": "false",
        "serverWorkerThreads": "8",
        "serverCallbackExecutorThreads": "0",
        "serverSelectorThreads": "3",
        "serverOnewaySemaphoreValue": "256",
        "serverAsyncSemaphoreValue": "64",
        "serverChannelMaxIdleTimeSeconds": "120",
        "serverSocketSndBufSize": "65535",
        "serverSocketRcvBufSize": "65535",
        "serverPooledByteBufAllocatorEnable": "true",
        "useEpollNativeSelector": "false",
        **SETTINGS,
    }


def namesrv_config(props: Mapping[str, str]) -> dict[str, str]:
    """``default_config`` with the NameServer keys of a ``--config`` file (``SETTINGS``), read by
    ``rmqcli.conf`` (a value that does not parse, or a bad one, is a ``UsageError``)."""
    conf = conf_of(props)
    config = default_config()
    config.update((name, text(conf.value(name))) for name in SETTINGS if name in conf)
    return config


@dataclass
class LiveBroker:
    """``BrokerLiveInfo``: when a broker address last registered, and over which connection."""

    last_update: float
    data_version: jb.DataVersion
    connection: Connection | None
    ha_server_addr: str = ""
    timeout: float = BROKER_EXPIRED_SECONDS  # s: heartbeatTimeoutMillis of its registration


@dataclass
class NameServer:
    """Route info and KV config; ``handle`` answers one request."""

    kv: dict[str, dict[str, str]] = field(default_factory=dict)
    brokers: dict[str, jb.BrokerData] = field(default_factory=dict)  # brokerAddrTable
    clusters: dict[str, list[str]] = field(default_factory=dict)  # clusterAddrTable
    topics: dict[str, dict[str, jb.QueueData]] = field(default_factory=dict)  # topicQueueTable
    live: dict[str, LiveBroker] = field(default_factory=dict)  # brokerLiveTable
    config: dict[str, str] = field(default_factory=default_config)

    # --- dispatch -----------------------------------------------------------------------------
    def handle(self, request: RemotingCommand, conn: Connection) -> Reply:
        handler = _HANDLERS.get(request.code)
        if handler is None:
            return not_supported(request)
        return handler(self, request, conn)

    def on_close(self, conn: Connection) -> None:
        """``BrokerHousekeepingService.onChannelClose``: forget brokers registered over ``conn``."""
        for addr, live in list(self.live.items()):
            if live.connection is conn:
                log.info("broker %s: connection closed; removed from the route table", addr)
                self._remove_addr(addr)

    @property
    def supports_acting_master(self) -> bool:
        return parse_boolean(self.config.get("supportActingMaster"))

    async def scan_expired(self) -> None:
        """``RouteInfoManager.scanNotActiveBroker`` every ``scanNotActiveBrokerInterval``."""
        period = int(self.config.get("scanNotActiveBrokerInterval", "5000")) / 1000
        while True:
            await asyncio.sleep(period)
            self.expire(time.monotonic())

    def expire(self, now: float) -> None:
        for addr, live in list(self.live.items()):
            if now - live.last_update > live.timeout:
                log.warning("broker %s: silent for %.0f s; removed", addr, live.timeout)
                if live.connection is not None:
                    live.connection.abort()
                self._remove_addr(addr)

    def heartbeat(self, addr: str) -> None:
        """``updateBrokerInfoUpdateTimestamp``: a registered broker is alive (others are ignored)."""
        live = self.live.get(addr)
        if live is not None:
            live.last_update = time.monotonic()

    # --- route table --------------------------------------------------------------------------
    def register(
        self,
        h: hd.RegisterBrokerRequestHeader,
        wrapper: jb.TopicConfigSerializeWrapper,
        conn: Connection | None,
    ) -> str | None:
        """``RouteInfoManager.registerBroker``; returns the master's address for a slave."""
        names = self.clusters.setdefault(h.cluster_name, [])
        if h.broker_name not in names:
            names.append(h.broker_name)
        data = self.brokers.get(h.broker_name)
        first = data is None
        if data is None:
            data = self.brokers[h.broker_name] = jb.BrokerData(
                cluster=h.cluster_name, broker_name=h.broker_name
            )
        data.enable_acting_master = h.enable_acting_master  # the last registrant decides (None: 4.x)
        for bid, addr in list(data.broker_addrs.items()):
            if addr == h.broker_addr and bid != h.broker_id:
                del data.broker_addrs[bid]  # the same address switched role
        old_addr = data.broker_addrs.get(h.broker_id)
        old_live = self.live.get(old_addr) if old_addr is not None and old_addr != h.broker_addr else None
        if old_live is not None and (old_live.data_version.state_version or 0) > (
            wrapper.data_version.state_version or 0
        ):  # 5.1.1: a controller-mode id held by a newer master epoch: the newcomer is ignored
            log.warning("Registered Broker conflicts with the existed one, just ignore.: Cluster:%s, "
                        "BrokerName:%s, BrokerId:%s, Old BrokerAddr:%s, Old Version:%s, New BrokerAddr:%s, "
                        "New Version:%s.", h.cluster_name, h.broker_name, h.broker_id, old_addr,
                        old_live.data_version.state_version, h.broker_addr,
                        wrapper.data_version.state_version)  # fmt: skip
            self.live.pop(h.broker_addr, None)
            return None
        first = first or h.broker_addr not in data.broker_addrs.values()
        data.broker_addrs[h.broker_id] = h.broker_addr
        previous = self.live.get(h.broker_addr)
        changed = previous is None or (
            previous.data_version.counter,
            previous.data_version.timestamp,
        ) != (wrapper.data_version.counter, wrapper.data_version.timestamp)
        # a prime slave: the smallest id of a group without a master, from a 5.x broker
        prime_slave = (
            h.enable_acting_master is not None and h.broker_id != 0 and h.broker_id == min(data.broker_addrs)
        )
        if h.broker_id == 0 or prime_slave:
            for config in wrapper.topic_config_table.values():
                queues = self.topics.setdefault(config.topic_name, {})
                if not (changed or first or h.broker_name not in queues):
                    continue
                queues[h.broker_name] = jb.QueueData(
                    broker_name=h.broker_name,
                    perm=config.perm & ~PERM_WRITE if prime_slave else config.perm,
                    read_queue_nums=config.read_queue_nums,
                    topic_sys_flag=config.topic_sys_flag,
                    write_queue_nums=config.write_queue_nums,
                )
        timeout = (h.heartbeat_timeout_millis or 0) / 1000 or BROKER_EXPIRED_SECONDS
        self.live[h.broker_addr] = LiveBroker(
            time.monotonic(), wrapper.data_version, conn, h.ha_server_addr, timeout
        )
        if h.broker_id != 0:
            return data.broker_addrs.get(0)
        return None

    def _remove_addr(self, addr: str) -> None:
        self.live.pop(addr, None)
        for name, data in list(self.brokers.items()):
            removed = False
            for bid, a in list(data.broker_addrs.items()):
                if a == addr:
                    del data.broker_addrs[bid]
                    removed = True
            if not data.broker_addrs:
                self._remove_broker_name(name)
            elif removed:
                self._masterless(data)

    def _masterless(self, data: jb.BrokerData) -> None:
        """``cleanTopicByUnRegisterRequests``: a group that takes part in SlaveActingMaster and has
        lost its master keeps its queue data, read-only."""
        if not data.enable_acting_master or 0 in data.broker_addrs:
            return
        for queues in self.topics.values():
            qd = queues.get(data.broker_name)
            if qd is not None:
                qd.perm &= ~PERM_WRITE

    def _remove_broker_name(self, name: str) -> None:
        data = self.brokers.pop(name, None)
        if data is not None:
            names = self.clusters.get(data.cluster, [])
            if name in names:
                names.remove(name)
            if not names:
                self.clusters.pop(data.cluster, None)
        for topic, queues in list(self.topics.items()):
            queues.pop(name, None)
            if not queues:
                del self.topics[topic]

    def route(self, topic: str) -> jb.TopicRouteData | None:
        """``RouteInfoManager.pickupTopicRouteData``: None when no broker data can be found."""
        queues = self.topics.get(topic)
        if not queues:
            return None
        datas = []
        acting = self.supports_acting_master and not topic.startswith(SYNC_MEMBER_TOPIC_PREFIX)
        for name, qd in queues.items():
            data = self.brokers.get(name)
            if data is None:
                continue
            addrs = dict(sorted(data.broker_addrs.items()))
            if acting and addrs and 0 not in addrs and data.enable_acting_master and not qd.perm & PERM_WRITE:
                smallest = min(addrs)
                addrs = {0: addrs.pop(smallest), **addrs}  # the acting master, as clients see it
            datas.append(
                jb.BrokerData(
                    broker_addrs=addrs,
                    broker_name=data.broker_name,
                    cluster=data.cluster,
                    enable_acting_master=data.enable_acting_master,
                )
            )
        if not datas:
            return None
        route = jb.TopicRouteData(broker_datas=datas, queue_datas=list(queues.values()))
        if self.config.get("orderMessageEnable") == "true":
            route.order_topic_conf = self.kv.get(ORDER_TOPIC_CONFIG, {}).get(topic)
        return route


# --- handlers (one per request code) -------------------------------------------------------------
def put_kv(ns: NameServer, req: RemotingCommand, conn: Connection) -> Reply:
    h = req.header(hd.PutKVConfigRequestHeader)
    ns.kv.setdefault(h.namespace, {})[h.key] = h.value
    return req.response()


def get_kv(ns: NameServer, req: RemotingCommand, conn: Connection) -> Reply:
    h = req.header(hd.GetKVConfigRequestHeader)
    value = ns.kv.get(h.namespace, {}).get(h.key)
    if value is None:
        return req.response(RS.QUERY_NOT_FOUND, f"No config item, Namespace: {h.namespace} Key: {h.key}")
    return req.response(header=hd.GetKVConfigResponseHeader(value=value))


def delete_kv(ns: NameServer, req: RemotingCommand, conn: Connection) -> Reply:
    h = req.header(hd.DeleteKVConfigRequestHeader)
    table = ns.kv.get(h.namespace)
    if table is not None:
        table.pop(h.key, None)
        if not table:
            del ns.kv[h.namespace]
    return req.response()


def get_kv_list(ns: NameServer, req: RemotingCommand, conn: Connection) -> Reply:
    h = req.header(hd.GetKVListByNamespaceRequestHeader)
    table = ns.kv.get(h.namespace)
    if not table:
        return req.response(RS.QUERY_NOT_FOUND, f"No config item, Namespace: {h.namespace}")
    return req.response(body=jb.encode(jb.KVTable(table=dict(table))))


def register_broker(ns: NameServer, req: RemotingCommand, conn: Connection) -> Reply:
    h = req.header(hd.RegisterBrokerRequestHeader)
    if h.body_crc32 and (zlib.crc32(req.body) & 0x7FFFFFFF) != h.body_crc32:
        return req.response(RS.SYSTEM_ERROR, "crc32 not match")
    if h.compressed:
        return req.response(RS.SYSTEM_ERROR, "compressed RegisterBrokerBody is not supported")
    wrapper = jb.TopicConfigSerializeWrapper()
    if req.body:
        if req.version >= 37:  # V3_0_11: RegisterBrokerBody with filter servers
            wrapper = required_body(jb.RegisterBrokerBody, req.body).topic_config_serialize_wrapper
        else:
            wrapper = required_body(jb.TopicConfigSerializeWrapper, req.body)
    master = ns.register(h, wrapper, conn)
    master_ha = ns.live[master].ha_server_addr if master and master in ns.live else None
    body = b""
    order = ns.kv.get(ORDER_TOPIC_CONFIG)
    if order:
        body = jb.encode(jb.KVTable(table=dict(order)))
    return req.response(
        header=hd.RegisterBrokerResponseHeader(ha_server_addr=master_ha, master_addr=master), body=body
    )


def unregister_broker(ns: NameServer, req: RemotingCommand, conn: Connection) -> Reply:
    h = req.header(hd.UnRegisterBrokerRequestHeader)
    data = ns.brokers.get(h.broker_name)
    ns.live.pop(h.broker_addr, None)
    if data is not None:
        if data.broker_addrs.get(h.broker_id) == h.broker_addr:
            del data.broker_addrs[h.broker_id]
        if not data.broker_addrs:
            ns._remove_broker_name(h.broker_name)
        else:
            ns._masterless(data)
    return req.response()


def broker_heartbeat(ns: NameServer, req: RemotingCommand, conn: Connection) -> Reply:
    """BROKER_HEARTBEAT (904), oneway: nothing is answered."""
    h = req.header(hd.BrokerHeartbeatRequestHeader)
    ns.heartbeat(h.broker_addr)
    return req.response()


def broker_member_group(ns: NameServer, req: RemotingCommand, conn: Connection) -> Reply:
    """GET_BROKER_MEMBER_GROUP (901): the group's live members by id; the cluster is echoed. 5.1.1
    leaves the remark of its answer at ``createResponseCommand``'s default."""
    h = req.header(hd.GetBrokerMemberGroupRequestHeader)
    data = ns.brokers.get(h.broker_name)
    group = jb.BrokerMemberGroup(
        broker_addrs=dict(sorted(data.broker_addrs.items())) if data is not None else {},
        broker_name=h.broker_name,
        cluster=h.cluster_name,
    )
    body = jb.encode(jb.GetBrokerMemberGroupResponseBody(broker_member_group=group))
    return req.response(remark="not set any response code", body=body)


def get_route(ns: NameServer, req: RemotingCommand, conn: Connection) -> Reply:
    h = req.header(hd.GetRouteInfoRequestHeader)
    route = ns.route(h.topic)
    if route is None:
        return req.response(
            RS.TOPIC_NOT_EXIST, f"No topic route info in name server for the topic: {h.topic}{FAQ}"
        )
    standard = req.version >= STANDARD_JSON_VERSION or bool(h.accept_standard_json_only)
    body = jb.encode_standard(route) if standard else jb.encode(route)
    return req.response(body=body)


def cluster_info(ns: NameServer, req: RemotingCommand, conn: Connection) -> Reply:
    info = jb.ClusterInfo(
        broker_addr_table={
            name: jb.BrokerData(
                broker_addrs=dict(d.broker_addrs), broker_name=d.broker_name, cluster=d.cluster
            )
            for name, d in ns.brokers.items()
        },
        cluster_addr_table={c: list(n) for c, n in ns.clusters.items()},
    )
    return req.response(body=jb.encode(info))


def _write_perm(ns: NameServer, broker_name: str, wipe: bool) -> int:
    """``RouteInfoManager.operateWritePermOfBroker``: the number of topics changed."""
    count = 0
    for queues in ns.topics.values():
        qd = queues.get(broker_name)
        if qd is not None:
            qd.perm = qd.perm & ~PERM_WRITE if wipe else qd.perm | PERM_WRITE
            count += 1
    return count


def wipe_write_perm(ns: NameServer, req: RemotingCommand, conn: Connection) -> Reply:
    h = req.header(hd.WipeWritePermOfBrokerRequestHeader)
    count = _write_perm(ns, h.broker_name, True)
    return req.response(header=hd.WipeWritePermOfBrokerResponseHeader(wipe_topic_count=count))


def add_write_perm(ns: NameServer, req: RemotingCommand, conn: Connection) -> Reply:
    h = req.header(hd.AddWritePermOfBrokerRequestHeader)
    count = _write_perm(ns, h.broker_name, False)
    return req.response(header=hd.AddWritePermOfBrokerResponseHeader(add_topic_count=count))


def all_topics(ns: NameServer, req: RemotingCommand, conn: Connection) -> Reply:
    return req.response(body=jb.encode(jb.TopicList(topic_list=list(ns.topics))))


def topics_by_cluster(ns: NameServer, req: RemotingCommand, conn: Connection) -> Reply:
    h = req.header(hd.GetTopicsByClusterRequestHeader)
    names = set(ns.clusters.get(h.cluster, []))
    topics = [t for t, queues in ns.topics.items() if names & queues.keys()]
    return req.response(body=jb.encode(jb.TopicList(topic_list=topics)))


def system_topics(ns: NameServer, req: RemotingCommand, conn: Connection) -> Reply:
    """GET_SYSTEM_TOPIC_LIST_FROM_NS: cluster and broker names, and one broker's address."""
    topics: list[str] = []
    addr = None
    for cluster, names in ns.clusters.items():
        topics.append(cluster)
        topics.extend(names)
    for data in ns.brokers.values():
        if data.broker_addrs:
            addr = next(iter(data.broker_addrs.values()))
    return req.response(body=jb.encode(jb.TopicList(broker_addr=addr, topic_list=topics)))


def delete_topic(ns: NameServer, req: RemotingCommand, conn: Connection) -> Reply:
    h = req.header(hd.DeleteTopicFromNamesrvRequestHeader)
    queues = ns.topics.get(h.topic)
    if queues is not None:
        if h.cluster_name:
            for name in ns.clusters.get(h.cluster_name, []):
                queues.pop(name, None)
            if not queues:
                del ns.topics[h.topic]
        else:
            del ns.topics[h.topic]
    return req.response()


def query_data_version(ns: NameServer, req: RemotingCommand, conn: Connection) -> Reply:
    h = req.header(hd.QueryDataVersionRequestHeader)
    version = required_body(jb.DataVersion, req.body) if req.body else jb.DataVersion()
    live = ns.live.get(h.broker_addr)
    changed = live is None or (live.data_version.counter, live.data_version.timestamp) != (
        version.counter,
        version.timestamp,
    )
    if live is not None:
        live.last_update = time.monotonic()
    body = jb.encode(live.data_version) if live is not None else b""
    return req.response(header=hd.QueryDataVersionResponseHeader(changed=changed), body=body)


def _listen_port(ns: NameServer, conn: Connection) -> None:
    if "listenPort" not in ns.config and conn.transport is not None:
        sockname = conn.transport.get_extra_info("sockname")
        if isinstance(sockname, tuple) and len(sockname) >= 2:
            ns.config["listenPort"] = str(sockname[1])


def get_config(ns: NameServer, req: RemotingCommand, conn: Connection) -> Reply:
    """``Configuration.getAllConfigsFormatString``: ``key=value`` lines."""
    _listen_port(ns, conn)
    return req.response(body=properties_text(ns.config))


def update_config(ns: NameServer, req: RemotingCommand, conn: Connection) -> Reply:
    """``DefaultRequestProcessor.updateConfig``: the config paths cannot change (NO_PERMISSION);
    other keys change only when they exist (``Configuration.mergeIfExist``)."""
    _listen_port(ns, conn)
    changes = properties_body(req.body, pairs_only=True)
    if any(key in changes for key in PATH_KEYS):
        return req.response(RS.NO_PERMISSION, "Can not update config path")
    ns.config.update((key, value) for key, value in changes.items() if key in ns.config)
    return req.response()


_HANDLERS = {
    RC.PUT_KV_CONFIG: put_kv,
    RC.GET_KV_CONFIG: get_kv,
    RC.DELETE_KV_CONFIG: delete_kv,
    RC.GET_KVLIST_BY_NAMESPACE: get_kv_list,
    RC.REGISTER_BROKER: register_broker,
    RC.UNREGISTER_BROKER: unregister_broker,
    RC.GET_ROUTEINFO_BY_TOPIC: get_route,
    RC.GET_BROKER_CLUSTER_INFO: cluster_info,
    RC.WIPE_WRITE_PERM_OF_BROKER: wipe_write_perm,
    RC.ADD_WRITE_PERM_OF_BROKER: add_write_perm,
    RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: all_topics,
    RC.GET_TOPICS_BY_CLUSTER: topics_by_cluster,
    RC.GET_SYSTEM_TOPIC_LIST_FROM_NS: system_topics,
    RC.DELETE_TOPIC_IN_NAMESRV: delete_topic,
    RC.QUERY_DATA_VERSION: query_data_version,
    RC.BROKER_HEARTBEAT: broker_heartbeat,
    RC.GET_BROKER_MEMBER_GROUP: broker_member_group,
    RC.GET_NAMESRV_CONFIG: get_config,
    RC.UPDATE_NAMESRV_CONFIG: update_config,
}
