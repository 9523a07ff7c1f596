"""5.1.1's controller commands (controller.md §8): ``getControllerMetaData``, ``getSyncStateSet``,
``getControllerConfig``, ``updateControllerConfig``, ``electMaster``, ``cleanBrokerMetadata``.

``-a`` names the controllers (their DLedger peer ports, §1.1). The leader-only requests go to the
leader that the first address names in its GET_METADATA_INFO (1005) answer, as
``MQClientAPIImpl.getControllerMetaData`` finds it; ``getControllerConfig`` and
``updateControllerConfig`` ask every listed controller, each keeping its own settings (§2.13).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from rmqcli.admin.session import AdminSession
from rmqcli.errors import BrokerError, NotFoundError, UsageError
from rmqcli.remoting.codes import RequestCode as RC


@dataclass
class ControllerMetaData:
    """GET_METADATA_INFO's answer (§2.9)."""

    group: str | None
    controller_leader_id: str | None
    controller_leader_address: str | None
    is_leader: bool
    peers: list[str] = field(default_factory=list)


@dataclass
class Replica:
    """``BrokerReplicasInfo.ReplicaIdentity``."""

    broker_name: str
    broker_id: int
    broker_address: str | None
    alive: bool


@dataclass
class SyncStateSet:
    """One group of the CONTROLLER_GET_SYNC_STATE_DATA answer (§2.10)."""

    broker_name: str
    master_broker_id: int | None
    master_address: str | None
    master_epoch: int
    sync_state_set_epoch: int
    in_sync_replicas: list[Replica]
    not_in_sync_replicas: list[Replica]


@dataclass
class ControllerSettings:
    """GET_CONTROLLER_CONFIG of one controller: its settings in the order it sent them."""

    addr: str
    properties: dict[str, str]


@dataclass
class ElectedMaster:
    """CONTROLLER_ELECT_MASTER's answer (§2.6, §8.6)."""

    cluster_name: str
    broker_name: str
    master_broker_id: int | None
    master_address: str | None
    master_epoch: int | None
    sync_state_set_epoch: int | None


def controllers(address: str) -> list[str]:
    """``-a``'s addresses (``;``-separated)."""
    addrs = [a.strip() for a in address.split(";") if a.strip()]
    if not addrs:
        raise UsageError("-a/--controllerAddress names no controller")
    return addrs


def get_controller_meta_data(session: AdminSession, controller_address: str) -> ControllerMetaData:
    response = session.call(controllers(controller_address)[0], RC.CONTROLLER_GET_METADATA_INFO)
    h = response.ext_fields
    return ControllerMetaData(
        group=h.get("group"),
        controller_leader_id=h.get("controllerLeaderId"),
        controller_leader_address=h.get("controllerLeaderAddress"),
        is_leader=h.get("isLeader", "false").lower() == "true",
        peers=[p for p in (h.get("peers") or "").split(";") if p],
    )


def leader(session: AdminSession, controller_address: str) -> str:
    """The leader's address as the first controller names it."""
    meta = get_controller_meta_data(session, controller_address)
    if not meta.controller_leader_address:
        first = controllers(controller_address)[0]
        raise BrokerError(f"{first}: the controller knows no leader (group {meta.group})")
    return meta.controller_leader_address


def get_sync_state_set(
    session: AdminSession, controller_address: str, broker_name: str | None, cluster_name: str | None
) -> list[SyncStateSet]:
    """``getSyncStateSet -b`` (one group) or ``-c`` (the cluster's groups, from the name server)."""
    if broker_name:
        names = [broker_name.strip()]
    else:
        assert cluster_name is not None
        info = session.cluster_info()
        names = sorted(info.cluster_addr_table.get(cluster_name.strip()) or ())
        if not names:
            raise NotFoundError(
                f"[error] no cluster {cluster_name.strip()!r} in the name server's cluster info"
            )
    body = json.dumps(names, separators=(",", ":")).encode("utf-8")
    response = session.call(leader(session, controller_address), RC.CONTROLLER_GET_SYNC_STATE_DATA, body=body)
    table = json.loads(response.body or b"{}").get("replicasInfoTable") or {}
    return [_sync_state_set(name, value) for name, value in table.items()]


def _sync_state_set(name: str, raw: dict) -> SyncStateSet:
    def replicas(key: str) -> list[Replica]:
        return [
            Replica(
                r.get("brokerName", name),
                int(r.get("brokerId", 0)),
                r.get("brokerAddress"),
                bool(r.get("alive", False)),
            )  # fmt: skip
            for r in raw.get(key) or []
        ]

    master = raw.get("masterBrokerId")
    return SyncStateSet(
        broker_name=name,
        master_broker_id=None if master is None else int(master),
        master_address=raw.get("masterAddress"),
        master_epoch=int(raw.get("masterEpoch", 0)),
        sync_state_set_epoch=int(raw.get("syncStateSetEpoch", 0)),
        in_sync_replicas=replicas("inSyncReplicas"),
        not_in_sync_replicas=replicas("notInSyncReplicas"),
    )


def get_controller_config(session: AdminSession, controller_address: str) -> list[ControllerSettings]:
    """GET_CONTROLLER_CONFIG (1010) of each controller; the first failure fails the command."""
    from rmqcli.admin.broker import parse_properties

    out = []
    for addr in controllers(controller_address):
        response = session.call(addr, RC.GET_CONTROLLER_CONFIG)
        out.append(ControllerSettings(addr, dict(parse_properties(response.body or b""))))
    return out


def update_controller_config(
    session: AdminSession, controller_address: str, key: str, value: str
) -> list[str]:
    """UPDATE_CONTROLLER_CONFIG (1009) ``key=value`` to each controller; the addresses."""
    addrs = controllers(controller_address)
    body = f"{key.strip()}={value.strip()}\n".encode()
    for addr in addrs:
        session.call(addr, RC.UPDATE_CONTROLLER_CONFIG, body=body)
    return addrs


def elect_master(
    session: AdminSession, controller_address: str, cluster_name: str, broker_name: str, broker_id: str
) -> ElectedMaster:
    """CONTROLLER_ELECT_MASTER (1002) with ``designateElect=true`` to the leader."""
    try:
        wanted = int(broker_id.strip())
    except ValueError:
        raise UsageError(f"-b/--brokerId: {broker_id!r} is not a broker id") from None
    header = {"clusterName": cluster_name.strip(), "brokerName": broker_name.strip(), "brokerId": wanted,
              "designateElect": True}  # fmt: skip
    h = session.call(leader(session, controller_address), RC.CONTROLLER_ELECT_MASTER, header).ext_fields
    return ElectedMaster(
        cluster_name=cluster_name.strip(),
        broker_name=broker_name.strip(),
        master_broker_id=_int(h.get("masterBrokerId")),
        master_address=h.get("masterAddress"),
        master_epoch=_int(h.get("masterEpoch")),
        sync_state_set_epoch=_int(h.get("syncStateSetEpoch")),
    )


def clean_broker_metadata(
    session: AdminSession,
    controller_address: str,
    cluster_name: str | None,
    broker_name: str,
    broker_controller_ids_to_clean: str | None,
    clean_living_broker: bool,
) -> str:
    """CLEAN_BROKER_DATA (1011) to the leader; the broker name."""
    if not clean_living_broker and not (cluster_name or "").strip():
        raise UsageError("cleanLivingBroker option is false, clusterName option can not be empty.")
    header = {
        "clusterName": (cluster_name or "").strip() or None,
        "brokerName": broker_name.strip(),
        "brokerControllerIdsToClean": broker_controller_ids_to_clean,
        "isCleanLivingBroker": clean_living_broker,
    }
    session.call(leader(session, controller_address), RC.CLEAN_BROKER_DATA, header)
    return broker_name.strip()


def _int(text: str | None) -> int | None:
    return None if text is None else int(text)
