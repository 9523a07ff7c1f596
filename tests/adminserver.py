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

from formats.names import (
    DEFAULT_TOPIC,
    OFFSET_MOVED_EVENT,
    ORDER_TOPIC_CONFIG,
    PERM_INHERIT,
    PERM_READ_WRITE,
    PERM_WRITE,
    RETRY_PREFIX,
    SELF_TEST_TOPIC,
)
from rmqcli.remoting import headers as hd
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.codec import FrameDecoder, RemotingCommand, decode, encode
from rmqcli.remoting.codes import ResponseCode as RS

TOPIC_RE = re.compile(r"^[%|a-zA-Z0-9_-]+$")
FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."


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
class OnlineConsumer:
    """A consumer client staged as online (what its HEART_BEAT would register), with the answer its
    client would give to GET_CONSUMER_RUNNING_INFO (B.5) and CONSUME_MESSAGE_DIRECTLY."""

    connection: jb.Connection
    data: jb.ConsumerData
    running_info: Any = None
    direct_result: Any = None


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
    # part B state: subscription groups, consumer offsets, stored messages, clients, stats
    groups: dict[str, jb.SubscriptionGroupConfig] = field(default_factory=dict)
    consumer_offsets: dict[tuple[str, str], dict[int, int]] = field(default_factory=dict)
    commitlog: bytearray = field(default_factory=bytearray)
    queues: dict[tuple[str, int], list[tuple[int, int, int, int]]] = field(default_factory=dict)
    index: dict[str, list[int]] = field(default_factory=dict)
    online: dict[str, dict[str, OnlineConsumer]] = field(default_factory=dict)
    producers: dict[str, dict[str, jb.Connection]] = field(default_factory=dict)
    stats: dict[tuple[str, str], jb.BrokerStatsData] = field(default_factory=dict)
    consume_tps: dict[str, float] = field(default_factory=dict)

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
        self.peers: dict[int, str] = {}
        self.commands: list[tuple[str, RemotingCommand]] = []
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
                        (DEFAULT_TOPIC, 8),
                        (SELF_TEST_TOPIC, 1),
                        (b.cluster, 16),
                        (b.name, 1),
                        (OFFSET_MOVED_EVENT, 1),
                    ):
                        inherit = PERM_INHERIT if topic in (DEFAULT_TOPIC, b.cluster, b.name) else 0
                        self.create_topic(b, topic, queues, queues, PERM_READ_WRITE | inherit)

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
        self,
        broker: Broker,
        topic: str,
        read: int = 8,
        write: int = 8,
        perm: int = PERM_READ_WRITE,
        **kw: Any,
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
                    self.commands.append((who, request))
                    peer = writer.get_extra_info("peername")
                    self.peers[request.opaque] = f"{peer[0]}:{peer[1]}" if peer else "127.0.0.1:0"
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
        order = self.kv.get(ORDER_TOPIC_CONFIG, {}).get(topic)
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
        table = jb.TopicStatsTable()
        for qid in range(config.write_queue_nums):
            low, high, ts = self.queue_bounds(broker, h.topic, qid)
            mq = jb.MessageQueue(broker_name=broker.name, queue_id=qid, topic=h.topic)
            table.offset_table[mq] = jb.TopicOffset(last_update_timestamp=ts, max_offset=high, min_offset=low)
        return req.response(body=jb.encode(table))

    def _broker_300(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        h = req.header(hd.QueryTopicConsumeByWhoRequestHeader)
        groups = list(broker.consumers.get(h.topic, []))
        for group, clients in broker.online.items():
            if any(s.topic == h.topic for c in clients.values() for s in c.data.subscription_data_set):
                groups.append(group)
        groups += [g for t, g in broker.consumer_offsets if t == h.topic]
        return req.response(body=jb.encode(jb.GroupList(group_list=list(dict.fromkeys(groups)))))

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

    # --- part B: groups, offsets, messages (B.3, B.4, B.6-B.8) ------------------------------------
    def _broker_200(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        config = jb.decode(jb.SubscriptionGroupConfig, req.body)
        broker.groups[config.group_name] = config
        return req.response()

    def _broker_201(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        if not broker.groups:
            return req.response(RS.SYSTEM_ERROR, "No subscription group in this broker")
        wrapper = jb.SubscriptionGroupWrapper(
            data_version=jb.DataVersion(counter=broker.data_version, timestamp=1700000000000),
            subscription_group_table=dict(broker.groups),
        )
        return req.response(body=jb.encode(wrapper))

    def _broker_207(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        h = req.header(hd.DeleteSubscriptionGroupRequestHeader)
        broker.groups.pop(h.group_name, None)
        if h.remove_offset:
            for key in [k for k in broker.consumer_offsets if k[1] == h.group_name]:
                del broker.consumer_offsets[key]
        return req.response()

    # stored messages
    def queue_bounds(self, broker: Broker, topic: str, qid: int) -> tuple[int, int, int]:
        """``(min, max, lastUpdate)`` of a queue: its stored messages, else the staged offsets."""
        entries = broker.queues.get((topic, qid))
        if entries:
            return 0, len(entries), entries[-1][3]
        return broker.offsets.get(topic, {}).get(qid, (0, 0, 0))

    def store(
        self,
        broker: Broker,
        topic: str,
        qid: int,
        body: bytes,
        props: dict[str, str],
        *,
        sys_flag: int = 0,
        flag: int = 0,
        born: str = "127.0.0.1:50000",
        born_ts: int | None = None,
        store_ts: int | None = None,
    ) -> tuple[str, int]:
        """Append one stored record (B.8) to the commit log; returns (offset msg id, queue offset)."""
        import ipaddress

        from formats import commitlog as cl

        props = dict(props)
        props.setdefault("CLUSTER", broker.cluster)
        raw_props = cl.encode_properties_as_broker(props)
        entries = broker.queues.setdefault((topic, qid), [])
        phys = len(broker.commitlog)
        now = int(time.time() * 1000)
        born_host, _, born_port = born.rpartition(":")
        record = cl.MessageRecord.build(
            dict(
                magic_code=cl.MAGIC_V1,
                body_crc=cl.body_crc(body),
                queue_id=qid,
                flag=flag,
                queue_offset=len(entries),
                physical_offset=phys,
                sys_flag=sys_flag,
                born_timestamp=born_ts or now,
                born_host=dict(address=ipaddress.IPv4Address(born_host).packed, port=int(born_port)),
                store_timestamp=store_ts or now,
                store_host=dict(address=b"\x7f\x00\x00\x01", port=broker.port),
                reconsume_times=0,
                prepared_transaction_offset=0,
                body=body,
                topic=topic,
                properties=raw_props,
            )
        )
        broker.commitlog += record
        entries.append((phys, len(record), cl.tags_code(props.get("TAGS")), store_ts or now))
        for key in props.get("KEYS", "").split(" ") + [props.get("UNIQ_KEY", "")]:
            if key:
                broker.index.setdefault(f"{topic}#{key}", []).append(phys)
        msg_id = cl.offset_msg_id(b"\x7f\x00\x00\x01", broker.port, phys)
        return msg_id, len(entries) - 1

    def _record(self, broker: Broker, phys: int) -> bytes:
        size = int.from_bytes(broker.commitlog[phys : phys + 4], "big")
        return bytes(broker.commitlog[phys : phys + size])

    def _send(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        h = hd.parse_send_header(req.code, req.ext_fields)
        config = broker.topics.get(h.topic)
        if config is None:
            default = broker.topics.get(h.default_topic)
            if default is None or not default.perm & PERM_INHERIT:
                return req.response(RS.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist, apply first please!")
            nums = min(h.default_topic_queue_nums, default.write_queue_nums)
            self.create_topic(broker, h.topic, nums, nums, default.perm & ~PERM_INHERIT)
            config = broker.topics[h.topic]
        if not config.perm & PERM_WRITE:
            return req.response(RS.NO_PERMISSION, f"the topic[{h.topic}] sending message is forbidden")
        qid = h.queue_id if h.queue_id >= 0 else int(time.time() * 1000) % config.write_queue_nums
        if qid >= max(config.read_queue_nums, config.write_queue_nums):
            return req.response(RS.SYSTEM_ERROR, f"request queueId[{qid}] is illegal")
        from formats import commitlog as cl

        props = cl.decode_properties(h.properties or "")
        props.pop("WAIT", None)
        born = self.peers.get(req.opaque, "127.0.0.1:0")
        msg_id, offset = self.store(
            broker,
            h.topic,
            qid,
            req.body,
            props,
            sys_flag=h.sys_flag,
            flag=h.flag,
            born=born,
            born_ts=h.born_timestamp,
        )
        header = {
            "msgId": msg_id,
            "queueId": qid,
            "queueOffset": offset,
            "MSG_REGION": "DefaultRegion",
            "TRACE_ON": "true",
        }
        return req.response(header=header)

    _broker_10 = _send
    _broker_310 = _send
    _broker_320 = _send

    def _broker_11(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        from formats.commitlog import tags_code

        h = req.header(hd.PullMessageRequestHeader)
        if h.topic not in broker.topics:
            return req.response(RS.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist, apply first please!")
        entries = broker.queues.get((h.topic, h.queue_id), [])
        high = len(entries)

        def answer(
            code: int, next_offset: int, body: bytes = b"", remark: str | None = None
        ) -> RemotingCommand:
            header = {
                "suggestWhichBrokerId": 0,
                "nextBeginOffset": next_offset,
                "minOffset": 0,
                "maxOffset": high,
            }
            return req.response(code, remark, header=header, body=body)

        if high == 0:
            code = RS.PULL_NOT_FOUND if h.queue_offset == 0 else RS.PULL_OFFSET_MOVED
            return answer(code, 0, remark="NO_MESSAGE_IN_QUEUE")
        if h.queue_offset == high:
            return answer(RS.PULL_NOT_FOUND, h.queue_offset, remark="OFFSET_OVERFLOW_ONE")
        if h.queue_offset > high:
            return answer(RS.PULL_OFFSET_MOVED, high, remark="OFFSET_OVERFLOW_BADLY")
        wanted = set()
        if h.subscription and h.subscription.strip() not in ("", "*"):
            wanted = {tags_code(t.strip()) for t in h.subscription.split("||") if t.strip()}
        chosen = entries[h.queue_offset : h.queue_offset + min(h.max_msg_nums, 32)]
        body = b"".join(self._record(broker, e[0]) for e in chosen if not wanted or e[2] in wanted)
        next_offset = h.queue_offset + len(chosen)
        if not body:
            return answer(RS.PULL_RETRY_IMMEDIATELY, next_offset, remark="NO_MATCHED_MESSAGE")
        return answer(RS.SUCCESS, next_offset, body, "FOUND")

    def _broker_12(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        h = req.header(hd.QueryMessageRequestHeader)
        offsets = broker.index.get(f"{h.topic}#{h.key}", [])[: h.max_num]
        header = {
            "indexLastUpdateTimestamp": int(time.time() * 1000),
            "indexLastUpdatePhyoffset": len(broker.commitlog),
        }
        if not offsets:
            return req.response(
                RS.QUERY_NOT_FOUND, "can not find message, maybe time range not correct", header=header
            )
        return req.response(header=header, body=b"".join(self._record(broker, p) for p in offsets))

    def _broker_33(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        h = req.header(hd.ViewMessageRequestHeader)
        if not any(e[0] == h.offset for entries in broker.queues.values() for e in entries):
            return req.response(RS.SYSTEM_ERROR, f"can not find message by the offset, {h.offset}")
        return req.response(body=self._record(broker, h.offset))

    def _broker_29(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        h = req.header(hd.SearchOffsetRequestHeader)
        entries = broker.queues.get((h.topic, h.queue_id), [])
        offset = 0
        if entries:
            after = [i for i, e in enumerate(entries) if e[3] >= h.timestamp]
            offset = after[0] if after else len(entries) - 1
        return req.response(header={"offset": offset})

    def _broker_30(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        h = req.header(hd.GetMaxOffsetRequestHeader)
        return req.response(header={"offset": self.queue_bounds(broker, h.topic, h.queue_id)[1]})

    def _broker_31(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        h = req.header(hd.GetMinOffsetRequestHeader)
        return req.response(header={"offset": self.queue_bounds(broker, h.topic, h.queue_id)[0]})

    # consumer offsets and consume stats
    def _broker_14(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        h = req.header(hd.QueryConsumerOffsetRequestHeader)
        offset = broker.consumer_offsets.get((h.topic, h.consumer_group), {}).get(h.queue_id)
        if offset is None:
            return req.response(
                RS.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"
            )
        return req.response(header={"offset": offset})

    def _broker_15(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        h = req.header(hd.UpdateConsumerOffsetRequestHeader)
        broker.consumer_offsets.setdefault((h.topic, h.consumer_group), {})[h.queue_id] = h.commit_offset
        return req.response()

    def _stats(self, broker: Broker, group: str, topic: str) -> jb.ConsumeStats | None:
        config = broker.topics.get(topic)
        if config is None:
            return None
        stats = jb.ConsumeStats(consume_tps=broker.consume_tps.get(f"{topic}@{group}", 0.0))
        offsets = broker.consumer_offsets.get((topic, group), {})
        for qid in range(config.read_queue_nums):
            low, high, ts = self.queue_bounds(broker, topic, qid)
            consumer = max(offsets.get(qid, -1), 0)
            last = 0
            if consumer > 0:
                entries = broker.queues.get((topic, qid))
                last = entries[consumer - 1][3] if entries and consumer <= len(entries) else ts
            mq = jb.MessageQueue(broker_name=broker.name, queue_id=qid, topic=topic)
            stats.offset_table[mq] = jb.OffsetWrapper(
                broker_offset=high, consumer_offset=consumer, last_timestamp=last
            )
        return stats

    def _topics_of(self, broker: Broker, group: str) -> list[str]:
        return [t for t, g in broker.consumer_offsets if g == group]

    def _broker_208(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        h = req.header(hd.GetConsumeStatsRequestHeader)
        topics = [h.topic] if h.topic else self._topics_of(broker, h.consumer_group)
        result = jb.ConsumeStats()
        subscribed = {
            t
            for c in broker.online.get(h.consumer_group, {}).values()
            for t in (s.topic for s in c.data.subscription_data_set)
        }
        for topic in topics:
            if subscribed and topic not in subscribed:
                continue
            stats = self._stats(broker, h.consumer_group, topic)
            if stats is not None:
                result.offset_table.update(stats.offset_table)
                result.consume_tps += stats.consume_tps
        return req.response(body=jb.encode(result))

    def _broker_317(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        h = req.header(hd.GetConsumeStatsInBrokerHeader)
        out = jb.ConsumeStatsList(broker_addr=broker.addr)
        for group in broker.groups:
            items = []
            for topic in self._topics_of(broker, group):
                config = broker.topics.get(topic)
                if config is None or (h.is_order and not config.order):
                    continue
                stats = self._stats(broker, group, topic)
                if stats is not None:
                    out.total_diff += sum(
                        w.broker_offset - w.consumer_offset for w in stats.offset_table.values()
                    )
                    items.append(stats)
            out.consume_stats_list.append({group: items})
        return req.response(body=jb.encode(out))

    def _broker_314(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        h = req.header(hd.CloneGroupOffsetRequestHeader)
        topics = [h.topic] if h.topic else self._topics_of(broker, h.src_group)
        for topic in topics:
            if (topic, h.src_group) in broker.consumer_offsets:
                broker.consumer_offsets[(topic, h.dest_group)] = dict(
                    broker.consumer_offsets[(topic, h.src_group)]
                )
        return req.response()

    def _broker_222(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        h = req.header(hd.ResetOffsetRequestHeader)
        config = broker.topics.get(h.topic)
        if config is None:
            return req.response(
                RS.SYSTEM_ERROR,
                f"[reset-offset] reset offset failed, no topic in this broker. topic={h.topic}",
            )
        body = jb.ResetOffsetBody()
        offsets = broker.consumer_offsets.get((h.topic, h.group), {})
        for qid in range(config.write_queue_nums):
            consumer = offsets.get(qid, -1)
            if consumer == -1:
                return req.response(RS.SYSTEM_ERROR, f"THe consumer group <{h.group}> not exist")
            high = self.queue_bounds(broker, h.topic, qid)[1]
            entries = broker.queues.get((h.topic, qid), [])
            if h.timestamp == -1:
                target = high
            else:
                after = [i for i, e in enumerate(entries) if e[3] >= h.timestamp]
                target = after[0] if after else high
            mq = jb.MessageQueue(broker_name=broker.name, queue_id=qid, topic=h.topic)
            body.offset_table[mq] = target if h.is_force or target < consumer else consumer
        if not broker.online.get(h.group):
            return req.response(
                RS.CONSUMER_NOT_ONLINE,
                f"Consumer not online, so can not reset offset, Group: {h.group} Topic: {h.topic} "
                f"Timestamp: {h.timestamp}",
            )
        for mq, offset in body.offset_table.items():  # what the notified clients then commit
            offsets[mq.queue_id] = offset
        return req.response(body=jb.encode(body))

    # clients
    def add_consumer(
        self,
        group: str,
        client_id: str,
        subscriptions: dict[str, str],
        *,
        consume_type: str = "CONSUME_PASSIVELY",
        message_model: str = "CLUSTERING",
        version: int = 407,
        running_info: Any = None,
        brokers: list[Broker] | None = None,
    ) -> None:
        """Stage an online consumer (as its HEART_BEAT registers it) on every master (or ``brokers``),
        creating and registering ``%RETRY%<group>`` as a broker does."""
        data = jb.ConsumerData(
            group_name=group,
            consume_type=consume_type,
            message_model=message_model,
            subscription_data_set=[
                jb.SubscriptionData(
                    topic=t,
                    sub_string=e,
                    tags_set=[x.strip() for x in e.split("||")] if e != "*" else [],
                )
                for t, e in subscriptions.items()
            ],
        )
        conn = jb.Connection(
            client_addr=f"127.0.0.1:{40000 + len(client_id)}", client_id=client_id, version=version
        )
        for b in brokers or [b for b in self.brokers if b.broker_id == 0]:
            b.online.setdefault(group, {})[client_id] = OnlineConsumer(conn, data, running_info)
            if RETRY_PREFIX + group not in b.topics:
                self.create_topic(b, RETRY_PREFIX + group, 1, 1, PERM_READ_WRITE)

    def _broker_203(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        h = req.header(hd.GetConsumerConnectionListRequestHeader)
        clients = broker.online.get(h.consumer_group)
        if not clients:
            return req.response(RS.CONSUMER_NOT_ONLINE, f"the consumer group[{h.consumer_group}] not online")
        first = next(iter(clients.values())).data
        body = jb.ConsumerConnection(
            connection_set=[c.connection for c in clients.values()],
            consume_from_where=first.consume_from_where,
            consume_type=first.consume_type,
            message_model=first.message_model,
            subscription_table={s.topic: s for s in first.subscription_data_set},
        )
        return req.response(body=jb.encode(body))

    def _broker_307(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        h = req.header(hd.GetConsumerRunningInfoRequestHeader)
        client = broker.online.get(h.consumer_group, {}).get(h.client_id)
        if client is None:
            return req.response(RS.SYSTEM_ERROR, f"The Consumer <{h.client_id}> not online")
        from rmqcli.admin.beans import ConsumerRunningInfo

        return req.response(body=jb.encode(client.running_info or ConsumerRunningInfo()))

    def _broker_309(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        h = req.header(hd.ConsumeMessageDirectlyResultRequestHeader)
        client = broker.online.get(h.consumer_group, {}).get(h.client_id or "")
        if client is None:
            return req.response(RS.SYSTEM_ERROR, f"The Consumer <{h.client_id}> not online")
        from rmqcli.admin.beans import ConsumeMessageDirectlyResult

        result = client.direct_result or ConsumeMessageDirectlyResult(
            consume_result="CR_SUCCESS", spent_time_mills=1
        )
        return req.response(body=jb.encode(result))

    def _broker_34(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        data = jb.decode(jb.HeartbeatData, req.body)
        for p in data.producer_data_set:
            conn = jb.Connection(
                client_addr=self.peers.get(req.opaque, ""), client_id=data.client_id, version=req.version
            )
            broker.producers.setdefault(p.group_name, {})[data.client_id] = conn
        return req.response()

    def _broker_35(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        h = req.header(hd.UnregisterClientRequestHeader)
        if h.producer_group:
            broker.producers.get(h.producer_group, {}).pop(h.client_id, None)
        return req.response()

    def _broker_204(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        h = req.header(hd.GetProducerConnectionListRequestHeader)
        conns = broker.producers.get(h.producer_group)
        if not conns:
            return req.response(RS.SYSTEM_ERROR, f"the producer group[{h.producer_group}] not exist")
        return req.response(body=jb.encode(jb.ProducerConnection(connection_set=list(conns.values()))))

    def _broker_315(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        h = req.header(hd.ViewBrokerStatsDataRequestHeader)
        data = broker.stats.get((h.stats_name, h.stats_key))
        if data is None:
            return req.response(RS.SYSTEM_ERROR, f"The stats <{h.stats_name}> <{h.stats_key}> not exist")
        return req.response(body=jb.encode(data))

    def _broker_321(self, req: RemotingCommand, broker: Broker) -> RemotingCommand:
        h = req.header(hd.QueryConsumeQueueRequestHeader)
        entries = broker.queues.get((h.topic or "", h.queue_id), [])
        body = jb.QueryConsumeQueueResponseBody(max_queue_index=len(entries), min_queue_index=0)
        for phys, size, code, _ in entries[h.index : h.index + h.count]:
            body.queue_data.append(jb.ConsumeQueueData(physic_offset=phys, physic_size=size, tags_code=code))
        if h.consumer_group:
            client = next(iter(broker.online.get(h.consumer_group, {}).values()), None)
            if client is not None:
                body.subscription_data = next(
                    (s for s in client.data.subscription_data_set if s.topic == h.topic), None
                )
        return req.response(body=jb.encode(body))
