"""A controller on asyncio: 5.1.1's ``ControllerManager``, ``DLedgerController`` and
``ControllerRequestProcessor`` over rmq's DLedger member (controller.md §1.1, §2.3, §3.4-§3.8).

- **One port.** The controller answers its requests on its DLedger peer port, beside the Raft RPC
  (``DLedgerNode.extra_dispatch``), as 5.1.1 registers its processor on DLedger's server.
- **Requests** (§2.3): 904, 1005, 1009 and 1010 are answered by any controller; the others only by
  the leader once its first entry is committed (else CONTROLLER_NOT_LEADER), one at a time, as the
  single ``EventScheduler`` thread runs them: the answer is computed from the state
  (``ReplicasInfoManager``), its events appended to the log as one batch, and the answer sent once
  a quorum committed them (5 s at most, else SYSTEM_ERROR). ``processReadEvent`` commits an empty
  entry before a read.
- **State** (§3.4): rebuilt from the log, never from a snapshot: every committed entry is applied in
  order as the committed index moves, on leaders and followers alike. An entry that does not
  decode or apply stops the applying (the Java state machine retries it forever); the controller
  says so in its log and answers from the state it has.
- **Leadership** (§3.6): a new leader appends empty entries until one commits, then serves and
  scans for groups whose master is gone every ``scanInactiveMasterInterval``.
- **Liveness** (§3.7): heartbeats (904) per controller; entries silent past their timeout are
  dropped every ``scanNotActiveBrokerInterval`` (first after 2 s), and a broker whose connection
  closes is dropped at once. When a group's master goes, the leader elects another.
- **Notifications** (§3.8): after each election, 1008 oneway to every live member of the group, a
  newer one for an address replacing an older one still pending.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from formats.javatext import parse_boolean, parse_long
from rmqcli.admin.broker import parse_properties, properties_text
from rmqcli.controller import events as ev
from rmqcli.controller import wire
from rmqcli.controller.bodies import ElectMasterResponseBody, SyncStateSet
from rmqcli.controller.codes import ControllerCode as Code
from rmqcli.controller.config import ControllerConfig, java_properties
from rmqcli.controller.elect import DefaultElectPolicy
from rmqcli.controller.heartbeat import BrokerIdentity, HeartbeatTable
from rmqcli.controller.recovery import recover_log
from rmqcli.controller.replicas import ControllerResult, ReplicasInfoManager
from rmqcli.dledger import protocol as dp
from rmqcli.dledger.ledger import LedgerError
from rmqcli.dledger.member import MemberState, Role
from rmqcli.dledger.node import DLedgerNode, Timing
from rmqcli.durable import replace_file
from rmqcli.errors import CorruptDataError
from rmqcli.remoting.client import RemotingClient
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.headers.catalogue import BrokerHeartbeatRequestHeader
from rmqcli.remoting.server.connection import Connection

log = logging.getLogger(__name__)

WAIT_TIMEOUT_S = 5.0  # ControllerRequestProcessor.WAIT_TIMEOUT_OUT
FIRST_SCAN_S = 2.0  # DefaultBrokerHeartbeatManager: the first scan of the heartbeat table
NOTIFY_TIMEOUT_S = 3.0
NOT_LEADER = "The controller is not in leader state"
RETRY_FIRST_ENTRY_S = 0.1

Compute = Callable[[], ControllerResult]


class ControllerServer:
    """One controller; ``await start()`` listens on its peer port, ``await close()`` stops it."""

    def __init__(self, config: ControllerConfig, timing: Timing | None = None):
        self.config = config
        timing = timing or Timing()
        recovered = recover_log(config.store_root, config.member_home, config.mapped_file_size)
        if recovered is not None:
            log.warning("controller %s: %s", config.self_id, recovered)
        state = MemberState.load(config.group, config.self_id, config.peer_map(), config.member_home)
        self.node = DLedgerNode(state, timing, data_file_size=config.mapped_file_size)
        self.node.extra_dispatch = self.dispatch
        self.node.on_role = self._on_role
        self.node.ledger.on_commit = self._apply_committed
        self.node.server.close_callbacks.append(self._channel_closed)
        self.replicas = ReplicasInfoManager(config.enable_elect_unclean_master)
        self.heartbeats = HeartbeatTable()
        self.policy = DefaultElectPolicy(self.heartbeats.is_active, self.heartbeats.live_info)
        self._last_ends: dict[tuple[str, int], tuple[int, int]] = {}  # (group, id) -> (epoch, end)
        self.applied_index = -1
        self.stalled: str | None = None  # why applying stopped
        self.leading = False  # the role handler's LEADER: first entry committed (§3.6)
        self.client = RemotingClient()
        self._serial = asyncio.Lock()  # the EventScheduler's one thread
        self._leader_tasks: list[asyncio.Task[Any]] = []
        self._tasks: list[asyncio.Task[Any]] = []
        self._notifying: dict[str, tuple[int, asyncio.Task[None]]] = {}

    @property
    def state(self) -> MemberState:
        return self.node.state

    # --- life cycle ----------------------------------------------------------------------------
    async def start(self) -> int:
        port = await self.node.start()
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._scan_heartbeats()))
        log.info("The Controller Server boot success. selfId=%s peers=%s store=%s", self.config.self_id,
                 self.config.peers, self.config.member_home)  # fmt: skip
        return port

    async def close(self) -> None:
        self._stop_leading()
        for task in self._tasks + [t for _, t in self._notifying.values()]:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.node.close()
        await self.client.close()

    # --- the state machine (§3.4) -----------------------------------------------------------------
    def _apply_committed(self) -> None:
        ledger = self.node.ledger
        while self.stalled is None and self.applied_index < ledger.committed_index:
            index = self.applied_index + 1
            try:
                event = ev.decode_entry(ledger.get(index).body, str(ledger.home), index)
                if event is not None:
                    self.replicas.apply(event)
            except CorruptDataError as exc:
                self.stalled = f"entry {index}: {exc}"
                log.error("controller %s: cannot apply %s; the state stays at entry %d", self.config.self_id,
                          self.stalled, self.applied_index)  # fmt: skip
                return
            self.applied_index = index

    # --- leadership (§3.6) ----------------------------------------------------------------------------
    def _on_role(self, term: int, role: Role) -> None:
        self._stop_leading()
        if role is Role.LEADER:
            loop = asyncio.get_running_loop()
            self._leader_tasks.append(loop.create_task(self._take_lead(term)))

    def _stop_leading(self) -> None:
        if self.leading:
            log.info("controller %s: no longer the leader", self.config.self_id)
        self.leading = False
        for task in self._leader_tasks:
            task.cancel()
        self._leader_tasks.clear()

    def _still_leader(self, term: int) -> bool:
        return self.state.role is Role.LEADER and self.state.curr_term == term

    async def _take_lead(self, term: int) -> None:
        """Append empty entries until one commits (every earlier entry is then applied)."""
        while self._still_leader(term):
            if await self._append([b""]) is None:
                self.leading = True
                log.info("controller %s: the leader of term %d, state at entry %d", self.config.self_id, term,
                         self.applied_index)  # fmt: skip
                loop = asyncio.get_running_loop()
                self._leader_tasks.append(loop.create_task(self._scan_inactive_masters()))
                return
            await asyncio.sleep(RETRY_FIRST_ENTRY_S)

    async def _append(self, bodies: list[bytes]) -> str | None:
        """Append ``bodies`` as consecutive entries and wait for the last one's commit: None when
        committed, else why not."""
        try:
            futures = [self.node.append(body)[1] for body in bodies]
        except LedgerError as exc:
            return f"DLedger refused the append: {exc.code.name} {exc}"
        try:
            appended = await asyncio.wait_for(asyncio.shield(futures[-1]), WAIT_TIMEOUT_S)
        except TimeoutError:
            return f"the append was not committed within {WAIT_TIMEOUT_S:.0f} s"
        if appended.code != dp.DLedgerResponseCode.SUCCESS:
            return f"the append failed: {appended.code.name}"
        return None

    # --- requests (§2) -----------------------------------------------------------------------------
    def dispatch(self, request: RemotingCommand, conn: Connection) -> Any:
        code = request.code
        if code == RC.BROKER_HEARTBEAT:
            return self._heartbeat(request, conn)
        if code == RC.CONTROLLER_GET_METADATA_INFO:
            return request.response(Code.SUCCESS, header=self.metadata())
        if code == RC.GET_CONTROLLER_CONFIG:
            return request.response(Code.SUCCESS, body=self.config_text().encode("utf-8"))
        if code == RC.UPDATE_CONTROLLER_CONFIG:
            return self._update_config(request)
        compute = self._compute(request)
        if compute is None:
            return request.response(Code.REQUEST_CODE_NOT_SUPPORTED, f" request type {code} not supported")
        if not self.leading:
            return request.response(Code.CONTROLLER_NOT_LEADER, NOT_LEADER)
        return self._answer(request, compute)

    def _compute(self, request: RemotingCommand) -> Compute | None:
        """The task of a leader-only request, its header decoded now (a bad one answers
        SYSTEM_ERROR with Java's message, from the remoting layer)."""
        r, alive = self.replicas, self.heartbeats.is_active
        code = request.code
        if code == RC.CONTROLLER_ALTER_SYNC_STATE_SET:
            h = request.header(wire.AlterSyncStateSetRequestHeader)
            body = wire.decode_sync_state_set(request.body) or SyncStateSet(frozenset(), 0)
            return lambda: r.alter_sync_state_set(
                h.broker_name or "", h.master_broker_id, h.master_epoch, body.sync_state_set,
                body.sync_state_set_epoch, alive,
            )  # fmt: skip
        if code == RC.CONTROLLER_ELECT_MASTER:
            e = request.header(wire.ElectMasterRequestHeader)
            return lambda: r.elect_master(e.broker_name, e.broker_id, e.designate_elect, self.policy)
        if code == RC.CONTROLLER_REGISTER_BROKER:
            g = request.header(wire.RegisterBrokerToControllerRequestHeader)
            name = g.broker_name or ""
            return lambda: r.register_broker(g.cluster_name, name, g.broker_id, g.broker_address, alive)
        if code == RC.CONTROLLER_GET_REPLICA_INFO:
            q = request.header(wire.GetReplicaInfoRequestHeader)
            return lambda: r.get_replica_info(q.broker_name or "")
        if code == RC.CONTROLLER_GET_SYNC_STATE_DATA:
            names = wire.decode_names(request.body)
            if not names:
                return lambda: ControllerResult(code=Code.SYSTEM_ERROR, remark=wire.NOT_SET)
            return lambda: r.get_sync_state_data(names, alive)
        if code == RC.CLEAN_BROKER_DATA:
            c = request.header(wire.CleanControllerBrokerDataRequestHeader)
            ids = c.broker_controller_ids_to_clean
            return lambda: r.clean_broker_data(
                c.cluster_name, c.broker_name, ids, c.is_clean_living_broker, alive
            )
        if code == RC.CONTROLLER_GET_NEXT_BROKER_ID:
            n = request.header(wire.GetNextBrokerIdRequestHeader)
            return lambda: r.get_next_broker_id(n.cluster_name, n.broker_name or "")
        if code == RC.CONTROLLER_APPLY_BROKER_ID:
            a = request.header(wire.ApplyBrokerIdRequestHeader)
            return lambda: r.apply_broker_id(a.cluster_name, a.broker_name or "", a.applied_broker_id or 0,
                                             a.register_check_code)  # fmt: skip
        return None

    async def _answer(self, request: RemotingCommand, compute: Compute) -> RemotingCommand:
        result = await self.run(compute)
        if request.code == RC.CONTROLLER_ELECT_MASTER and result.code == Code.SUCCESS:
            self._notify(result)
        return wire.answer(request, result)

    async def run(self, compute: Compute) -> ControllerResult:
        """One task of the scheduler: computed on the leader's state, its events committed before
        it is answered (§2.3)."""
        async with self._serial:
            if not self.leading:
                return ControllerResult(code=Code.CONTROLLER_NOT_LEADER, remark=NOT_LEADER)
            result = compute()
            self._report_unclean(result.events)
            bodies = [ev.encode(e) for e in result.events]
            if not bodies and self.config.process_read_event:
                bodies = [b""]
            if bodies:
                failed = await self._append(bodies)
                if failed is not None:
                    return ControllerResult(code=Code.SYSTEM_ERROR, remark=failed)
            return result

    def _report_unclean(self, events: list[object]) -> None:
        """rmq's own report of an election outside the in-sync set (``enableElectUncleanMaster``):
        where the new master's CommitLog ends, where the last master's did, as their last
        heartbeats told; what lies between may be lost."""
        for e in events:
            if not isinstance(e, ev.ElectMasterEvent) or not e.new_master_elected:
                continue
            info = self.replicas.sync_state_info.get(e.broker_name)
            if info is None or e.new_master_broker_id in info.sync_state_set or not info.sync_state_set:
                continue
            new = self._last_ends.get((e.broker_name, e.new_master_broker_id))
            old = self._last_ends.get((e.broker_name, info.master_broker_id))
            lacked = old[1] - new[1] if new and old else None
            log.warning(
                "controller %s: %s: broker %s elected master outside the in-sync set %s (unclean); its "
                "CommitLog ends at %s (epoch %s), the last master %s's at %s (epoch %s): %s bytes it lacks "
                "are lost", self.config.self_id, e.broker_name, e.new_master_broker_id,
                sorted(info.sync_state_set), new[1] if new else "?", new[0] if new else "?",
                info.master_broker_id, old[1] if old else "?", old[0] if old else "?",
                lacked if lacked is not None else "unknown",
            )  # fmt: skip

    def _heartbeat(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = request.header(BrokerHeartbeatRequestHeader)
        if h.broker_id is None:
            return request.response(Code.CONTROLLER_INVALID_REQUEST, "Heart beat with empty brokerId")
        known = self.replicas.replica_info.get(h.broker_name)
        if h.max_offset is not None and known is not None and h.broker_id in known.broker_id_info:
            # the last end each registered broker told (the unclean report)
            self._last_ends[(h.broker_name, h.broker_id)] = (
                h.epoch if h.epoch is not None else -1,
                h.max_offset,
            )
        self.heartbeats.on_heartbeat(
            h.cluster_name, h.broker_name, h.broker_addr, h.broker_id, h.heartbeat_timeout_mills, conn,
            h.epoch, h.max_offset, h.confirm_offset, h.election_priority,
        )  # fmt: skip
        return request.response(Code.SUCCESS, "Heart beat success")

    def metadata(self) -> dict[str, Any]:
        """GET_METADATA_INFO's header (§2.9), from the DLedger member."""
        s = self.state
        leader = s.leader_id
        return {
            "group": s.group,
            "controllerLeaderId": leader,
            "controllerLeaderAddress": s.peers.get(leader) if leader else None,
            "isLeader": s.role is Role.LEADER,
            "peers": "".join(f"{ident}:{addr};" for ident, addr in s.peers.items()),
        }

    # --- configuration (§2.13) ------------------------------------------------------------------------
    def config_properties(self) -> dict[str, str]:
        """The ``ControllerConfig`` fields by their Java field names (1010)."""
        return java_properties(self.config)

    def config_text(self) -> str:
        return properties_text(self.config_properties()).decode("utf-8")

    def _update_config(self, request: RemotingCommand) -> RemotingCommand:
        if not request.body:
            return request.response(Code.SUCCESS)
        try:
            request.body.decode("utf-8")
            props = dict(parse_properties(request.body))
        except UnicodeDecodeError:
            return request.response(Code.SYSTEM_ERROR, "string2Properties error")
        if "configStorePath" in props:
            return request.response(Code.NO_PERMISSION, "Can not update config path")
        changes: dict[str, Any] = {}
        ignored = []
        for key, raw in props.items():
            attribute, kind = _UPDATABLE.get(key, (None, None))
            if attribute is None:
                ignored.append(key)
                continue
            try:
                changes[attribute] = kind(raw)
            except ValueError:
                ignored.append(key)
        if ignored:
            log.warning("controller %s: UPDATE_CONTROLLER_CONFIG: rmq does not change %s",
                        self.config.self_id, ", ".join(sorted(ignored)))  # fmt: skip
        if changes:
            self.config = replace(self.config, **changes)
            self.replicas.enable_elect_unclean_master = self.config.enable_elect_unclean_master
            path = self.config.config_file
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                replace_file(path, self.config_text().encode("utf-8"))
            except OSError as exc:
                log.error(
                    "controller %s: cannot write %s: %s", self.config.self_id, self.config.config_file, exc
                )
        return request.response(Code.SUCCESS)

    # --- liveness (§3.7) ---------------------------------------------------------------------------------
    def _channel_closed(self, conn: Connection) -> None:
        gone = self.heartbeats.on_channel_close(conn)
        if gone is not None:
            log.info("controller %s: broker %s %s id %s went with its connection", self.config.self_id,
                     gone.cluster_name, gone.broker_name, gone.broker_id)  # fmt: skip
            self._inactive(gone)

    async def _scan_heartbeats(self) -> None:
        await asyncio.sleep(FIRST_SCAN_S)
        while True:
            for key in self.heartbeats.scan_not_active():
                log.info("controller %s: broker %s %s id %s missed its heartbeats", self.config.self_id,
                         key.cluster_name, key.broker_name, key.broker_id)  # fmt: skip
                self._inactive(key)
            await asyncio.sleep(self.config.scan_not_active_broker_interval / 1000)

    def _inactive(self, key: BrokerIdentity) -> None:
        """``onBrokerInactive``: on the leader, a new election when the group's master went."""
        if not self.leading:
            return
        info = self.replicas.get_replica_info(key.broker_name)
        if info.code == Code.SUCCESS and info.header.get("masterBrokerId") == key.broker_id:
            self._spawn(self._trigger_elect(key.broker_name))

    async def _scan_inactive_masters(self) -> None:
        while True:
            await asyncio.sleep(self.config.scan_inactive_master_interval / 1000)
            for name in self.replicas.scan_need_reelect_broker_sets(self.heartbeats.is_active):
                await self._trigger_elect(name)

    async def _trigger_elect(self, broker_name: str) -> None:
        result = await self.run(lambda: self.replicas.elect_master(broker_name, None, False, self.policy))
        log.info("controller %s: election in %s: %s %s %s", self.config.self_id, broker_name,
                 Code(result.code).name if result.code in Code._value2member_map_ else result.code,
                 result.remark or "", result.header)  # fmt: skip
        if result.code == Code.SUCCESS:
            self._notify(result)

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._leader_tasks.append(task)
        task.add_done_callback(lambda t: t in self._leader_tasks and self._leader_tasks.remove(t))

    # --- notifications (§3.8) ---------------------------------------------------------------------
    def _notify(self, result: ControllerResult) -> None:
        if not self.config.notify_broker_role_changed:
            return
        body = result.body
        master = result.header.get("masterBrokerId")
        if (
            not isinstance(body, ElectMasterResponseBody)
            or body.broker_member_group is None
            or master is None
        ):
            return
        group = body.broker_member_group
        header = wire.NotifyBrokerRoleChangedRequestHeader(
            master_address=result.header.get("masterAddress"),
            master_epoch=result.header.get("masterEpoch"),
            sync_state_set_epoch=result.header.get("syncStateSetEpoch"),
            master_broker_id=master,
        )
        epoch = result.header.get("masterEpoch") or 0
        set_epoch = result.header.get("syncStateSetEpoch") or 0
        notice = wire.encode_body(SyncStateSet(body.sync_state_set, set_epoch))
        for broker_id, addr in group.broker_addrs.items():
            if not addr or not self.heartbeats.is_active(group.cluster, group.broker_name, broker_id):
                continue
            pending = self._notifying.get(addr)
            if pending is not None and pending[0] < epoch:
                pending[1].cancel()
            command = RemotingCommand.request(RC.NOTIFY_BROKER_ROLE_CHANGED, header, notice, oneway=True)
            task = asyncio.ensure_future(self._send_notice(addr, command))
            self._notifying[addr] = (epoch, task)

    async def _send_notice(self, addr: str, command: RemotingCommand) -> None:
        try:
            await self.client.invoke_oneway(addr, command, NOTIFY_TIMEOUT_S)
            log.info("controller %s: told %s of the role change", self.config.self_id, addr)
        except Exception as exc:  # the broker learns it from its next 1004 poll
            log.warning("controller %s: cannot tell %s of the role change: %s", self.config.self_id, addr,
                        exc)  # fmt: skip


# keys UPDATE_CONTROLLER_CONFIG changes (by their setter names), with their parsers
_UPDATABLE: dict[str, tuple[str, Callable[[str], Any]]] = {
    "enableElectUncleanMaster": ("enable_elect_unclean_master", parse_boolean),
    "processReadEvent": ("process_read_event", parse_boolean),
    "notifyBrokerRoleChanged": ("notify_broker_role_changed", parse_boolean),
    "scanInactiveMasterInterval": ("scan_inactive_master_interval", parse_long),
    "scanNotActiveBrokerInterval": ("scan_not_active_broker_interval", parse_long),
}
