"""The name servers and brokers of ``rmq serve`` (``rmqcli.broker``) in this process, for the mqadmin
tests: one event loop in a thread runs ``namesrv_count`` real ``NameServer``s and one real
``BrokerController`` per broker, each over its own temporary store and on a free loopback port,
behind ``rmqcli.remoting.server.connection.Server`` as ``rmq serve`` wires them (send lane, reput after each
read). Brokers of several clusters, masters with their slaves and several name servers are all
real too: more of them in the same loop.

What the tests see: every request a listener received (``commands``, ``codes()``; ``namesrv`` for
any name server, else the broker's address), the connections that sent them (``connections``), and
the real state (``NameServer`` tables, ``BrokerController`` topics, groups, offsets and store).
The brokers' own REGISTER_BROKER / UNREGISTER_BROKER are not counted, nor what the tests stage.

Two differences from ``rmq serve``: a name server answers only once the brokers' re-registrations
of changed topics reached it (Java's ``updateAndCreateTopic`` registers before it answers; ``rmq
serve`` does it in the background), and the brokers' background services (flush, persistence,
delayed delivery, transaction checks, periodic registration) are not started.

What the tests stage that ``rmq serve`` cannot play, answered in front of the real handlers:

* ``fail[code]``: an error answer to a request code (clean-ups a real broker always acknowledges);
* ``BrokerNode.runtime``: the GET_BROKER_RUNTIME_INFO table of another broker version, or with
  chosen values (a real broker's depends on load, time and disk).

Online clients are real connections (``tests.admin.clients``). The stores are under /dev/shm where
there is one: no disk to wait for.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from rmqcli.broker.config import BrokerConfig
from rmqcli.broker.controller import BrokerController
from rmqcli.broker.services.messagestore import Unit
from rmqcli.namesrv.server import NameServer
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.codec import RemotingCommand, decode, encode
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.server.connection import Connection, Server, ServerLimits
from rmqcli.store.settings import StoreSettings
from rmqcli.store.write.messages import AppendResult, BatchElement, BatchMessage, Host, Message
from rmqcli.store.write.writer import StoreWriter
from tests.admin.clients import OnlineClient, consumer_data

T = TypeVar("T")
DEFAULT_BROKERS = (("DefaultCluster", "broker-a", 0), ("DefaultCluster", "broker-b", 0))
UNCOUNTED = (RC.REGISTER_BROKER, RC.UNREGISTER_BROKER)  # the brokers' own requests
MEMORY_DIR = Path("/dev/shm")
SETTINGS = StoreSettings(
    mapped_file_size_commitlog=1 << 20,
    mapped_file_size_consume_queue=6000,
    max_hash_slot_num=256,
    max_index_num=1024,
)


@dataclass
class BrokerNode:
    """One broker: its controller (the real state) and, when staged, the runtime table it answers."""

    controller: BrokerController
    runtime: dict[str, str] | None = None

    @property
    def name(self) -> str:
        return self.controller.config.broker_name

    @property
    def broker_id(self) -> int:
        return self.controller.config.broker_id

    @property
    def port(self) -> int:
        return self.controller.config.listen_port

    @property
    def addr(self) -> str:
        return self.controller.addr

    @property
    def topics(self) -> dict[str, dict]:
        """``topics.json``'s table: topic -> its config (fastjson shape)."""
        return self.controller.topics.table

    @property
    def groups(self) -> dict[str, dict]:
        """``subscriptionGroup.json``'s table."""
        return self.controller.writer.config.groups

    def offsets(self, topic: str, group: str) -> dict[int, int]:
        """The committed offsets of ``topic@group`` (``consumerOffset.json``)."""
        return dict(self.controller.writer.config.consumer_offsets.get(f"{topic}@{group}", {}))

    def units(self, topic: str, queue_id: int) -> list[Unit]:
        """Every consume-queue unit of a queue (physical offset, size, tags code)."""
        store = self.controller.store
        low = store.min_offset(topic, queue_id)
        return store.units(topic, queue_id, low, store.max_offset(topic, queue_id) - low)


class AdminServer:
    """Name servers and brokers of ``rmqcli.broker`` on 127.0.0.1, each on its own port."""

    def __init__(
        self,
        brokers: Sequence[tuple[str, str, int]] = DEFAULT_BROKERS,
        namesrv_count: int = 1,
    ):
        self.root = Path(
            tempfile.mkdtemp(prefix="rmq-admin-", dir=MEMORY_DIR if MEMORY_DIR.is_dir() else None)
        )
        self.namesrvs: list[NameServer] = []
        self.namesrv_ports: list[int] = []
        self.brokers: list[BrokerNode] = []
        self.clients: list[OnlineClient] = []
        self.commands: list[tuple[str, RemotingCommand]] = []  # (listener, request) as received
        self.fail: dict[int, tuple[int, str]] = {}
        self._senders: dict[str, set[Connection]] = {}
        self._servers: list[Server] = []
        self._unregistered: set[BrokerController] = set()
        self._quiet = False
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="adminserver", daemon=True)
        self._thread.start()
        try:
            self._call(self._start(list(brokers), namesrv_count))
        except BaseException:
            self.stop()
            raise

    # --- lifecycle ---------------------------------------------------------------------------
    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def run(self, fn: Callable[[], T]) -> T:
        """``fn()`` in the servers' loop (the state belongs to it); its requests are not counted."""

        async def quiet() -> T:
            self._quiet = True
            try:
                result = fn()
                if asyncio.iscoroutine(result):
                    result = await result
                return result
            finally:
                self._quiet = False

        return self._call(quiet())

    async def _start(self, spec: list[tuple[str, str, int]], namesrv_count: int) -> None:
        self._lock = asyncio.Lock()
        limits = ServerLimits()  # shared by the process's servers, as in rmq serve
        for _ in range(namesrv_count):
            ns = NameServer()
            server = Server("namesrv", self._namesrv_dispatch(ns), limits=limits)
            server.frame_handler = self._recorder("namesrv", None, None)
            server.close_callbacks.append(ns.on_close)
            self._servers.append(server)
            self.namesrv_ports.append(await server.start("127.0.0.1", 0))
            self.namesrvs.append(ns)
        for cluster, name, broker_id in spec:
            await self._start_broker(cluster, name, broker_id, limits)

    async def _start_broker(self, cluster: str, name: str, broker_id: int, limits: ServerLimits) -> None:
        """A store, a controller over it and its listener wired as ``rmq serve`` wires them; then
        its first REGISTER_BROKER."""
        server = Server("broker", _unready, limits=limits)
        self._servers.append(server)
        port = await server.start("127.0.0.1", 0)
        config = BrokerConfig(
            broker_name=name,
            broker_cluster_name=cluster,
            broker_id=broker_id,
            listen_port=port,
            broker_ip1="127.0.0.1",
            store=SETTINGS,
        )
        root, store_host = self.root / f"{name}-{broker_id}", Host.parse(f"127.0.0.1:{port}")
        writer = StoreWriter(root, SETTINGS, store_host=store_host, cluster=cluster)
        ctl = BrokerController(config, writer, [f"127.0.0.1:{p}" for p in self.namesrv_ports])
        changed = ctl.topics.on_change

        def on_change() -> None:  # persisted, and registered before a name server answers again
            changed()
            self._unregistered.add(ctl)

        ctl.topics.on_change = on_change
        node = BrokerNode(ctl)
        server.dispatch = ctl.dispatch
        server.settle = ctl.store.catch_up  # sends are dispatched after their answers
        ctl.defer_dispatch = True
        lane = ctl.send_lane.handle if ctl.send_lane is not None else None
        server.frame_handler = self._recorder(node.addr, node, lane)
        server.close_callbacks.append(ctl.on_close)
        self.brokers.append(node)
        await ctl.register_all()

    def stop(self) -> None:
        async def shutdown() -> None:
            for client in self.clients:
                await client.remoting.close()
            for node in self.brokers:
                await node.controller.shutdown()
            for server in self._servers:
                await server.close()

        if self.loop.is_running():
            self._call(shutdown())
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
        self.loop.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> AdminServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reset(self) -> None:
        """Forget the requests received and the staged answers (the state stays)."""
        self.commands.clear()
        self._senders.clear()
        self.fail.clear()
        for node in self.brokers:
            node.runtime = None

    # --- what the tests look at --------------------------------------------------------------
    @property
    def namesrv(self) -> str:
        """The ``-n`` value: every name server, ``;``-separated."""
        return ";".join(f"127.0.0.1:{p}" for p in self.namesrv_ports)

    @property
    def kv(self) -> dict[str, dict[str, str]]:
        """The first name server's KV config."""
        return self.namesrvs[0].kv

    def broker(self, name: str, broker_id: int = 0) -> BrokerNode:
        return next(b for b in self.brokers if b.name == name and b.broker_id == broker_id)

    def codes(self, role: str | None = None) -> list[int]:
        """Request codes received, in order (``role``: ``namesrv`` or a broker address)."""
        return [request.code for who, request in self.commands if role is None or who == role]

    @property
    def connections(self) -> dict[str, int]:
        """Per listener, the connections that sent it requests."""
        return {who: len(conns) for who, conns in self._senders.items()}

    # --- serving -----------------------------------------------------------------------------
    def _recorder(
        self, who: str, node: BrokerNode | None, lane: Callable[[bytes, Connection], bytes | None] | None
    ) -> Callable[[bytes, Connection], bytes | None]:
        """The listener's frame handler: counts each request, answers the staged ones, and leaves
        the rest to the broker's send lane (if any) and then to dispatch."""

        def handle(frame: bytes, conn: Connection) -> bytes | None:
            request = decode(frame)
            if not request.is_response and request.code not in UNCOUNTED and not self._quiet:
                self.commands.append((who, request))
                self._senders.setdefault(who, set()).add(conn)
            staged = None if request.is_response else self._staged(request, node)
            if staged is not None:
                return b"" if request.is_oneway else encode(staged)
            return lane(frame, conn) if lane is not None else None

        return handle

    def _staged(self, request: RemotingCommand, node: BrokerNode | None) -> RemotingCommand | None:
        if request.code in self.fail:
            return request.response(*self.fail[request.code])
        if node is not None and node.runtime is not None and request.code == RC.GET_BROKER_RUNTIME_INFO:
            return request.response(body=jb.encode(jb.KVTable(table=dict(node.runtime))))
        return None

    def _namesrv_dispatch(self, ns: NameServer) -> Callable[[RemotingCommand, Connection], Any]:
        def dispatch(request: RemotingCommand, conn: Connection) -> Any:
            if self._unregistered and request.code not in UNCOUNTED:
                return self._after_registrations(ns, request, conn)
            return ns.handle(request, conn)

        return dispatch

    async def _after_registrations(self, ns: NameServer, request: RemotingCommand, conn: Connection) -> Any:
        await self.settle()
        return ns.handle(request, conn)

    async def settle(self) -> None:
        """REGISTER_BROKER from every broker whose topics changed since it last registered."""
        async with self._lock:
            while self._unregistered:  # in the brokers' order, as their routes then list them
                ctl = next(b.controller for b in self.brokers if b.controller in self._unregistered)
                self._unregistered.discard(ctl)
                await ctl.register_all()

    # --- staging (in the loop, not counted) --------------------------------------------------
    def create_topic(
        self, broker: BrokerNode, topic: str, read: int = 8, write: int = 8, perm: int = 6, **kw: Any
    ) -> None:
        """``updateTopicConfig`` on ``broker`` (not persisted), then its registration."""

        def put() -> None:
            broker.controller.topics.put(topic, read, write, perm, notify=False, **kw)
            self._unregistered.add(broker.controller)

        self.run(put)

    def store(
        self,
        broker: BrokerNode,
        topic: str,
        queue_id: int,
        body: bytes = b"",
        properties: dict[str, str] | None = None,
        *,
        count: int = 1,
        store_ts: int | None = None,
        first_offset: int | None = None,
    ) -> list[AppendResult]:
        """``count`` messages put into a queue, stored at ``store_ts`` (else now); a queue not yet
        written starts at ``first_offset`` (its minimum offset, as after an expiry)."""

        def put() -> list[AppendResult]:
            ctl = broker.controller
            if first_offset is not None:
                ctl.writer.queue_offsets.setdefault((topic, queue_id), first_offset)
            if count == 1:
                return [
                    ctl.store.put(
                        Message(topic, queue_id, body, dict(properties or {}), store_timestamp=store_ts)
                    )
                ]
            elements = [BatchElement(body, dict(properties or {})) for _ in range(count)]  # one write
            return ctl.store.put_batch(
                BatchMessage(topic, queue_id, elements, store_timestamp=store_ts)
            ).records

        return self.run(put)

    def commit(self, broker: BrokerNode, group: str, topic: str, offsets: dict[int, int]) -> None:
        """Consumer offsets of ``topic@group`` (what UPDATE_CONSUMER_OFFSET commits)."""

        def commit() -> None:
            for queue_id, offset in offsets.items():
                broker.controller.offsets.commit(group, topic, queue_id, offset)

        self.run(commit)

    def set_topic_order(self, topics: list[str]) -> None:
        """The order the name servers list their topics in (``topics`` first), as a Java name
        server's HashMap happens to order them."""

        async def reorder() -> None:
            await self.settle()
            for ns in self.namesrvs:
                first = {t: ns.topics[t] for t in topics if t in ns.topics}
                ns.topics = {**first, **{t: q for t, q in ns.topics.items() if t not in first}}

        self.run(reorder)

    def online(
        self,
        client_id: str,
        *,
        consumer: jb.ConsumerData | None = None,
        producer_group: str | None = None,
        version: int = 407,
        running_info: Any = None,
    ) -> OnlineClient:
        """A client (consumer, producer or both) whose HEART_BEAT reached every master."""
        client = OnlineClient(client_id, running_info)
        data = jb.HeartbeatData(
            client_id=client_id,
            consumer_data_set=[consumer] if consumer is not None else [],
            producer_data_set=[jb.ProducerData(group_name=producer_group)] if producer_group else [],
        )

        async def heartbeats() -> None:
            for node in self.brokers:
                if node.broker_id == 0:
                    await client.heartbeat(node.addr, data, version)

        self.clients.append(client)
        self.run(heartbeats)
        return client

    def add_consumer(
        self,
        group: str,
        client_id: str,
        subscriptions: dict[str, str],
        *,
        consume_type: str = "CONSUME_PASSIVELY",
        message_model: str = "CLUSTERING",
        **kw: Any,
    ) -> OnlineClient:
        """An online consumer of ``group`` subscribed to ``topic: expression`` pairs."""
        consumer = consumer_data(group, subscriptions, consume_type, message_model)
        return self.online(client_id, consumer=consumer, **kw)


def _unready(request: RemotingCommand, conn: Connection) -> None:
    raise RuntimeError("the broker is not ready")
