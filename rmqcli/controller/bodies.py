"""The bodies of the controller's answers as values (controller.md §2.17): what each holds, in the
order 5.1.1 puts it (maps and lists of ids in Java ``HashMap`` order, ``javaorder``). Their fastjson
text is the codec's business."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SyncStateSet:
    """``SyncStateSet``: an in-sync set and its epoch (1001, 1003, 1004 answers; 1008)."""

    sync_state_set: frozenset[int]
    sync_state_set_epoch: int


@dataclass(frozen=True)
class BrokerMemberGroup:
    """``BrokerMemberGroup``: every registered id of a group with its address."""

    cluster: str | None
    broker_name: str
    broker_addrs: dict[int, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class ElectMasterResponseBody:
    """``ElectMasterResponseBody``: the member group only for a new master (§2.6)."""

    sync_state_set: frozenset[int]
    broker_member_group: BrokerMemberGroup | None = None


@dataclass(frozen=True)
class ReplicaIdentity:
    """``BrokerReplicasInfo.ReplicaIdentity``."""

    broker_name: str
    broker_id: int
    broker_address: str | None
    alive: bool


@dataclass(frozen=True)
class ReplicasInfo:
    """``BrokerReplicasInfo.ReplicasInfo``: one group in a 1006 answer."""

    master_broker_id: int | None
    master_address: str | None
    master_epoch: int
    sync_state_set_epoch: int
    in_sync_replicas: list[ReplicaIdentity]
    not_in_sync_replicas: list[ReplicaIdentity]


@dataclass(frozen=True)
class BrokerReplicasInfo:
    """``BrokerReplicasInfo``: the 1006 answer, by broker name."""

    replicas_info_table: dict[str, ReplicasInfo] = field(default_factory=dict)
