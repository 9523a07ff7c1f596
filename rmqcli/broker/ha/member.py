"""One broker's part in its group's replication, by role (``brokerRole`` of 4.9.8's broker.conf).

* ASYNC_MASTER / SYNC_MASTER: ``HAService`` on the HA port over the broker's own CommitLog
  (``source.WriterSource``); the broker calls ``appended()`` after each append. A SYNC_MASTER send
  waits in ``replicated()`` as ``CommitLog.submitReplicaRequest`` does: SLAVE_NOT_AVAILABLE at once
  when no slave is connected and within ``haSlaveFallbehindMax`` (``HAService.isSlaveOK``), else
  PUT_OK once a slave acknowledged the record's end, or FLUSH_SLAVE_TIMEOUT after ``slaveTimeout``.
* SLAVE: ``HAClient`` into the broker's own CommitLog files (``appender.QueueAppender``), a reput of
  what arrives (``reput.ReplicaReput``, handing each record to the broker's ``dispatch``), and
  ``SlaveSynchronize`` of the master's config. The master's HA address is ``haMasterAddress`` or,
  without it, the one each NameServer registration answer names (``registered``).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import Callable

from formats.records import Record
from rmqcli.broker.acting.config import ActingConfig
from rmqcli.broker.ha.appender import QueueAppender
from rmqcli.broker.ha.config import ROLES, SLAVE, SYNC_MASTER, HAConfig
from rmqcli.broker.ha.master import HAMaster
from rmqcli.broker.ha.reput import ReplicaReput
from rmqcli.broker.ha.slave import HASlave, SlaveState
from rmqcli.broker.ha.source import WriterSource
from rmqcli.broker.ha.sync import SlaveSynchronize
from rmqcli.remoting import json_body as jb
from rmqcli.store.write.files import WritableFileQueue

log = logging.getLogger(__name__)


REPUT_SLICE = 0.002  # s a slave's reput dispatches for between two turns of the loop
REPUT_QUIET = 0.001  # s without replicated bytes after which the reput runs
REPUT_MAX_WAIT = 0.1  # s the reput waits at most while bytes keep arriving
CLOSE_DISPATCH_SECONDS = 2.0  # at shutdown; what is left is dispatched by the next start's recovery


class Replicated(enum.Enum):
    """What a SYNC_MASTER send learns of its slaves (``PutMessageStatus``); the last two are a
    DLedger leader's (``rmqcli.broker.dledger``: no quorum in time, the leadership lost)."""

    PUT_OK = "PUT_OK"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


async def await_replicated(
    when_replicated: Callable[[int, Callable[[Replicated], None], int | None], None],
    next_offset: int,
    needed: int | None,
) -> Replicated:
    """A member's ``when_replicated`` awaited: its first answer."""
    fut: asyncio.Future[Replicated] = asyncio.get_running_loop().create_future()
    when_replicated(next_offset, lambda outcome: fut.done() or fut.set_result(outcome), needed)
    return await fut


class Replication:
    """The HA side of one broker; ``await start()`` once listening, ``await close()`` at shutdown."""

    waits_always = False  # a message that does not wait for its store is answered at once
    may_register = True
    state_version: int | None = None  # a controller-mode broker's master epoch (none here)

    def __init__(
        self,
        role: str,
        config: HAConfig,
        commitlog: WritableFileQueue,
        *,
        host: str = "0.0.0.0",
        dispatch: Callable[[Record], None] | None = None,
        sync: SlaveSynchronize | None = None,
        sync_flush: bool = False,
        flush_interval_ms: int = 500,
    ):
        if role not in ROLES:
            raise ValueError(f"brokerRole must be one of {', '.join(ROLES)}, not {role!r}")
        self.role = role
        self.config = config
        self.commitlog = commitlog
        self.sync = sync
        self.master: HAMaster | None = None
        self.slave: HASlave | None = None
        self.reput: ReplicaReput | None = None
        self._tasks: list[asyncio.Task] = []
        self._arrived = asyncio.Event()  # replicated bytes wait for the reput
        self._replicated_end = commitlog.max_offset
        self._last_arrival = 0.0
        self.quorum: ActingConfig | None = None  # SlaveActingMaster's quorum write settings
        self.alive_replicas: Callable[[], int] = lambda: 1  # the group's live members (the broker's)
        if role == SLAVE:
            self.reput = ReplicaReput(commitlog, dispatch or (lambda _rec: None), commitlog.max_offset)
            self.slave = HASlave(
                QueueAppender(commitlog),
                config,
                master_address=config.ha_master_address,
                sync_flush=sync_flush,
                flush_interval_ms=flush_interval_ms,
                on_appended=self._replicated_to,
            )
        else:
            self.master = HAMaster(
                WriterSource(commitlog), config, host=host, direct_push=role == SYNC_MASTER
            )

    @property
    def is_slave(self) -> bool:
        return self.role == SLAVE

    @property
    def ha_port(self) -> int:
        return self.master.port if self.master is not None else self.config.ha_listen_port

    # --- life cycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        """Bind the HA port (a master; a port in use raises ``OSError``) or start replicating."""
        loop = asyncio.get_running_loop()
        if self.master is not None:
            await self.master.start()
        if self.slave is not None:
            self._tasks.append(loop.create_task(self.slave.run()))
            self._tasks.append(loop.create_task(self._reput_loop()))
            if self.sync is not None:
                self._tasks.append(loop.create_task(self.sync.run()))

    async def close(self) -> None:
        if self.slave is not None:
            await self.slave.close()
        for task in self._tasks[1:]:  # the reput and config sync; the HA client's run ends on its close
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        if self.reput is not None:  # what arrived, for up to CLOSE_DISPATCH_SECONDS; the next start's
            deadline = time.monotonic() + CLOSE_DISPATCH_SECONDS  # recovery dispatches the rest
            self.reput.dispatch_to(self.commitlog.max_offset, deadline)
        if self.master is not None:
            await self.master.close()

    def raft_keys(self) -> dict[str, str]:
        """A DLedger member's Raft state for the runtime info; none here."""
        return {}

    def commitlog_file_deleted(self, from_offset: int) -> None:
        """The clean-up deleted the CommitLog file starting at ``from_offset``: a slave's appender lets
        go of its descriptor."""
        if self.slave is not None:
            self.slave.appender.forget(from_offset)

    # --- a slave's reput --------------------------------------------------------------------------------
    def _replicated_to(self, end: int) -> None:
        """The HA client appended up to ``end``: the reput is told, and runs apart from the client
        (``ReputMessageService`` is a thread of its own), so replication never waits for it."""
        self._replicated_end = end
        self._last_arrival = time.monotonic()
        self._arrived.set()

    async def _reput_loop(self) -> None:
        """Dispatch what arrived, ``REPUT_SLICE`` s at a time. The HA client goes first: while
        bytes keep arriving, a slice runs only once the stream pauses for ``REPUT_QUIET`` s or
        ``REPUT_MAX_WAIT`` s after the last slice, so a catching-up slave takes its master's bytes
        at the speed of the link and dispatches them right after, and a steady stream is
        dispatched in its pauses and at least a slice every ``REPUT_MAX_WAIT`` s."""
        reput = self.reput
        assert reput is not None
        last_slice = time.monotonic()
        while True:
            await self._arrived.wait()
            self._arrived.clear()
            while reput.broken is None and reput.next < self._replicated_end:
                now = time.monotonic()
                if now - self._last_arrival < REPUT_QUIET and now - last_slice < REPUT_MAX_WAIT:
                    await asyncio.sleep(REPUT_QUIET)
                    continue
                before = reput.next
                reput.dispatch_to(self._replicated_end, now + REPUT_SLICE)
                if reput.next == before:  # the last record is not whole yet
                    break
                last_slice = time.monotonic()
                await asyncio.sleep(0)

    def dispatch_behind(self) -> int:
        """``dispatchBehindBytes``: replicated CommitLog bytes the reput has not dispatched yet."""
        return max(0, self.commitlog.max_offset - self.reput.next) if self.reput is not None else 0

    # --- what the broker calls ----------------------------------------------------------------------
    def appended(self) -> None:
        """New CommitLog bytes (a master): wake the HA writers."""
        if self.master is not None:
            self.master.notify_append()

    def registered(self, master_addr: str | None, ha_server_addr: str | None) -> None:
        """A registration answer (``RegisterBrokerResult``): the master's broker address for the
        config sync and, without ``haMasterAddress``, its HA address (``updateHaMasterAddress``)."""
        if self.sync is not None:
            self.sync.master_addr = master_addr or None
        if self.slave is not None and not self.config.ha_master_address and ha_server_addr:
            self.slave.update_master_address(ha_server_addr)

    @property
    def quorum_write(self) -> bool:
        """A SYNC_MASTER under SlaveActingMaster: 5.1.1's quorum write (``acks_needed``)."""
        return self.quorum is not None and self.role == SYNC_MASTER and self.master is not None

    def acks_needed(self) -> int | None:
        """The copies a quorum write needs, this master's included (``calcNeedAckNums``):
        ``inSyncReplicas``, or with ``enableAutoInSyncReplicas`` the live in-sync count within
        ``[minInSyncReplicas, inSyncReplicas]``; None when fewer replicas are in sync
        (IN_SYNC_REPLICAS_NOT_ENOUGH: the send is refused before it is stored)."""
        quorum, master = self.quorum, self.master
        assert quorum is not None and master is not None
        in_sync = min(self.alive_replicas(), master.in_sync(quorum.ha_max_gap_not_in_sync))
        needed = quorum.in_sync_replicas
        if quorum.enable_auto_in_sync_replicas:
            needed = max(min(needed, in_sync), quorum.min_in_sync_replicas)
        return None if needed > in_sync else needed

    def when_replicated(
        self, next_offset: int, callback: Callable[[Replicated], None], needed: int | None = None
    ) -> None:
        """A SYNC_MASTER send's wait for its slaves: ``callback`` with the outcome, at once when it
        is known (PUT_OK on any other role), else once a slave acknowledged or ``slaveTimeout``.
        A quorum write (``needed`` from ``acks_needed``) waits for ``needed - 1`` slaves, not at
        all for 1."""
        master = self.master
        if self.role != SYNC_MASTER or master is None or (needed is not None and needed <= 1):
            callback(Replicated.PUT_OK)
        elif needed is not None:
            master.when_acked(
                next_offset,
                lambda ok: callback(Replicated.PUT_OK if ok else Replicated.FLUSH_SLAVE_TIMEOUT),
                count=needed - 1,
            )
        elif not master.is_slave_ok(next_offset):
            callback(Replicated.SLAVE_NOT_AVAILABLE)
        else:
            master.when_acked(
                next_offset, lambda ok: callback(Replicated.PUT_OK if ok else Replicated.FLUSH_SLAVE_TIMEOUT)
            )

    def master_offline(self) -> None:
        """``onMasterOffline`` (SlaveActingMaster): the master left its group; the HA client stops
        connecting and the config sync stops, until ``master_online``."""
        if self.sync is not None:
            self.sync.master_addr = None
        if self.slave is not None:
            self.slave.update_master_address(None)

    def master_online(self) -> None:
        """``onMasterOnline``: the master is back; with ``haMasterAddress`` the HA client reconnects
        at once, else the next registration answer names the master's HA address."""
        if self.slave is not None and self.config.ha_master_address:
            self.slave.update_master_address(self.config.ha_master_address)

    async def replicated(self, next_offset: int, needed: int | None = None) -> Replicated:
        """``when_replicated`` awaited."""
        return await await_replicated(self.when_replicated, next_offset, needed)

    def fall_behind(self) -> int:
        """``slaveFallBehindMuch``: bytes no slave acknowledged (0 without slaves or on a slave)."""
        if self.master is None or not self.master.connection_count:
            return 0
        return self.master.slave_fall_behind()

    def runtime_info(self) -> jb.HARuntimeInfo:
        """RocketMQ 5's ``HARuntimeInfo`` (GET_BROKER_HA_STATUS): a master's slaves, or a slave's link."""
        top = self.commitlog.max_offset
        info = jb.HARuntimeInfo(master=self.master is not None, master_commit_log_max_offset=top)
        if self.master is not None:
            fallbehind_max = self.config.ha_slave_fallbehind_max
            info.ha_connection_info = [
                jb.HAConnectionRuntimeInfo(
                    addr=s.address,
                    diff=s.gap,
                    in_sync=s.ack_offset >= 0 and s.gap < fallbehind_max,
                    slave_ack_offset=s.ack_offset,
                    transfer_from_where=s.transfer_from,
                    transferred_byte_in_second=s.transferred_per_second,
                )
                for s in self.master.slaves()
            ]
            info.in_sync_slave_nums = sum(1 for c in info.ha_connection_info if c.in_sync)
        elif self.slave is not None:
            info.ha_client_runtime_info = jb.HAClientRuntimeInfo(
                activated=self.slave.state is SlaveState.CONNECTED,
                last_read_timestamp=self.slave.last_read_ms,
                last_write_timestamp=self.slave.last_write_ms,
                master_addr=self.slave.master_address,
                max_offset=top,
                transferred_byte_in_second=self.slave.flow.per_second(),
            )
        return info
