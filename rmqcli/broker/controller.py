"""The Broker: state, processors, background services (``BrokerController`` of RocketMQ 4.9.x).

``dispatch`` routes a request to the processor module registered for its code (B.3, B.4) and
answers REQUEST_CODE_NOT_SUPPORTED for the rest; ``dispatch_vip`` does the same for the VIP channel
(``fastRemotingServer``, listenPort − 2), where the pulls and POP are not registered. The
processors see the controller as a ``context.BrokerContext`` and never import this module.
Background services: the store's flush, the consumer-offset, delay-offset and config persistence
(every ``flushConsumerOffsetInterval``), delayed delivery (``schedule``), the transaction check
(``transaction``), client expiry, and REGISTER_BROKER to every name server at start, every
``registerNameServerPeriod`` and whenever the topic table changes (A.7, B.6 auto-creation).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import zlib
from collections.abc import Awaitable
from dataclasses import replace

from formats.commitlog import SCHEDULE_TOPIC
from formats.names import BENCHMARK_TOPIC
from rmqcli.broker import admin
from rmqcli.broker.acl import handlers as acl_handlers
from rmqcli.broker.acl.hagate import HaGate
from rmqcli.broker.acl.ownership import StoreNames
from rmqcli.broker.acl.setup import BrokerAcl, broker_credentials, open_acl
from rmqcli.broker.acting.escape import EscapeBridge
from rmqcli.broker.acting.group import GroupMembership, Identity
from rmqcli.broker.acting.preonline import take_locks, take_offsets
from rmqcli.broker.autoswitch.replication import AutoSwitchReplication
from rmqcli.broker.config import BrokerConfig
from rmqcli.broker.context import BrokerParts, Handler
from rmqcli.broker.dledger.replication import DLedgerReplication
from rmqcli.broker.ha.config import SLAVE
from rmqcli.broker.ha.member import Replication
from rmqcli.broker.ha.sync import SlaveSynchronize
from rmqcli.broker.metrics.api import NO_METRICS, NoMetrics
from rmqcli.broker.metrics.broker import BrokerMetrics, timed
from rmqcli.broker.pop import handlers as pop_handlers
from rmqcli.broker.pop import service as pop_service
from rmqcli.broker.processor import consumer, pull, query, send, sendback, transaction
from rmqcli.broker.processor.holds import HoldService
from rmqcli.broker.processor.sendlane import SendLane
from rmqcli.broker.services.messagestore import MessageStore
from rmqcli.broker.services.retention import RetentionService, Usage
from rmqcli.broker.services.schedule import ScheduleService
from rmqcli.broker.services.tps import Stats
from rmqcli.broker.state import (
    DEFAULT_TOPIC,
    OFFSET_MOVED_EVENT,
    PERM_INHERIT,
    PERM_READ_WRITE,
    SELF_TEST_TOPIC,
    ClientChannel,
    ClientManager,
    ConsumerOffsetManager,
    LockManager,
    SubscriptionGroupManager,
    TopicConfigManager,
    is_readable,
    is_writable,
)
from rmqcli.broker.timer import api as timer
from rmqcli.broker.timer.sync import TimerSync
from rmqcli.dledger.node import DLedgerNode
from rmqcli.errors import RmqError
from rmqcli.remoting import headers as hd
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.client import RemotingClient
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode
from rmqcli.remoting.server.connection import Connection, Reply, not_supported
from rmqcli.store.retention import RetentionConfig, disk_used_ratio
from rmqcli.store.write.writer import StoreWriter

log = logging.getLogger(__name__)

HOUSEKEEPING_SECONDS = 10.0
SCHEDULE_TOPIC_QUEUE_NUM = 18  # TopicConfigManager: fixed, whatever messageDelayLevel says
BENCHMARK_TOPIC_QUEUE_NUM = 1024  # TopicConfigManager's BenchmarkTest
REGISTER_TIMEOUT = 6.0
# registered on the main port only (4.9.8's and 5.1.1's BrokerController.registerProcessor): on the
# VIP channel the admin processor, its default, answers them REQUEST_CODE_NOT_SUPPORTED
MAIN_PORT_ONLY = frozenset(
    {
        RC.PULL_MESSAGE,
        RC.LITE_PULL_MESSAGE,
        RC.PEEK_MESSAGE,
        RC.POP_MESSAGE,
        RC.NOTIFICATION,
        RC.POLLING_INFO,
    }
)


class BrokerController:
    """One broker over one open store."""

    def __init__(
        self,
        config: BrokerConfig,
        writer: StoreWriter,
        namesrv_addrs: list[str],
        acl: BrokerAcl | None = None,
        ha_host: str = "0.0.0.0",
        disk_usage: Usage = disk_used_ratio,
        dledger: DLedgerNode | None = None,
    ):
        self.config = config
        self.writer = writer
        self.namesrv_addrs = namesrv_addrs
        self.parts = BrokerParts()  # POP, the timer, request modes, the config version (context)
        self.names = StoreNames(writer)  # the groups by which ACL reads a POP retry topic
        self.store = MessageStore(
            writer, sync_flush=config.sync_flush, flush_interval_ms=config.flush_interval_commit_log
        )
        self.topics = TopicConfigManager(writer, self._topics_changed)
        auto_group = config.auto_create_subscription_group  # a group created by a client: written behind
        self.groups = SubscriptionGroupManager(writer, auto_group, self.persist_soon)
        self.offsets = ConsumerOffsetManager(writer, config.use_server_side_reset_offset)
        self.clients = ClientManager(self._notify_ids_changed)
        self.locks = LockManager()
        self.holds = HoldService(
            5.0 if config.long_polling_enable else config.short_polling_time_mills / 1000
        )
        self.stats = Stats(self.store)
        self.metrics: NoMetrics = BrokerMetrics(self) if config.metrics.prom else NO_METRICS
        self.store.listeners.append(self.holds.arrived)
        self.handlers: dict[int, Handler] = {}
        self.defer_dispatch = False  # True when the server runs store.catch_up after each read
        if acl is None and config.acl_enable:
            acl = open_acl(config)
        self.acl = acl  # every request is checked
        self.remoting = RemotingClient(credentials=broker_credentials(config, acl))  # acl.brokerkeys
        timer_sync = TimerSync(writer.root) if config.timer.wheel_enable else None  # 5.1.1's timer sync
        sync = SlaveSynchronize(writer.config, self.persist_soon, self.remoting.invoke, self.addr, timer_sync)
        self.ha: Replication | DLedgerReplication | AutoSwitchReplication
        if dledger is not None:  # a member of a DLedger group: the election sets the role
            self.ha = DLedgerReplication(
                dledger, writer, self.store.replicated, sync, config.dledger.follower_id, self.change_role
            )
        elif config.autoswitch.enable:  # controller mode: the controller sets the role
            self.ha = AutoSwitchReplication(
                config, writer, self.store.replicated, sync, self.change_role, self.remoting.invoke,
                self.remoting.invoke_oneway, self.addr, ha_host,
            )  # fmt: skip
        else:
            self.ha = Replication(
                config.broker_role,
                config.ha,
                writer.commitlog,
                host=ha_host,
                dispatch=self.store.replicated,
                sync=sync,
                sync_flush=config.sync_flush,
                flush_interval_ms=config.flush_interval_commit_log,
            )
        self.store.append_hooks.append(self.ha.appended)
        if acl is not None and self.ha.master is not None:  # the group's slaves only (acl.hagate)
            gate = HaGate(
                acl, config.ha.allowed_addresses, config.broker_name, namesrv_addrs, self.remoting.invoke
            )
            self.ha.master.admit = gate.admit
        self.retention = RetentionService(self.store, self.ha, self._retention_config, disk_usage)
        # regular sends answered from their frames, on a master without ACL (a slave refuses; with
        # ACL every request goes through dispatch)
        lane = self.acl is None and config.broker_role != SLAVE
        self.send_lane: SendLane | None = SendLane(self) if lane else None
        self.schedule = ScheduleService(self)
        self.transactions = transaction.TransactionCheckService(self)
        self.escape = EscapeBridge(self, self.remoting, namesrv_addrs)
        self.schedule.escape = self.transactions.escape = self.escape
        for module in (send, pull, consumer, query, admin, sendback, transaction, acl_handlers, pop_handlers):
            self.handlers.update(module.HANDLERS)
        if isinstance(self.ha, AutoSwitchReplication):  # the controller's notice of a new role (1008)
            self.handlers[RC.NOTIFY_BROKER_ROLE_CHANGED] = self.ha.role_notice
            self.handlers[RC.GET_BROKER_EPOCH_CACHE] = self.ha.epoch_cache
        self.vip_handlers = {code: h for code, h in self.handlers.items() if code not in MAIN_PORT_ONLY}
        self._register_wanted = asyncio.Event()
        if isinstance(self.ha, AutoSwitchReplication):
            self.ha.register_soon = self._register_wanted.set
            self.ha.release = self.store.release_held
        self._tasks: list[asyncio.Task[None]] = []
        self._special: list[asyncio.Task[None]] = []  # delayed delivery and the transaction check
        self._timer: asyncio.Task[None] | None = None  # a DLedger member's, while it is the master
        self._pre_online_members: dict[int, str] = {}  # the group's members a returning master asked
        self.membership: GroupMembership | None = None
        if config.acting.enable_slave_acting_master:
            self.membership = GroupMembership(
                Identity(config.broker_cluster_name, config.broker_name, config.broker_id, self.addr),
                config.acting,
                namesrv_addrs,
                self.remoting.invoke,
                self.remoting.invoke_oneway,
                self._min_broker_changed,
            )
            membership = self.membership  # 5.1.1's quorum write on a SYNC_MASTER
            self.ha.quorum = config.acting
            self.ha.alive_replicas = lambda: membership.alive_replicas
        self._init_topics()

    @property
    def addr(self) -> str:
        return f"{self.config.broker_ip1}:{self.config.listen_port}"

    # --- requests -----------------------------------------------------------------------------
    def dispatch(self, req: RemotingCommand, conn: Connection) -> Reply | Awaitable[Reply]:
        return self._route(self.handlers, req, conn)

    def dispatch_vip(self, req: RemotingCommand, conn: Connection) -> Reply | Awaitable[Reply]:
        """The VIP channel's requests: ACL first (its RPC hook), then every processor but the pulls."""
        return self._route(self.vip_handlers, req, conn)

    def _route(
        self, handlers: dict[int, Handler], req: RemotingCommand, conn: Connection
    ) -> Reply | Awaitable[Reply]:
        if self.acl is not None:
            refusal = self.acl.refusal(req, conn.peer[0], self.store.look_message, self.names)
            if refusal is not None:
                return refusal
        handler = handlers.get(req.code)
        if handler is None:
            return not_supported(req)
        if self.metrics.enabled:
            return timed(self.metrics, req, handler(self, req, conn))
        return handler(self, req, conn)

    def on_close(self, conn: Connection) -> None:
        """``ClientHousekeepingService``: a closed connection takes its clients with it."""
        self.clients.on_close(conn)

    def _notify_ids_changed(self, group: str, members: list[ClientChannel]) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED (40, oneway) to every member of ``group`` (B.5)."""
        config = self.writer.config.groups.get(group)
        if config is not None and not config.get("notifyConsumerIdsChangedEnable", True):
            return
        for member in members:
            member.connection.send_oneway(RC.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group})

    # --- topics and persistence ---------------------------------------------------------------
    def _init_topics(self) -> None:
        """``TopicConfigManager`` constructor: the system topics a 4.9.x broker creates at start."""
        c = self.config
        wanted: list[tuple[str, int, int]] = [(SELF_TEST_TOPIC, 1, PERM_READ_WRITE)]
        if c.auto_create_topic_enable:
            wanted.append((DEFAULT_TOPIC, c.default_topic_queue_nums, PERM_READ_WRITE | PERM_INHERIT))
        wanted.append((BENCHMARK_TOPIC, BENCHMARK_TOPIC_QUEUE_NUM, PERM_READ_WRITE))
        # the cluster's and the broker's own topics: inherit only, read and write when enabled
        cluster_perm = PERM_INHERIT | (PERM_READ_WRITE if c.cluster_topic_enable else 0)
        wanted.append((c.broker_cluster_name, 16, cluster_perm))
        broker_perm = PERM_INHERIT | (PERM_READ_WRITE if c.broker_topic_enable else 0)
        wanted.append((c.broker_name, 1, broker_perm))
        wanted.append((OFFSET_MOVED_EVENT, 1, PERM_READ_WRITE))
        wanted.append((SCHEDULE_TOPIC, SCHEDULE_TOPIC_QUEUE_NUM, PERM_READ_WRITE))
        if c.trace_topic_enable:  # the message traces' topic: 1 queue, the default perm
            wanted.append((c.msg_trace_topic_name, 1, PERM_READ_WRITE))
        wanted.append((f"{c.broker_cluster_name}_REPLY_TOPIC", 1, PERM_READ_WRITE))
        created = False
        for name, nums, perm in wanted:
            if self.topics.get(name) is None:
                self.topics.put(name, nums, nums, perm, notify=False)
                created = True
        if created:
            self.persist()

    def persist(self) -> None:
        """Write topics.json, subscriptionGroup.json, consumerOffset.json, delayOffset.json now
        (an admin request is answered once they are on disk)."""
        self.offsets.changed = False
        self.schedule.changed = False
        self.store.persist_config()

    def persist_soon(self, *, topics: bool = True) -> None:
        """``persist`` off the event loop: the texts are taken now and written by a worker thread
        (without topics.json when ``topics`` is false)."""
        self.offsets.changed = False
        self.schedule.changed = False
        self.store.persist_config_soon(topics=topics)

    def _retention_config(self) -> RetentionConfig:
        """The clean-up settings of the moment; in a DLedger group DLedger's ``CleanSpaceService``
        deletes the log's data files, with ``fileReservedHours`` = ``fileReservedTime`` + 1 (4.9.8
        ``DLedgerCommitLog``) and the other keys as they are."""
        config = self.config.retention
        if self.config.dledger.enable:
            return dataclasses.replace(config, file_reserved_time=config.file_reserved_time + 1)
        return config

    def _topics_changed(self) -> None:
        """A topic created, deleted or changed: topics.json now (``TopicConfigManager.persist``, in
        the request, as 4.9.8: an admin request is answered once it is on disk), the other files
        behind, then a registration."""
        self.store.persist_topics()
        self.persist_soon(topics=False)
        self._register_wanted.set()

    # --- background services ------------------------------------------------------------------
    def start(self) -> None:
        """The background services; a slave runs neither delayed delivery nor the transaction check
        (``handleScheduleMessageService``, ``startProcessorByHa``), its HA client replicates, until
        it acts as master (SlaveActingMaster: ``_min_broker_changed``)."""
        loop = asyncio.get_running_loop()
        services = [
            self.store.flush_loop(),
            self._persist_loop(),
            self._housekeeping(),
            self._register_loop(),
            self._acl_watch(),
            self.retention.run(),
            pop_service.run(self),  # the revive service (PopReviveService)
        ]
        if self.membership is not None:
            services.append(self.membership.run())
        if not self.config.is_slave:
            services.append(timer.run(self))  # 5.x timer messages' delivery (TimerMessageStore)
        for coro in services:
            self._tasks.append(loop.create_task(coro))
        if not self._pre_online_wanted:  # else once back online (_register_loop)
            self._special_services(not self.config.is_slave)

    @property
    def _pre_online_wanted(self) -> bool:
        """A master under SlaveActingMaster takes its group's offsets before it registers."""
        return self.membership is not None and not self.config.is_slave

    async def _pre_online(self) -> None:
        """``BrokerPreOnlineService`` (``rmqcli.broker.acting.preonline``): the offsets of the
        group's live members, until they could all be read (every second)."""
        assert self.membership is not None
        while True:
            group = await self.membership.fetch()
            members = {bid: addr for bid, addr in (group or {}).items() if addr != self.addr}
            if not members:
                return
            try:
                moved = await take_offsets(self.writer.config, members, self.remoting.invoke)
                moved += await take_locks(self.locks, members, self.remoting.invoke)
            except RmqError as exc:
                log.warning(
                    "pre-online: the offsets of group %s: %s; again in 1 s", self.config.broker_name, exc
                )
                await asyncio.sleep(1.0)
                continue
            self.persist_soon()
            log.warning("pre-online: %d offsets and locks taken from %s", moved, ", ".join(members.values()))
            self._pre_online_members = members
            return

    async def _back_online(self) -> None:
        """Registered again: once the acting slave has seen this master (two member-group periods)
        and stopped acting, its last offsets are taken too; then delayed delivery and the
        transaction check run here."""
        assert self.membership is not None
        members = self._pre_online_members
        if members:
            await asyncio.sleep(2 * self.config.acting.sync_broker_member_group_period / 1000 + 0.5)
            try:
                if await take_offsets(self.writer.config, members, self.remoting.invoke):
                    self.persist_soon()
            except RmqError as exc:
                log.warning("pre-online: the acting slave's last offsets: %s", exc)
        self._special_services(True)

    def _special_services(self, run: bool) -> None:
        """``changeSpecialServiceStatus``: delayed delivery and the transaction check run on the
        group's master, or on the slave acting for it."""
        if run and not self._special:
            loop = asyncio.get_running_loop()
            self._special = [loop.create_task(self.schedule.run()), loop.create_task(self.transactions.run())]
        elif not run and self._special:
            for task in self._special:
                task.cancel()
            self._special = []

    @property
    def special_services_running(self) -> bool:
        """``isSpecialServiceRunning``: ``brokerActive`` of the runtime info."""
        return bool(self._special)

    def _min_broker_changed(self, min_id: int, min_addr: str | None, offline_addr: str | None) -> None:
        """``onMinBrokerChange``: act as master when this slave is the smallest live member; stop
        replicating when the master left; when it is back, replicate again and answer the held
        pulls so that consumers go back to it."""
        self._special_services(self.config.broker_id == min_id)
        sync = self.ha.sync
        if offline_addr is not None and (sync is None or sync.master_addr in (None, offline_addr)):
            self.ha.master_offline()
        if min_id == 0 and min_addr is not None:
            self.ha.master_online()
            self._register_wanted.set()  # its answer names the master's HA address
            self.holds.release_all()

    def change_role(self, role: str, broker_id: int) -> None:
        """A DLedger member's new role (``changeToMaster``/``changeToSlave``): delayed delivery and the
        transaction check run on the master only; registered at once with the new id."""
        self.config = replace(self.config, broker_role=role, broker_id=broker_id)
        self._special_services(role != SLAVE)
        if role != SLAVE and self._timer is None:  # 5.x timer messages' delivery, on the master
            self._timer = asyncio.get_running_loop().create_task(timer.run(self))
        elif role == SLAVE and self._timer is not None:
            self._timer.cancel()
            self._timer = None
        log.warning("%s: now %s, brokerId %d", self.config.broker_name, role, broker_id)
        self._register_wanted.set()

    async def start_ha(self) -> None:
        """Bind the HA port (a master) or start replicating (a slave); ``OSError`` when the port is
        taken."""
        await self.ha.start()

    async def _persist_loop(self) -> None:
        """``ConsumerOffsetManager.persist`` every ``flushConsumerOffsetInterval`` ms (when changed),
        written by a worker thread."""
        while True:
            await asyncio.sleep(max(self.config.flush_consumer_offset_interval, 100) / 1000)
            if self.offsets.changed or self.schedule.changed:
                try:
                    self.persist_soon()
                except (OSError, RmqError):
                    log.exception("persisting consumer offsets failed")

    async def _acl_watch(self) -> None:
        """``AclFileWatchService``: the ACL files are reloaded when they change."""
        if self.acl is None:
            return
        while True:
            await asyncio.sleep(self.acl.watch_seconds)
            self.acl.files.maybe_reload()

    async def _housekeeping(self) -> None:
        while True:
            self.stats.sample()
            self.clients.expire(time.monotonic())
            await asyncio.sleep(HOUSEKEEPING_SECONDS)

    async def _register_loop(self) -> None:
        period = min(max(self.config.register_name_server_period, 10000), 60000) / 1000
        back_online = self._pre_online_wanted
        if back_online:
            await self._pre_online()
        while True:
            self._register_wanted.clear()
            await self.register_all()
            if back_online:
                back_online = False
                self._tasks.append(asyncio.get_running_loop().create_task(self._back_online()))
            try:
                await asyncio.wait_for(self._register_wanted.wait(), period)
            except TimeoutError:
                pass

    def _register_request(self, only_topic: str | None = None) -> RemotingCommand:
        wrapper = self.topics.wrapper()
        if only_topic is not None:  # registerIncrementBrokerData: the one topic, the table's version
            wrapper.topic_config_table = {
                name: c for name, c in wrapper.topic_config_table.items() if name == only_topic
            }
        perm = self.config.broker_permission
        if not (is_writable(perm) and is_readable(perm)):
            # BrokerController.registerBrokerAll: a broker that is not read-write registers every
            # topic as new TopicConfig(name, readQueueNums, writeQueueNums, brokerPermission)
            wrapper.topic_config_table = {
                name: jb.TopicConfig(
                    topic_name=name,
                    read_queue_nums=c.read_queue_nums,
                    write_queue_nums=c.write_queue_nums,
                    perm=perm,
                )
                for name, c in wrapper.topic_config_table.items()
            }
        if self.ha.state_version is not None:  # controller mode: the master epoch (5.1.1 nextVersion)
            wrapper.data_version.state_version = self.ha.state_version
        body = jb.encode(jb.RegisterBrokerBody(topic_config_serialize_wrapper=wrapper))
        acting = self.config.acting
        header = hd.RegisterBrokerRequestHeader(
            broker_name=self.config.broker_name,
            broker_addr=self.addr,
            cluster_name=self.config.broker_cluster_name,
            ha_server_addr=self.config.ha_server_addr,
            broker_id=self.config.broker_id,
            # with SlaveActingMaster, as RocketMQ 5.1.1: the group's flag and the heartbeat timeout
            # (without it the header is 4.9.8's, and a 5.x name server treats the broker as 4.x)
            heartbeat_timeout_millis=(
                acting.broker_not_active_timeout_millis if acting.enable_slave_acting_master else None
            ),
            enable_acting_master=True if acting.enable_slave_acting_master else None,
            compressed=False,
            body_crc32=zlib.crc32(body) & 0x7FFFFFFF,
        )
        return RemotingCommand.request(RC.REGISTER_BROKER, header, body)

    async def register_all(self, only_topic: str | None = None) -> None:
        """``BrokerOuterAPI.registerBrokerAll``: REGISTER_BROKER to every name server; with
        ``only_topic`` that topic alone (``registerIncrementBrokerData``: a name server keeps the
        broker's other topics, so a new topic costs one topic's registration, not the table's)."""
        if not self.ha.may_register:  # a DLedger member before its first role change
            return
        for addr in self.namesrv_addrs:
            try:
                request = self._register_request(only_topic)
                response = await self.remoting.invoke(addr, request, REGISTER_TIMEOUT)
                if response.code != ResponseCode.SUCCESS:
                    log.warning("register with %s: %s %s", addr, response.describe(), response.remark or "")
                    continue
                result = response.header(hd.RegisterBrokerResponseHeader)
                self.ha.registered(result.master_addr, result.ha_server_addr)
            except RmqError as exc:
                log.warning("register with name server %s failed: %s", addr, exc)

    async def unregister_all(self) -> None:
        header = hd.UnRegisterBrokerRequestHeader(
            broker_name=self.config.broker_name,
            broker_addr=self.addr,
            cluster_name=self.config.broker_cluster_name,
            broker_id=self.config.broker_id,
        )
        for addr in self.namesrv_addrs:
            try:
                await self.remoting.invoke(addr, RemotingCommand.request(RC.UNREGISTER_BROKER, header), 3.0)
            except RmqError as exc:
                log.warning("unregister from name server %s failed: %s", addr, exc)

    async def shutdown(self) -> None:
        """Stop the services, unregister, wait for the flushes and config writes under way, then
        flush and close the store (``abort`` removed)."""
        tasks = self._tasks + self._special + ([self._timer] if self._timer is not None else [])
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        self._special.clear()
        await self.ha.close()
        await self.unregister_all()
        await self.remoting.close()
        await self.store.settle()
        self.store.close()
