"""A broker's part in a DLedger group (4.9.8 ``DLedgerCommitLog`` + ``DLedgerRoleChangeHandler``),
in the place of the master/slave ``Replication`` (``rmqcli.broker.ha.member``): no HA port.

- Appends go to the member's log (``LedgerSink``, the ``StoreWriter``'s ``EntrySink``) only while it
  leads; a send waits until its entry is committed by a quorum: PUT_OK, or after
  ``maxWaitAckTimeMs`` (2.5 s) OS_PAGECACHE_BUSY (the producer's code 1 ``[PC_SYNCHRONIZED]broker
  busy``), or when the leadership is lost UNKNOWN_ERROR. A message that does not wait for its store
  waits all the same, as ``DLedgerCommitLog.asyncPutMessage`` does.
- What a quorum committed is dispatched to the consume queues and index (``EntryReput``), on the
  leader and on its followers alike, and wakes held pulls.
- The broker's role follows the member's: a candidate or follower is a SLAVE registered with its
  follower id (selfId's number + 1) that copies its leader's config (``SlaveSynchronize``); a leader
  becomes a SYNC_MASTER with id 0 once everything it holds is committed and dispatched, its queue
  offsets taken from the consume queues. Nothing registers before the first role change.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from formats import dledger as dfmt
from formats.records import Record
from rmqcli.broker.ha.config import SLAVE, SYNC_MASTER
from rmqcli.broker.ha.member import Replicated, await_replicated
from rmqcli.broker.ha.sync import SlaveSynchronize
from rmqcli.broker.ha.waiters import SendWaiters
from rmqcli.dledger import protocol as dp
from rmqcli.dledger.ledger import LedgerError
from rmqcli.dledger.member import Role
from rmqcli.dledger.node import DLedgerNode
from rmqcli.dledger.runtime_keys import raft_table
from rmqcli.remoting import json_body as jb
from rmqcli.store.write.writer import StoreWriter

log = logging.getLogger(__name__)

MAX_WAIT_ACK_S = 2.5  # DLedgerConfig.maxWaitAckTimeMs
CATCH_UP_POLL_S = 0.1  # DLedgerRoleChangeHandler: a new leader's wait for its own dispatch
TIMEOUT_POLL_S = 0.05


class LedgerSink:
    """The ``StoreWriter``'s ``EntrySink`` over a member's log: appends only on a leader."""

    def __init__(self, node: DLedgerNode):
        self.node = node
        self.data = node.ledger.data

    def body_position(self, body_size: int) -> int:
        state = self.node.state
        if state.role is not Role.LEADER:
            raise LedgerError(dp.DLedgerResponseCode.NOT_LEADER, f"{state.self_id} is not the leader")
        return self.node.ledger.next_pos(dfmt.BODY_OFFSET + body_size) + dfmt.BODY_OFFSET

    def append(self, body: bytes) -> None:
        self.node.append(body)

    @property
    def committed_end(self) -> int:
        pos = self.node.ledger.committed_pos
        if pos > 0:
            return pos
        files = self.data.files
        return files[0].from_offset if files else 0


class DLedgerReplication:
    """The broker side of one member; ``await start()`` once listening, ``await close()`` at shutdown."""

    waits_always = True  # every send waits for its commit
    state_version: int | None = None  # a controller-mode broker's master epoch (none here)
    quorum = None
    quorum_write = False
    master = None
    slave = None

    def __init__(
        self,
        node: DLedgerNode,
        writer: StoreWriter,
        dispatch: Callable[[Record], None],
        sync: SlaveSynchronize | None,
        follower_id: int,
        change_role: Callable[[str, int], None],
    ):
        self.node, self.writer, self.sync = node, writer, sync
        self.follower_id, self.change_role = follower_id, change_role
        self.role = SLAVE
        self.may_register = False  # 4.9.8 registers at its first role change
        self.alive_replicas: Callable[[], int] = lambda: 1
        assert writer.reput is not None and isinstance(writer.entries, LedgerSink)
        self.sink: LedgerSink = writer.entries
        writer.reput.dispatch = dispatch
        self._waiting: SendWaiters[Replicated] = SendWaiters()
        self._roles: asyncio.Queue[tuple[int, Role]] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def is_slave(self) -> bool:
        return self.role == SLAVE

    @property
    def ha_port(self) -> int:
        return 0

    # --- life cycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        self.node.on_role = lambda term, role: self._roles.put_nowait((term, role))
        self.node.ledger.on_commit = self._committed
        await self.node.start()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._handle_roles()), loop.create_task(self._expire())]
        if self.sync is not None:
            self._tasks.append(loop.create_task(self.sync.run()))

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._waiting.fail_all(Replicated.UNKNOWN_ERROR)
        self.node.ledger.on_commit = None
        await self.node.close()

    # --- commits ----------------------------------------------------------------------------------
    def _committed(self) -> None:
        """The committed index moved: dispatch, and answer the sends it covers."""
        self.writer.dispatch_committed()
        end = self.sink.committed_end
        self._waiting.answer(lambda offset: offset <= end, Replicated.PUT_OK)

    async def _expire(self) -> None:
        while True:
            await asyncio.sleep(TIMEOUT_POLL_S)
            self._waiting.expire(Replicated.OS_PAGECACHE_BUSY)

    # --- roles ------------------------------------------------------------------------------------
    async def _handle_roles(self) -> None:
        """``DLedgerRoleChangeHandler``: one change at a time, in order."""
        while True:
            term, role = await self._roles.get()
            log.info("Begin handling broker role change term=%d role=%s currStoreRole=%s",
                     term, role.value, self.role)  # fmt: skip
            started = time.monotonic()
            succeeded = True
            if role is Role.LEADER:
                succeeded = await self._lead(term)
            elif role is Role.FOLLOWER or self.role != SLAVE:
                self._to_slave()
            self.may_register = True
            log.info("Finish handling broker role change succ=%s term=%d role=%s currStoreRole=%s cost=%d",
                     succeeded, term, role.value, self.role, (time.monotonic() - started) * 1000)  # fmt: skip

    async def _lead(self, term: int) -> bool:
        """A new leader serves once all it holds is committed and dispatched."""
        state, ledger = self.node.state, self.node.ledger
        while True:
            if state.role is not Role.LEADER or state.curr_term != term:
                return False
            caught_up = ledger.end_index == ledger.committed_index and not self.dispatch_behind()
            if ledger.end_index == -1 or caught_up:
                break
            await asyncio.sleep(CATCH_UP_POLL_S)
        self.writer.reset_queue_offsets()
        self.role = SYNC_MASTER
        self.change_role(SYNC_MASTER, 0)
        return True

    def _to_slave(self) -> None:
        self._waiting.fail_all(Replicated.UNKNOWN_ERROR)
        self.role = SLAVE
        self.change_role(SLAVE, self.follower_id)

    # --- what the broker calls ----------------------------------------------------------------------
    def appended(self) -> None:
        """The node's dispatchers are woken by its own append."""

    def registered(self, master_addr: str | None, ha_server_addr: str | None) -> None:
        if self.sync is not None:
            self.sync.master_addr = master_addr or None

    def when_replicated(
        self, next_offset: int, callback: Callable[[Replicated], None], needed: int | None = None
    ) -> None:
        if self.sink.committed_end >= next_offset:
            callback(Replicated.PUT_OK)
        elif self.node.state.role is not Role.LEADER:
            callback(Replicated.UNKNOWN_ERROR)
        else:
            self._waiting.add(next_offset, MAX_WAIT_ACK_S, callback)

    async def replicated(self, next_offset: int, needed: int | None = None) -> Replicated:
        return await await_replicated(self.when_replicated, next_offset, needed)

    def acks_needed(self) -> int | None:
        return None

    def dispatch_behind(self) -> int:
        """``dispatchBehindBytes``: committed bytes not dispatched yet."""
        reput = self.writer.reput
        return max(0, self.sink.committed_end - reput.next) if reput is not None else 0

    def runtime_info(self) -> jb.HARuntimeInfo:
        end = self.sink.committed_end
        return jb.HARuntimeInfo(master=not self.is_slave, master_commit_log_max_offset=end)

    def raft_keys(self) -> dict[str, str]:
        """The member's Raft state for the runtime info (``rmq dledgerStatus`` reads it)."""
        return raft_table(self.node)

    def commitlog_file_deleted(self, from_offset: int) -> None:
        """The clean-up took the log's oldest data file: ``reviseLedgerBeginIndex`` (DLedger's
        ``CleanSpaceService``); the index files stay, as DLedger keeps them."""
        self.node.ledger.revise_begin()

    def master_offline(self) -> None:
        """SlaveActingMaster does not apply to a DLedger group."""

    def master_online(self) -> None:
        """SlaveActingMaster does not apply to a DLedger group."""
