"""The controller's replicated state and its request logic (5.1.1 ``ReplicasInfoManager``,
controller.md §3.1-§3.5 and §2.5-§2.16).

Two tables keyed by broker name alone: ``replica_info`` (the group's registered ids with address and
check code, and the id counter) and ``sync_state_info`` (master, master epoch, in-sync set and its
epoch); a group *exists* only when it is in both. ``apply`` changes them, one committed event at a
time, on every controller (§3.2); the request methods only read them and return a
``ControllerResult``: the answer's code, remark, header fields (Java names, nulls left out) and body,
plus the events to append before answering (a refusal has none). Checks run in 5.1.1's order. Where
5.1.1 would throw (a null it unboxes, an event for a group it no longer holds), a request answers
``SYSTEM_ERROR`` and ``apply`` raises ``CorruptDataError``, the entry being one a Java controller's
state machine stalls on.

Liveness is not part of the state: the checks that need it take an ``AlivePredicate`` (§3.7).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from formats.javatext import parse_long
from rmqcli.controller.bodies import (
    BrokerMemberGroup,
    BrokerReplicasInfo,
    ElectMasterResponseBody,
    ReplicaIdentity,
    ReplicasInfo,
    SyncStateSet,
)
from rmqcli.controller.codes import FIRST_BROKER_CONTROLLER_ID, ControllerCode
from rmqcli.controller.elect import AlivePredicate, DefaultElectPolicy
from rmqcli.controller.events import (
    AlterSyncStateSetEvent,
    ApplyBrokerIdEvent,
    CleanBrokerDataEvent,
    ElectMasterEvent,
    Event,
    UpdateBrokerAddressEvent,
)
from rmqcli.controller.javaorder import grown_capacity, hash_set_order, presized_capacity
from rmqcli.errors import CorruptDataError

Code = ControllerCode


@dataclass
class BrokerReplicaInfo:
    """``BrokerReplicaInfo``: a group's registered ids, each with (address, registerCheckCode)."""

    cluster_name: str | None
    broker_name: str
    next_assign_broker_id: int = FIRST_BROKER_CONTROLLER_ID
    broker_id_info: dict[int, tuple[str | None, str | None]] = field(default_factory=dict)

    def add_broker(self, broker_id: int, address: str | None, check_code: str | None) -> None:
        self.broker_id_info[broker_id] = (address, check_code)
        self.next_assign_broker_id += 1  # on every add, not max + 1

    def address(self, broker_id: int | None) -> str | None:
        entry = self.broker_id_info.get(broker_id) if broker_id is not None else None
        return entry[0] if entry else None

    def check_code(self, broker_id: int | None) -> str | None:
        entry = self.broker_id_info.get(broker_id) if broker_id is not None else None
        return entry[1] if entry else None

    def id_table(self) -> dict[int, str | None]:
        """``getBrokerIdTable``: id -> address, in the order of the ``HashMap`` 5.1.1 copies it to."""
        ids = hash_set_order(sorted(self.broker_id_info), presized_capacity(len(self.broker_id_info)))
        return {i: self.broker_id_info[i][0] for i in ids}


@dataclass
class SyncStateInfo:
    """``SyncStateInfo``: a group's master and in-sync set with their epochs."""

    cluster_name: str | None
    broker_name: str
    master_epoch: int = 0
    sync_state_set_epoch: int = 0
    sync_state_set: set[int] = field(default_factory=set)
    master_broker_id: int | None = None

    @property
    def first_time_for_elect(self) -> bool:
        return self.master_epoch == 0


@dataclass
class ControllerResult:
    """A request's outcome: answer code, remark, header fields, body, and the events to append."""

    code: int = Code.SUCCESS
    remark: str | None = None
    header: dict[str, Any] = field(default_factory=dict)
    body: Any = None
    events: list[Event] = field(default_factory=list)

    def set_header(self, **fields: Any) -> None:
        self.header.update({k: v for k, v in fields.items() if v is not None})

    def refuse(self, code: int, remark: str | None) -> ControllerResult:
        self.code, self.remark = code, remark
        return self


def _java_split(text: str, sep: str) -> list[str]:
    """``String.split`` with a literal one-character separator: trailing empty parts dropped."""
    parts = text.split(sep)
    while parts and parts[-1] == "" and len(parts) > 1:
        parts.pop()
    return [] if parts == [""] and text != "" else parts


def _blank(text: str | None) -> bool:
    """``StringUtils.isBlank``: null, empty or only whitespace."""
    return text is None or all(ch.isspace() for ch in text)


class ReplicasInfoManager:
    """The two tables, the event application and the request checks of one controller."""

    def __init__(self, enable_elect_unclean_master: bool = False):
        self.enable_elect_unclean_master = enable_elect_unclean_master
        self.replica_info: dict[str, BrokerReplicaInfo] = {}
        self.sync_state_info: dict[str, SyncStateInfo] = {}

    def contains(self, broker_name: str) -> bool:
        """``isContainsBroker``: the group is in both tables."""
        return broker_name in self.replica_info and broker_name in self.sync_state_info

    # --- applying committed events (§3.2) ----------------------------------------------------

    def apply(self, event: Event) -> None:
        """Apply one committed event exactly as 5.1.1's ``applyEvent`` does."""
        name = event.broker_name
        if isinstance(event, AlterSyncStateSetEvent):
            if self.contains(name):
                info = self.sync_state_info[name]
                info.sync_state_set = set(event.new_sync_state_set)
                info.sync_state_set_epoch += 1
        elif isinstance(event, ApplyBrokerIdEvent):
            if self.contains(name):
                replicas = self.replica_info[name]
                if event.new_broker_id not in replicas.broker_id_info:
                    replicas.add_broker(event.new_broker_id, event.broker_address, event.register_check_code)
            else:  # a new group, or one a clean left in one table only: both entries start afresh
                replicas = BrokerReplicaInfo(event.cluster_name, name)
                replicas.add_broker(event.new_broker_id, event.broker_address, event.register_check_code)
                self.replica_info[name] = replicas
                self.sync_state_info[name] = SyncStateInfo(event.cluster_name, name)
        elif isinstance(event, ElectMasterEvent):
            if self.contains(name):  # else ignored (5.1.1 logs it)
                info = self.sync_state_info[name]
                info.master_epoch += 1
                if event.new_master_elected:
                    info.master_broker_id = event.new_master_broker_id
                    info.sync_state_set = (
                        {event.new_master_broker_id} if event.new_master_broker_id is not None else set()
                    )
                    info.sync_state_set_epoch += 1
                else:
                    info.master_broker_id = None  # the in-sync set is kept
        elif isinstance(event, CleanBrokerDataEvent):
            self._apply_clean(event)
        elif isinstance(event, UpdateBrokerAddressEvent):
            replicas = self.replica_info.get(name)
            if replicas is None:
                raise CorruptDataError(
                    f"UpdateBrokerAddressEvent for broker group {name!r}, which has no replicas"
                )
            entry = replicas.broker_id_info.get(event.broker_id) if event.broker_id is not None else None
            if entry is not None and event.broker_id is not None:
                replicas.broker_id_info[event.broker_id] = (event.broker_address, entry[1])
        else:  # pragma: no cover - the Event union is closed
            raise TypeError(f"not a controller event: {event!r}")

    def _apply_clean(self, event: CleanBrokerDataEvent) -> None:
        name, ids = event.broker_name, event.broker_id_set_to_clean
        if not ids:
            self.replica_info.pop(name, None)
            self.sync_state_info.pop(name, None)
            return
        if not self.contains(name):
            return
        replicas, info = self.replica_info[name], self.sync_state_info[name]
        for broker_id in ids:
            replicas.broker_id_info.pop(broker_id, None)
            info.sync_state_set.discard(broker_id)
        if not replicas.broker_id_info:
            del self.replica_info[name]
        if not info.sync_state_set:  # tested on its own: a group can be left in one table
            del self.sync_state_info[name]

    def apply_all(self, events: Iterable[Event]) -> None:
        """Replay events in log order (§3.4: there are no snapshots)."""
        for event in events:
            self.apply(event)

    # --- requests (§2.5-§2.16, §3.5) ------------------------------------------------------

    def alter_sync_state_set(
        self,
        broker_name: str,
        master_broker_id: int | None,
        master_epoch: int | None,
        new_sync_state_set: Iterable[int],
        sync_state_set_epoch: int,
        alive: AlivePredicate,
    ) -> ControllerResult:
        """CONTROLLER_ALTER_SYNC_STATE_SET (1001), checks in §2.5's order. The answer's header is
        ``newSyncStateSetEpoch`` (a Java ``int``: 0 in refusals)."""
        result = ControllerResult(header={"newSyncStateSetEpoch": 0})
        if not self.contains(broker_name):
            return result.refuse(
                Code.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, "Broker metadata is not existed"
            )
        new_set = set(new_sync_state_set)
        info, replicas = self.sync_state_info[broker_name], self.replica_info[broker_name]
        if new_set == info.sync_state_set:
            return result.refuse(
                Code.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet",
            )
        if info.master_broker_id is None:
            return result.refuse(Code.SYSTEM_ERROR, "no master recorded for the broker group")
        if info.master_broker_id != master_broker_id:
            return result.refuse(
                Code.CONTROLLER_INVALID_MASTER,
                "Rejecting alter syncStateSet request because the current leader is:"
                f"{{{info.master_broker_id}}}, not {{{_java_str(master_broker_id)}}}",
            )
        if master_epoch is None:
            return result.refuse(Code.SYSTEM_ERROR, "masterEpoch missing")
        if master_epoch != info.master_epoch:
            return result.refuse(
                Code.CONTROLLER_FENCED_MASTER_EPOCH,
                "Rejecting alter syncStateSet request because the current master epoch is:"
                f"{{{info.master_epoch}}}, not {{{master_epoch}}}",
            )
        if sync_state_set_epoch != info.sync_state_set_epoch:
            return result.refuse(
                Code.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
                "Rejecting alter syncStateSet request because the current syncStateSet epoch is:"
                f"{{{info.sync_state_set_epoch}}}, not {{{sync_state_set_epoch}}}",
            )
        for replica in hash_set_order(sorted(new_set)):
            if replica not in replicas.broker_id_info:
                return result.refuse(
                    Code.CONTROLLER_INVALID_REPLICAS,
                    f"Rejecting alter syncStateSet request because the replicas {{{replica}}} don't exist",
                )
            if not alive(replicas.cluster_name, replicas.broker_name, replica):
                return result.refuse(
                    Code.CONTROLLER_BROKER_NOT_ALIVE,
                    f"Rejecting alter syncStateSet request because the replicas {{{replica}}} don't alive",
                )
        if info.master_broker_id not in new_set:
            return result.refuse(
                Code.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                "Rejecting alter syncStateSet request because the newSyncStateSet don't contains origin "
                f"leader {{{info.master_broker_id}}}",
            )
        epoch = info.sync_state_set_epoch + 1
        result.header["newSyncStateSetEpoch"] = epoch
        result.body = SyncStateSet(frozenset(new_set), epoch)
        result.events.append(AlterSyncStateSetEvent(broker_name, frozenset(new_set)))
        return result

    def elect_master(
        self,
        broker_name: str,
        broker_id: int | None,
        designate_elect: bool,
        policy: DefaultElectPolicy,
    ) -> ControllerResult:
        """CONTROLLER_ELECT_MASTER (1002) and the controller's own trigger (``broker_id`` None),
        §2.6 and §3.5."""
        result = ControllerResult()
        if not self.contains(broker_name):
            return result.refuse(
                Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "Broker hasn't been registered"
            )
        info, replicas = self.sync_state_info[broker_name], self.replica_info[broker_name]
        in_sync = set(info.sync_state_set)
        old_master = info.master_broker_id
        all_replicas = set(replicas.broker_id_info) if self.enable_elect_unclean_master else None
        new_master = broker_id if info.first_time_for_elect else None
        if new_master is None:
            preferred = broker_id if designate_elect else None
            new_master = policy.elect(
                replicas.cluster_name, replicas.broker_name, in_sync, all_replicas, old_master, preferred
            )
        if new_master is not None and new_master == old_master:
            result.set_header(
                masterBrokerId=old_master,
                masterAddress=replicas.address(old_master),
                masterEpoch=info.master_epoch,
                syncStateSetEpoch=info.sync_state_set_epoch,
            )
            result.body = ElectMasterResponseBody(frozenset(in_sync))
            return result.refuse(
                Code.CONTROLLER_MASTER_STILL_EXIST,
                f"The old master {old_master} is still alive, not need to elect new master for broker "
                f"{replicas.broker_name}",
            )
        if new_master is not None:
            result.set_header(
                masterBrokerId=new_master,
                masterAddress=replicas.address(new_master),
                masterEpoch=info.master_epoch + 1,
                syncStateSetEpoch=info.sync_state_set_epoch + 1,
            )
            addrs = replicas.id_table()
            member_addrs = {i: addrs[i] for i in hash_set_order(sorted(addrs), grown_capacity(len(addrs)))}
            group = BrokerMemberGroup(replicas.cluster_name, replicas.broker_name, member_addrs)
            result.body = ElectMasterResponseBody(frozenset({new_master}), group)
            result.events.append(ElectMasterEvent(broker_name, True, new_master))
            return result
        if broker_id is None:
            result.events.append(ElectMasterEvent(broker_name, False))
            return result.refuse(
                Code.CONTROLLER_MASTER_NOT_AVAILABLE,
                "Old master has down and failed to elect a new broker master",
            )
        return result.refuse(Code.CONTROLLER_ELECT_MASTER_FAILED, "Failed to elect a new master")

    def register_broker(
        self,
        cluster_name: str | None,
        broker_name: str,
        broker_id: int | None,
        broker_address: str | None,
        alive: AlivePredicate,
    ) -> ControllerResult:
        """CONTROLLER_REGISTER_BROKER (1003), §2.7."""
        result = ControllerResult()
        result.set_header(clusterName=cluster_name, brokerName=broker_name)
        if not self.contains(broker_name):
            return result.refuse(
                Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                f"Broker-set: {broker_name} hasn't been registered in controller",
            )
        replicas, info = self.replica_info[broker_name], self.sync_state_info[broker_name]
        if broker_id is None:
            return result.refuse(Code.SYSTEM_ERROR, "brokerId missing")
        if broker_id not in replicas.broker_id_info:
            return result.refuse(
                Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                f"BrokerId: {broker_id} hasn't been registered in broker-set: {broker_name}",
            )
        master = info.master_broker_id
        if master is not None and alive(cluster_name, broker_name, master):
            result.set_header(
                masterBrokerId=master,
                masterAddress=replicas.address(master),
                masterEpoch=info.master_epoch,
                syncStateSetEpoch=info.sync_state_set_epoch,
            )
        result.body = SyncStateSet(frozenset(info.sync_state_set), info.sync_state_set_epoch)
        if broker_address is None:
            result.body = None
            return result.refuse(Code.SYSTEM_ERROR, "brokerAddress missing")
        if broker_address != replicas.address(broker_id):
            result.events.append(
                UpdateBrokerAddressEvent(cluster_name, broker_name, broker_address, broker_id)
            )
        return result

    def get_replica_info(self, broker_name: str) -> ControllerResult:
        """CONTROLLER_GET_REPLICA_INFO (1004), §2.8: the master whether alive or not."""
        result = ControllerResult()
        if not self.contains(broker_name):
            return result.refuse(Code.CONTROLLER_BROKER_METADATA_NOT_EXIST, "Broker metadata is not existed")
        info, replicas = self.sync_state_info[broker_name], self.replica_info[broker_name]
        result.set_header(
            masterBrokerId=info.master_broker_id,
            masterAddress=replicas.address(info.master_broker_id),
            masterEpoch=info.master_epoch,
        )
        result.body = SyncStateSet(frozenset(info.sync_state_set), info.sync_state_set_epoch)
        return result

    def get_sync_state_data(self, broker_names: Iterable[str], alive: AlivePredicate) -> ControllerResult:
        """CONTROLLER_GET_SYNC_STATE_DATA (1006), §2.10: unknown names skipped."""
        table: dict[str, ReplicasInfo] = {}
        for name in broker_names:
            if not self.contains(name):
                continue
            info, replicas = self.sync_state_info[name], self.replica_info[name]
            in_sync: list[ReplicaIdentity] = []
            not_in_sync: list[ReplicaIdentity] = []
            for broker_id, address in replicas.id_table().items():
                replica = ReplicaIdentity(
                    name, broker_id, address, alive(replicas.cluster_name, name, broker_id)
                )
                (in_sync if broker_id in info.sync_state_set else not_in_sync).append(replica)
            table[name] = ReplicasInfo(
                master_broker_id=info.master_broker_id,
                master_address=replicas.address(info.master_broker_id),
                master_epoch=info.master_epoch,
                sync_state_set_epoch=info.sync_state_set_epoch,
                in_sync_replicas=in_sync,
                not_in_sync_replicas=not_in_sync,
            )
        return ControllerResult(body=BrokerReplicasInfo(table))

    def clean_broker_data(
        self,
        cluster_name: str | None,
        broker_name: str,
        broker_controller_ids_to_clean: str | None,
        is_clean_living_broker: bool,
        alive: AlivePredicate,
    ) -> ControllerResult:
        """CLEAN_BROKER_DATA (1011), §2.14; the ids are ``;``-separated."""
        result = ControllerResult()
        ids: frozenset[int] | None = None
        if not is_clean_living_broker:
            info = self.sync_state_info.get(broker_name)
            text = broker_controller_ids_to_clean
            if _blank(text) and info is not None and info.master_broker_id is not None:
                return result.refuse(
                    Code.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                    f"Broker {broker_name} is still alive, clean up failure",
                )
            if text is not None and not _blank(text):
                try:
                    parsed = [parse_long(part) for part in _java_split(text, ";")]
                except ValueError as exc:
                    return result.refuse(
                        Code.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                        "Please set the option <brokerControllerIdsToClean> according to the format, "
                        f"exception: {exc}",
                    )
                ids = frozenset(parsed)
                for broker_id in hash_set_order(sorted(ids), grown_capacity(len(ids))):
                    if alive(cluster_name, broker_name, broker_id):
                        return result.refuse(
                            Code.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                            f"Broker [{broker_name},  {broker_id}] is still alive, clean up failure",
                        )
        if self.contains(broker_name):
            result.events.append(CleanBrokerDataEvent(broker_name, ids))
            return result
        return result.refuse(
            Code.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
            f"Broker {broker_name} is not existed,clean broker data failure.",
        )

    def get_next_broker_id(self, cluster_name: str | None, broker_name: str) -> ControllerResult:
        """CONTROLLER_GET_NEXT_BROKER_ID (1012), §2.15: reserves nothing."""
        replicas = self.replica_info.get(broker_name)
        next_id = FIRST_BROKER_CONTROLLER_ID if replicas is None else replicas.next_assign_broker_id
        result = ControllerResult()
        result.set_header(clusterName=cluster_name, brokerName=broker_name, nextBrokerId=next_id)
        return result

    def apply_broker_id(
        self,
        cluster_name: str | None,
        broker_name: str,
        applied_broker_id: int,
        register_check_code: str | None,
    ) -> ControllerResult:
        """CONTROLLER_APPLY_BROKER_ID (1013), §2.16: the address is the check code up to its first
        ``;``. Only the group's replica table is consulted, as in 5.1.1."""
        result = ControllerResult()
        result.set_header(clusterName=cluster_name, brokerName=broker_name)
        parts = _java_split(register_check_code, ";") if register_check_code is not None else []
        if not parts:
            return result.refuse(Code.SYSTEM_ERROR, "registerCheckCode holds no broker address")
        event = ApplyBrokerIdEvent(
            cluster_name, broker_name, parts[0], applied_broker_id, register_check_code
        )
        replicas = self.replica_info.get(broker_name)
        if replicas is None:
            if applied_broker_id == FIRST_BROKER_CONTROLLER_ID:
                result.events.append(event)
                return result
            return result.refuse(
                Code.CONTROLLER_BROKER_ID_INVALID,
                f"Broker-set: {broker_name} hasn't been registered in controller, but broker try to apply "
                f"brokerId: {applied_broker_id}",
            )
        if (
            applied_broker_id not in replicas.broker_id_info
            or replicas.check_code(applied_broker_id) == register_check_code
        ):
            result.events.append(event)
            return result
        return result.refuse(
            Code.CONTROLLER_BROKER_ID_INVALID,
            f"Fail to apply brokerId: {applied_broker_id} in broker-set: {broker_name}",
        )

    def scan_need_reelect_broker_sets(self, alive: AlivePredicate) -> list[str]:
        """The groups whose recorded master is not alive while some registered id is (§3.5, §3.7)."""
        out = []
        for name, info in self.sync_state_info.items():
            master = info.master_broker_id
            if master is None or alive(info.cluster_name, name, master):
                continue
            replicas = self.replica_info.get(name)
            if replicas is not None and any(
                alive(info.cluster_name, name, i) for i in replicas.broker_id_info
            ):
                out.append(name)
        return out


def _java_str(value: object) -> str:
    return "null" if value is None else str(value)
