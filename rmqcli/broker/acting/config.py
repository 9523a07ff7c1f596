"""The SlaveActingMaster keys of broker.conf (``BrokerConfig`` of RocketMQ 5.1.1, 5.1.1 defaults).

The keys are rows of ``rmqcli.conf.keys`` (owner ``acting``): a boolean must read true or false, a
number be positive. rmq's broker speaks to name servers with BROKER_HEARTBEAT (904) and
GET_BROKER_MEMBER_GROUP (901), as a 5.1.1 broker with ``compatibleWithOldNameSrv=false`` does; so
that key is implemented as ``false`` only (5.1.1's default, ``true``, heartbeats with
QUERY_DATA_VERSION and reads the group from a route, which rmq does not implement; given so, it is
named at start as a key rmq does not implement).
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqcli.conf.keys import setting


@dataclass(frozen=True)
class ActingConfig:
    enable_slave_acting_master: bool = setting("enableSlaveActingMaster")
    # an acting master's puts go to another group's master
    enable_remote_escape: bool = setting("enableRemoteEscape")
    broker_heartbeat_interval: int = setting("brokerHeartbeatInterval")  # ms between BROKER_HEARTBEATs
    # ms: sent as heartbeatTimeoutMillis
    broker_not_active_timeout_millis: int = setting("brokerNotActiveTimeoutMillis")
    # ms between GET_BROKER_MEMBER_GROUPs
    sync_broker_member_group_period: int = setting("syncBrokerMemberGroupPeriod")
    # quorum write of a SYNC_MASTER (MessageStoreConfig; with SlaveActingMaster only)
    # the group's size; the live count until the first member group
    total_replicas: int = setting("totalReplicas")
    # copies a send needs, the master's included (1: no wait)
    in_sync_replicas: int = setting("inSyncReplicas")
    # the floor when enableAutoInSyncReplicas lowers it
    min_in_sync_replicas: int = setting("minInSyncReplicas")
    enable_auto_in_sync_replicas: bool = setting("enableAutoInSyncReplicas")
    # bytes: a slave further behind is not in sync
    ha_max_gap_not_in_sync: int = setting("haMaxGapNotInSync")
    # a queue lock holds when a majority of totalReplicas grant it
    lock_in_strict_mode: bool = setting("lockInStrictMode")
