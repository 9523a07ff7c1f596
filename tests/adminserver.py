"""A NameServer and Brokers on loopback for the mqadmin tests: real asyncio sockets, the real codec.

``AdminServer`` runs one event loop in a thread with ``namesrv_count`` name server listeners (one
shared state, as a set of name servers that brokers all register with) and one listener per broker.
It answers the request codes behind the mqadmin commands with headers and bodies shaped as
PROTOCOL.md B.2, B.4 and B.9 document (built with ``rmqcli.remoting.json_body``), keeps state
(UPDATE_AND_CREATE_TOPIC registers the topic with the name servers, as a broker's re-register
does), and answers any other code with REQUEST_CODE_NOT_SUPPORTED (A.6).
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from rmqcli.remoting import headers as hd
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.codec import FrameDecoder, RemotingCommand, decode, encode
from rmqcli.remoting.codes import ResponseCode as RS

TOPIC_RE = re.compile(r"^[%|a-zA-Z0-9_-]+$")
FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
PERM_WRITE = 2


def default_runtime(version: str = "V4_9_7") -> dict[str, str]:
    """A GET_BROKER_RUNTIME_INFO table with the keys mqadmin reads (C.4.1)."""
    return {
        "brokerVersionDesc": version,
        "brokerVersion": "407",
        "msgPutTotalYesterdayMorning": "0",
        "msgPutTotalTodayMorning": "10",
        "msgPutTotalTodayNow": "25",
        "msgGetTotalYesterdayMorning": "0",
        "msgGetTotalTodayMorning": "4",
        "msgGetTotalTodayNow": "9",
        "sendThreadPoolQueueSize": "0",
        "sendThreadPoolQueueHeadWaitTimeMills": "0",
        "pullThreadPoolQueueSize": "0",
        "pullThreadPoolQueueHeadWaitTimeMills": "0",
        "pageCacheLockTimeMills": "0",
        "earliestMessageTimeStamp": str(int(time.time() * 1000) - 3 * 3600 * 1000),
        "putTps": "12.5 10.0 8.0",
        "getTransferedTps": "3.25 2.0 1.0",
        "commitLogDiskRatio": "0.4512",
        "bootTimestamp": "1700000000000",
    }


@dataclass
class Broker:
    """One broker: identity, listener, topic configs, queue offsets, runtime table, config."""

    cluster: str
    name: str
    broker_id: int = 0
    port: int = 0
    topics: dict[str, jb.TopicConfig] = field(default_factory=dict)
    offsets: dict[str, dict[int, tuple[int, int, int]]] = field(default_factory=dict)
    runtime: dict[str, str] = field(default_factory=default_runtime)
    config: dict[str, str] = field(default_factory=dict)
    consumers: dict[str, list[str]] = field(default_factory=dict)
    data_version: int = 1

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"


class AdminServer:
    """Name servers and brokers on 127.0.0.1, each on its own port, served by one thread."""

    def __init__(
        self,
        brokers: list[tuple[str, str, int]] | None = None,
        namesrv_count: int = 1,
        initial_topics: bool = True,
    ):
        spec = (
            brokers
            if brokers is not None
            else [("DefaultCluster", "broker-a", 0), ("DefaultCluster", "broker-b", 0)]
        )
        self.brokers = [Broker(cluster=c, name=n, broker_id=i) for c, n, i in spec]
        self.namesrv_ports: list[int] = []
        self.namesrv_count = namesrv_count
        # name server state (shared by every name server listener)
        self.routes: dict[str, dict[str, jb.QueueData]] = {}
        self.kv: dict[str, dict[str, str]] = {}
        self.namesrv_config: dict[str, str] = {"rocketmqHome": "/opt/rocketmq", "orderMessageEnable": "false"}
        self.topic_order: list[str] = []
        # what happened
        self.requests: list[tuple[str, int]] = []
        self.connections: dict[str, int] = {}
        self.fail: dict[int, tuple[int, str]] = {}
        self._servers: list[Any] = []
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="adminserver", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("admin test server did not start")
        if initial_topics:
            for b in self.brokers:
                if b.broker_id == 0:
                    for topic, queues in (
                        ("TBW102", 8),
                        ("SELF_TEST_TOPIC", 1),
                        (b.cluster, 16),
                        (b.name, 1),
                        ("OFFSET_MOVED_EVENT", 1),
                    ):
                        self.create_topic(
                            b, topic, queues, queues, 7 if topic in ("TBW102", b.cluster, b.name) else 6
                        )

    # --- lifecycle ---------------------------------------------------------------------------
    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._start())
        self._ready.set()
        self.loop.run_forever()

    async def _start(self) -> None:
        for _ in range(self.namesrv_count):
            server = await asyncio.start_server(lambda r, w: self._serve(r, w, None), "127.0.0.1", 0)
            self._servers.append(server)
            self.namesrv_ports.append(server.sockets[0].getsockname()[1])
        for broker in self.brokers:
            server = await asyncio.start_server(lambda r, w, b=broker: self._serve(r, w, b), "127.0.0.1", 0)
            self._servers.append(server)
            broker.port = server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        async def shutdown() -> None:
            for server in self._servers:
                server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        self.loop.close()

    def __enter__(self) -> AdminServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def namesrv(self) -> str:
        """The ``-n`` value: every name server, ``;``-separated."""
        return ";".join(f"127.0.0.1:{p}" for p in self.namesrv_ports)

    def broker(self, name: str, broker_id: int = 0) -> Broker:
        return next(b for b in self.brokers if b.name == name and b.broker_id == broker_id)

    def codes(self, role: str | None = None) -> list[int]:
        """Request codes received, in order (``role``: ``namesrv`` or a broker address)."""
        return [code for who, code in self.requests if role is None or who == role]

    # --- state helpers (also used by tests to stage data) ------------------------------------
    def create_topic(
        self, broker: Broker, topic: str, read: int = 8, write: int = 8, perm: int = 6, **kw: Any
    ) -> None:
        broker.topics[topic] = jb.TopicConfig(
            topic_name=topic, read_queue_nums=read, write_queue_nums=write, perm=perm, **kw
        )
        broker.data_version += 1
        if broker.broker_id == 0:
            self.register(broker, topic)

    def register(self, broker: Broker, topic: str) -> None:
        """What REGISTER_BROKER does for one topic: the master's queue data goes into the route."""
        config = broker.topics[topic]
        if topic not in self.routes:
            self.routes[topic] = {}
            self.topic_order.append(topic)
        self.routes[topic][broker.name] = jb.QueueData(
            broker_name=broker.name,
            perm=config.perm,
            read_queue_nums=config.read_queue_nums,
            write_queue_nums=config.write_queue_nums,
            topic_sys_flag=config.topic_sys_flag,
        )

    def set_offsets(self, broker: Broker, topic: str, queues: list[tuple[int, int, int]]) -> None:
        """``(min, max, lastUpdateTimestamp)`` per queue id, as GET_TOPIC_STATS_INFO reports them."""
        broker.offsets[topic] = dict(enumerate(queues))

    def set_topic_order(self, topics: list[str]) -> None:
        """The order GET_ALL_TOPIC_LIST_FROM_NAMESERVER lists topics in (unknown ones get a route)."""
        owner = next(b for b in self.brokers if b.broker_id == 0)
        for topic in topics:
            if topic not in self.routes:
                self.create_topic(owner, topic, 4, 4)
        self.topic_order = list(topics) + [t for t in self.topic_order if t not in topics]

    # --- serving -----------------------------------------------------------------------------
    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, broker: Broker | None
    ) -> None:
        who = broker.addr if broker else "namesrv"
        self.connections[who] = self.connections.get(who, 0) + 1
        decoder = FrameDecoder()
        try:
            while data := await reader.read(65536):
                for frame in decoder.feed(data):
                    request = decode(frame)
                    if request.is_response:
                        continue
                    self.requests.append((who, request.code))
                    response = self._answer(request, broker)
                    if response is not None and not request.is_oneway:
                        writer.write(encode(response))
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    def _answer(self, request: RemotingCommand, broker: Broker | None) -> RemotingCommand:
        if request.code in self.fail:
            code, remark = self.fail[request.code]
            return request.response(code, remark)
        handler = getattr(self, f"_{'broker' if broker else 'ns'}_{int(request.code)}", None)
        if handler is None:
            return request.response(
                RS.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported"
            )
        try:
            return handler(request, broker) if broker else handler(request)
        except hd.HeaderError as exc:
            return request.response(RS.SYSTEM_ERROR, str(exc))

    # name server (B.2)
    def _ns_100(self, req: RemotingCommand) -> RemotingCommand:
        h = req.header(hd.PutKVConfigRequestHeader)
        self.kv.setdefault(h.namespace, {})[h.key] = h.value
        return req.response()

    def _ns_101(self, req: RemotingCommand) -> RemotingCommand:
        h = req.header(hd.GetKVConfigRequestHeader)
        value = self.kv.get(h.namespace, {}).get(h.key)
        if value is None:
            return req.response(RS.QUERY_NOT_FOUND, f"No config item, Namespace: {h.namespace} Key: {h.key}")
        return req.response(header=hd.GetKVConfigResponseHeader(value=value))

    def _ns_102(self, req: RemotingCommand) -> RemotingCommand:
        h = req.header(hd.DeleteKVConfigRequestHeader)
        self.kv.get(h.namespace, {}).pop(h.key, None)
        return req.response()

    def _route(self, topic: str) -> jb.TopicRouteData | None:
        queues = self.routes.get(topic)
        if not queues:
            return None
        datas = []
        for name in queues:
            addrs = {b.broker_id: b.addr for b in self.brokers if b.name == name}
            cluster = next(b.cluster for b in self.brokers if b.name == name)
            datas.append(jb.BrokerData(broker_addrs=addrs, broker_name=name, cluster=cluster))
        order = self.kv.get("ORDER_TOPIC_CONFIG", {}).get(topic)
        return jb.TopicRouteData(
            broker_datas=datas, queue_datas=list(queues.values()), order_topic_conf=order
        )

    def _ns_105(self, req: RemotingCommand) -> RemotingCommand:
        h = req.header(hd.GetRouteInfoRequestHeader)
        route = self._route(h.topic)
        if route is None:
            return req.response(
                RS.TOPIC_NOT_EXIST, f"No topic route info in name server for the topic: {h.topic}{FAQ}"
            )
        standard = req.version >= 401 or bool(h.accept_standard_json_only)
        return req.response(body=jb.encode_standard(route) if standard else jb.encode(route))

    def _cluster_info(self) -> jb.ClusterInfo:
        table: dict[str, jb.BrokerData] = {}
        clusters: dict[str, list[str]] = {}
        for b in self.brokers:
            data = table.setdefault(b.name, jb.BrokerData(broker_name=b.name, cluster=b.cluster))
            data.broker_addrs[b.broker_id] = b.addr
            names = clusters.setdefault(b.cluster, [])
            if b.name not in names:
                names.append(b.name)
        return jb.ClusterInfo(broker_addr_table=table, cluster_addr_table=clusters)

    def _ns_106(self, req: RemotingCommand) -> RemotingCommand:
        return req.response(body=jb.encode(self._cluster_info()))

    def _perm(self, req: RemotingCommand, wipe: bool) -> RemotingCommand:
        name = req.ext_fields.get("brokerName", "")
        count = 0
        for queues in self.routes.values():
            q = queues.get(name)
            if q is not None:
                q.perm = q.perm & ~PERM_WRITE if wipe else q.perm | PERM_WRITE
                count += 1
        key = "wipeTopicCount" if wipe else "addTopicCount"
        return req.response(header={key: count})

    def _ns_205(self, req: RemotingCommand) -> RemotingCommand:
        req.header(hd.WipeWritePermOfBrokerRequestHeader)
        return self._perm(req, True)

    def _ns_327(self, req: RemotingCommand) -> RemotingCommand:
        req.header(hd.AddWritePermOfBrokerRequestHeader)
        return self._perm(req, False)

    def _ns_206(self, req: RemotingCommand) -> RemotingCommand:
        topics = [t for t in self.topic_order if self.routes.get(t)]
        return req.response(body=jb.encode(jb.TopicList(topic_list=topics)))

    def _ns_216(self, req: RemotingCommand) -> RemotingCommand:
        h = req.header(hd.DeleteTopicFromNamesrvRequestHeader)
        queues = self.routes.get(h.topic, {})
        for b in self.brokers:
            if h.cluster_name in (None, b.cluster):
                queues.pop(b.name, None)
        if not queues:
            self.routes.pop(h.topic, None)
        return req.response()

    def _ns_318(self, req: RemotingCommand) -> RemotingCommand:
        for line in req.body.decode().splitlines():
            if "=" in line:
                k, _, v = line.partition("=")
                self.namesrv_config[k.strip()] = v.strip()
        return req.response()

    def _ns_319(self, req: RemotingCommand) -> RemotingCommand:
        text = "".join(f"{k}={v}\n" for k, v in self.namesrv_config.items())
        return req.response(body=text.encode())

    # broker (B.4)
    def _broker_17(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        h = req.header(hd.CreateTopicRequestHeader)
        if broker.broker_id != 0:
            return req.response(
                RS.SYSTEM_ERROR,
                "Can't modify topic or subscription group from slave broker, "
                "please execute it from master broker.",
            )
        if not TOPIC_RE.match(h.topic) or len(h.topic) > 127:
            return req.response(
                RS.SYSTEM_ERROR,
                f"The specified topic[{h.topic}] contains illegal characters, "
                "allowing only ^[%|a-zA-Z0-9_-]+$",
            )
        self.create_topic(
            broker,
            h.topic,
            h.read_queue_nums,
            h.write_queue_nums,
            h.perm,
            topic_filter_type=h.topic_filter_type,
            topic_sys_flag=h.topic_sys_flag or 0,
            order=h.order,
        )
        return req.response()

    def _broker_215(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        h = req.header(hd.DeleteTopicRequestHeader)
        broker.topics.pop(h.topic, None)
        broker.offsets.pop(h.topic, None)
        return req.response()

    def _broker_202(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        h = req.header(hd.GetTopicStatsInfoRequestHeader)
        config = broker.topics.get(h.topic)
        if config is None:
            return req.response(RS.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist")
        offsets = broker.offsets.get(h.topic, {})
        table = jb.TopicStatsTable()
        for qid in range(config.write_queue_nums):
            low, high, ts = offsets.get(qid, (0, 0, 0))
            mq = jb.MessageQueue(broker_name=broker.name, queue_id=qid, topic=h.topic)
            table.offset_table[mq] = jb.TopicOffset(last_update_timestamp=ts, max_offset=high, min_offset=low)
        return req.response(body=jb.encode(table))

    def _broker_300(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        h = req.header(hd.QueryTopicConsumeByWhoRequestHeader)
        return req.response(body=jb.encode(jb.GroupList(group_list=broker.consumers.get(h.topic, []))))

    def _broker_28(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        return req.response(body=jb.encode(jb.KVTable(table=dict(broker.runtime))))

    def _broker_26(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        props = {
            "brokerName": broker.name,
            "brokerClusterName": broker.cluster,
            "brokerId": str(broker.broker_id),
        }
        props.update(broker.config)
        version = jb.encode(jb.DataVersion(counter=broker.data_version, timestamp=1700000000000)).decode()
        text = "".join(f"{k}={v}\n" for k, v in props.items())
        return req.response(header=hd.GetBrokerConfigResponseHeader(version=version), body=text.encode())

    def _broker_25(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        for line in req.body.decode().splitlines():
            if "=" in line:
                k, _, v = line.partition("=")
                broker.config[k.strip()] = v.strip()
        return req.response()

    def _broker_306(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        return req.response()

    _broker_329 = _broker_306
    _broker_316 = _broker_306
