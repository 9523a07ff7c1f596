"""A broker's replication in controller mode, in the place of the master/slave ``Replication``
(``rmqcli.broker.ha.member``): 5.1.1 ``AutoSwitchHAService`` with ``ReplicasManager`` driving it
(docs/controller.md §5.5-§5.7).

- The HA port is bound at start and serves slaves only while this broker is the master.
- **To master**: the slave client stops; what arrived is dispatched; an epoch entry
  ``(epoch, max offset)`` is appended (refused, as 5.1.1 refuses it, when nothing was written
  since the last one began); the queue offsets are read from the consume queues; the broker becomes
  a SYNC_MASTER with id 0.
- **To slave**: every slave connection closes; the broker becomes a SLAVE with its controller id,
  replicating from the master the NameServer names (``registered``); a rejoining replica is cut
  back to the point it shares with the master (``haslave``, ``rmqcli.store.write.truncate``).
- **In-sync set** (§5.6): a slave whose acknowledgement reaches this master's end (and the confirm
  offset, and the last epoch's start) joins the proposed set at once; every
  ``checkSyncStateSetPeriod`` a member that was not caught up for ``haMaxTimeSlaveNotCatchup``, or
  has no connection, leaves it; a change goes to the controller (1001).
- **Confirm offset** (§5.7): the master's end when the set is itself alone, else the smallest
  acknowledgement of the connected members; a slave takes the master's, bounded by its own end.
- **Sends** on the master: with ``allAckInSyncStateSet`` a send waits (``slaveTimeout``) for every
  member of the set, else for ``inSyncReplicas`` copies; below ``minInSyncReplicas`` members a send
  is refused before it is stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path

from formats.autoswitch import TRANSFER
from formats.epoch import EpochEntry
from formats.records import Record
from rmqcli.broker.autoswitch.epochs import EpochCache
from rmqcli.broker.autoswitch.hamaster import AutoSwitchMaster, SlaveLink
from rmqcli.broker.autoswitch.haslave import AutoSwitchSlave
from rmqcli.broker.autoswitch.replicas import Invoke, Oneway, ReplicasManager
from rmqcli.broker.config import BrokerConfig
from rmqcli.broker.ha.appender import QueueAppender
from rmqcli.broker.ha.config import SLAVE, SYNC_MASTER
from rmqcli.broker.ha.member import Replicated, await_replicated
from rmqcli.broker.ha.reput import ReplicaReput
from rmqcli.broker.ha.source import WriterSource
from rmqcli.broker.ha.sync import SlaveSynchronize
from rmqcli.broker.ha.waiters import SendWaiters
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.store.write.truncate import truncate_store
from rmqcli.store.write.writer import StoreWriter

log = logging.getLogger(__name__)

REPUT_POLL_S = 0.005
CATCH_UP_POLL_S = 0.05
WAIT_POLL_S = 0.05


class AutoSwitchReplication:
    """The broker side of controller mode; ``await start()`` once listening, ``await close()``."""

    waits_always = False
    quorum = None
    slave = None

    def __init__(
        self,
        config: BrokerConfig,
        writer: StoreWriter,
        dispatch: Callable[[Record], None],
        sync: SlaveSynchronize,
        change_role: Callable[[str, int], None],
        invoke: Invoke,
        oneway: Oneway,
        broker_addr: str,
        host: str = "0.0.0.0",
    ):
        self.config, self.writer, self.sync = config, writer, sync
        self.change_role = change_role
        auto = config.autoswitch
        self.auto = auto
        root = Path(writer.root)
        self.epochs = EpochCache.load(auto.epoch_path(root))
        queue = writer.commitlog
        self.master = AutoSwitchMaster(
            WriterSource(queue), self.epochs, config.ha, lambda: self.confirm_offset, host=host
        )
        self.master.on_ack = self._acked
        self.master.on_gone = self._gone
        self.appender = QueueAppender(queue)
        self.client = AutoSwitchSlave(
            self.appender, self.epochs, config.ha, -1, self._truncate, self._slave_appended,
            sync_from_last_file=auto.sync_from_last_file, async_learner=auto.async_learner,
        )  # fmt: skip
        # the reput goes on from where the consume queues end: a restart's recovery dispatched only
        # the confirmed records, the others wait for the confirm offset (or a cut)
        start = min(queue.max_offset, max(writer.dispatcher.max_physic_offset, queue.first_start(0)))
        self.reput = ReplicaReput(queue, dispatch, start)
        self.replicas = ReplicasManager(
            auto, config.broker_cluster_name, config.broker_name, broker_addr, auto.identity_path(root),
            invoke, oneway, self, config.acting.broker_heartbeat_interval,
        )  # fmt: skip
        self.role = SLAVE
        self.fenced = True
        self._confirm = queue.max_offset  # until the first transfer or role
        self.release: Callable[[bool], None] = lambda _everything: None  # the store's release_held
        writer.dispatch_bound = lambda: self._confirm  # what reaches the consume queues (§5.7)
        self.sync_set: frozenset[int] = frozenset()
        self.proposed: frozenset[int] | None = None  # a set being reported (remoteSyncStateSet)
        self.alive_replicas: Callable[[], int] = lambda: 1
        self._waiting: SendWaiters[Replicated] = SendWaiters()
        self._tasks: list[asyncio.Task[None]] = []
        self._reporting = False
        self.register_soon: Callable[[], None] = lambda: None  # the broker registers again at once

    # --- what the broker reads --------------------------------------------------------------------
    @property
    def is_slave(self) -> bool:
        return self.role == SLAVE

    @property
    def confirm_offset(self) -> int:
        """``getConfirmOffset`` (§5.7): the consume queues hold the records that end within it."""
        return self._confirm

    @confirm_offset.setter
    def confirm_offset(self, value: int) -> None:
        if value != self._confirm:
            self._confirm = value
            self.release(False)

    @property
    def ha_port(self) -> int:
        return self.master.port

    @property
    def may_register(self) -> bool:
        """The fence (§5.2): nothing registers with the name servers before it is lifted."""
        return not self.fenced

    @property
    def state_version(self) -> int:
        """The master epoch, as the registration's ``dataVersion.stateVersion``."""
        return self.replicas.state.master_epoch

    @property
    def quorum_write(self) -> bool:
        return self.role == SYNC_MASTER

    # --- life cycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        await self.master.start()
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self.replicas.run()),
            loop.create_task(self.client.run()),
            loop.create_task(self._reput_loop()),
            loop.create_task(self._shrink_loop()),
            loop.create_task(self._expire()),
            loop.create_task(self.sync.run()),
        ]

    async def close(self) -> None:
        await self.client.close()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._waiting.fail_all(Replicated.FLUSH_SLAVE_TIMEOUT)
        self.reput.dispatch_to(self.writer.commitlog.max_offset, time.monotonic() + 2.0)
        self.appender.release()
        await self.master.close()

    # --- roles (ReplicasManager's RoleSink) ---------------------------------------------------------
    def unfence(self) -> None:
        self.fenced = False
        self.change_role(self.role, 0 if self.role == SYNC_MASTER else self.replicas.broker_id)

    def to_master(self, epoch: int, set_epoch: int, members: frozenset[int], same_master: bool) -> None:
        """``changeToMaster`` (§5.5)."""
        if same_master and self.role == SYNC_MASTER:
            self.epochs.append(EpochEntry(epoch, self.writer.commitlog.max_offset))
            self.change_role(SYNC_MASTER, 0)
            return
        self.client.set_master(None)
        self.reput.dispatch_to(self.writer.commitlog.max_offset)
        if self.reput.next < self.writer.commitlog.max_offset:  # truncateInvalidMsg: a record cut by
            self._truncate(self.reput.next)  # the end of what had arrived
        end = self.writer.commitlog.max_offset
        self.epochs.truncate_from_epoch(epoch)
        self.epochs.append(EpochEntry(epoch, end))
        self._confirm = end  # the set is this master alone until a slave catches up
        self.release(True)  # everything replicated reaches the consume queues
        self.writer.reset_queue_offsets()
        self.role = SYNC_MASTER
        self.master.serving = True
        self.sync.master_addr = None
        self._recompute_confirm()
        self.change_role(SYNC_MASTER, 0)
        asyncio.get_running_loop().create_task(self._report_set())

    def to_slave(self, master_addr: str, epoch: int, master_id: int, same_master: bool) -> None:
        """``changeToSlave`` (§5.5): the HA address comes with the next registration answer."""
        if same_master and self.role == SLAVE:
            self.change_role(SLAVE, self.replicas.broker_id)
            return
        self._waiting.fail_all(Replicated.FLUSH_SLAVE_TIMEOUT)
        self.role = SLAVE
        self.master.serving = False
        self.master.drop_all()
        self.client.broker_id = self.replicas.broker_id
        self.sync.master_addr = master_addr
        self.change_role(SLAVE, self.replicas.broker_id)

    def sync_set_changed(self, members: frozenset[int], epoch: int) -> None:
        self.sync_set = members
        self.proposed = None
        self._recompute_confirm()

    def heartbeat_values(self) -> tuple[int, int, int]:
        return self.epochs.last_epoch, self.writer.commitlog.max_offset, self.confirm_offset

    # --- the broker's hooks -------------------------------------------------------------------------
    def role_notice(self, _ctl: object, req: RemotingCommand, _conn: object) -> RemotingCommand:
        """NOTIFY_BROKER_ROLE_CHANGED (1008), the broker's handler."""
        self.replicas.notified(req)
        return req.response()

    def epoch_cache(self, _ctl: object, req: RemotingCommand, _conn: object) -> RemotingCommand:
        """GET_BROKER_EPOCH_CACHE (1007): the epochs, the last ending at the CommitLog's end."""
        end = self.writer.commitlog.max_offset
        entries = [
            jb.EpochEntry(end_offset=self.epochs.end_of(i, end), epoch=e.epoch, start_offset=e.start_offset)
            for i, e in enumerate(self.epochs.entries)
        ]
        cache = jb.EpochEntryCache(
            broker_id=self.replicas.broker_id if self.role == SLAVE else 0,
            broker_name=self.config.broker_name,
            cluster_name=self.config.broker_cluster_name,
            epoch_list=entries,
            max_offset=end,
        )
        return req.response(body=jb.encode(cache))

    def appended(self) -> None:
        self.master.notify_append()
        if self.role == SYNC_MASTER and self._members() <= {self.replicas.broker_id}:
            self.confirm_offset = self.writer.commitlog.max_offset

    def registered(self, master_addr: str | None, ha_server_addr: str | None) -> None:
        """The NameServer's answer names the group's master and its HA address (5.1.1 always takes
        them from there in controller mode)."""
        if self.role == SLAVE and not self.fenced:
            self.sync.master_addr = master_addr or None
            self.client.set_master(ha_server_addr or None)
            if not ha_server_addr:  # the new master has not registered yet: ask again soon (rmq's;
                asyncio.get_running_loop().call_later(1.0, self.register_soon)  # 5.1.1 waits 30 s)

    def acks_needed(self) -> int | None:
        """Refused before the store below ``minInSyncReplicas``."""
        members = len(self._members())
        if members < self.config.acting.min_in_sync_replicas:
            return None
        return members if self.auto.all_ack_in_sync_state_set else self.config.acting.in_sync_replicas

    def when_replicated(
        self, next_offset: int, callback: Callable[[Replicated], None], needed: int | None = None
    ) -> None:
        if self._acked_enough(next_offset):
            callback(Replicated.PUT_OK)
        else:
            self._waiting.add(next_offset, self.config.ha.slave_timeout_seconds, callback)

    async def replicated(self, next_offset: int, needed: int | None = None) -> Replicated:
        return await await_replicated(self.when_replicated, next_offset, needed)

    def dispatch_behind(self) -> int:
        return max(0, self.writer.commitlog.max_offset - self.reput.next) if self.role == SLAVE else 0

    def runtime_info(self) -> jb.HARuntimeInfo:
        """GET_BROKER_HA_STATUS (``AutoSwitchHAService.getRuntimeInfo``): a master's slaves, in sync
        when in the set; a slave's link."""
        end = self.writer.commitlog.max_offset
        info = jb.HARuntimeInfo(master=self.role != SLAVE, master_commit_log_max_offset=end)
        if self.role != SLAVE:
            members = self._members()
            info.ha_connection_info = [
                jb.HAConnectionRuntimeInfo(
                    addr=link.address,
                    diff=end - max(link.ack_offset, 0),
                    in_sync=link.slave_id in members,
                    slave_ack_offset=link.ack_offset,
                    transfer_from_where=link.request_offset,
                )  # fmt: skip
                for link in self.master.links.values()
            ]
            info.in_sync_slave_nums = sum(1 for c in info.ha_connection_info if c.in_sync)
        else:
            info.ha_client_runtime_info = jb.HAClientRuntimeInfo(
                activated=self.client.state == TRANSFER,
                master_addr=self.client.master_address,
                max_offset=end,
            )
        return info

    def raft_keys(self) -> dict[str, str]:
        return {}

    def commitlog_file_deleted(self, from_offset: int) -> None:
        self.appender.forget(from_offset)
        self.epochs.truncate_prefix(self.writer.commitlog.first_start(0), self.writer.commitlog.max_offset)

    def master_offline(self) -> None:
        """SlaveActingMaster does not apply in controller mode."""

    def master_online(self) -> None:
        """SlaveActingMaster does not apply in controller mode."""

    # --- slave side ---------------------------------------------------------------------------------
    def _truncate(self, offset: int) -> None:
        self.reput.dispatch_to(min(offset, self.writer.commitlog.max_offset))
        self.appender.flush()
        cut = truncate_store(self.writer, offset)
        self.reput.next = min(self.reput.next, offset)
        if cut.commitlog_bytes:
            log.warning("controller mode: cut the store at %d to rejoin the master: %d CommitLog bytes, "
                        "%d consume-queue files, kept in %s", offset, cut.commitlog_bytes, cut.queue_files,
                        cut.backup)  # fmt: skip

    def _slave_appended(self, end: int, confirm: int) -> None:
        self.confirm_offset = confirm

    async def _reput_loop(self) -> None:
        while True:
            await asyncio.sleep(REPUT_POLL_S)
            if self.role == SLAVE:
                self.reput.dispatch_to(self.writer.commitlog.max_offset, time.monotonic() + 0.002)
            else:
                self.reput.next = self.writer.commitlog.max_offset

    # --- master side: acknowledgements, the in-sync set, the confirm offset ---------------------------
    def _members(self) -> frozenset[int]:
        """The set acks are counted against: the confirmed one, with the proposed one while a report
        is in flight."""
        return self.sync_set | (self.proposed or frozenset())

    def _acked(self, link: SlaveLink) -> None:
        if self.role != SYNC_MASTER:
            return
        end = self.writer.commitlog.max_offset
        if link.slave_id not in self._members() and not link.async_learner:
            last_start = self.epochs.entries[-1].start_offset if self.epochs.entries else 0
            at_end = link.ack_offset >= min(end, link.last_master_max)
            if at_end and link.ack_offset >= self.confirm_offset and link.ack_offset >= last_start:
                self.proposed = self._members() | {link.slave_id}
                asyncio.get_running_loop().create_task(self._report_set())
        self._recompute_confirm()
        self._answer_waiting()

    def _gone(self, link: SlaveLink) -> None:
        if self.role == SYNC_MASTER and link.slave_id in self._members():
            self.proposed = self._members() - {link.slave_id}
            asyncio.get_running_loop().create_task(self._report_set())

    def _acks(self) -> dict[int, int]:
        return {i: link.ack_offset for i, link in self.master.links_by_id().items()}

    def _recompute_confirm(self) -> None:
        """``computeConfirmOffset`` (§5.7)."""
        if self.role != SYNC_MASTER:
            return
        own = self.replicas.broker_id
        end = self.writer.commitlog.max_offset
        others = self._members() - {own}
        if not others:
            self.confirm_offset = end
            return
        acks = self._acks()
        if any(i not in acks for i in others):
            return  # a member without a connection: unchanged
        self.confirm_offset = min([end] + [acks[i] for i in others if acks[i] > 0])

    def _acked_enough(self, next_offset: int) -> bool:
        own = self.replicas.broker_id
        acks = self._acks()
        if self.auto.all_ack_in_sync_state_set:
            return all(acks.get(i, -1) >= next_offset for i in self._members() - {own})
        needed = self.config.acting.in_sync_replicas
        return 1 + sum(1 for a in acks.values() if a >= next_offset) >= needed

    def _answer_waiting(self) -> None:
        self._waiting.answer(self._acked_enough, Replicated.PUT_OK)

    async def _expire(self) -> None:
        while True:
            await asyncio.sleep(WAIT_POLL_S)
            self._answer_waiting()
            self._waiting.expire(Replicated.FLUSH_SLAVE_TIMEOUT)

    async def _shrink_loop(self) -> None:
        """``maybeShrinkSyncStateSet`` every ``checkSyncStateSetPeriod``."""
        period = self.auto.check_sync_state_set_period / 1000
        while True:
            await asyncio.sleep(period)
            if self.role != SYNC_MASTER or self.fenced:
                continue
            own = self.replicas.broker_id
            now = time.time_ns() // 1_000_000
            links = self.master.links_by_id()
            keep = {own} | {
                i for i in self._members()
                if i in links and now - links[i].caught_up_ms <= self.auto.ha_max_time_slave_not_catchup
            }  # fmt: skip
            if frozenset(keep) != self.sync_set:
                self.proposed = frozenset(keep)
                await self._report_set()

    async def _report_set(self) -> None:
        """1001 with the proposed set (one report at a time)."""
        if self._reporting or self.role != SYNC_MASTER:
            return
        proposed = self.proposed
        if proposed is None or proposed == self.sync_set:
            self.proposed = None
            return
        self._reporting = True
        try:
            ok = await self.replicas.alter_sync_state_set(proposed | {self.replicas.broker_id})
            if not ok:
                self.proposed = None
        finally:
            self._reporting = False
