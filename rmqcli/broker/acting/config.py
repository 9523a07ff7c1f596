"""The SlaveActingMaster keys of broker.conf (``BrokerConfig`` of RocketMQ 5.1.1, 5.1.1 defaults).

rmq's broker speaks to name servers with BROKER_HEARTBEAT (904) and GET_BROKER_MEMBER_GROUP (901),
as a 5.1.1 broker with ``compatibleWithOldNameSrv=false`` does; so that key may be given as
``false`` only (5.1.1's default, ``true``, heartbeats with QUERY_DATA_VERSION and reads the group
from a route, which rmq does not implement).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from rmqcli.errors import UsageError


@dataclass(frozen=True)
class ActingConfig:
    enable_slave_acting_master: bool = False
    enable_remote_escape: bool = False  # an acting master's puts go to another group's master
    broker_heartbeat_interval: int = 1000  # ms between BROKER_HEARTBEATs
    broker_not_active_timeout_millis: int = 10000  # ms: sent as heartbeatTimeoutMillis
    sync_broker_member_group_period: int = 1000  # ms between GET_BROKER_MEMBER_GROUPs
    # quorum write of a SYNC_MASTER (MessageStoreConfig; with SlaveActingMaster only)
    total_replicas: int = 1  # the group's size; the live count until the first member group
    in_sync_replicas: int = 1  # copies a send needs, the master's included (1: no wait)
    min_in_sync_replicas: int = 1  # the floor when enableAutoInSyncReplicas lowers it
    enable_auto_in_sync_replicas: bool = False
    ha_max_gap_not_in_sync: int = 256 * 1024 * 1024  # bytes: a slave further behind is not in sync
    lock_in_strict_mode: bool = False  # a queue lock holds when a majority of totalReplicas grant it


PROPERTY_NAMES = {
    "enableSlaveActingMaster": "enable_slave_acting_master",
    "enableRemoteEscape": "enable_remote_escape",
    "brokerHeartbeatInterval": "broker_heartbeat_interval",
    "brokerNotActiveTimeoutMillis": "broker_not_active_timeout_millis",
    "syncBrokerMemberGroupPeriod": "sync_broker_member_group_period",
    "totalReplicas": "total_replicas",
    "inSyncReplicas": "in_sync_replicas",
    "minInSyncReplicas": "min_in_sync_replicas",
    "enableAutoInSyncReplicas": "enable_auto_in_sync_replicas",
    "haMaxGapNotInSync": "ha_max_gap_not_in_sync",
    "lockInStrictMode": "lock_in_strict_mode",
}
COMPATIBLE_KEY = "compatibleWithOldNameSrv"  # accepted as false only (see the module docstring)


def acting_config_from_properties(props: dict[str, str]) -> ActingConfig:
    """``ActingConfig`` from broker.conf; a boolean must read true or false, a period be positive."""
    kinds = {f.name: f.type for f in fields(ActingConfig)}
    changes: dict[str, object] = {}
    for key, name in PROPERTY_NAMES.items():
        raw = props.get(key)
        if raw is None:
            continue
        raw = raw.strip()
        if kinds[name] == "bool":
            if raw.lower() not in ("true", "false"):
                raise UsageError(f"broker.conf: {key}={raw!r} is not true or false")
            changes[name] = raw.lower() == "true"
        else:
            if not raw.isdigit() or int(raw) == 0:
                raise UsageError(f"broker.conf: {key}={raw!r} is not a positive number")
            changes[name] = int(raw)
    return replace(ActingConfig(), **changes)


def implemented(props: dict[str, str]) -> set[str]:
    """The keys of ``props`` this module takes (``compatibleWithOldNameSrv`` only as false)."""
    keys = set(PROPERTY_NAMES) & set(props)
    if props.get(COMPATIBLE_KEY, "").strip().lower() == "false":
        keys.add(COMPATIBLE_KEY)
    return keys
