"""A controller-mode broker's talk with the controllers (5.1.1 ``ReplicasManager``;
docs/controller.md §5.2-§5.6).

At start the broker is fenced (not registered with the name servers, no heartbeat). Every 5 s
until it succeeds: find the controller leader (1005), register (§5.3: 1012, ``brokerIdentity-temp``,
1013, ``brokerIdentity``, then 1003), one heartbeat (904) to every reachable controller, and, when
the registration named no live master, ask for an election (1002). A role in an answer is applied
(``RoleSink``), and the fence is lifted. Then: a heartbeat every ``brokerHeartbeatInterval``, the
replica info (1004) every ``syncBrokerMetadataPeriod``, the leader (1005) every
``syncControllerMetadataPeriod``, and the controllers' reachability every 3 s. A role input is
applied only when its master epoch is above the broker's, whatever brought it (1002, 1003, 1004,
or the controller's 1008 notice).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from formats.epoch import BrokerIdentity
from formats.javatext import JavaNumberError, parse_int, parse_long
from rmqcli.broker.autoswitch import identity as ident
from rmqcli.broker.autoswitch.config import AutoSwitchConfig
from rmqcli.controller import wire
from rmqcli.controller.codes import ControllerCode
from rmqcli.errors import CorruptDataError, RmqError
from rmqcli.remoting.client import parse_address
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.remoting.headers.catalogue import BrokerHeartbeatRequestHeader

log = logging.getLogger(__name__)

RETRY_S = 5.0  # startBasicService is retried every 5 s
PROBE_S = 3.0  # the controllers' reachability
TIMEOUT_S = 3.0
Invoke = Callable[[str, RemotingCommand, float], Awaitable[RemotingCommand]]
Oneway = Callable[[str, RemotingCommand, float], Awaitable[None]]


class RoleSink(Protocol):
    """What the broker does with a role (the replication, ``rmqcli.broker.autoswitch.replication``)."""

    def to_master(self, epoch: int, set_epoch: int, members: frozenset[int], same_master: bool) -> None: ...

    def to_slave(self, master_addr: str, epoch: int, master_id: int, same_master: bool) -> None: ...

    def unfence(self) -> None: ...

    def sync_set_changed(self, members: frozenset[int], epoch: int) -> None: ...

    def heartbeat_values(self) -> tuple[int, int, int]:
        """(last epoch, max offset, confirm offset)."""
        ...


@dataclass
class GroupState:
    """``ReplicasManager``'s record of the group."""

    master_epoch: int = 0
    master_id: int | None = None
    master_addr: str | None = None
    sync_set: frozenset[int] = frozenset()
    sync_set_epoch: int = 0


class ControllerFailure(Exception):
    """A controller answered with an error (code, remark)."""

    def __init__(self, code: int, remark: str | None):
        super().__init__(f"code {code}: {remark}")
        self.code = code


class ReplicasManager:
    """One broker's registration and role with the controllers; ``await run()`` (cancel to stop)."""

    def __init__(
        self,
        config: AutoSwitchConfig,
        cluster: str,
        broker_name: str,
        broker_addr: str,
        identity_path: Path,
        invoke: Invoke,
        oneway: Oneway,
        sink: RoleSink,
        heartbeat_interval_ms: int,
    ):
        self.config = config
        self.cluster, self.broker_name, self.broker_addr = cluster, broker_name, broker_addr
        self.identity_path = identity_path
        self.invoke, self.oneway, self.sink = invoke, oneway, sink
        self.heartbeat_s = heartbeat_interval_ms / 1000
        self.controllers = config.controllers
        self.available: list[str] = list(self.controllers)
        self.leader: str | None = None
        self.broker_id = -1  # the controller's id of this broker (brokerControllerId)
        self.state = GroupState()
        self.running = False  # startBasicService done: the fence is lifted

    # --- life cycle -------------------------------------------------------------------------------
    async def run(self) -> None:
        tasks = [asyncio.create_task(self._probe())]
        try:
            while not await self._start_basic():
                await asyncio.sleep(RETRY_S)
            self.running = True
            self.sink.unfence()
            periods = (
                (self.heartbeat_s, self.heartbeat),
                (self.config.sync_broker_metadata_period / 1000, self.sync_replica_info),
                (self.config.sync_controller_metadata_period / 1000, self.find_leader),
            )
            tasks += [asyncio.create_task(self._every(period, step)) for period, step in periods]
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _every(self, period: float, step: Callable[[], Awaitable[object]]) -> None:
        while True:
            await asyncio.sleep(period)
            try:
                await step()
            except Exception as exc:  # logged; the next period tries again
                log.warning("controller mode: %s failed: %s", getattr(step, "__name__", step), exc)

    async def _probe(self) -> None:
        """Every 3 s: the controllers a TCP connection reaches (``availableControllerAddresses``)."""
        while True:
            reachable = []
            for addr in self.controllers:
                try:
                    host, port = parse_address(addr)
                    _r, w = await asyncio.wait_for(asyncio.open_connection(host, port), 1.0)
                    w.close()
                    reachable.append(addr)
                except (OSError, TimeoutError, RmqError):
                    continue
            self.available = reachable
            await asyncio.sleep(PROBE_S)

    async def _start_basic(self) -> bool:
        """``startBasicService``: leader, registration, first heartbeat, master."""
        try:
            if not await self.find_leader():
                return False
            if not await self._register():
                return False
            await self.heartbeat()
            if self.state.master_id is None and not await self.elect():
                return False
            return True
        except (RmqError, ControllerFailure, OSError) as exc:
            log.warning("controller mode: start with the controllers failed, again in 5 s: %s", exc)
            return False

    # --- requests ---------------------------------------------------------------------------------
    async def _call(self, addr: str | None, code: int, header: object, body: bytes = b"") -> RemotingCommand:
        if not addr:
            raise ControllerFailure(-1, "no controller leader known")
        request = RemotingCommand.request(code, header, body)  # type: ignore[arg-type]
        answer = await self.invoke(addr, request, TIMEOUT_S)
        if answer.code not in (RS.SUCCESS, ControllerCode.CONTROLLER_MASTER_STILL_EXIST):
            raise ControllerFailure(answer.code, answer.remark)
        return answer

    async def find_leader(self) -> bool:
        """1005 to each reachable controller: the first that names a leader."""
        for addr in self.available or self.controllers:
            try:
                answer = await self.invoke(
                    addr, RemotingCommand.request(RC.CONTROLLER_GET_METADATA_INFO), TIMEOUT_S
                )
            except (RmqError, OSError):
                continue
            leader = (answer.ext_fields or {}).get("controllerLeaderAddress")
            if answer.code == RS.SUCCESS and leader:
                if leader != self.leader:
                    log.info("controller mode: the controller leader is %s", leader)
                self.leader = leader
                return True
        return False

    async def heartbeat(self) -> None:
        """904, oneway, to every reachable controller."""
        epoch, max_offset, confirm = self.sink.heartbeat_values()
        header = BrokerHeartbeatRequestHeader(
            cluster_name=self.cluster,
            broker_addr=self.broker_addr,
            broker_name=self.broker_name,
            broker_id=self.broker_id,
            epoch=epoch,
            max_offset=max_offset,
            confirm_offset=confirm,
            heartbeat_timeout_mills=self.config.controller_heartbeat_timeout,
            election_priority=self.config.election_priority,
        )
        for addr in self.available:
            with contextlib.suppress(RmqError, OSError):
                await self.oneway(addr, RemotingCommand.request(RC.BROKER_HEARTBEAT, header, oneway=True),
                                  self.config.send_heartbeat_timeout / 1000)  # fmt: skip

    async def _register(self) -> bool:
        """§5.3: an id from the controller (or the file's), then 1003."""
        if self.broker_id < 0 and not await self._apply_for_id():
            return False
        header = wire.RegisterBrokerToControllerRequestHeader(
            cluster_name=self.cluster, broker_name=self.broker_name, broker_id=self.broker_id,
            broker_address=self.broker_addr,
        )  # fmt: skip
        answer = await self._call(self.leader, RC.CONTROLLER_REGISTER_BROKER, header)
        fields = answer.ext_fields or {}
        members = wire.decode_sync_state_set(answer.body)
        master_id, master_addr = _long(fields.get("masterBrokerId")), fields.get("masterAddress")
        log.info(
            "controller mode: registered as broker id %d (master %s at %s)",
            self.broker_id,
            master_id,
            master_addr,
        )
        if master_id is not None and master_addr:
            epoch = _int(fields.get("masterEpoch")) or 0
            set_epoch = _int(fields.get("syncStateSetEpoch")) or 0
            self._apply(
                master_id, master_addr, epoch, set_epoch, members.sync_state_set if members else frozenset()
            )
        return True

    async def _apply_for_id(self) -> bool:
        path, temp = self.identity_path, ident.temp_path(self.identity_path)
        try:
            found = ident.read(path)
            pending = ident.read(temp) if found is None else None
        except CorruptDataError as exc:
            log.error("controller mode: %s", exc)
            return False
        for held in (found, pending):
            if held is not None and (held.cluster, held.broker_name) != (self.cluster, self.broker_name):
                log.error("controller mode: Check and find that metadata/tempMetadata invalid: %s names "
                          "%s/%s, not %s/%s", path, held.cluster, held.broker_name, self.cluster,
                          self.broker_name)  # fmt: skip
                return False
        if found is not None:
            self.broker_id = found.broker_id
            return True
        if pending is None:
            header = wire.GetNextBrokerIdRequestHeader(
                cluster_name=self.cluster, broker_name=self.broker_name
            )
            answer = await self._call(self.leader, RC.CONTROLLER_GET_NEXT_BROKER_ID, header)
            next_id = _long((answer.ext_fields or {}).get("nextBrokerId"))
            if next_id is None:
                return False
            code = f"{self.broker_addr};{int(time.time() * 1000)}"
            pending = BrokerIdentity(self.cluster, self.broker_name, next_id, code)
            ident.write(temp, pending)
        header = wire.ApplyBrokerIdRequestHeader(
            cluster_name=self.cluster, broker_name=self.broker_name, applied_broker_id=pending.broker_id,
            register_check_code=pending.register_check_code,
        )  # fmt: skip
        try:
            await self._call(self.leader, RC.CONTROLLER_APPLY_BROKER_ID, header)
        except (ControllerFailure, RmqError, OSError) as exc:
            ident.remove(temp)  # the next try asks for an id again
            await asyncio.sleep(random.random())
            log.warning("controller mode: applying for broker id %d failed: %s", pending.broker_id, exc)
            return False
        ident.write(path, BrokerIdentity(self.cluster, self.broker_name, pending.broker_id))
        ident.remove(temp)
        self.broker_id = pending.broker_id
        log.info("controller mode: broker id %d applied for and written to %s", self.broker_id, path)
        return True

    async def elect(self) -> bool:
        """``brokerElect``: 1002 for this broker; the master in the answer is applied."""
        header = wire.ElectMasterRequestHeader(
            cluster_name=self.cluster,
            broker_name=self.broker_name,
            broker_id=self.broker_id,
            designate_elect=False,
        )
        answer = await self._call(self.leader, RC.CONTROLLER_ELECT_MASTER, header)
        fields = answer.ext_fields or {}
        master_id, master_addr = _long(fields.get("masterBrokerId")), fields.get("masterAddress")
        if master_id is None or not master_addr:
            log.warning("controller mode: Now no master in broker set")
            return False
        members = _elected_set(answer.body)
        self._apply(master_id, master_addr, _int(fields.get("masterEpoch")) or 0,
                    _int(fields.get("syncStateSetEpoch")) or 0, members)  # fmt: skip
        return True

    async def sync_replica_info(self) -> None:
        """The 1004 poll (§5.4)."""
        header = wire.GetReplicaInfoRequestHeader(broker_name=self.broker_name)
        try:
            answer = await self._call(self.leader, RC.CONTROLLER_GET_REPLICA_INFO, header)
        except ControllerFailure as exc:
            if exc.code == ControllerCode.CONTROLLER_BROKER_METADATA_NOT_EXIST:
                await self._register()
                await asyncio.sleep(2)
            raise
        fields = answer.ext_fields or {}
        members = wire.decode_sync_state_set(answer.body)
        epoch = _int(fields.get("masterEpoch")) or 0
        master_id, master_addr = _long(fields.get("masterBrokerId")), fields.get("masterAddress")
        if epoch > self.state.master_epoch:
            if master_id is not None and master_addr:
                self._apply(master_id, master_addr, epoch, members.sync_state_set_epoch if members else 0,
                            members.sync_state_set if members else frozenset())  # fmt: skip
            else:
                await self.elect()
        elif epoch == self.state.master_epoch and self.is_master and members is not None:
            self.adopt_set(members.sync_state_set, members.sync_state_set_epoch)

    async def alter_sync_state_set(self, members: frozenset[int]) -> bool:
        """1001 from the master: the set it proposes; the answer's set is adopted."""
        header = wire.AlterSyncStateSetRequestHeader(
            broker_name=self.broker_name,
            master_broker_id=self.broker_id,
            master_epoch=self.state.master_epoch,
        )
        body = wire.encode_body(_set_body(members, self.state.sync_set_epoch))
        try:
            answer = await self._call(self.leader, RC.CONTROLLER_ALTER_SYNC_STATE_SET, header, body)
        except (ControllerFailure, RmqError, OSError) as exc:
            log.warning("controller mode: proposing the in-sync set %s failed: %s", sorted(members), exc)
            return False
        got = wire.decode_sync_state_set(answer.body)
        if got is not None:
            self.adopt_set(got.sync_state_set, got.sync_state_set_epoch)
        return True

    # --- roles ------------------------------------------------------------------------------------
    @property
    def is_master(self) -> bool:
        return self.state.master_id is not None and self.state.master_id == self.broker_id

    def notified(self, request: RemotingCommand) -> None:
        """NOTIFY_BROKER_ROLE_CHANGED (1008) from the controller."""
        h = request.header(wire.NotifyBrokerRoleChangedRequestHeader)
        members = wire.decode_sync_state_set(request.body)
        if h.master_broker_id is None or not h.master_address or h.master_epoch is None:
            return
        set_epoch = h.sync_state_set_epoch or (members.sync_state_set_epoch if members else 0)
        self._apply(h.master_broker_id, h.master_address, h.master_epoch, set_epoch,
                    members.sync_state_set if members else frozenset())  # fmt: skip

    def _apply(
        self, master_id: int, master_addr: str, epoch: int, set_epoch: int, members: frozenset[int]
    ) -> None:
        """``changeToMaster`` / ``changeToSlave``: only a master epoch above the broker's."""
        state = self.state
        if epoch <= state.master_epoch:
            return
        same = state.master_id == master_id
        state.master_epoch = epoch
        if master_id == self.broker_id:
            self.adopt_set(members, set_epoch, force=True)
            state.master_id, state.master_addr = master_id, self.broker_addr
            log.warning("controller mode: %s is now the master (epoch %d, in-sync set %s)",
                        self.broker_addr, epoch, sorted(members))  # fmt: skip
            self.sink.to_master(epoch, set_epoch, members, same)
        else:
            state.master_id, state.master_addr = master_id, master_addr
            log.warning("controller mode: %s is now a slave of %d at %s (epoch %d)",
                        self.broker_addr, master_id, master_addr, epoch)  # fmt: skip
            self.sink.to_slave(master_addr, epoch, master_id, same)

    def adopt_set(self, members: frozenset[int], epoch: int, force: bool = False) -> None:
        """``changeSyncStateSet``: a newer set epoch replaces the set."""
        if force or epoch > self.state.sync_set_epoch:
            self.state.sync_set, self.state.sync_set_epoch = frozenset(members), epoch
            self.sink.sync_set_changed(self.state.sync_set, epoch)


def _long(text: str | None) -> int | None:
    """A ``Long`` header field as the controller's answer decodes it (``Long.parseLong``); absent or
    not a number: ``None``."""
    return _number(text, parse_long)


def _int(text: str | None) -> int | None:
    """An ``Integer`` header field (``Integer.parseInt``); absent or not a number: ``None``."""
    return _number(text, parse_int)


def _number(text: str | None, parse: Callable[[str], int]) -> int | None:
    if text is None:
        return None
    try:
        return parse(text)
    except JavaNumberError:
        return None


def _elected_set(body: bytes | None) -> frozenset[int]:
    """The ``syncStateSet`` of an ``ElectMasterResponseBody``."""
    from formats import fastjson

    try:
        raw = fastjson.loads(body) if body else {}
    except ValueError:
        return frozenset()
    members = raw.get("syncStateSet") if isinstance(raw, dict) else None
    try:
        return frozenset(int(i) for i in members or [])
    except (TypeError, ValueError):
        return frozenset()


def _set_body(members: frozenset[int], epoch: int) -> object:
    from rmqcli.controller.bodies import SyncStateSet

    return SyncStateSet(frozenset(members), epoch)
